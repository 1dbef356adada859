"""Integration: real clusters on loopback, Mininet style."""

import hashlib
import shutil
import os
import socket
import subprocess
import sys

import pytest
import trio

import apps
import emu
from emu.config import HostSpec, LinkSpec, RunConfig
from emu.wire import MAGIC, OUTER, VERSION
from emu.sim import EngineNet
from emu.topologies import star

FRAME_DATA = 1024 - 50  # message payload that makes one 1 KiB frame (46 header bytes and the FCS)


async def test_ping_and_messages_match_the_direct_simulation():
    topo = star(4, link=LinkSpec(latency_ns=300, bandwidth_bps=25 * 10**9))
    scenario = {"h0": (apps.send_to, "h3", 7000, 1, 3), "h1": (apps.send_to, "h3", 2500, 2, 2),
                "h3": (apps.recv_n, 5), "h2": (apps.ping, "h1")}
    expected = EngineNet(topo).run(scenario)
    async with emu.Cluster(topo) as net:
        assert await net.run(scenario) == expected
        # the last event: h3's last receive returns one receive overhead after the message was there
        assert net.now == expected["h3"][-1][3] + HostSpec().recv_overhead_ns
        # a second episode starts where the first ended
        t_before = net.now
        rtt = await net["h0"].ping("h1")
        assert net.now == t_before + rtt


async def test_exchange_over_two_processes_equals_one_process(tmp_path):
    topo = star(6)
    scenario = {"h0": (apps.exchange, "h5", 3000, 4), "h5": (apps.exchange, "h0", 3000, 4),
                "h1": (apps.send_to, "h2", 50_000), "h3": (apps.send_to, "h2", 20_000), "h2": (apps.recv_n, 2),
                "h4": (apps.ping, "h1")}
    results, digests, metrics = [], [], []
    # one process with frames handed over directly, one with every link on UDP, two processes
    for processes, direct in ((1, True), (1, False), (2, True)):
        cap = tmp_path / f"p{processes}{direct}.pcapng"
        async with emu.Cluster(topo, processes=processes, capture=cap, direct=direct) as net:
            results.append(await net.run(scenario))
            metrics.append(net.metrics)
            stats = await net.stats()
            if processes == 2:
                assert len(net._handles) == 2 and {net.plan.owner[h] for h in net.hosts} == {0, 1}
        sent = sum(s["element"]["datagrams_sent"] for s in stats)
        assert (sent == 0) == (processes == 1 and direct)  # the direct path really skips the sockets
        digests.append(hashlib.sha256(cap.read_bytes()).hexdigest())
    assert results[0] == results[1] == results[2] == EngineNet(topo).run(scenario)
    assert metrics[0] == metrics[1] == metrics[2]
    assert digests[0] == digests[1] == digests[2]
    # nothing captured: in-process links handed over in memory leave the FCS off (OutPort.defer_fcs);
    # a frame on a socket carries its whole bytes, FCS included; figures unchanged
    for direct in (True, False):
        async with emu.Cluster(topo, direct=direct) as net:
            deferred = [p for el in net._local.elements for p in el.out_ports if p.defer_fcs]
            assert bool(deferred) == direct
            assert await net.run(scenario) == results[0]
            assert net.metrics == metrics[0]


async def test_fan_in_63_hosts_500_frames_each_loses_nothing():
    n, per = 64, 500
    topo = star(n, host=HostSpec(mtu_bytes=FRAME_DATA))
    scenario = {f"h{i}": (apps.send_to, "h0", FRAME_DATA, 0, per) for i in range(1, n)}
    scenario["h0"] = (apps.recv_count, (n - 1) * per)
    async with emu.Cluster(topo) as net:
        res = await net.run(scenario)
        stats = {s["name"]: s for s in await net.stats()}
    total, t_done = res["h0"]
    assert total == (n - 1) * per * FRAME_DATA
    frames = (n - 1) * per
    assert stats["h0"]["ports"][0]["rx_frames"] == frames
    assert stats["s0"]["ports"][0]["tx_frames"] == frames
    assert sum(stats[f"h{i}"]["ports"][0]["tx_frames"] for i in range(1, n)) == frames
    assert stats["s0"]["engine"]["forwarded"] == frames
    # the switch port toward h0 is the bottleneck: 31500 frames of 1 KiB at 100 Gbit/s back to back
    assert t_done >= frames * 82
    assert stats["s0"]["ports"][0]["peak_queue_frames"] > 1000


