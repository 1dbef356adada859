"""The network manager element and link bring-up of spec 03 (switch/manager.py, emu/bringup.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

import emu
from emu.bringup import BRINGUP, Bringup, BringupEvent
from emu.config import ConfigError, ManagerSpec
from emu.sim import EngineNet
from emu.wire import DST_OFF, PacketType, build_frame
from emu.wire.qsnet import MGMT, ROUTE_ENTRY, TRAP, MgmtOp, TrapKind
from emu.nodes.collectives.hw import HW_GROUP
from emu.topologies import build


def managed(spec="fattree:k=4,n=2", routing="static", **mspec):
    t = build(spec, settings={"switch": {"routing": routing}, "elan": {"max_tries": 8, "retransmit_ns": 5000}})
    t.add_manager(spec=ManagerSpec(**{"persist_ns": 10_000, **mspec}))
    return t


async def puts(host, rank, n, gap):
    host.mem_write(0x1000, b"q" * 3000)
    out = []
    for i in range(n):
        r = await host.put(rank, 0x1000, 0x9000 + 0x10000 * i, 3000)
        out.append(r.ok)
        await host.sleep(gap)
    return out


def walk(t, routes, src, dst):
    """The nodes a frame from host src to host dst visits following ``routes`` (None: stuck)."""
    nb = t.neighbours()
    far = {(u, p): v for u in t.nodes for p, v, _vp, _l in nb[u]}
    node, seen = far[(src, 0)], [src]
    while node != dst:
        if node in seen or len(seen) > 20:
            return None
        seen.append(node)
        port = routes[node][t.nodes[dst].id]
        if port < 0:
            return None
        node = far[(node, port)]
    return seen + [dst]


def test_a_dead_link_is_written_out_of_exactly_the_tables_that_would_send_into_it():
    t = managed()
    old = {s: list(r) for s, r in t.routes.items()}
    net = EngineNet(t)
    net.link_down("s0", "s7")
    res = net.run({f"h{i}": (puts, 12 + i, 4, 20_000) for i in range(4)})
    assert all(all(v) for v in res.values())  # every put got through (resent until the tables moved)
    mgr = net.engines["mgr"]
    first_trap = min(tm for tm, node, _p, f in net.delivered if node == "mgr" and f[DST_OFF + 6] == PacketType.TRAP)
    assert mgr.actions == [(first_trap + 10_000, "link s0-s7 down: out of the tables")]  # persist_ns after
    assert mgr.stats["commands_done"] == mgr.stats["commands_sent"] and mgr.stats["commands_failed"] == 0
    new = {s: net.engines[s].routes for s in old if s != "mgr"}
    dead = {"s0", "s7"}
    hosts = t.host_names()
    for s in new:
        for d in hosts:
            before, after = old[s][t.nodes[d].id], new[s][t.nodes[d].id]
            # a switch's entry changed iff its old route to d crossed the dead link
            crossed = any({a, b} == dead for a, b in _pairs(_from_switch(t, old, s, d)))
            assert (before != after) == crossed, (s, d, before, after)
    for a in hosts:  # and every host reaches every other by the new tables, never over the dead link
        for b in hosts:
            if a != b:
                path = walk(t, new, a, b)
                assert path is not None and not any({x, y} == dead for x, y in _pairs(path)), (a, b, path)


def _pairs(path):
    return list(zip(path, path[1:])) if path else []


def _from_switch(t, routes, s, dst):
    nb = t.neighbours()
    far = {(u, p): v for u in t.nodes for p, v, _vp, _l in nb[u]}
    node, seen = s, []
    while node != dst and len(seen) < 20:
        seen.append(node)
        node = far[(node, routes[node][t.nodes[dst].id])]
    return seen + [dst]


def test_a_link_that_comes_back_goes_back_into_the_tables_and_a_blip_changes_nothing():
    t = managed()
    old = {s: list(r) for s, r in t.routes.items()}
    net = EngineNet(t)
    net.link_down("s1", "s5")
    net.step_all(until=5_000)
    net.link_down("s1", "s5", up=True)  # back within persist_ns: nothing to do
    net.step_all()
    assert net.engines["mgr"].actions == [] and net.engines["mgr"].stats["traps"] == 4
    net.link_down("s1", "s5")
    net.step_all(until=net.now + 15_000)
    net.link_down("s1", "s5", up=True)
    net.step_all()
    acts = [a for _t, a in net.engines["mgr"].actions]
    assert acts == ["link s1-s5 down: out of the tables", "link s1-s5 back up: into the tables again"]
    assert {s: net.engines[s].routes for s in old if s != "mgr"} == {s: r for s, r in old.items() if s != "mgr"}


async def bcast_late(host, wait):
    await host.sleep(wait)
    host.mem_write(0, b"z" * 2000)
    return await host.bcast_put(HW_GROUP, 15, 0, 0x7000, 2000)


def test_a_broadcast_tree_moves_to_the_next_top_switch_when_its_root_loses_a_link():
    t = managed()
    t.add_group(HW_GROUP, t.host_names())
    assert t.group_roots[HW_GROUP] == "s4"
    net = EngineNet(t)
    net.link_down("s0", "s4")
    res = net.run({"h0": (bcast_late, 20_000), **{h: (_wait, ) for h in t.host_names()[1:]}})
    assert res["h0"].ok
    assert all(len(res[h]) == 1 for h in t.host_names()[1:])
    acts = [a for _t, a in net.engines["mgr"].actions]
    assert f"group {HW_GROUP:#x}: tree root moved to s5" in acts
    assert HW_GROUP not in net.engines["s4"].groups and HW_GROUP in net.engines["s5"].groups


async def _wait(host):
    return await host.wait_arrivals(1, timeout_ns=200_000)


def test_routers_take_commands_and_traps_from_routers_only_never_from_a_host():
    t = managed()
    net = EngineNet(t)
    s0 = net.engines["s0"]
    before = list(s0.routes)
    forged = build_frame(0, t.nodes["s0"].id, PacketType.MGMT,
                         MGMT.pack(MgmtOp.SET_ROUTES, 0, 0, 0, 1, 1) + ROUTE_ENTRY.pack(15, 1) + bytes([0]))
    net.send("h0", 0, forged)
    trap = build_frame(0, t.nodes["mgr"].id, PacketType.TRAP, TRAP.pack(TrapKind.LINK_DOWN, 4, 1, t.nodes["s0"].id, 0, 0))
    net.send("h1", 0, trap)
    net.step_all()
    assert s0.routes == before and s0.stats["foreign_mgmt"] == 2
    assert net.engines["mgr"].stats["traps"] == 0


def test_the_bring_up_table_is_closed():
    assert set(BRINGUP) == set(Bringup)
    for s, moves in BRINGUP.items():
        assert set(moves) <= set(BringupEvent) and set(moves.values()) <= set(Bringup)
        assert (not moves) == (s in (Bringup.UP, Bringup.MISCABLED, Bringup.DEAD))


async def put_app(host, rank):
    host.mem_write(0x1000, b"w" * 4096)
    r = await host.put(rank, 0x1000, 0x9000, 4096)
    return r.ok, r.resent


async def test_bring_up_takes_bad_and_mis_cabled_links_out_and_keeps_a_nodes_only_link():
    t = build("fattree:k=4,n=2", settings={"switch": {"routing": "static"}})
    t.add_manager(spec=ManagerSpec(bringup=True, test_frames=32))
    t.cabling_plan[("s1", 4)] = ("s6", 1)   # the plan says s1 port 4 goes to s6; it goes to s4
    async with emu.Cluster(t) as net:
        await net.schedule(0, "ber", link=("s0", "s5"), rate=1e-4)
        await net.schedule(0, "ber", link=("h5", "s1"), rate=1e-4)
        await net.run({})
        res = await net.run({f"h{i}": (put_app, 15 - i) for i in range(16)})
        stats = {s["name"]: s for s in await net.stats()}
    acts = [a for _t, a in stats["mgr"]["actions"]]
    assert any(a.startswith("link s1-s4 mis-cabled (found s4 port 1)") and a.endswith("out of the tables") for a in acts)
    assert any(a.startswith("link s0-s5 ") and "test frames lost or damaged" in a and ", sample " in a
               and a.endswith("): out of the tables") for a in acts)
    assert any(a.startswith("link h5-s1 ") and "kept, the only way to a node; admitted" in a for a in acts)
    assert stats["mgr"]["engine"]["links_out"] == 2 and stats["mgr"]["engine"]["links_kept"] == 1
    assert all(ok for ok, _ in res.values())
    assert sum(r for _ok, r in res.values() if _ok) == res["h5"][1] + res["h10"][1]  # resends only over h5's link
    for s in ("s0", "s1", "s2", "s3"):
        assert stats[s]["engine"]["bringup_up"] + stats[s]["engine"].get("bringup_miscabled", 0) == 8


def test_emu_run_with_the_manager_and_what_it_refuses():
    exe = str(Path(sys.executable).parent / "emu")
    out = subprocess.run([exe, "run", "--topo", "fattree:k=4,n=2", "--test", "put", "--size", "16KiB", "--manager",
                          "--set", "manager.bringup=true", "--set", "switch.routing=static",
                          "--fault", "at=0,link=s0-s5,ber=1e-4"], capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "packets_resent=0" in out.stdout and "link s0-s5" in out.stdout, text
    bad = subprocess.run([exe, "run", "--topo", "star:n=4", "--test", "put", "--set", "manager.persist_ns=5"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "give --manager too" in bad.stdout + bad.stderr
    with pytest.raises(ConfigError, match="ManagerSpec.action 'restart' is not one of rewrite, reset, none"):
        ManagerSpec(action="restart")
    with pytest.raises(ConfigError, match="ManagerSpec.band 'wifi' is not one of auto, out, in"):
        ManagerSpec(band="wifi")


def _bring_up(seed=0, **mspec):
    t = build("fattree:k=4,n=2", settings={"switch": {"routing": "static"}})
    t.add_manager(spec=ManagerSpec(**{"bringup": True, **mspec}))
    net = EngineNet(t, seed=seed)
    for name in net.names:  # the switches' bring-up starts on their timers at 0
        net._push_timer(name)
    return t, net


def test_a_forged_bring_up_end_from_a_host_port_is_counted_and_ignored():
    t, net = _bring_up(test_frames=8)
    net.run({})  # bring-up over
    s0, h0 = net.engines["s0"], net.engines["h0"]
    assert s0.stats.get("foreign_mgmt", 0) == 0 and h0.stats.get("foreign_mgmt", 0) == 0
    before = len(net.delivered)
    s0_id = t.nodes["s0"].id
    for op, count in ((MgmtOp.END, 8), (MgmtOp.HELLO, 8), (MgmtOp.END, 8), (MgmtOp.RESULT, 3)):
        body = b"" if op != MgmtOp.HELLO else __import__("struct").pack("!IB", t.nodes["h0"].id, 0)
        net.send("h0", 0, build_frame(t.nodes["h0"].id, s0_id, PacketType.MGMT,
                                      MGMT.pack(op, 0, 0, 0, 0, count) + body, prio=1))
    for _ in range(10_000):  # without an end it would loop (RESULT, PATTERN, END, ...): bounded steps
        if not net.heap:
            break
        net.step_all(one=True)
    assert not net.heap
    assert len(net.delivered) - before == 4  # the four forged frames reached s0; nothing came back
    assert s0.stats["foreign_mgmt"] == 4
    # a stray END at a NIC (no HELLO before it) gets no answer either
    net.send("s0", 0, build_frame(s0_id, t.nodes["h0"].id, PacketType.MGMT, MGMT.pack(MgmtOp.END, 0, 0, 0, 0, 8),
                                  prio=1))
    net.step_all()
    assert len(net.delivered) - before == 5 and h0.stats["bringup_refused"] == 1


def _ber(net, t, a, b, ber, seed):
    """A seeded bit-error rate on link a-b, both ways (as ``Cluster.schedule(..., "ber")``)."""
    import random

    from emu.port import frame_error_probability

    link = next(lk for lk in t.links if {lk.a, lk.b} == {a, b})
    ends = {(link.a, link.a_port), (link.b, link.b_port)}
    rng = random.Random(seed)

    def tamper(node, port, frame):
        if (node, port) in ends and rng.random() < frame_error_probability(ber, len(frame)):
            f = bytearray(frame)
            bit = rng.randrange(8 * len(f))
            f[bit // 8] ^= 0x80 >> (bit % 8)
            return bytes(f)
        return frame
    net.tamper = tamper


def test_a_link_at_ber_1e_3_is_caught_by_bring_up_for_seeds_0_to_99():
    """s0's traps go up the manager tree over s0-s4 itself: its own report may be lost on it (seed 0
    lost it), the answering end's (s4's, one way) is not."""
    link = ("s0", "s4")
    from emu.bringup import frames_to_catch, miss_probability

    mspec = ManagerSpec(bringup=True)
    from emu.port import frame_error_probability
    from emu.wire import HDR_LEN

    p = frame_error_probability(1e-3, HDR_LEN + MGMT.size + mspec.test_bytes + 4)
    n = frames_to_catch(p, mspec.max_error_rate)
    assert n <= mspec.test_frames and miss_probability(n, p, mspec.max_error_rate) <= 1e-9
    key = frozenset(link)
    for seed in range(100):
        t, net = _bring_up(seed)
        _ber(net, t, *link, 1e-3, seed)
        net.run({})
        mgr = net.engines["mgr"]
        assert key in mgr.dead, (seed, mgr.actions)
        assert mgr.stats["links_out"] == 1, (seed, mgr.actions)


def test_the_test_pattern_is_sized_by_the_binomial_tail():
    from emu.bringup import caught_rate, frames_to_catch, miss_probability

    n = frames_to_catch(0.05, 0.01)
    assert miss_probability(n, 0.05, 0.01) <= 1e-9 < miss_probability(n - 1, 0.05, 0.01)
    assert 400 < n < 1200  # the Chernoff bound ln(1e9) / KL(0.01 || 0.05) = 838
    assert frames_to_catch(0.9998, 0.01) <= 4 and frames_to_catch(0.01, 0.01) is None
    assert frames_to_catch(0.0101, 0.01) is None  # beyond the 16-bit count's 32767 frames
    q = caught_rate(64, 0.01)
    assert miss_probability(64, q, 0.01) <= 1e-9 < miss_probability(64, q * 0.99, 0.01)


@pytest.mark.parametrize("dead", [("s0", "s4"), ("s0", "s5")])
def test_in_band_the_reset_of_the_managers_own_switch_never_cuts_it_off(dead):
    # issue 42: the manager sits on s4 (in band); resetting s4's links (or s5's, reached through s0)
    # must leave every router reachable: ports out of service still carry management frames, and the
    # commands go round the dead link itself
    t = managed(action="reset")
    net = EngineNet(t)
    net.link_down(*dead)
    net.run({"h0": (puts, 12, 2, 20_000)})
    mgr = net.engines["mgr"]
    assert mgr.attach == "s4"
    assert [w for _t, w in mgr.actions] == [f"link {'-'.join(dead)} down: {dead[1]}'s links reset "
                                            "(4 routers take their ports to it out of service)"]
    assert mgr.stats["commands_failed"] == 0 and mgr.stats["commands_done"] == mgr.stats["commands_sent"] == 5
    held = {s: set(net.engines[s].held) for s in ("s0", "s1", "s2", "s3")}
    assert all(len(h) == 1 for h in held.values()) and net.engines[dead[1]].held, (held, net.engines[dead[1]].held)
