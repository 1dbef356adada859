"""Richer routing state: candidate next hops, multicast group tables, policies by name, networkx."""

import copy

import networkx as nx
import pytest

import apps
import emu
from emu.config import ConfigError, parse_settings
from emu.sim import EngineNet
from emu.wire import FLAG_BCAST, MSG, PacketType, build_frame
from emu.wire.fabric import FLAG_SRCRT, FLAGS_OFF as FLAGS
from emu.switch import routing
from emu.switch.forward import make_switch
from emu.topologies.base import NO_ROUTE, Topology
from emu.topologies.deadlock import channel_dependencies, dependency_cycle
from emu.config import merge_settings
from emu.topologies.registry import IDEAL_ROUTER
from emu.topologies.registry import build as _build


def build(spec, settings=None, **kw):
    """Routing tests drive engines in the harness: meshes and tori get the ideal output-queued switch."""
    return _build(spec, settings=merge_settings(IDEAL_ROUTER, settings), **kw)

SPECS = ["star:n=4", "fattree:k=2,n=3", "fattree:k=3,n=2", "clos:radix=8,stages=2", "twolevel:ports=4,hosts=12",
         "mesh:k=3,n=2", "torus:k=4,n=2", "torus:k=5,n=2", "clos:radix=8,stages=2,nodes=10", "qsnet:nodes=150"]


def _custom() -> Topology:
    """Two switches joined by two parallel links, a host on both (h1: its port 1 to s1), a host
    behind a host (h3, reachable only through h2: never routed to) and a chain s1-s2."""
    t = Topology("custom")
    for h in range(4):
        t.add_host(f"h{h}")
    for s in range(3):
        t.add_switch(f"s{s}")
    t.add_link("h0", "s0")
    t.add_link("s0", "s1")
    t.add_link("s0", "s1")
    t.add_link("h1", "s0")
    t.add_link("h1", "s1")
    t.add_link("s1", "s2")
    t.add_link("h2", "s2")
    t.add_link("h2", "h3")
    return t


def _minimal_next_hops(t):
    """{(switch, host address): ports on a shortest path avoiding other hosts}, from networkx BFS."""
    nb = t.neighbours()
    g = nx.Graph()
    g.add_edges_from((lk.a, lk.b) for lk in t.links)
    hosts = {h.name for h in t.hosts}
    want = {}
    for dst in t.hosts:
        sub = g.subgraph([n for n in g if n == dst.name or n not in hosts])
        dist = nx.single_source_shortest_path_length(sub, dst.name)
        for sw in t.switches:
            want[(sw.name, dst.id)] = tuple(p for p, peer, _, _ in nb[sw.name]
                                            if sw.name in dist and dist.get(peer) == dist[sw.name] - 1)
    return want


@pytest.mark.parametrize("spec", SPECS + ["custom"])
def test_candidates_are_exactly_the_minimal_next_hops_and_hold_the_static_route(spec):
    t = _custom() if spec == "custom" else build(spec)
    t.validate()
    routes = copy.deepcopy(t.routes)
    t.compute_candidates()
    assert t.routes == routes                                    # the default choice is untouched
    for (sw, d), want in _minimal_next_hops(t).items():
        got = t.candidates[sw][d]
        assert got == want, (sw, d)
        assert (t.routes[sw][d] in got) if got else t.routes[sw][d] == NO_ROUTE, (sw, d)
    # shortest-path routing for any graph is the lowest-port minimal next hop
    t.routes = {}
    t.compute_routes()
    assert all(t.routes[sw][d] == (c[0] if c else NO_ROUTE) for sw, row in t.candidates.items()
               for d, c in enumerate(row))


def test_a_custom_graph_routes_around_hosts_and_over_parallel_links():
    t = _custom()
    t.validate()
    t.compute_candidates()
    assert t.candidates["s0"][2] == (1, 2)          # both parallel links to s1
    assert t.candidates["s2"][1] == (0,)            # via s1, never via host h2
    assert t.candidates["s0"][3] == () and t.routes["s0"][3] == NO_ROUTE  # h3 hangs off a host


