"""Richer routing state: candidate next hops, multicast group tables, policies by name, networkx."""

import networkx as nx
import pytest

import emu
from emu.config import ConfigError, SwitchSpec, parse_settings
from emu.wire import FLAG_BCAST, PacketType, build_frame
from nodes.collectives.run import check_results, run_collective
from switch.forward import make_switch
from topologies.deadlock import dependency_cycle
from topologies.registry import build

SPECS = ["star:n=4", "fattree:k=2,n=3", "fattree:k=3,n=2", "clos:radix=8,stages=2", "twolevel:ports=4,hosts=12",
         "mesh:k=3,n=2", "torus:k=4,n=2", "clos:radix=8,stages=2,nodes=10"]


@pytest.mark.parametrize("spec", SPECS)
def test_candidates_are_exactly_the_minimal_next_hops_and_hold_the_static_route(spec):
    t = build(spec)
    t.validate()
    t.compute_candidates()
    g = nx.Graph()
    g.add_edges_from((lk.a, lk.b) for lk in t.links)
    for node in t.hosts:  # routes never pass through a host
        g.nodes[node.name]["host"] = True
    far = {(n, p): peer for n, es in t.neighbours().items() for p, peer, _, _ in es}
    for dst in t.hosts:
        sub = g.subgraph([n for n in g if n == dst.name or not g.nodes[n].get("host")])
        dist = nx.single_source_shortest_path_length(sub, dst.name)
        for sw in t.switches:
            want = tuple(p for p, peer, _, _ in t.neighbours()[sw.name]
                         if peer in dist and dist[peer] == dist[sw.name] - 1)
            got = t.candidates[sw.name][dst.id]
            assert got == want and t.routes[sw.name][dst.id] in got, (sw.name, dst.name)


def test_on_a_fat_tree_every_up_port_is_a_candidate():
    t = build("fattree:k=4,n=3")
    t.compute_candidates()
    # h0's stage-1 switch reaching h63 (another subtree): all four up ports, ports 4..7
    assert t.candidates["s0"][63] == (4, 5, 6, 7) and t.candidates["s0"][1] == (1,)


def _deliveries(t, gid, src):
    """Walk the group tables as switches replicate a frame from ``src``: host -> times reached."""
    far = {(n, p): (peer, pp) for n, es in t.neighbours().items() for p, peer, pp, _ in es}
    got: dict[str, int] = {}
    todo = [far[(src, 0)]]
    while todo:
        node, inport = todo.pop()
        if t.nodes[node].kind == "host":
            got[node] = got.get(node, 0) + 1
            continue
        for p in t.group_ports[node][gid]:
            if p != inport:
                todo.append(far[(node, p)])
    return got


@pytest.mark.parametrize("spec,members", [("fattree:k=2,n=3", ["h0", "h3", "h5", "h6"]),
                                          ("torus:k=3,n=2", ["h4", "h0", "h8"]),
                                          ("twolevel:ports=4,hosts=12", ["h1", "h2", "h11"])])
def test_a_group_frame_reaches_every_member_once_from_any_member(spec, members):
    t = build(spec)
    t.add_group(7, members)
    for src in members:
        assert _deliveries(t, 7, src) == {m: 1 for m in members if m != src}


def test_a_switch_replicates_group_frames_on_its_tree_ports():
    t = build("fattree:k=2,n=2")
    t.add_group(5, ["h0", "h1", "h3"])
    sw = make_switch(t.nodes["s0"], t, {})
    frame = build_frame(0, 5, PacketType.MSG, b"x" * 16, flags=FLAG_BCAST)
    outs = sw.receive(frame, 0, 100)
    assert sorted(p for p, _, _ in outs) == sorted(p for p in t.group_ports["s0"][5] if p != 0)
    assert all(f[26] == 1 for _, f, _ in outs) and sw.stats["replicated"] == len(outs)
    with pytest.raises(ConfigError, match="two or more distinct hosts"):
        t.add_group(6, ["h0", "h0"])


async def _alltoall(routing, seed=0):
    t = build("fattree:k=2,n=3", settings=parse_settings([f"switch.routing={routing}"]))
    async with emu.Cluster(t, seed=seed) as net:
        r = await run_collective(net, "alltoall", count=512, dtype="int32")
        check_results(r, 512, "int32", "sum", 0, 0)
        return r.completion_ns, dict(net.metrics.link_frames)


async def test_routing_policies_by_name_deliver_and_spread():
    static, adaptive = await _alltoall("static"), await _alltoall("adaptive")
    d1, d2, d3 = await _alltoall("dispersive", 1), await _alltoall("dispersive", 1), await _alltoall("dispersive", 2)
    assert adaptive[1] != static[1]              # it took other up ports than the table
    assert d1 == d2 and d1[1] != d3[1]           # seeded: the same seed spreads the same way


async def test_an_unknown_policy_is_refused():
    t = build("star:n=2", settings=parse_settings(["switch.routing=zigzag"]))
    with pytest.raises(ConfigError, match="unknown routing policy 'zigzag'; known: static, adaptive, dispersive"):
        async with emu.Cluster(t):
            pass


def test_networkx_export_and_the_channel_dependency_check():
    t = build("fattree:k=2,n=3")
    g = t.to_networkx()
    assert (g.number_of_nodes(), g.number_of_edges()) == (len(t.nodes), len(t.links))
    assert g.nodes["h3"]["kind"] == "host" and g.nodes["s0"]["id"] == t.nodes["s0"].id
    cycle = dependency_cycle(build("torus:k=4,n=2"))
    assert len(cycle) == 4 and len({n for n, _ in cycle}) == 4     # the ring of one dimension
    assert dependency_cycle(build("mesh:k=4,n=2")) == [] and dependency_cycle(build("fattree:k=2,n=3")) == []
