"""Deadlock freedom of a routing policy with its VC classes: the channel dependency graph over
(router, output port, VC) (Dally and Seitz; ``emu.topologies.deadlock`` does it for one VC and the
tables alone).

Every route the policy may give a frame is followed as the switches follow it (the
:class:`.model.RouteModel`, the tables for the last phase): from each router with hosts to each host,
``minimal`` directly; ``valiant``, ``ugal_l`` and ``ugal_g`` also via every intermediate that is a
detour; ``par`` also via every intermediate from the router after a minimal first local hop. At each
router the VC of the next link is the router's VC policy's (``emu.switch.vc``: what the switches
use), from the port the frame came in on, the port it leaves on and its VC. Channel ``c1`` depends on
``c2`` when a route takes ``c2`` right after ``c1``; with finite buffers a cycle is where a deadlock
can form, and none means none can.
"""

from __future__ import annotations

from emu.config import ConfigError

from ..vc import selector
from .model import RouteModel

DETOURS = {"minimal": False, "static": False, "valiant": True, "ugal_l": True, "ugal_g": True, "par": True}


def routes(t, policy: str, model: RouteModel | None = None):
    """Yield ([(router, out port)], ...) every route ``policy`` may take on ``t``, source router
    first, the last pair the port to the destination host."""
    if policy not in DETOURS:
        raise ConfigError(f"the deadlock check knows the policies {', '.join(DETOURS)}, not {policy!r}")
    m = model or RouteModel(t)
    sources = sorted(set(m.of_host))
    for dst in range(len(m.of_host)):
        tgt = m.of_host[dst]
        for s in sources:
            if s == tgt:
                continue
            first = m.path(s, None, dst)
            yield first
            if not DETOURS[policy]:
                continue
            for inter in range(m.inters):
                if m.intermediate_useful(s, inter, tgt):
                    yield m.path(s, inter, dst)
            if policy == "par" and m.dragonfly:
                s2 = m.peer[s].get(first[0][1])
                if s2 is not None and m.group[s2] == m.group[s] and s2 != tgt:
                    for inter in range(m.inters):
                        if m.intermediate_useful(s2, inter, tgt):
                            yield [first[0]] + m.path(s2, inter, dst)


def _selectors(t, m: RouteModel, vcs: int | None):
    sel = []
    for name in m.names:
        node = t.nodes[name]
        n = vcs or (node.spec.vc_groups if node.spec.input_queued else node.spec.vcs)
        sel.append(selector(node.spec.vc_policy, node, n))
    inject = {}
    for a, r in enumerate(m.of_host):
        inject.setdefault(r, m.host_port[a])
    return sel, inject


def _graph(m: RouteModel, edges):
    import networkx as nx

    g = nx.DiGraph()
    g.add_edges_from(((m.names[a[0]], a[1], a[2]), (m.names[b[0]], b[1], b[2])) for a, b in edges)
    return g


def dependencies_by_route(t, policy: str, vcs: int | None = None):
    """:func:`dependencies` the plain way, one route of :func:`routes` at a time: the specification
    the fast walk is tested against (slow: sources x intermediates x hosts routes)."""
    m = RouteModel(t)
    sel, inject = _selectors(t, m, vcs)
    edges = set()
    for path in routes(t, policy, m):
        vc, prev, in_port = 0, None, inject[path[0][0]]
        for r, p in path:
            f = sel[r]
            vc = f(in_port, p, vc) if f is not None else vc
            ch = (r, p, vc)
            if prev is not None:
                edges.add((prev, ch))
            prev = ch
            in_port = m.peer_port[r].get(p)
    return _graph(m, edges)


def _arrivals(m: RouteModel, sel, inject, sources, edges: set) -> list[dict]:
    """Where a detour toward each intermediate router gets there (not a dragonfly: the way there
    does not depend on the destination): per intermediate, {(last channel, in port, VC): the source
    routers whose frames arrive so}; the dependencies on the way there are added to ``edges``. A
    detour from ``s`` via ``inter`` is taken toward some router with hosts other than both."""
    out: list[dict] = [{} for _ in range(m.R)]
    targets = set(sources)
    for s in sources:
        for inter in range(m.R):
            if inter == s or not targets - {s, inter}:
                continue
            i, in_port, vc, prev = s, inject[s], 0, None
            for _ in range(4 * m.R + 4):
                if i == inter:
                    out[inter].setdefault((prev, in_port, vc), set()).add(s)
                    break
                p = m.next[i][inter]
                f = sel[i]
                vc = f(in_port, p, vc) if f is not None else vc
                ch = (i, p, vc)
                if prev is not None:
                    edges.add((prev, ch))
                prev, in_port, i = ch, m.peer_port[i][p], m.peer[i][p]
            else:
                raise ConfigError(f"the routes from {m.names[s]} to router {m.names[inter]} loop")
    return out


