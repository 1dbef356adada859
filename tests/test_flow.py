"""Finite buffers, virtual channels and credit flow control."""

import hashlib

import pytest

import apps
import emu
from emu.config import ConfigError, HostSpec, LinkSpec, RunConfig, SwitchSpec, parse_settings
from emu.buffers import BufferState
from emu.wire import is_credit
from emu.nodes.collectives import model
from emu.nodes.collectives.run import check_results, run_collective
from emu.topologies import star
from emu.topologies.base import Topology
from emu.topologies.registry import build

H, L = HostSpec(), LinkSpec()


@pytest.mark.parametrize("n", [2, 8])
async def test_buffers_covering_the_credit_loop_change_no_closed_form(n):
    """With every input buffer at least the credit loop's bandwidth-delay product, contention-free
    runs take exactly the closed forms' times."""
    sw = SwitchSpec(vc_buffer_bytes=8 * 1074, vcs=2)
    async with emu.Cluster(star(n, switch=sw)) as net:
        for count in (n, 256 * n, 1024 * n):
            r = await run_collective(net, "allreduce", count=count, dtype="float32", algo="ring")
            assert r.completion_ns == model.ring_allreduce_ns(n, count * 4, H, L, sw)
        r = await run_collective(net, "allreduce", count=4000, dtype="float64", algo="recursive_doubling")
        assert r.completion_ns == model.recursive_doubling_allreduce_ns(n, 4000 * 8, H, L, sw)
        m = net.metrics
    assert m.vc_peak_bytes and max(max(v) for v in m.vc_peak_bytes.values()) <= 8 * 1074
    assert not m.credit_stalls


def _bottleneck(buffer_bytes):
    """h0 -(100 Gbit/s)- s0 -(10 Gbit/s)- h1: the switch's input from h0 holds ``buffer_bytes``."""
    t = Topology("bottleneck")
    t.add_host("h0")
    t.add_host("h1")
    t.add_switch("s0", SwitchSpec(vc_buffer_bytes=buffer_bytes))
    t.add_link("h0", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**11), a_port=0, b_port=0)
    t.add_link("h1", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**10), a_port=0, b_port=1)
    t.routes = {"s0": [0, 1]}
    return t


PORT_VIEW_CREDITS = []


async def _starts_at_h0(buffer_bytes, n):
    async with emu.Cluster(_bottleneck(buffer_bytes), run=RunConfig(capture=True)) as net:
        await net.run({"h0": (apps.send_to, "h1", 1000, 0, n), "h1": (apps.recv_n, n)})
        view = net._local.by_name["h0"].ports
        if buffer_bytes == 1100:
            PORT_VIEW_CREDITS[:] = [view.credits(0)]
            assert view.waiting(0) == 0 and view.queue(0, net.now, vc=0) == (0, 0)
        recs = await net.capture_records()
        iface = net.plan.iface_base["h0"]
        m = net.metrics
    starts = [ts for ts, i, d, f in recs if i == iface and d == 2 and not is_credit(f)]
    return starts, m