def test_on_a_fat_tree_every_up_port_is_a_candidate_and_rows_are_shared():
    t = build("fattree:k=4,n=3")
    t.compute_candidates()
    # h0's stage-1 switch reaching h63 (another subtree): all four up ports, ports 4..7
    assert t.candidates["s0"][63] == (4, 5, 6, 7) and t.candidates["s0"][1] == (1,)
    tops = [s.name for s in t.switches if s.info["top"]]
    assert all(t.candidates[s] is t.candidates[tops[0]] for s in tops)   # one row for all top switches
    assert len({id(c) for row in t.candidates.values() for c in row}) == len(
        {c for row in t.candidates.values() for c in row})                # one tuple per distinct set


# -- multicast groups ---------------------------------------------------------------------------

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
                                          ("twolevel:ports=4,hosts=12", ["h1", "h2", "h11"]),
                                          ("qsnet:nodes=200", ["h3", "h130", "h199", "h17"])])
def test_a_group_frame_reaches_every_member_once_from_any_member(spec, members):
    t = build(spec)
    t.add_group(7, members)
    for src in members:
        assert _deliveries(t, 7, src) == {m: 1 for m in members if m != src}


def _group_frame(src: int, gid: int, data: bytes = b"abcdefgh") -> bytes:
    return build_frame(src, gid, PacketType.MSG, MSG.pack(1, 5, len(data), 0) + data, flags=FLAG_BCAST)


@pytest.mark.parametrize("spec,members", [("fattree:k=2,n=3", ["h0", "h3", "h5", "h6"]),
                                          ("mesh:k=3,n=2", ["h0", "h2", "h4", "h8"])])
def test_switch_engines_replicate_a_group_frame_to_exactly_the_members(spec, members):
    t = build(spec)
    t.add_group(9, members)
    for src in members:
        net = EngineNet(t)
        net.send(src, 0, _group_frame(t.nodes[src].id, 9))
        net.step_all()
        got = [name for _, name, _, _ in net.delivered if t.nodes[name].kind == "host"]
        assert sorted(got) == sorted(m for m in members if m != src)
        assert all(net.engines[m].stats["messages_received"] == (m != src) for m in members)
        assert sum(e.stats.get("no_route", 0) for e in net.engines.values()) == 0


def test_a_switch_replicates_on_its_tree_ports_but_the_ingress_one():
    t = build("fattree:k=2,n=2")
    t.add_group(5, ["h0", "h1", "h3"])
    sw = make_switch(t.nodes["s0"], t, {})
    outs = sw.receive(_group_frame(0, 5), 0, 100)
    assert sorted(p for p, _, _ in outs) == sorted(p for p in t.group_ports["s0"][5] if p != 0)
    assert all(f[26] == 1 for _, f, _ in outs) and sw.stats["replicated"] == len(outs)
    assert sw.receive(_group_frame(0, 6), 0, 200) == [] and sw.stats["no_route"] == 1   # no such group


def test_groups_are_sets_and_redefining_one_replaces_its_tree():
    a, b = build("fattree:k=2,n=3"), build("fattree:k=2,n=3")
    a.add_group(1, ["h0", "h5", "h6"])
    b.add_group(1, ["h6", "h0", "h5"])
    assert a.group_ports == b.group_ports and a.groups[1] == ("h0", "h5", "h6")
    a.add_group(1, ["h0", "h1"])
    assert _deliveries(a, 1, "h0") == {"h1": 1}
    assert [s for s, g in a.group_ports.items() if 1 in g] == ["s0"]   # the old tree is gone
    for bad in (["h0", "h0"], ["h0"], ["h0", "s1"], ["h0", "nope"]):
        with pytest.raises(ConfigError, match="two or more distinct hosts"):
            a.add_group(2, bad)
    for gid in (-1, 2**32, "1", True):
        with pytest.raises(ConfigError, match="group id must be an integer within 0..2\\*\\*32-1"):
            a.add_group(gid, ["h0", "h1"])