def dependencies(t, policy: str, vcs: int | None = None):
    """The channel dependency graph (``networkx.DiGraph`` of (router name, out port, VC)) of
    ``policy``'s routes on ``t`` with each router's VC policy (``vcs``: this many VCs instead of
    the spec's).

    The same graph as following every route of :func:`routes` (:func:`dependencies_by_route`), built
    faster in two ways. A frame's next channel depends only on its state at a router -- (router, in
    port, VC, intermediate still ahead, destination) -- so a walk stops at a state an earlier walk
    went through (everything after it is in the graph already). And hosts whose routes agree at every
    router but their own (the family's tables: every host of a router) are walked once, the last
    hop's channel added for each of them."""
    if policy not in DETOURS:
        raise ConfigError(f"the deadlock check knows the policies {', '.join(DETOURS)}, not {policy!r}")
    m = RouteModel(t)
    sel, inject = _selectors(t, m, vcs)
    R = m.R
    groups: dict[tuple, list[int]] = {}  # (target router, its route column elsewhere) -> hosts
    for dst in range(len(m.of_host)):
        tgt = m.of_host[dst]
        col = tuple(m.routes[i][dst] if i != tgt and m.routes[i] is not None else None for i in range(R))
        alone = m.routes[tgt] is None or m.routes[tgt][dst] in m.peer[tgt]  # its own router sends it on: walk it alone
        groups.setdefault((tgt, col, dst if alone else None), []).append(dst)
    edges: set = set()
    seen: dict = {}  # state -> the walk that first went through it
    walk_no = 0

    def walk(i, inter, rep, hosts, in_port, vc, prev):
        nonlocal walk_no
        walk_no += 1
        target = m.of_host[rep]
        for _ in range(4 * R + 4):
            if inter is not None and m.arrived(i, inter):
                inter = None
            key = (i, in_port, vc, inter, rep)
            f = sel[i]
            p = m.routes[i][rep] if inter is None else m.step(i, inter, target)
            if p not in m.peer[i]:  # the last hop, to the host: one channel per host of the group
                for h in hosts:
                    ph = m.routes[i][h]
                    edges.add((prev, (i, ph, f(in_port, ph, vc) if f is not None else vc)))
                return
            vc2 = f(in_port, p, vc) if f is not None else vc
            ch = (i, p, vc2)
            if prev is not None:
                edges.add((prev, ch))
            w = seen.get(key)
            if w is not None:
                if w == walk_no:
                    break
                return
            seen[key] = walk_no
            prev, in_port, vc, i = ch, m.peer_port[i][p], vc2, m.peer[i][p]
        raise ConfigError(f"the routes from {m.names[i]} to host {rep} loop")

    sources = sorted(set(m.of_host))
    arrivals = _arrivals(m, sel, inject, sources, edges) if DETOURS[policy] and not m.dragonfly else None
    for (tgt, _col, _alone), hosts in groups.items():
        rep = hosts[0]
        if arrivals is not None:  # the detours from where they reach their intermediate
            for inter, at in enumerate(arrivals):
                if inter == tgt:
                    continue
                for (prev, in_port, vc), srcs in at.items():
                    if srcs - {tgt}:
                        walk(inter, None, rep, hosts, in_port, vc, prev)
        for s in sources:
            if s == tgt:
                continue
            walk(s, None, rep, hosts, inject[s], 0, None)
            if not DETOURS[policy] or arrivals is not None:
                continue
            for inter in range(m.inters):
                if m.intermediate_useful(s, inter, tgt):
                    walk(s, inter, rep, hosts, inject[s], 0, None)
            if policy == "par" and m.dragonfly:
                p1 = m.routes[s][rep]
                s2 = m.peer[s].get(p1)
                if s2 is not None and m.group[s2] == m.group[s] and s2 != tgt:
                    f = sel[s]
                    vc1 = f(inject[s], p1, 0) if f is not None else 0
                    for inter in range(m.inters):
                        if m.intermediate_useful(s2, inter, tgt):
                            walk(s2, inter, rep, hosts, m.peer_port[s][p1], vc1, (s, p1, vc1))
    return _graph(m, edges)


def cycle(t, policy: str, vcs: int | None = None) -> list[tuple[str, int, int]]:
    """A cycle of (router, port, VC) channels among ``policy``'s routes on ``t``, or [] when there is
    none (the routing cannot deadlock)."""
    import networkx as nx

    g = dependencies(t, policy, vcs)
    try:
        return [e[0] for e in nx.find_cycle(g)]
    except nx.NetworkXNoCycle:
        return []


def classes(t, policy: str) -> int:
    """The VCs ``policy``'s routes on ``t`` use (the highest class + 1) with the routers' VC policy
    given as many VCs as it asks for."""
    g = dependencies(t, policy, vcs=32)
    return 1 + max((c[2] for c in g.nodes), default=0)


def _register() -> None:
    """Give topology files this check (``emu.topologies.file_deadlock.VC_CLASS_CHECK``)."""
    from emu.topologies.file_deadlock import VC_CLASS_CHECK

    if not VC_CLASS_CHECK:
        VC_CLASS_CHECK.append((DETOURS, cycle))


_register()
