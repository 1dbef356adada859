"""Spec 03, second reading: management out of band (every router's own link to the manager) and the
manager's two responses to a persistent fault, reset and rewrite (switch/manager.py)."""

import pytest

import emu
from emu.config import ManagerSpec
from emu.sim import EngineNet
from emu.topologies.registry import build
from emu.wire import DST_OFF, PacketType

PTYPE = DST_OFF + 6


def test_out_of_band_links_every_router_to_the_manager_and_routing_ignores_them():
    plain = build("qsnet:nodes=300", settings={"switch": {"routing": "qsnet"}})
    plain.compute_candidates()
    t = build("qsnet:nodes=300", settings={"switch": {"routing": "qsnet"}})
    mgr = t.add_manager(spec=ManagerSpec())
    assert mgr.info["band"] == "out" and t.management == "out"
    routers = [s.name for s in t.switches if s.name != "mgr"]
    assert sorted(t.manager_ports) == sorted(routers) and len(t.neighbours()["mgr"]) == len(routers) == 61
    for s in routers:  # the port after the router's data ports, to the manager
        assert t.manager_ports[s] == t.nports(s) - 1 and t.neighbours()[s][-1][1] == "mgr"
    t.compute_candidates()
    assert "mgr" not in t.candidates and all(t.candidates[s] == plain.candidates[s] for s in routers)
    t.add_group(7, t.host_names())
    assert "mgr" not in t.group_ports and t.group_roots[7] != "mgr"
    inband = build("fattree:k=4,n=2")
    assert inband.add_manager().info["band"] == "in" and len(inband.neighbours()["mgr"]) == 1
    forced = build("qsnet:nodes=300")
    assert forced.add_manager(spec=ManagerSpec(band="in")).info["band"] == "in"


def _link_down_traps(band: str):
    # EngineNet drives the engines without credits: the output-queued switch with unbounded buffers
    t = build("qsnet:nodes=300", settings={"switch": {"routing": "static", "model": "output_queued",
                                                      "vc_buffer_bytes": 0, "pool_bytes": 0}})
    t.add_manager(spec=ManagerSpec(band=band, persist_ns=10_000))
    net = EngineNet(t)
    # a link on the in-band manager tree: an upper router's only way to the manager
    attach = next(v for _p, v, _vp, _l in t.neighbours()["mgr"])
    nb = t.neighbours()
    upper = next(v for p, v, vp, _l in nb[attach] if v != "mgr" and t.manager_ports.get(v) == vp) \
        if band == "in" else next(v for _p, v, _vp, _l in nb["s48"] if v != "mgr")
    box = attach if band == "in" else "s48"
    net.link_down(box, upper)
    net.step_all(until=50_000)
    traps = [(node, port) for _t, node, port, f in net.delivered if f[PTYPE] == PacketType.TRAP]
    links = sum(1 for lk in t.links if {lk.a, lk.b} == {box, upper})
    return net.engines["mgr"], traps, links


def test_out_of_band_every_trap_reaches_the_manager_and_none_crosses_a_data_link():
    mgr, traps, links = _link_down_traps("out")
    assert links == 10  # s48 is router R0: ten carved 3-way switches, each with a link to upper router s8
    assert mgr.stats["traps_link_down"] == 2 * links and all(node == "mgr" for node, _p in traps)
    assert [a for _t, a in mgr.actions] == ["link s48-s8 down: out of the tables"]  # the manager names links by ends
    assert mgr.stats["commands_done"] == mgr.stats["commands_sent"] > 0
    inband, itraps, links = _link_down_traps("in")
    # in band, the router whose way to the manager was one of those links cannot report them: one end's
    # traps arrive, not both ends'
    assert inband.stats["traps_link_down"] == links


async def _faulted(action: str, routing: str = "qsnet"):
    t = build("qsnet:nodes=300", settings={"switch": {"routing": routing}, "elan": {"retransmit_ns": 10_000}})
    t.add_manager(spec=ManagerSpec(action=action, persist_ns=5_000))

    async def puts(host, rank):
        host.mem_write(0x1000, b"m" * 8192)
        oks = []
        for i in range(6):
            oks.append((await host.put(rank, 0x1000, 0x100000 + 0x10000 * i, 8192)).ok)
        return oks, host.now

    async with emu.Cluster(t) as net:
        await net.schedule(net.now + 2_000, "down", link=("s0", "s8"))
        res = await net.run({f"h{i}": (puts, (i + 150) % 300) for i in range(0, 300, 7)})
        st = {s["name"]: s for s in await net.stats()}
    return res, st


@pytest.mark.parametrize("action", ["reset", "rewrite"])
async def test_reset_and_rewrite_on_the_same_fault(action):
    """Adaptive routing with rewritten tables: the policies read the candidates the manager installed
    (they once kept the table they were built with, and packets looped between s8 and s1)."""
    res, st = await _faulted(action)
    assert all(all(oks) for oks, _t in res.values())
    mgr = st["mgr"]["engine"]
    acts = [a for _t, a in st["mgr"]["actions"]]
    if action == "reset":  # s0 has nodes on it: the upper router s8 is reset, its neighbours hold their ports
        assert mgr["routers_reset"] == 1 and acts[0].startswith("link s0-s8 down: s8's links reset")
        assert "routes_rewritten" not in st["s0"]["engine"]
    else:
        assert mgr.get("routers_reset", 0) == 0 and acts == ["link s0-s8 down: out of the tables"]
        assert st["s8"]["engine"]["routes_rewritten"] > 0