def test_a_group_tree_is_rooted_at_the_lowest_live_switch_high_enough_and_moves_when_it_fails():
    t = build("fattree:k=4,n=3")
    tops = [n.name for n in t.switches if n.info["top"]]
    everyone = t.host_names()
    t.add_group(1, everyone)
    assert t.group_roots[1] == tops[0]   # the whole machine: the lowest-numbered top switch
    t.add_group(2, ["h0", "h5", "h13"])  # one pod: its lowest-numbered switch of stage 2, not a top one
    assert t.nodes[t.group_roots[2]].info["stage"] == 2
    t.add_group(3, ["h0", "h2"])         # one edge switch
    assert t.group_roots[3] == "s0" and set(t.group_ports) >= {"s0"} and \
        [s for s, g in t.group_ports.items() if 3 in g] == ["s0"]
    t.add_group(1, everyone, avoid=[tops[0]])   # that top switch failed: the next one
    assert t.group_roots[1] == tops[1] and 1 not in t.group_ports.get(tops[0], {})
    assert _deliveries(t, 1, "h7") == {m: 1 for m in everyone if m != "h7"}
    down = (t.group_roots[1], next(v for _p, v, _vp, _l in t.neighbours()[t.group_roots[1]]))
    t.add_group(1, everyone, avoid=[tops[0], down])  # and a link of the new tree: around it
    assert _deliveries(t, 1, "h40") == {m: 1 for m in everyone if m != "h40"}
    assert not any(set(down) == {a, b} for a, b in _tree_links(t, 1))
    with pytest.raises(ConfigError, match="h0's link .port 0. leads to no live switch"):
        t.add_group(4, ["h0", "h9"], avoid=["s0"])
    with pytest.raises(ConfigError, match="avoid names"):
        t.add_group(4, ["h0", "h9"], avoid=["s999"])


def _tree_links(t, gid):
    far = {(lk.a, lk.a_port): (lk.b, lk.b_port) for lk in t.links}
    far.update({(lk.b, lk.b_port): (lk.a, lk.a_port) for lk in t.links})
    return {(sw, far[(sw, p)][0]) for sw, g in t.group_ports.items() if gid in g for p in g[gid]}


# -- routing policies ---------------------------------------------------------------------------

class _View:
    """A port view with set queues and ports down."""

    def __init__(self, queued, down=()):
        self.queued, self.down = queued, set(down)

    def up(self, port, now):
        return port not in self.down

    def queue(self, port, now, vc=None):
        return (0, 0) if vc is not None else (1, self.queued.get(port, 0))


def _switch(spec, name, routing_name, seed=0):
    t = build(spec, settings=parse_settings([f"switch.routing={routing_name}"]))
    return t, make_switch(t.nodes[name], t, {"seed": seed})


def _frame(dst):
    return build_frame(0, dst, PacketType.MSG, MSG.pack(1, 0, 4, 0) + b"abcd")


def test_adaptive_takes_the_least_loaded_candidate_up_first_then_the_static_port():
    t, sw = _switch("fattree:k=4,n=3", "s0", "adaptive")
    static = t.routes["s0"][63]
    assert sw.candidates[63] == (4, 5, 6, 7) and static == 7
    port = lambda: sw.receive(_frame(63), 0, 0)[0][0]  # noqa: E731
    assert port() == static                                    # no port view: the static port
    sw.ports = _View({})
    assert port() == static                                    # idle: ties go to the table
    sw.ports = _View({7: 300, 4: 100, 5: 200, 6: 100})
    assert port() == 4                                         # least loaded, lowest port
    sw.ports = _View({7: 300, 4: 100, 5: 200, 6: 100}, down={4})
    assert port() == 6                                         # a port that is down is avoided
    sw.ports = _View({}, down={4, 5, 6, 7})
    assert port() == static
    assert sw.receive(_frame(1), 0, 0)[0][0] == 1              # one candidate: nothing to choose


