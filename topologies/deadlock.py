"""Deadlock freedom of a routing function: the channel dependency graph (Dally and Seitz).

A channel is a directed link, named ``(node, output port)``. Channel ``c1`` depends on ``c2`` when
some route takes ``c2`` right after ``c1``. Wormhole or virtual cut-through routing with finite
buffers and one virtual channel is deadlock-free if this graph has no cycle; a cycle is where a
credit deadlock can form (the emulator reports one when it does: ``emu.Cluster`` names the cyclic
wait).

The graph holds the dependencies routes really create: per destination, from every other host's
first switch, following the tables. With ``adaptive=True`` a route may take any minimal next hop
(``Topology.candidates``, what the ``adaptive`` and ``dispersive`` policies choose among): an
acyclic graph then means those policies cannot deadlock either (up*/down* on a fat tree: every
up port is minimal and the graph stays acyclic); fully adaptive minimal routing on a mesh has
cycles (the turns dimension order forbids).
"""

from __future__ import annotations

from .base import NO_ROUTE, Topology


def channel_dependencies(t: Topology, *, adaptive: bool = False):
    """The channel dependency graph of ``t``'s routing (a ``networkx.DiGraph`` whose nodes are
    ``(node, out port)`` channels, hosts' injection channels included); with ``adaptive``, of every
    minimal next hop instead of the table's one."""
    import networkx as nx

    t.validate()
    if adaptive and not t.candidates:
        t.compute_candidates()
    far = {(node, port): peer for node, es in t.neighbours().items() for port, peer, _, _ in es}
    switch = {n.name for n in t.switches}

    def outs(node: str, d: int):
        if adaptive:
            row = t.candidates.get(node)
            return row[d] if row is not None and d < len(row) else ()
        p = t.out_port(node, d)
        return () if p == NO_ROUTE else (p,)

    # channel -> {(next switch, its out ports toward a destination)}: few distinct per channel over
    # all destinations (candidate tuples are shared), expanded into edges at the end
    follow: dict[tuple[str, int], dict] = {}
    first: dict[str, list[str]] = {}  # switch -> hosts whose port 0 leads to it
    for h in t.hosts:
        s = far.get((h.name, 0))
        if s in switch:
            first.setdefault(s, []).append(h.name)
    for dst in t.hosts:
        d = dst.id
        todo = []
        for s, hs in first.items():
            o = outs(s, d)
            for h in hs:
                if h != dst.name:
                    follow.setdefault((h, 0), {})[(s, o)] = None
            if hs != [dst.name]:
                todo.append(s)
        seen = set(todo)
        while todo:
            s = todo.pop()
            for q in outs(s, d):
                nxt = far.get((s, q))
                fs = follow.setdefault((s, q), {})
                if nxt not in switch:
                    continue
                fs[(nxt, outs(nxt, d))] = None
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    g = nx.DiGraph()
    g.add_nodes_from(follow)
    g.add_edges_from((c, (n, q)) for c, nexts in follow.items() for n, qs in nexts for q in qs)
    return g


def dependency_cycle(t: Topology, *, adaptive: bool = False) -> list[tuple[str, int]]:
    """A cycle of channels in ``t``'s routing (``[(node, port), ...]``), or [] if it is deadlock-free
    (``adaptive``: over every minimal next hop). The same topology gives the same cycle every time."""
    import networkx as nx

    g = channel_dependencies(t, adaptive=adaptive)
    if nx.is_directed_acyclic_graph(g):
        return []
    for comp in nx.strongly_connected_components(g):
        if len(comp) > 1 or any(g.has_edge(c, c) for c in comp):
            sub = nx.DiGraph((u, v) for u, v in g.edges if u in comp and v in comp)  # in g's order
            return [edge[0] for edge in nx.find_cycle(sub)]
    return []  # not reached: a graph with a cycle has a strongly connected component holding it
