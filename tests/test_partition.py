"""emu.partition's expected load: its own edge betweenness gives networkx's sums to the last bit
(so the partition METIS makes from them is the one it made before), and the cut is balanced."""

import networkx as nx
import pytest

from emu.partition import edge_betweenness, partition_used
from emu.topologies import build


@pytest.mark.parametrize("spec", ["fattree:k=4,n=3", "mesh:k=4,n=2", "torus:k=4,n=2", "dragonfly:a=4,p=2,h=2",
                                  "star:n=4"])
def test_edge_betweenness_is_networkx_to_the_bit(spec):
    t = build(spec)
    names = list(t.nodes)
    hosts = [n.name for n in t.hosts]
    g = nx.Graph()
    g.add_nodes_from(names)
    for link in t.links:
        g.add_edge(link.a, link.b)
    ref = {tuple(sorted(k)): 2 * v for k, v in
           nx.edge_betweenness_centrality_subset(g, hosts, hosts, normalized=False).items()}
    mine = {tuple(sorted(k)): v for k, v in edge_betweenness(names, [(l.a, l.b) for l in t.links], hosts).items()}
    assert mine == ref  # float equality: the same sums in the same order
    assert len(mine) == g.number_of_edges() and max(mine.values()) > 1


def test_parallel_links_are_one_edge_and_a_leaf_switch_path_counts_once():
    # a - s - b with the a-s link doubled: every ordered host pair (2) crosses both edges once
    b = edge_betweenness(["a", "s", "b"], [("a", "s"), ("s", "a"), ("s", "b")], ["a", "b"])
    assert b == {("a", "s"): 2.0, ("s", "b"): 2.0}


def test_the_fat_tree_splits_evenly():
    owner, used = partition_used(build("fattree:k=4,n=3"), 2)
    assert used == "metis" or used.startswith("kernighan")
    assert sorted(list(owner.values()).count(p) for p in (0, 1)) == [len(owner) // 2] * 2


def _networkx_doubled(names, links, hosts):
    g = nx.Graph()
    g.add_nodes_from(names)
    g.add_edges_from(links)
    return {tuple(sorted(k)): 2 * v for k, v in
            nx.edge_betweenness_centrality_subset(g, hosts, hosts, normalized=False).items()}


@pytest.mark.parametrize("seed", range(12))
def test_sources_on_one_link_share_their_neighbours_pass_to_the_bit(seed):
    # random graphs with hosts on one link (to a switch, to another host, two on one switch), hosts
    # on several links, a self-loop, parallel links, a part out of reach: networkx's floats exactly
    import random

    rng = random.Random(seed)
    core = [f"s{i}" for i in range(rng.randint(3, 9))]
    links = [(rng.choice(core), rng.choice(core)) for _ in range(rng.randint(3, 14))]
    names, hosts = list(core), []
    for i in range(rng.randint(2, 12)):
        h = f"h{i}"
        names.append(h)
        hosts.append(h)
        links += [(h, rng.choice(core + hosts[:-1]))] * rng.choice([1, 1, 1, 2])  # (2: a doubled link)
        if rng.random() < 0.2:
            links.append((h, rng.choice(core)))  # a second neighbour: a pass of its own
    names.append("far")
    hosts += rng.sample(core, rng.randint(0, 2)) + (["far"] if seed % 3 == 0 else [])
    rng.shuffle(links)
    mine = {tuple(sorted(k)): v for k, v in edge_betweenness(names, links, hosts).items()}
    assert mine == _networkx_doubled(names, links, hosts)