def test_dispersive_spreads_over_the_candidates_and_repeats_per_seed():
    def draws(seed, name="s0"):
        _, sw = _switch("fattree:k=4,n=3", name, "dispersive", seed)
        return [sw.receive(_frame(63), 0, i)[0][0] for i in range(400)]

    a = draws(1)
    assert draws(1) == a and draws(2) != a and draws(1, "s1") != a     # seeded per run and per switch
    assert sorted(set(a)) == [4, 5, 6, 7] and min(a.count(p) for p in range(4, 8)) > 60


@pytest.mark.parametrize("policy", ["adaptive", "dispersive", "qsnet"])
def test_no_policy_chooses_a_port_whose_link_is_down_or_out_of_service_while_another_is_live(policy):
    # issue 42: a router sees loss of signal on its own port at once (its port view), and knows the
    # ports the manager or bring-up took out of service (held)
    t, sw = _switch("fattree:k=4,n=3", "s0", policy, seed=3)
    assert sw.candidates[63] == (4, 5, 6, 7)
    srcrt = lambda route: bytes(_frame(63)[:FLAGS]) + bytes([FLAG_SRCRT, 0, route]) + _frame(63)[FLAGS + 3:]  # noqa: E731
    for down, held in (({7}, set()), ({4, 5}, {7}), (set(), {4, 5, 6})):
        sw.ports, sw.held = _View({}, down=down), set(held)
        live = {4, 5, 6, 7} - down - held
        got = {sw.receive(_frame(63), 0, i)[0][0] for i in range(200)}
        got |= {sw.receive(srcrt(r), 0, i)[0][0] for r in range(8) for i in range(4)}
        assert got <= live, (down, held, got)
        if policy == "dispersive":
            assert got == live  # and it still spreads over every live one


def test_a_policy_registers_by_name_and_an_unknown_one_is_refused():
    routing.register("highest", lambda engine, seed: lambda dst, static, frame, now: engine.candidates[dst][-1])
    try:
        _, sw = _switch("fattree:k=4,n=3", "s0", "highest")
        assert sw.receive(_frame(63), 0, 0)[0][0] == 7 and sw.receive(_frame(16), 0, 0)[0][0] == 7
    finally:
        del routing.POLICIES["highest"]
    with pytest.raises(ConfigError, match="unknown routing policy 'zigzag'; known: static, adaptive, dispersive, qsnet, minimal, valiant, ugal_l, ugal_g, par, ecmp, spray$"):
        _switch("star:n=2", "s0", "zigzag")


async def test_an_unknown_policy_is_refused_before_the_cluster_runs():
    t = build("star:n=2", settings=parse_settings(["switch.routing=zigzag"]))
    with pytest.raises(ConfigError, match="unknown routing policy 'zigzag'; known: static, adaptive, dispersive"):
        async with emu.Cluster(t):
            pass


async def _two_flows(routing_name, seed=0, processes=1, *more):
    """h0 -> h4 and h1 -> h6 on fattree:k=2,n=3: destination-mod-k sends both up s0's port 2."""
    t = build("fattree:k=2,n=3", settings=parse_settings([f"switch.routing={routing_name}", *more]))
    async with emu.Cluster(t, seed=seed, processes=processes) as net:
        r = await net.run({"h0": (apps.send_to, "h4", 4096, 0, 8), "h1": (apps.send_to, "h6", 4096, 0, 8),
                           "h4": (apps.recv_count, 8), "h6": (apps.recv_count, 8)})
        assert r["h4"][0] == r["h6"][0] == 8 * 4096            # every byte arrived
        up = {p: net.metrics.link_frames.get(f"s0-p{p}", 0) for p in (2, 3)}
        return max(r["h4"][1], r["h6"][1]), up


async def test_policies_by_name_in_a_cluster_spread_a_hot_up_link():
    static_ns, static_up = await _two_flows("static")
    adaptive_ns, adaptive_up = await _two_flows("adaptive")
    d1, d2, d3 = await _two_flows("dispersive", 1), await _two_flows("dispersive", 1), await _two_flows("dispersive", 2)
    assert static_up[3] == 0 and min(adaptive_up.values()) > 0 and adaptive_ns < static_ns
    assert d1 == d2 and d1 != d3 and min(d1[1].values()) > 0
    assert await _two_flows("dispersive", 1, 2) == d1                   # whatever the number of processes
    # with finite buffers and credits, adaptive also counts what waits for credit
    _, credit_up = await _two_flows("adaptive", 0, 1, "switch.vc_buffer_bytes=2048")
    assert min(credit_up.values()) > 0