@pytest.mark.parametrize("processes", [1, 2, 3])
async def test_recovery_from_datagrams_the_os_dropped(processes):
    # over several processes, frames of the next window can arrive before a lost one is recovered:
    # the per-window accounting must not let them stand in for it
    topo = star(4)
    scenario = {"h0": (apps.send_to, "h3", 40_000), "h1": (apps.send_to, "h3", 30_000), "h3": (apps.recv_n, 2),
                "h2": (apps.ping, "h0")}
    clean = EngineNet(topo).run(scenario)
    run = RunConfig(socket_drop_rate=0.2, stall_timeout_s=0.02, seed=3, processes=processes)
    async with emu.Cluster(topo, run=run) as net:
        assert await net.run(scenario) == clean
        stats = await net.stats()
    assert sum(s["element"]["sock_dropped"] for s in stats) > 0
    assert sum(s["element"]["retransmitted"] for s in stats) > 0


async def test_unrecoverable_loss_stops_the_run_naming_the_link():
    topo = star(2)
    run = RunConfig(stall_timeout_s=0.01, max_recovery_rounds=3, direct=False)  # every link on UDP
    with pytest.raises(emu.FrameLossError, match=r"h0-nic0 -> s0-p0"):
        async with emu.Cluster(topo, run=run) as net:
            h0 = net._local.by_name["h0"]
            h0._drop_rate, h0._sendto_orig = 1.0, h0._sendto
            h0._sendto = lambda data, addr, lossy=True: h0._sendto_orig(data, addr, lossy=True)
            await net.run({"h0": (apps.send_to, "h1", 100)})


async def test_foreign_datagrams_are_counted_and_the_run_carries_on():
    topo = star(3)
    async with emu.Cluster(topo) as net:
        addr = net._local.by_name["s0"].addr
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.sendto(b"\x00garbage" * 5, addr)
            s.sendto(OUTER.pack(MAGIC, VERSION, 0, net.cluster_id ^ 1, 0, 0, 0, 0, 0), addr)
            s.sendto(OUTER.pack(MAGIC, VERSION, 0, net.cluster_id, 9999, 0, 0, 0, 0), addr)
            await trio.sleep(0.05)
            rtt = await net["h0"].ping("h2")
        finally:
            s.close()
        st = [x["element"] for x in await net.stats()]
        (proc,) = await net.process_stats()
    assert rtt == EngineNet(topo).run({"h0": (apps.ping, "h2")})["h0"]
    # counted where they arrived: the process's socket (emu.batch), which all its elements share
    assert tuple(proc[k] for k in ("bad_magic", "foreign_cluster", "bad_link")) == (1, 1, 1)
    assert not any(e[k] for e in st for k in ("bad_magic", "foreign_cluster", "bad_link"))


async def test_app_errors_and_deadlocks_say_where():
    async with emu.Cluster(star(2)) as net:
        with pytest.raises(emu.AppError, match="(?s)h0.*boom in the app"):
            await net.run({"h0": apps.crash})
        with pytest.raises(emu.DeadlockError, match=r"h0 blocked in recv\(src=h1, tag=99\)"):
            await net.run({"h0": apps.wait_forever})


def test_bad_parameters_are_refused_before_anything_starts():
    with pytest.raises(emu.ConfigError, match="latency_ns must be an integer within 1.."):
        LinkSpec(latency_ns=0)
    with pytest.raises(emu.ConfigError, match="processes=9 exceeds the 3 nodes"):
        emu.Cluster(star(2), processes=9)
    with pytest.raises(emu.ConfigError, match="star: n must be"):
        star(1)
    with pytest.raises(emu.ConfigError, match="mtu_bytes"):
        HostSpec(mtu_bytes=0)


async def test_everything_is_cleaned_up_also_on_error():
    topo = star(3)
    with pytest.raises(RuntimeError, match="user error"):
        async with emu.Cluster(topo, processes=2) as net:
            socks = [el.sock for el in net._local.elements]
            await net["h0"].ping("h2")
            raise RuntimeError("user error")
    assert all(s.fileno() == -1 for s in socks)
    # the worker process is gone: no child python left running emu.worker
    out = subprocess.run(["pgrep", "-f", "emu.worker"], capture_output=True, text=True).stdout.split()
    assert str(os.getpid()) not in out and not [p for p in out if _parent(p) == os.getpid()]


def _parent(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().split(")")[1].split()[1])
    except OSError:
        return -1


