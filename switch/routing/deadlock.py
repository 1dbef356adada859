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


def dependencies(t, policy: str, vcs: int | None = None):
    """The channel dependency graph (``networkx.DiGraph`` of (router name, out port, VC)) of
    ``policy``'s routes on ``t`` with each router's VC policy (``vcs``: this many VCs instead of
    the spec's)."""
    import networkx as nx

    m = RouteModel(t)
    sel = []
    for name in m.names:
        node = t.nodes[name]
        n = vcs or (node.spec.vc_groups if node.spec.input_queued else node.spec.vcs)
        sel.append(selector(node.spec.vc_policy, node, n))
    inject = {}
    for a, r in enumerate(m.of_host):
        inject.setdefault(r, m.host_port[a])
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
    g = nx.DiGraph()
    g.add_edges_from(((m.names[a[0]], a[1], a[2]), (m.names[b[0]], b[1], b[2])) for a, b in edges)
    return g


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