# -- networkx and the channel dependency graph --------------------------------------------------

def test_networkx_export_round_trips_nodes_links_and_figures():
    t = build("fattree:k=2,n=3", latency_ns=250)
    g = t.to_networkx()
    assert (g.number_of_nodes(), g.number_of_edges()) == (len(t.nodes), len(t.links))
    assert g.nodes["h3"]["kind"] == "host" and g.nodes["s0"]["id"] == t.nodes["s0"].id
    assert g.nodes["s0"]["info"] == t.nodes["s0"].info
    lk = t.links[0]
    (data,) = g.get_edge_data(lk.a, lk.b).values()
    assert data == {"ports": {lk.a: lk.a_port, lk.b: lk.b_port}, "latency_ns": 250,
                    "bandwidth_bps": lk.spec.bandwidth_bps}
    assert sorted(d for _, d in g.degree()) == sorted(len(e) for e in t.neighbours().values())
    multi = _custom().to_networkx()
    assert multi.number_of_edges("s0", "s1") == 2                       # parallel links kept


def test_the_channel_dependency_check():
    cycle = dependency_cycle(build("torus:k=4,n=2"))
    assert len(cycle) == 4 and len({n for n, _ in cycle}) == 4 and len({p for _, p in cycle}) == 1  # one ring
    assert dependency_cycle(build("mesh:k=4,n=2")) == [] and dependency_cycle(build("fattree:k=2,n=3")) == []
    # every minimal next hop: up*/down* stays acyclic on trees; a mesh gets the turns DOR forbids
    assert dependency_cycle(build("fattree:k=4,n=2"), adaptive=True) == []
    assert dependency_cycle(build("qsnet:nodes=150"), adaptive=True) == []
    assert len(dependency_cycle(build("mesh:k=3,n=2"), adaptive=True)) >= 4
    assert dependency_cycle(build("torus:k=4,n=2")) == cycle                   # the same cycle every time
    g = channel_dependencies(build("fattree:k=2,n=2"))
    assert ("h0", 0) in g and all(g.out_degree((s, p)) == 0 for s in ("s0", "s1") for p in (0, 1))  # into hosts


def test_a_group_tree_avoids_the_one_parallel_link_a_fault_names():
    """``--fault link=s0-s8.0,down`` at 0 names one of the parallel links between s0 and s8: the
    group's tree goes over the other one (it was refused: the name taken for a node's); ``s0-s8``
    names them all, and an unknown link is refused in one line, its names in the order given."""
    t = build("qsnet:nodes=64")
    ports = lambda sw, tree: set(tree[sw][1]) | ({tree[sw][0]} if tree[sw][0] is not None else set())  # noqa: E731
    s8_to_s0 = [lk.b_port if lk.b == "s8" else lk.a_port for lk in t.links if {lk.a, lk.b} == {"s0", "s8"}]
    root, tree = t.spanning_tree(t.host_names())
    assert root == "s8" and s8_to_s0[0] in ports("s8", tree)  # (the first of the pair, by port)
    root, tree = t.spanning_tree(t.host_names(), avoid=[("s0", "s8.0")])
    assert root == "s8" and s8_to_s0[0] not in ports("s8", tree) and s8_to_s0[1] in ports("s8", tree)
    root, tree = t.spanning_tree(t.host_names(), avoid=[("s0", "s8")])
    assert not any({lk.a, lk.b} == {"s0", "s8"} and (lk.a_port in ports(lk.a, tree) if lk.a in tree else False)
               for lk in t.links)  # (no link between them in the tree)
    with pytest.raises(ConfigError, match=r"avoid names \[\('s0', 's8.7'\), \('s0', 'zz'\)\], neither nodes nor links"):
        t.spanning_tree(t.host_names(), avoid=[("s0", "s8.7"), ("s0", "zz")])