async def test_back_pressure_slows_a_sender_exactly_as_the_model_says():
    n, wire = 6, 1000 + 50
    free, _ = await _starts_at_h0(1 << 20, n)          # a buffer that never fills: hand-off times
    got, m = await _starts_at_h0(1100, n)              # room for one frame: one credit in the loop
    ser_fast, ser_slow, lat, d_sw = -(-wire * 8 // 100), -(-wire * 8 // 10), 100, 50
    # by hand: frame i starts at h0 when handed over, the port is free, and the credit of frame i-1
    # is back: frame i-1 left s0's buffer when it started toward h1 (after the switch delay, behind
    # the frame before it on the slow link), and its credit took one link latency back
    s, h0_free, s0_free, credit = [], 0, 0, 0
    for a in free:
        start = max(a, h0_free, credit)
        h0_free = start + ser_fast
        out = max(start + ser_fast + lat + d_sw, s0_free)
        s0_free = out + ser_slow
        credit = out + lat
        s.append(start)
    assert got == s and got != free
    assert PORT_VIEW_CREDITS == [1100]  # what an engine read: full credit once the run drained
    assert m.credit_stalls == {"h0-nic0": n - 1} and m.vc_peak_bytes["s0-p0"] == [wire]


def _torus(*sets):
    ideal = ["switch.model=output_queued", "switch.cut_through=false", "switch.vcs=1", "switch.vc_policy=by_class"]
    return build("torus:k=4,n=2", settings=parse_settings([*ideal, "switch.vc_buffer_bytes=1100", *sets]))


async def test_a_cyclic_credit_wait_is_reported_and_the_dateline_removes_it():
    async with emu.Cluster(_torus()) as net:
        with pytest.raises(emu.DeadlockError, match=r"credit deadlock at \d+ ns: \d+ frame\(s\) wait for credit"
                                                    r".*cyclic wait: (s\d+-p\d vc0 -> ){4}s\d+-p\d vc0"):
            await run_collective(net, "alltoall", count=256, dtype="int32")
    async with emu.Cluster(_torus("switch.vcs=2", "switch.vc_policy=dateline")) as net:
        r = await run_collective(net, "alltoall", count=256, dtype="int32")
        check_results(r, 256, "int32", "sum", 0, 0)
        m = net.metrics
    assert max(max(v) for v in m.vc_peak_bytes.values()) <= 1100
    assert any(v[1] for v in m.vc_peak_bytes.values())     # VC 1 carried the frames past the datelines


async def _flow_run(tmp_path, name, processes):
    cap = tmp_path / name
    t = build("fattree:k=2,n=3", settings=parse_settings(["switch.vc_buffer_bytes=1100", "switch.pool_bytes=2200",
                                                          "switch.credit_delay_ns=20"]))
    async with emu.Cluster(t, capture=cap, processes=processes, seed=3) as net:
        r = await run_collective(net, "alltoall", count=2048, dtype="int32")
        m = net.metrics
    return r.completion_ns, m, hashlib.sha256(cap.read_bytes()).hexdigest()


async def test_finite_buffers_and_a_pool_are_deterministic_over_processes(tmp_path):
    a, b, c = (await _flow_run(tmp_path, "a", 1), await _flow_run(tmp_path, "b", 1),
               await _flow_run(tmp_path, "c", 2))
    assert a == b == c
    assert a[1].credit_stalls and 0 < max(a[1].pool_peak_bytes.values()) <= 2200   # the pool was used


def test_a_buffer_that_a_sender_overruns_says_so():
    b = BufferState(vcs=2, capacity=1000, pool_capacity=500, credit_delay_ns=0)
    b.take(1, False, 1000, 10)
    with pytest.raises(OverflowError, match="VC 1 buffer overrun"):
        b.take(1, False, 1, 11)
    b.take(1, True, 500, 12)
    with pytest.raises(OverflowError, match="shared pool overrun"):
        b.take(0, True, 1, 13)
    b.free(1, True, 500, 20)
    b.free(1, False, 1000, 30)
    assert b.occ == [0, 0] and b.peak == [0, 1500] and b.integral == [0, 1000 * 2 + 1500 * 8 + 1000 * 10]


async def test_flow_settings_are_refused_when_they_cannot_work():
    with pytest.raises(ConfigError, match="vcs must be within 1..32"):
        SwitchSpec(vcs=0)
    with pytest.raises(ConfigError, match="pool_bytes needs finite VC buffers"):
        SwitchSpec(pool_bytes=100)
    with pytest.raises(ConfigError, match="vc_policy 'zigzag' is not one of by_class, dateline"):
        SwitchSpec(vc_policy="zigzag")
    with pytest.raises(ConfigError, match="dateline VC policy needs a torus"):
        async with emu.Cluster(build("mesh:k=3,n=2", settings=parse_settings(["switch.vc_policy=dateline"]))):
            pass


def test_the_issue_example_reports_per_vc_peaks_and_stalls(tmp_path):
    import json

    from emu.front.cli import main

    out = tmp_path / "r.json"
    assert main(["run", "--topo", "fattree:k=4,n=3", "--set", "switch.vc_buffer_bytes=2048", "--set", "switch.vcs=2",
                 "--test", "alltoall", "--size", "4KiB", "--json", str(out)]) == 0
    [r] = json.loads(out.read_text())["results"]
    assert r["ok"] and 0 < r["max_vc_peak_bytes"] <= 2048 and r["credit_stalls"] > 0
    assert all(max(p["vc_peak_bytes"]) <= 2048 for p in r["per_port_flow"].values() if "vc_peak_bytes" in p)
