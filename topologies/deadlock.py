"""Deadlock freedom of a routing function: the channel dependency graph (Dally and Seitz).

A channel is a directed link. Channel ``c1`` depends on ``c2`` when some route takes ``c2`` right
after ``c1``. Wormhole or virtual cut-through routing with finite buffers and one virtual channel
is deadlock-free if this graph has no cycle; a cycle is where a credit deadlock can form (the
emulator reports one when it does: ``emu.Cluster`` names the cyclic wait).
"""

from __future__ import annotations

from .base import NO_ROUTE, Topology


def channel_dependencies(t: Topology):
    """The channel dependency graph of ``t``'s routing tables (a ``networkx.DiGraph`` whose nodes
    are ``(node, out port)`` channels)."""
    import networkx as nx

    t.validate()
    far = {}
    for node, entries in t.neighbours().items():
        for port, peer, _pport, _ in entries:
            far[(node, port)] = peer
    g = nx.DiGraph()
    for h in t.hosts:
        d = h.id
        for node in t.switches:
            out = t.out_port(node.name, d)
            if out == NO_ROUTE:
                continue
            nxt = far[(node.name, out)]
            if t.nodes[nxt].kind == "switch":
                g.add_edge((node.name, out), (nxt, t.out_port(nxt, d)))
            else:
                g.add_node((node.name, out))
    return g


def dependency_cycle(t: Topology) -> list[tuple[str, int]]:
    """A cycle of channels in ``t``'s routing (``[(node, port), ...]``), or [] if it is deadlock-free."""
    import networkx as nx

    try:
        return [edge[0] for edge in nx.find_cycle(channel_dependencies(t))]
    except nx.NetworkXNoCycle:
        return []
