"""Multi-rail (spec 03): a node's adapters on separate networks, QsNet packets striped over them."""

import pytest

from emu.config import ConfigError
from emu.sim import EngineNet
from emu.wire import PacketType, parse_frame
from emu.topologies import build

DATA = bytes(i * 31 % 256 for i in range(64 * 1024))


@pytest.mark.parametrize("spec,switches", [("fattree:k=4,n=2", 8), ("clos:radix=8,stages=2", 12),
                                           ("clos:radix=8,stages=2,nodes=12", 7)])
def test_rails_are_separate_copies_of_the_network_with_a_link_from_every_host_to_each(spec, switches):
    one, two = build(spec), build(spec + ",rails=2")
    two.validate()
    assert two.name == spec + ",rails=2"
    assert len(two.hosts) == len(one.hosts) and len(two.switches) == 2 * switches
    assert len(two.links) == 2 * len(one.links)
    rail = {s.name: s.info["rail"] for s in two.switches}
    for lk in two.links:  # no link joins the rails; a host's port r is on rail r
        a, b = two.nodes[lk.a], two.nodes[lk.b]
        if a.kind == b.kind == "switch":
            assert rail[lk.a] == rail[lk.b]
        else:
            h, hp, s = (lk.a, lk.a_port, lk.b) if a.kind == "host" else (lk.b, lk.b_port, lk.a)
            assert rail[s] == hp
    for s in two.switches:  # each rail routes every host, as rail 0 of the single network does
        twin = f"s{int(s.name[1:]) % switches}"
        assert two.routes[s.name] == one.routes[twin]
    assert two.bisection == 2 * one.bisection
    with pytest.raises(ConfigError, match="rails must be an integer within 1..8"):
        build(spec + ",rails=9")


async def put_app(host, rank, data):
    host.mem_write(0x1000, data)
    r = await host.put(rank, 0x1000, 0x100000, len(data))
    return r.ok, r.t_ns, r.resent


async def wait_app(host, addr, size):
    await host.wait_arrivals(1)
    return host.mem_read(addr, size)


def run_put(spec, **kw):
    t = build(spec)
    net = EngineNet(t, **kw)
    res = net.run({"h0": (put_app, 15, DATA), "h15": (wait_app, 0x100000, len(DATA))})
    return t, net, res


def test_packets_are_striped_over_the_rails_and_acks_come_back_on_their_packets_rail():
    t, net, res = run_put("fattree:k=4,n=2,rails=2")
    ok, t2, _ = res["h0"]
    assert ok and res["h15"] == DATA
    st = net.engines["h0"].mechanism("qsnet").stats
    assert st["packets_rail0"] == st["packets_rail1"] == 32
    rail = {s.name: s.info["rail"] for s in t.switches}
    data_on = {0: 0, 1: 0}
    for _tm, node, port, f in net.delivered:
        pt = parse_frame(f)[4]
        if node in rail and pt == PacketType.QPKT:
            data_on[rail[node]] += 1
        if node == "h0" and pt == PacketType.QACK:
            assert port in (0, 1)
    assert data_on[0] == data_on[1] > 0  # the same number of switch crossings on each rail
    acks = [port for _tm, node, port, f in net.delivered if node == "h0" and parse_frame(f)[4] == PacketType.QACK]
    assert acks.count(0) == acks.count(1) == 32
    _t, _n, single = run_put("fattree:k=4,n=2")
    assert t2 < 0.75 * single["h0"][1]  # two links: the transfer takes much less time


def test_a_rail_that_goes_down_leaves_the_other_to_carry_every_packet():
    t = build("fattree:k=4,n=2,rails=2", settings={"elan": {"retransmit_ns": 5000}})
    net = EngineNet(t)
    rail1 = next(lk.b for lk in t.links if lk.a == "h0" and lk.a_port == 1)
    net.link_down("h0", rail1)
    res = net.run({"h0": (put_app, 15, DATA), "h15": (wait_app, 0x100000, len(DATA))})
    ok, _t, resent = res["h0"]
    assert ok and res["h15"] == DATA and resent == 32  # every rail-1 packet went again, on rail 0