CONTENDED = {f"h{i}": (apps.send_to, "h0", 3000, i, 20) for i in range(1, 8)}
CONTENDED["h0"] = (apps.recv_n, 140)


async def _contended(cap, processes=1):
    async with emu.Cluster(star(8), capture=cap, processes=processes) as net:
        res = await net.run(CONTENDED)
    return res["h0"], hashlib.sha256(cap.read_bytes()).hexdigest()


async def test_determinism_under_cpu_load(tmp_path):
    quiet = await _contended(tmp_path / "a.pcapng")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = [await _contended(tmp_path / f"b{p}.pcapng", p) for p in (1, 2, 3)]
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert loaded == [quiet] * 3  # one, two and three processes, all under load
    # every receive time, source order and hop count, and the capture bytes
    assert len(quiet[0]) == 140


def test_ctrl_c_tears_down_processes_and_sockets():
    import signal
    import time

    here = os.path.dirname(__file__)
    proc = subprocess.Popen([sys.executable, os.path.join(here, "interrupt_me.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=os.path.dirname(here))
    try:
        line = proc.stdout.readline().split()
        assert line and line[0] == "pids", proc.stderr.read()
        workers = [int(p) for p in line[1:2]]
        assert workers and os.path.exists(f"/proc/{workers[0]}")
        time.sleep(1.0)  # let the run get going
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr.read()
    for pid in workers:
        deadline = time.time() + 10
        while os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" and time.time() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z", f"worker {pid} still running"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0]
    except OSError:
        return "gone"


async def test_run_metrics_count_frames_bytes_hops_and_links():
    topo = star(4, host=HostSpec(mtu_bytes=1000))
    scenario = {"h0": (apps.send_to, "h2", 5000), "h2": (apps.recv_n, 1)}
    sim = EngineNet(topo).run(scenario)
    async with emu.Cluster(topo) as net:
        t0 = net.now
        await net.run(scenario)
        m = net.metrics
    assert m.start_ns == t0 and m.completion_ns == sim["h2"][0][3] + HostSpec().recv_overhead_ns
    assert (m.frames, m.bytes, m.hop_count) == (5, 5000 + 5 * 50, 10)  # 46 header bytes + FCS per frame
    assert m.link_frames == {"h0-nic0": 5, "s0-p2": 5}
    assert m.peak_queue_frames["h0-nic0"] == 5 and m.dropped == {}


async def test_link_down_drops_counts_captures_and_comes_back(tmp_path):
    cap = tmp_path / "down.pcapng"
    async with emu.Cluster("star:n=3", capture=cap) as net:
        await net.link_down("s0", "h1")
        with pytest.raises(emu.DeadlockError, match=r"h0 blocked in ping\(h1\)"):
            await net["h0"].ping("h1")
        assert net.metrics.dropped == {"s0-p1": 1}
        await net.link_up("h1", "s0")
        assert await net["h2"].ping("h1") == 816
        with pytest.raises(emu.ConfigError, match="no link between 'h0' and 'h1'"):
            await net.link_down("h0", "h1")
    out = subprocess.run(["tshark", "-r", str(cap), "-T", "fields", "-e", "frame.comment"],
                         capture_output=True, text=True) if shutil.which("tshark") else None
    if out is not None:
        assert "dropped: link down" in out.stdout
    assert b"dropped: link down" in cap.read_bytes()


async def _fault_run(tmp_path, seed, name):
    cap = tmp_path / name
    async with emu.Cluster(star(2), seed=seed, capture=cap) as net:
        await net.set_fault("h0", "s0", drop=0.2, corrupt=0.3)
        await net.run({"h0": (apps.send_to, "h1", 200, 0, 40)})
        m = net.metrics
        st = {s["name"]: s for s in await net.stats()}
    return m, st, hashlib.sha256(cap.read_bytes()).hexdigest(), cap.read_bytes()


async def test_seeded_faults_drop_and_corrupt_deterministically(tmp_path):
    m1, st1, d1, raw = await _fault_run(tmp_path, 7, "a.pcapng")
    m2, _, d2, _ = await _fault_run(tmp_path, 7, "b.pcapng")
    m3, _, d3, _ = await _fault_run(tmp_path, 8, "c.pcapng")
    assert d1 == d2 and d1 != d3 and m1.dropped == m2.dropped
    lost, bad = m1.dropped["h0-nic0"], m1.corrupted["h0-nic0"]
    assert 0 < lost < 40 and 0 < bad < 40
    # what was lost never reached the switch; what was corrupted did, failed its FCS there and was
    # dropped by the port: it never reached an engine, let alone an application
    assert st1["s0"]["ports"][0]["rx_frames"] == 40 - lost
    assert st1["s0"]["ports"][0]["fcs_errors"] == bad and m1.fcs_errors == {"s0-p0": bad}
    h1, s0 = st1["h1"]["engine"], st1["s0"]["engine"]
    assert s0["forwarded"] == 40 - lost - bad and s0["malformed"] == 0 and h1["malformed"] == 0
    assert h1["messages_received"] == 40 - lost - bad
    assert raw.count(b"dropped: fault") == lost and raw.count(b"corrupted: fault") == bad
    assert raw.count(b"dropped: FCS error") == bad
    if shutil.which("tshark"):  # Wireshark checks every frame's FCS too: exactly the corrupted ones fail
        out = subprocess.run(["tshark", "-r", str(tmp_path / "a.pcapng"), "-o", "eth.check_fcs:TRUE", "-T", "fields",
                              "-e", "eth.fcs.status"], capture_output=True, text=True, check=True).stdout.split()
        assert out.count("0") == bad and out.count("1") == len(out) - bad


async def test_faults_are_refused_when_out_of_range_and_can_be_cleared():
    async with emu.Cluster("star:n=2") as net:
        with pytest.raises(emu.ConfigError, match="drop must be a probability within 0..1"):
            await net.set_fault("h0", "s0", drop=1.5)
        await net.set_fault("h0", "s0", drop=1.0)
        with pytest.raises(emu.DeadlockError, match="ping"):
            await net["h0"].ping("h1")
        await net.set_fault("h0", "s0")
        assert await net["h0"].ping("h1") == 816


async def test_real_time_mode_paces_windows_and_changes_no_figure():
    from emu.sync import Pacer

    clock = [100.0]
    starts = []

    async def fake_sleep(dt):
        clock[0] += dt

    async with emu.Cluster("star:n=4") as net:
        pacer = Pacer(1e6, clock=lambda: clock[0], sleep=fake_sleep)  # 1 ms of model per wall second
        net._sync.pacer = pacer
        orig = pacer.wait_for

        async def spy(t):
            await orig(t)
            starts.append((t, clock[0]))
        pacer.wait_for = spy
        rtt = await net["h0"].ping("h3")
    assert rtt == 816
    v0, w0 = starts[0]
    assert all(abs(w - (w0 + (t - v0) / 1e6)) < 1e-9 for t, w in starts)  # each window waits for its time
    assert len(starts) > 3 and starts[-1][0] > v0
    # and the real clock: the same figure, paced
    async with emu.Cluster("star:n=4", realtime_ns_per_s=1e7) as net:
        assert await net["h0"].ping("h3") == 816


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_cancelled_run_leaves_a_clear_error_not_a_confused_cluster(processes):
    scenario = {"h0": (apps.send_to, "h3", 2_000_000), "h1": (apps.send_to, "h3", 1_500_000), "h3": (apps.recv_n, 2)}
    # paced to 100 us of virtual time per wall second, the run (about 160 us) cannot end within the
    # 0.3 s the test waits, however fast the machine
    async with emu.Cluster(star(4), processes=processes, realtime_ns_per_s=1e5) as net:
        with trio.move_on_after(0.3) as cs:
            await net.run(scenario)
        assert cs.cancelled_caught
        with pytest.raises(emu.EmuError, match="interrupted.*start a new one"):
            await net.run({"h0": (apps.ping, "h1")})


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_capture_spilled_to_disk_in_runs_has_the_same_bytes_as_one_kept_in_memory(tmp_path, processes):
    import glob
    import tempfile

    digests = []
    for spill in (10**9, 50):  # never spill, or every few windows: many sorted runs merged at the end
        cap = tmp_path / f"c{spill}.pcapng"
        run = RunConfig(processes=processes, capture=True, capture_spill_records=spill,
                        partition="order")  # domain 0 (checked below) holds the busy nodes
        async with emu.Cluster(star(8), run=run, capture=cap) as net:
            await net.run(CONTENDED)
            if spill == 50:
                spilled = net._local._runs
                assert len(spilled) > 3  # the domain in this process really wrote runs to disk
        digests.append(hashlib.sha256(cap.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    assert not glob.glob(f"{tempfile.gettempdir()}/emu-capture-{os.getpid()}-*")  # every run file removed


async def test_faults_on_a_link_that_deferred_its_fcs_act_on_the_frames_as_on_the_line():
    """In-process links leave the FCS off until a fault is set (``OutPort.restore_fcs``): the frames
    then fail their FCS at the next port exactly as over UDP, where every frame carries one."""
    scenario = {"h1": (apps.send_to, "h2", 20_000, 0, 3), "h2": (apps.recv_n, 3)}
    out = []
    for direct in (True, False):
        async with emu.Cluster(star(3), direct=direct) as net:
            await net.run({"h0": (apps.ping, "h1")})  # frames went out before the fault
            await net.set_fault("h1", "s0", corrupt=0.3)
            try:
                await net.run(scenario)
            except emu.DeadlockError:
                pass  # lost segments: the receiver waits for them (as it would over UDP)
            out.append(net.metrics)
    assert out[0] == out[1]
    assert sum(out[0].fcs_errors.values()) > 0


async def test_runs_leave_the_applications_garbage_and_its_own_freeze_to_the_collector(monkeypatch):
    """The collector's freeze is the process's first run's, once (emu.sync.freeze_startup): reference
    cycles an application leaves in one run are collected after later runs (review: freezing at
    every run kept them forever), and a program that froze objects itself keeps its freeze."""
    import gc
    import weakref

    from emu import sync

    class Node:
        pass

    refs = []

    async def app(host):
        gc.collect()  # (what earlier runs left: collectable now, inside this run)
        left = sum(1 for r in refs if r() is not None)
        keep = []
        for _ in range(50):
            a, b = Node(), Node()
            a.other, b.other = b, a  # a cycle: only the collector frees it
            keep.append(a)
            refs.append(weakref.ref(a))
        await host.ping("h1")
        return left  # (``keep`` dies with the app: garbage as the run ends)

    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        lefts = [(await net.run({"h0": app}))["h0"] for _ in range(4)]
    assert len(refs) == 200 and lefts == [0, 0, 0, 0]

    monkeypatch.setattr(sync, "_frozen", False)  # (as if no run had happened in this process)
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 7)  # a program that froze its own objects
    freezes = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        await net.run({"h0": app})
    assert freezes == [] and sync._frozen is False


async def test_a_run_batches_young_collections_and_gives_the_thresholds_back(monkeypatch):
    """During a run the collector's youngest generation waits for emu.sync.RUN_GEN0 new objects;
    after it the thresholds are the program's again, and a change the program made meanwhile stays."""
    import gc

    from emu import sync

    before = gc.get_threshold()
    seen = []

    async def app(host, change):
        seen.append(gc.get_threshold())
        if change:
            gc.set_threshold(1234, 5, 6)
        return await host.ping("h1")

    try:
        async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
            await net.run({"h0": (app, False)})
            assert gc.get_threshold() == before
            await net.run({"h0": (app, True)})
            assert gc.get_threshold() == (1234, 5, 6)
        assert seen[0] == (max(before[0], sync.RUN_GEN0), *before[1:])
    finally:
        gc.set_threshold(*before)


def test_a_commands_start_up_freeze_is_extended_by_its_first_run(monkeypatch):
    """``emu run`` freezes its modules as it starts (emu.sync.freeze_until_run: the start-up's
    collections skip them); its first run freezes what was made since with them, without a pass
    of the collector over everything (the workers would wait for it); a program's own freeze is
    kept."""
    import gc

    from emu import sync

    calls = []
    count = [0]
    monkeypatch.setattr(sync, "_frozen", False)
    monkeypatch.setattr(sync, "_until_run", False)
    monkeypatch.setattr(gc, "get_freeze_count", lambda: count[0])
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append("freeze"), count.__setitem__(0, 5)))
    monkeypatch.setattr(gc, "unfreeze", lambda: (calls.append("unfreeze"), count.__setitem__(0, 0)))
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    sync.freeze_until_run()
    sync.freeze_until_run()  # (once)
    assert calls == ["freeze"] and sync._until_run
    sync.freeze_startup()
    assert calls == ["freeze", "freeze"] and sync._frozen and not sync._until_run
    sync.freeze_startup()  # (once)
    assert calls == ["freeze", "freeze"]
    monkeypatch.setattr(sync, "_frozen", False)
    calls.clear()
    sync.freeze_until_run()  # a program that froze objects itself (count 5): neither is done
    sync.freeze_startup()
    assert calls == [] and not sync._until_run
