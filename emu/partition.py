"""Spreading a topology's nodes over processes: balanced expected load, least traffic between them.

The load model: every host sends the same amount to every other host along shortest paths (the
all-to-all that bounds what collectives do), so the expected traffic of a link is the number of
host pairs whose shortest paths cross it (networkx's edge betweenness over the hosts, split evenly
over equal paths and over parallel links), and the expected work of a node is the traffic of its
links (each crossing is one receive and one send). METIS (``pymetis``) then cuts the graph into
``parts`` of about equal work while cutting as little traffic as it can: a fat tree's pods, a
mesh's quadrants stay in one process, and so do most of their frames, which then need no socket.

Where pymetis is missing, networkx's Kernighan-Lin bisection, applied recursively, does the same
for a power-of-two number of parts; otherwise nodes go in contiguous blocks of their order. The
partition changes wall-clock time only: figures and captures are the same whatever it is (tested).
"""

from __future__ import annotations

import logging

from .graph import Topology

log = logging.getLogger(__name__)


def by_order(names: list[str], parts: int) -> dict[str, int]:
    """Contiguous blocks of the node order."""
    return {name: (i * parts) // len(names) for i, name in enumerate(names)}


def graph_of(topology: Topology) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """What the partition reads of a topology: its node names in order, its links as name pairs in
    order, its hosts (every node when it has none). Plain lists: a worker process can make the
    partition from them while the main process checks the rest of the input (``emu.control``)."""
    names = list(topology.nodes)
    return names, [(link.a, link.b) for link in topology.links], [n.name for n in topology.hosts] or names


def expected_load(topology: Topology) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """Expected all-to-all traffic per node pair with links between them (summed over parallel
    links), and per node; integers (METIS takes integer weights), at least 1."""
    return _expected_load(*graph_of(topology))


def _expected_load(names, links, hosts) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    between = edge_betweenness(names, links, hosts)
    edge = {}
    for (a, b), v in between.items():
        edge[(a, b) if a <= b else (b, a)] = max(1, round(v))  # ordered pairs: both directions
    node = dict.fromkeys(names, 1)
    for (a, b), v in edge.items():
        node[a] += v
        node[b] += v
    return edge, node


def edge_betweenness(names: list[str], links: list[tuple[str, str]], hosts: list[str]) -> dict[tuple[str, str], float]:
    """Per edge of the undirected graph ``names``/``links`` (parallel links one edge), summed over
    the ordered pairs of distinct ``hosts``: the share of the pair's shortest paths that cross it,
    as networkx's ``edge_betweenness_centrality_subset(g, hosts, hosts, normalized=False)`` times 2
    counts it (Brandes' accumulation; past a node that is no host the share splits evenly over its
    predecessors). The same sums in the same order, so the same floats to the last bit, on lists
    of node numbers rather than dicts of names, and networkx is not imported.
    ``tests/test_partition.py`` checks the equality.

    A source with one neighbour ``s`` (a host on one link: every host of a fat tree) takes no pass
    of its own: its shortest paths are ``s``'s with one hop before, so its pass makes the same
    floats as ``s``'s pass in the same order on every edge but its own link, whose share is what
    ``s`` gathered from its other successors (``_pass``'s ``first``, summed again without the
    source's own). One pass per switch with hosts rather than per host (fattree:k=4,n=4: 64 passes
    instead of 256, 0.28 -> 0.06 CPU s); each source's floats are then added to the sums in the
    sources' order, as one vector (numpy adds element by element: the same additions)."""
    import numpy as np

    index = {n: i for i, n in enumerate(names)}
    adj: list[list[int]] = [[] for _ in names]  # neighbours in the order networkx's Graph keeps them
    adje: list[list[int]] = [[] for _ in names]  # the number of the edge to each
    keys: dict[tuple[int, int], int] = {}
    for a, b in links:
        i, j = index[a], index[b]
        key = (i, j) if i <= j else (j, i)
        if key in keys:
            continue
        e = keys[key] = len(keys)
        adj[i].append(j)
        adje[i].append(e)
        if i != j:
            adj[j].append(i)
            adje[j].append(e)
    n = len(names)
    target = [False] * n
    for h in hosts:
        target[index[h]] = True
    total = np.zeros(len(keys))
    passes: dict[int, tuple] = {}
    for s in (index[h] for h in hosts):
        if len(adj[s]) == 1 and adj[s][0] != s:  # one neighbour: its pass, but for the source's own link
            via = adj[s][0]
            if via not in passes:
                passes[via] = _pass(via, adj, adje, target, len(keys))
            vec, first = passes[via]
            d = 0.0  # delta[via] in the source's own pass: its other successors' shares, in order
            for w, c in first:
                if w != s:
                    d += c
            e = adje[s][0]
            was = vec[e]
            vec[e] = (1.0 / 1.0) * (1.0 + d) if target[via] else d / 1  # (sigma 1 at both ends, one predecessor)
            total += vec
            vec[e] = was
        else:
            total += _pass(s, adj, adje, target, len(keys))[0]
    return {(names[i], names[j]): float(total[e]) for (i, j), e in keys.items()}


def _pass(s: int, adj: list[list[int]], adje: list[list[int]], target: list[bool], edges: int) -> tuple:
    """Brandes' pass from source ``s``: (each edge's share, as a numpy vector; the successors of
    ``s`` in the order their shares were added to ``s``'s, with those shares)."""
    import numpy as np

    n = len(adj)
    order = []  # BFS from s (networkx's _single_source_shortest_path_basic)
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    sigma = [0.0] * n
    dist = [-1] * n
    sigma[s], dist[s] = 1.0, 0
    queue = [s]
    head = 0
    while head < len(queue):
        v = queue[head]
        head += 1
        order.append(v)
        dv1, sv = dist[v] + 1, sigma[v]
        for w, e in zip(adj[v], adje[v]):
            if dist[w] < 0:
                queue.append(w)
                dist[w] = dv1
            if dist[w] == dv1:
                sigma[w] += sv
                preds[w].append((v, e))
    delta = [0.0] * n  # (networkx's _accumulate_edges_subset)
    vec = [0.0] * edges  # (each edge gets one share per pass at most: one direction is a DAG edge)
    first = []
    while order:
        w = order.pop()
        pw, dw = preds[w], delta[w]
        if target[w]:
            sw, d1 = sigma[w], 1.0 + dw
            for v, e in pw:
                c = (sigma[v] / sw) * d1
                vec[e] = c
                delta[v] += c
        else:
            for v, e in pw:
                c = dw / len(pw)
                vec[e] = c
                delta[v] += c
        if pw and pw[0][0] == s:  # (then s is its one predecessor)
            first.append((w, vec[pw[0][1]]))
    return np.array(vec), first


def partition(topology: Topology, parts: int, method: str = "metis") -> dict[str, int]:
    """Node name -> part (0..parts-1); every part gets at least one node."""
    return partition_used(topology, parts, method)[0]


def partition_used(topology: Topology, parts: int, method: str = "metis") -> tuple[dict[str, int], str]:
    """(node name -> part, the method actually used, in words: what a run's record says)."""
    return partition_of(*graph_of(topology), parts, method)


def partition_of(names: list[str], links: list[tuple[str, str]], hosts: list[str], parts: int,
                 method: str = "metis") -> tuple[dict[str, int], str]:
    """``partition_used`` of the topology whose ``graph_of`` is ``names``, ``links``, ``hosts``."""
    if parts <= 1:
        return dict.fromkeys(names, 0), "none (one process)"
    if method == "order" or parts >= len(names):
        return by_order(names, parts), "order" + ("" if method == "order" else " (a node per process)")
    edge, node = _expected_load(names, links, hosts)
    owner, used = _metis(names, edge, node, parts), "metis"
    if owner is None:
        owner = _kernighan_lin(names, edge, node, parts)
        used = "kernighan-lin bisection (metis asked; pymetis is not installed)"
    if owner is None or len(set(owner.values())) < parts:
        log.info("partition: no balanced cut into %d parts; contiguous blocks of the node order instead", parts)
        why = ("pymetis is not installed and recursive bisection makes powers of two only" if used != "metis"
               else "no balanced cut")
        return by_order(names, parts), f"order (metis asked; {why})"
    return owner, used


def _metis(names, edge, node, parts) -> dict[str, int] | None:
    try:
        import pymetis
    except ImportError:
        return None
    index = {n: i for i, n in enumerate(names)}
    adj: list[list[tuple[int, int]]] = [[] for _ in names]
    for (a, b), w in sorted(edge.items()):
        adj[index[a]].append((index[b], w))
        adj[index[b]].append((index[a], w))
    xadj, adjncy, eweights = [0], [], []
    for row in adj:
        row.sort()
        adjncy.extend(j for j, _ in row)
        eweights.extend(w for _, w in row)
        xadj.append(len(adjncy))
    graph = ({"adjacency": pymetis.CSRAdjacency(xadj, adjncy)} if hasattr(pymetis, "CSRAdjacency")
             else {"xadj": xadj, "adjncy": adjncy})
    _, membership = pymetis.part_graph(parts, **graph, vweights=[node[n] for n in names], eweights=eweights)
    return {n: int(membership[i]) for i, n in enumerate(names)}


def _kernighan_lin(names, edge, node, parts) -> dict[str, int] | None:
    if parts & (parts - 1):
        return None  # recursive bisection makes powers of two only
    import networkx as nx

    g = nx.Graph()
    for n in names:
        g.add_node(n)
    for (a, b), w in edge.items():
        g.add_edge(a, b, weight=w)
    groups = [list(names)]
    while len(groups) < parts:
        nxt = []
        for grp in groups:
            a, b = nx.community.kernighan_lin_bisection(g.subgraph(grp), weight="weight", seed=1)
            nxt += [sorted(a, key=names.index), sorted(b, key=names.index)]
        groups = nxt
    return {n: i for i, grp in enumerate(groups) for n in grp}


def cut_share(topology: Topology, owner: dict[str, int]) -> tuple[float, list[int]]:
    """(share of the expected traffic that crosses between parts, expected work per part)."""
    edge, node = expected_load(topology)
    total = sum(edge.values()) or 1
    cut = sum(w for (a, b), w in edge.items() if owner[a] != owner[b])
    work = [0] * (max(owner.values()) + 1)
    for n, w in node.items():
        work[owner[n]] += w
    return cut / total, work
