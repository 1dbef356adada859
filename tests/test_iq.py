"""The input-queued router (``switch.model=input_queued``): pipeline, VCs, allocators, credits.

Times are asserted exactly against the rules of ``emu.switch.iq``, written out by hand here from the
captured injection times (one byte per ns on every link unless said otherwise)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emu
from emu.config import ConfigError, HostSpec, LinkSpec, RunConfig, SwitchSpec
from emu.topologies.base import Topology
from emu.topologies.registry import build
from emu.wire import DST_OFF, is_credit

L = 10  # ns per link
BPS = 8_000_000_000  # one byte per ns
DIR_IN, DIR_OUT = 1, 2


def ser(n, bps=BPS):
    return -(-n * 8_000_000_000 // bps)


def chain(k, sw, link=None):
    """h0 - s0 - s1 - ... - s(k-1) - h1: router i has port 0 toward h0, port 1 toward h1."""
    link = link or LinkSpec(latency_ns=L, bandwidth_bps=BPS)
    t = Topology(f"chain{k}")
    t.add_host("h0")
    t.add_host("h1")
    for i in range(k):
        t.add_switch(f"s{i}", sw)
    t.add_link("h0", "s0", link, a_port=0, b_port=0)
    for i in range(k - 1):
        t.add_link(f"s{i}", f"s{i + 1}", link, a_port=1, b_port=0)
    t.add_link(f"s{k - 1}", "h1", link, a_port=1, b_port=0)
    t.routes = {f"s{i}": [0, 1] for i in range(k)}
    return t


def star(n, sw, links=None, host=None):
    """Hosts h0..h(n-1) on router s0, host i on port i; ``links``: per host, its LinkSpec."""
    t = Topology(f"star{n}")
    for i in range(n):
        t.add_host(f"h{i}", host)
    t.add_switch("s0", sw)
    for i in range(n):
        t.add_link(f"h{i}", "s0", (links or {}).get(i, LinkSpec(latency_ns=L, bandwidth_bps=BPS)),
                   a_port=0, b_port=i)
    t.routes = {"s0": list(range(n))}
    return t


def iq(**kw):
    kw.setdefault("route_ns", 7)
    kw.setdefault("vc_alloc_ns", 5)
    kw.setdefault("sw_alloc_ns", 3)
    kw.setdefault("traversal_ns", 2)
    return SwitchSpec(model="input_queued", **kw)


def sender(dst, payloads, vcs=None, after=0):
    async def app(host):
        if after:
            await host.sleep(after)
        for i, size in enumerate(payloads):
            await host.send(dst, bytes(size), tag=i, vc=(vcs or [0] * len(payloads))[i])
        return host.now
    return app


def receiver(n):
    async def app(host):
        return [len((await host.recv()).data) for _ in range(n)]
    return app


async def _records(t, apps):
    async with emu.Cluster(t, run=RunConfig(capture=True)) as net:
        res = await net.run(apps)
        recs = [r for r in await net.capture_records() if not is_credit(r[3])]
        return net, res, recs


def _times(net, recs, node, port, direction):
    iface = net.plan.iface_base[node] + port
    return [ts for ts, i, d, f in recs if i == iface and d & 3 == direction]


@pytest.mark.parametrize("cut_through", [True, False])
@pytest.mark.parametrize("flits", [1, 4])
@pytest.mark.parametrize("hops", [1, 2, 3, 5])
async def test_zero_load_latency_is_the_pipeline_model_for_every_hop_count(hops, flits, cut_through):
    sw = iq(cut_through=cut_through)
    n = 64 * flits  # the frame on the wire: payload + 50 bytes of headers and FCS
    net, res, recs = await _records(chain(hops, sw), {"h0": sender("h1", [n - 50]), "h1": receiver(1)})
    assert res["h1"] == [n - 50]
    start = _times(net, recs, "h0", 0, DIR_OUT)[0]
    got = _times(net, recs, "h1", 0, DIR_IN)[0]
    stages = 7 + 5 + 3 + 2
    per_hop = (ser(64) if cut_through else ser(n)) + L + stages  # head (or whole frame) in, then the pipeline
    assert got == start + hops * per_hop + ser(n) + L
    # every router's output starts exactly when the model says
    for i in range(hops):
        assert _times(net, recs, f"s{i}", 1, DIR_OUT)[0] == start + (i + 1) * per_hop


async def test_cut_through_never_sends_a_tail_before_it_came():
    """A slow link in, a fast link out: the head waits so that the tail follows without a gap."""
    sw = iq(cut_through=True)
    slow = LinkSpec(latency_ns=L, bandwidth_bps=BPS // 4)
    t = star(2, sw, links={0: slow})
    n = 256
    net, res, recs = await _records(t, {"h0": sender("h1", [n - 50]), "h1": receiver(1)})
    start = _times(net, recs, "h0", 0, DIR_OUT)[0]
    head = start + ser(64, BPS // 4) + L
    tail = start + ser(n, BPS // 4) + L
    out = _times(net, recs, "s0", 1, DIR_OUT)[0]
    assert out == max(head + 17, tail - ser(n) + ser(64))
    assert out > head + 17  # the tail rule is the one that binds here


async def _hol(vcs, y_vc):
    """h3 sends a 1 KiB frame to h1 first; 100 ns later h0 sends X (one flit) to h1, then Y (one
    flit) to h2. X waits for the output to h1; with one VC, Y waits behind X."""
    sw = iq(vcs=vcs, route_ns=4, vc_alloc_ns=0, sw_alloc_ns=0, traversal_ns=0, cut_through=True)
    t = star(4, sw)
    apps = {"h3": sender("h1", [1024 - 50]), "h1": receiver(2), "h2": receiver(1)}

    async def h0(host):
        await host.sleep(100)
        await host.send("h1", bytes(14), vc=0)
        await host.send("h2", bytes(14), vc=y_vc)
    apps["h0"] = h0
    net, _res, recs = await _records(t, apps)
    a = _times(net, recs, "h3", 0, DIR_OUT)[0]
    x, y = _times(net, recs, "h0", 0, DIR_OUT)
    out1 = _times(net, recs, "s0", 1, DIR_OUT)
    out2 = _times(net, recs, "s0", 2, DIR_OUT)[0]
    return a, x, y, out1, out2


async def test_one_vc_shows_head_of_line_blocking_and_two_vcs_remove_it():
    a, x, y, out1, out2 = await _hol(1, 0)
    ga = a + ser(64) + L + 4  # A: head in, routed, granted: the output to h1 is busy for 1,024 ns
    assert out1[0] == ga
    gx = max(x + ser(64) + L + 4, ga + ser(1024))  # X: routed, then waits for that output
    assert out1[1] == gx
    hy = y + ser(64) + L
    assert hy + 4 < gx  # Y was in, routed, with its output free ...
    assert out2 == max(hy, gx + ser(64)) + 4  # ... and left only once X had left the buffer: blocked

    a2, x2, y2, out1b, out2b = await _hol(2, 1)
    assert (a2, x2, y2, out1b) == (a, x, y, out1)
    assert out2b == y2 + ser(64) + L + 4  # on another VC (h0 gives it the one with most credit), Y passes X


@pytest.mark.parametrize("allocator", ["round_robin", "islip"])
async def test_the_switch_allocator_serves_competing_inputs_in_turn(allocator):
    """Three inputs, each with six one-flit frames for the same output: once all three compete,
    the output takes one frame from each in turn."""
    sw = iq(allocator=allocator, route_ns=4, vc_alloc_ns=0, sw_alloc_ns=0, traversal_ns=0)
    t = star(4, sw, host=HostSpec(send_overhead_ns=0))  # each input always has a frame waiting
    apps = {f"h{i}": sender("h3", [14] * 6) for i in range(3)}
    apps["h3"] = receiver(18)
    net, res, recs = await _records(t, apps)
    assert res["h3"] == [14] * 18
    iface = net.plan.iface_base["s0"] + 3
    srcs = [int.from_bytes(f[DST_OFF - 4:DST_OFF], "big") for ts, i, d, f in recs if i == iface and d & 3 == DIR_OUT]
    assert len(srcs) == 18
    ids = sorted(set(srcs))
    assert len(ids) == 3
    for k in range(0, 18, 3):  # every three consecutive frames: one of each input
        assert sorted(srcs[k:k + 3]) == ids, srcs
    out = _times(net, recs, "s0", 3, DIR_OUT)
    gaps = [b - a for a, b in zip(out, out[1:])]
    assert set(gaps) == {ser(64)}  # back to back: the output never idles while inputs wait


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vcs=st.sampled_from([1, 2, 4]), buffer_flits=st.integers(2, 5), allocator=st.sampled_from(["round_robin", "islip"]),
       cut_through=st.booleans(), sizes=st.lists(st.integers(1, 78), min_size=4, max_size=24), seed=st.integers(0, 99))
def test_credits_never_negative_and_buffers_never_over_their_size(vcs, buffer_flits, allocator, cut_through, sizes,
                                                                 seed):
    """Random messages between random hosts of a 3x3 mesh of routers with small buffers: every
    message arrives whole, no buffer ever held more than its size (the router refuses to), and
    when the run is over every credit is back and every buffer empty."""
    import random

    import trio

    rng = random.Random(seed)
    sw = {"model": "input_queued", "vcs": vcs, "flit_bytes": 64, "vc_buffer_bytes": 64 * buffer_flits,
          "allocator": allocator, "cut_through": cut_through, "route_ns": 5}
    t = build("mesh:k=3,n=2", settings={"switch": sw, "host": {"mtu_bytes": 78}})
    hosts = [h.name for h in sorted(t.hosts, key=lambda h: h.id)]
    plan: dict[str, list] = {h: [] for h in hosts}
    expect: dict[str, int] = {h: 0 for h in hosts}
    for s in sizes:
        src, dst = rng.sample(hosts, 2)
        plan[src].append((dst, s, rng.randrange(vcs)))
        expect[dst] += 1

    def app(h):
        async def run(host):
            for dst, size, vc in plan[h]:
                await host.send(dst, bytes([size & 0xFF]) * size, vc=vc)
            got = [(await host.recv()).data for _ in range(expect[h])]
            return sorted((len(d), d[:1]) for d in got)
        return run

    async def main():
        async with emu.Cluster(t) as net:
            res = await net.run({h: app(h) for h in hosts})
            dom = net._local
            for name in (s.name for s in t.switches):
                eng = dom.by_name[name].engine
                assert all(o == 0 for row in eng.bufs.occ for o in row) and not any(eng.bufs.pool)
                assert max(max(r) for r in eng.bufs.peak) <= 64 * buffer_flits
                for o, cr in enumerate(eng.credits):
                    if cr is not None:
                        assert cr == [eng.downstream[o][1]] * len(cr)
            return res

    res = trio.run(main)
    for h in hosts:
        want = sorted((s, bytes([s & 0xFF])) for p in plan.values() for d, s, _ in p if d == h)
        assert res[h] == want


async def test_figures_are_the_same_over_one_and_two_processes():
    from emu.nodes.collectives.run import run_collective

    out = []
    for procs in (1, 2):
        t = build("mesh:k=4,n=2", settings={"switch": {"model": "input_queued", "vcs": 2, "cut_through": True,
                                                          "allocator": "islip", "iterations": 2}})
        async with emu.Cluster(t, run=RunConfig(processes=procs, capture=True)) as net:
            r = await run_collective(net, "alltoall", count=3000, dtype="uint8")
            recs = await net.capture_records()
            out.append((r.completion_ns, net.now, len(recs), hash(tuple((ts, i, d) for ts, i, d, _f in recs))))
    assert out[0] == out[1]


async def test_bad_router_settings_are_refused_in_one_line():
    t = build("torus:k=4,n=2", settings={"switch": {"model": "input_queued", "vc_policy": "dateline", "vcs": 1}})
    with pytest.raises(ConfigError, match="needs 2 VC groups.*set switch.vcs to at least 2"):
        async with emu.Cluster(t):
            pass
    with pytest.raises(ConfigError, match="whole number of 64-byte flits"):
        SwitchSpec(model="input_queued", vc_buffer_bytes=100)
    with pytest.raises(ConfigError, match="model 'ideal' is not one of"):
        SwitchSpec(model="ideal")
    with pytest.raises(ConfigError, match="allocator"):
        SwitchSpec(allocator="wavefront")
    assert HostSpec()  # (the host side needs no setting)


def test_the_curves_script_runs_both_models_at_a_tiny_size(capsys):
    import load_script

    mod = load_script.load("router_curves")
    assert mod.main(["--k", "3", "--vcs", "1", "--loads", "0.1,0.9", "--cycles", "40", "--size", "64"]) == 0
    out = capsys.readouterr().out
    assert "output_queued  vcs=1" in out and "input_queued  vcs=1" in out and "saturation" in out


async def _class_vcs(traffic_class):
    import numpy as np

    from emu.nodes.collectives.comm import Comm
    from emu.wire import PacketType, parse_frame

    async def app(host):
        comm = Comm(host, traffic_class=traffic_class)
        return (await comm.allreduce(np.arange(600, dtype=np.float64) + comm.rank, algo="ring")).sum()

    t = build("mesh:k=3,n=2", settings={"switch": {"model": "input_queued", "vcs": 4, "classes": 2}})
    async with emu.Cluster(t, run=RunConfig(capture=True)) as net:
        res = await net.run({h.name: app for h in t.hosts})
        recs = await net.capture_records()
    frames = [parse_frame(f[:-4]) for ts, i, d, f in recs if not is_credit(f)]  # (captured with their FCS)
    vcs = {h[2] for h in frames if h[4] == PacketType.MSG}
    return set(res.values()), vcs


async def test_a_communicator_s_traffic_class_keeps_its_messages_on_that_class_s_vcs():
    sums0, vcs0 = await _class_vcs(0)
    sums1, vcs1 = await _class_vcs(1)
    assert sums0 == sums1 and len(sums0) == 1  # the same result on every rank, either way
    assert vcs0 <= {0, 2} and vcs1 <= {1, 3}  # class c: the VCs v with v mod 2 == c
    assert vcs0 and vcs1


def test_the_engine_harness_refuses_an_input_queued_router_in_one_line():
    from emu.sim import EngineNet

    with pytest.raises(ConfigError, match="input-queued router .* run it in an emu.Cluster"):
        EngineNet(build("mesh:k=2,n=2", settings={"switch": {"model": "input_queued"}}))


async def test_adaptive_routing_on_the_input_queued_router_counts_the_frames_waiting_in_its_buffers():
    """Two frames from h0 to a host under the other leaf, back to back, on a router whose route stage
    is longer than a frame: when the second is routed the first still waits in the input buffer,
    not yet on its port -- the adaptive policy sees it there and sends the second up the other link."""
    from emu.switch.iq import IQView

    sw = {"model": "input_queued", "routing": "adaptive", "route_ns": 2000, "cut_through": True}
    t = build("fattree:k=2,n=2", settings={"switch": sw, "host": {"send_overhead_ns": 0}})
    leaf = next(lk.b if lk.a == "h0" else lk.a for lk in t.links if "h0" in (lk.a, lk.b))
    far = next(h.name for h in t.hosts if len(t.route("h0", h.name)) > 3)  # through a top switch
    async with emu.Cluster(t, run=RunConfig(capture=True)) as net:
        await net.run({"h0": sender(far, [200, 200]), far: receiver(2)})
        assert isinstance(net._local.by_name[leaf].engine.ports, IQView)
        recs = await net.capture_records()
        base = net.plan.iface_base[leaf]
        ups = {i - base for ts, i, d, f in recs if d & 3 == DIR_OUT and base <= i < base + t.nports(leaf)
               and not is_credit(f) and len(f) > 200}
    assert len(ups) == 2


# -- what goes wrong on links: every credit comes back ------------------------------------------------

def _full(net, name):
    eng = net._local.by_name[name].engine
    return all(cr is None or cr == [eng.downstream[o][1]] * len(cr) for o, cr in enumerate(eng.credits))


async def test_a_frame_granted_to_a_down_port_takes_no_credit():
    t = chain(2, iq(vcs=1, vc_buffer_bytes=1088))
    async with emu.Cluster(t) as net:
        await net.link_down("s0", "s1")
        await net.run({"h0": sender("h1", [100, 100])})  # dropped at s0's port toward s1
        assert _full(net, "s0")
        await net.link_up("s0", "s1")
        res = await net.run({"h0": sender("h1", [100] * 5), "h1": receiver(5)})
    assert res["h1"] == [100] * 5


@pytest.mark.parametrize("a,b", [("h0", "s0"), ("s0", "s1")])
async def test_a_frame_a_fault_loses_on_the_wire_gives_its_credit_back_a_round_trip_later(a, b):
    t = chain(2, iq(vcs=1, vc_buffer_bytes=1088))
    async with emu.Cluster(t) as net:
        await net.set_fault(a, b, drop=1.0)
        await net.run({"h0": sender("h1", [100])})
        await net.set_fault(a, b)
        res = await net.run({"h0": sender("h1", [100] * 3), "h1": receiver(3)})
        assert res["h1"] == [100] * 3 and _full(net, "s0")
        assert net._local.by_name["h0"].out_ports[0].flow.credits == [1088]


async def test_a_credit_lost_with_its_link_is_restored():
    async def sleeper(host):
        await host.sleep(6000)

    for sw in (iq(), SwitchSpec(vc_buffer_bytes=2176)):  # both router models
        async with emu.Cluster(chain(2, sw)) as net:
            await net.schedule(2560, "down", link=("s0", "s1"))  # while s1's credit for h0's frame is on the wire
            await net.schedule(4000, "up", link=("s0", "s1"))
            await net.run({"h0": sender("h1", [1000]), "h1": sleeper})
            el = net._local.by_name["s0"]
            lost = sum(p["lost_in_flight"] for p in (await net.stats())[2]["ports"])
            credits = el.engine.credits[1] if sw.input_queued else el.outs[1].flow.credits
            assert lost >= 1 and credits == [2176]


async def test_an_input_queued_router_into_a_finite_output_queued_one_keeps_its_credits_without_a_capture():
    link = LinkSpec(latency_ns=L, bandwidth_bps=BPS)
    t = Topology("mixed")
    t.add_host("h0")
    t.add_host("h1")
    t.add_switch("s0", iq(vc_buffer_bytes=1152))
    t.add_switch("s1", SwitchSpec(vc_buffer_bytes=1152))
    t.add_link("h0", "s0", link, a_port=0, b_port=0)
    t.add_link("s0", "s1", link, a_port=1, b_port=0)
    t.add_link("s1", "h1", link, a_port=1, b_port=0)
    t.routes = {"s0": [0, 1], "s1": [0, 1]}
    async with emu.Cluster(t) as net:  # (no capture: frames between elements may go without their FCS)
        res = await net.run({"h0": sender("h1", [100] * 60), "h1": receiver(60)})
        assert res["h1"] == [100] * 60 and _full(net, "s0")


async def test_islip_turns_between_an_input_s_vcs_too():
    sw = iq(vcs=2, allocator="islip", route_ns=4, vc_alloc_ns=0, sw_alloc_ns=0, traversal_ns=0)
    t = star(3, sw, host=HostSpec(send_overhead_ns=0))
    n = 30
    apps = {"h0": sender("h1", [14] * n), "h2": sender("h1", [14] * n), "h1": receiver(2 * n)}
    net, _res, recs = await _records(t, apps)
    iface = net.plan.iface_base["s0"] + 1
    h0 = net.topology.nodes["h0"].id
    vcs = [f[DST_OFF + 4] for ts, i, d, f in recs if i == iface and d & 3 == DIR_OUT
           and int.from_bytes(f[DST_OFF - 4:DST_OFF], "big") == h0]
    assert set(vcs) == {0, 1} and "11111" not in "".join(map(str, vcs[:-5]))  # no VC waits for the other to empty


async def test_link_bring_up_runs_on_input_queued_routers():
    from emu.config import ManagerSpec

    t = build("fattree:k=2,n=2", settings={"switch": {"model": "input_queued"}})
    t.add_manager(spec=ManagerSpec(bringup=True, test_frames=8))
    async with emu.Cluster(t) as net:
        from emu.switch.iq import InputQueuedEngine

        await net.run({})  # the links' bring-up: every router's links tested and admitted
        routers = [el for el in net._local.elements if isinstance(el.engine, InputQueuedEngine)]
        assert len(routers) == 4 and not any(el.engine.held for el in routers)
        stats = {s["name"]: s["engine"] for s in await net.stats()}
        # every link tested: 4 to hosts and 4 between routers (the manager's own are not)
        assert sum(stats[el.name].get("bringup_up", 0) for el in routers) == 8
        res = await net.run({"h0": sender("h3", [100]), "h3": receiver(1)})
        assert res["h3"] == [100]


async def test_a_ring_of_input_queued_routers_deadlocks_with_one_vc_and_says_where_and_the_dateline_removes_it():
    from emu.errors import DeadlockError
    from emu.nodes.collectives.run import run_collective

    one = {"model": "input_queued", "vcs": 1, "vc_policy": "by_class", "vc_buffer_bytes": 1152}
    async with emu.Cluster(build("torus:k=4,n=1", settings={"switch": one})) as net:
        with pytest.raises(DeadlockError, match=r"credit deadlock .* cyclic wait: (s\d-p2 vc0 -> ){4}s\d-p2 vc0"):
            await run_collective(net, "alltoall", count=256 * 1024, dtype="uint8")
    async with emu.Cluster(build("torus:k=4,n=1", settings={"switch": {"vc_buffer_bytes": 1152}})) as net:
        r = await run_collective(net, "alltoall", count=256 * 1024, dtype="uint8")  # the default: dateline
        assert r.completion_ns > 0