async def test_several_links_into_one_network_the_switch_chooses_the_final_link():
    import emu

    async def put_to(host, rank):
        host.mem_write(0x1000, DATA)
        return (await host.put(rank, 0x1000, 0x100000 + host.rank * 0x20000, len(DATA))).ok

    rx = {}
    for routing in ("static", "qsnet"):
        t = build("fattree:k=4,n=1,links=2", settings={"switch": {"routing": routing}})
        assert [(lk.a_port, lk.b_port) for lk in t.links if lk.a == "h1"] == [(0, 1), (1, 5)]
        async with emu.Cluster(t) as net:
            res = await net.run({h: (put_to, 1) for h in ("h0", "h2", "h3")})
            st = {s["name"]: s for s in await net.stats()}
        assert all(res.values())
        rx[routing] = [p["rx_frames"] for p in st["h1"]["ports"]]
        sent = st["h0"]["ports"]
        assert sent[0]["tx_frames"] > 0 and sent[1]["tx_frames"] > 0  # the sender stripes over its links
    assert rx["static"][1] == 0 < rx["static"][0]   # the table's link only
    assert min(rx["qsnet"]) > 0                      # the switch spreads the last hop over both


def test_qsnet_rails_are_separate_networks_and_links_go_to_different_lower_routers():
    two = build("qsnet:nodes=300,rails=2")
    two.validate()
    one = build("qsnet:nodes=300")
    assert len(two.switches) == 2 * len(one.switches) and len(two.links) == 2 * len(one.links)
    assert two.figures["node_switches"] == 6 and two.figures["top_switches"] == 256 and two.figures["rails"] == 2
    rail = {s.name: s.info["rail"] for s in two.switches}
    assert {(lk.a_port, rail[lk.b]) for lk in two.links if lk.a == "h7"} == {(0, 0), (1, 1)}
    multi = build("qsnet:nodes=300,links=2")
    multi.validate()
    assert multi.figures["node_switches"] == 5  # 64 nodes per chassis: 128 down links, two per node
    ends = [(lk.a_port, lk.b, multi.nodes[lk.b].info["chassis"]) for lk in multi.links if lk.a == "h70"]
    assert [p for p, _s, _c in ends] == [0, 1] and ends[0][1] != ends[1][1] and ends[0][2] == ends[1][2] == 1
    multi.compute_candidates()
    lowers = {s for _p, s, _c in ends}
    nb = multi.neighbours()
    uppers = [s.name for s in multi.switches if s.info.get("chassis") == 1 and s.info["stage"] == 2]
    for s in uppers:  # the upper routers of h70's chassis can still pick either link: the last stage
        assert {v for p, v, _vp, _l in nb[s] if p in multi.candidates[s][70]} == lowers
    with pytest.raises(ConfigError, match="rails and links cannot be combined"):
        build("qsnet:nodes=300,rails=2,links=2")
    with pytest.raises(ConfigError, match="nodes must be an integer within 2..8192"):
        build("qsnet:nodes=9000,links=2")


@pytest.mark.parametrize("spec", ["qsnet:nodes=300,rails=2", "qsnet:nodes=300,links=2"])
async def test_a_node_spreads_its_packets_over_its_links_and_the_routers_over_the_last_stage(spec):
    import emu

    async def put_to(host, rank):
        host.mem_write(0x1000, DATA)
        return (await host.put(rank, 0x1000, 0x100000 + host.rank * 0x20000, len(DATA))).ok

    t = build(spec, settings={"switch": {"routing": "qsnet"}})
    async with emu.Cluster(t) as net:
        res = await net.run({h: (put_to, 70) for h in ("h0", "h200", "h299")})
        st = {s["name"]: s for s in await net.stats()}
    assert all(res.values())
    rx = [p["rx_frames"] for p in st["h70"]["ports"]]
    assert len(rx) == 2 and min(rx) > 0  # data reaches the target on both of its links
    assert all(min(p["tx_frames"] for p in st[h]["ports"]) > 0 for h in ("h0", "h200"))  # senders stripe
