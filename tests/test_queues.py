"""Output-queue mechanisms of the output-queued switch (switch/queues, emu/pause, issue 47): exact
behaviour on crafted cases, the PAUSE frame's bytes, bad settings, a lossless incast, determinism."""

import hashlib
import random
import shutil
import subprocess
import sys

import pytest
from scapy.contrib.mac_control import MACControlClassBasedFlowControl
from scapy.layers.l2 import Ether

import apps
import emu
from emu.config import ConfigError, LinkSpec, QueueSpec, RunConfig, SwitchSpec, parse_settings
from emu.pause import PrioQueues
from emu.port import OutPort
from emu.wire.cc import FLAG_ECN, FLAG_INT, FLAG_TRIM, empty_int, int_hops, trim
from emu.wire.fabric import FLAGS_OFF, HOPS_OFF, PacketType, build_frame
from emu.wire.host import MSG
from emu.wire.pause import is_pause, parse_pause
from emu.topologies.base import Topology
from emu.topologies.registry import build
from emu.switch.queues import SwitchQueues

DIR_IN, DIR_OUT, DROPPED = 1, 2, 4
WIRE = 1024 + 50  # a full message segment (host.mtu_bytes) on the wire, FCS included
FAST, SLOW = -(-WIRE * 8 // 100), -(-WIRE * 8 // 10)  # its time on a 100 and a 10 Gbit/s line (ns)


def _segment(offset=0, size=1000, flags=0):
    return build_frame(1, 2, PacketType.MSG, MSG.pack(7, 0, 1 << 20, offset) + bytes(size - 0), flags=flags)


def _port(spec, seed=0):
    p = OutPort(0, "s0-p0", 0, 0, "h1", "h1-nic0", 100, 10**11)
    p.flow = PrioQueues(framing=p.framing)
    return p, SwitchQueues(spec, [p], seed, 5)


def test_a_step_marks_from_exactly_k_bytes_in_the_queue():
    f = _segment()
    n = len(f) + 4
    p, _ = _port(QueueSpec(ecn="step", k_bytes=2 * n))
    flags = []
    for _ in range(4):
        g = p.flow.admit(f, 0)
        p.hand_over(g, 0, None)
        flags.append(bool(g[FLAGS_OFF] & FLAG_ECN))
    assert flags == [False, False, True, True]  # queues of 0, n, 2n (= k: marked), 3n bytes
    assert p.flow.stats == {"ecn_marked": 2}
    p2, _ = _port(QueueSpec(ecn="step", k_bytes=2 * n + 1))
    for _ in range(3):
        g = p2.flow.admit(f, 0)
        p2.hand_over(g, 0, None)
    assert not g[FLAGS_OFF] & FLAG_ECN  # one byte short of k


def test_red_marks_nothing_below_kmin_all_from_kmax_and_draws_the_seeded_probability_between():
    f = _segment()
    n = len(f) + 4
    spec = QueueSpec(ecn="red", kmin_bytes=2 * n, kmax_bytes=12 * n, pmax=0.5)
    p, _ = _port(spec, seed=9)
    rng = random.Random((9 * 1_000_003 + 5) * 4099 + 0)  # the port's generator, as documented
    expect = []
    for i in range(14):
        q = i * n
        expect.append(False if q < 2 * n else True if q >= 12 * n else rng.random() < 0.5 * (q - 2 * n) / (10 * n))
        g = p.flow.admit(f, 0)
        p.hand_over(g, 0, None)
        assert bool(g[FLAGS_OFF] & FLAG_ECN) == expect[-1]
    assert expect[:2] == [False, False] and expect[12:] == [True, True]
    assert p.flow.stats["ecn_marked"] == sum(expect)


def test_a_queue_is_a_port_and_a_class():
    f0 = _segment()
    f3 = build_frame(1, 2, PacketType.MSG, MSG.pack(7, 0, 1 << 20, 0) + bytes(1000), prio=3)
    n = len(f0) + 4
    p, _ = _port(QueueSpec(ecn="step", k_bytes=n))
    for f in (f0, f0, f0):
        p.hand_over(p.flow.admit(f, 0), 0, None)
    marks = []
    for _ in range(2):
        g = p.flow.admit(f3, 0)
        p.hand_over(g, 0, None)
        marks.append(bool(g[FLAGS_OFF] & FLAG_ECN))
    assert marks == [False, True]  # class 3's queue: empty, then one frame (= k), whatever class 0 holds
    p.start_ready(0)  # class 3 goes first; on the line, it still counts for class 3 only
    assert (SwitchQueues.class_bytes(p, 3, 1), SwitchQueues.class_bytes(p, 0, 1)) == (2 * n, 3 * n)
    assert SwitchQueues.queue_bytes(p, 1) == 5 * n and SwitchQueues.queue_bytes(p, p.free_at) == 4 * n


def test_only_message_segments_of_the_marked_classes_are_marked():
    p, _ = _port(QueueSpec(ecn="step", k_bytes=0, ecn_classes="1-7"))
    assert not p.flow.admit(_segment(), 0)[FLAGS_OFF] & FLAG_ECN  # class 0 is not in the list
    ping = build_frame(1, 2, PacketType.PING, bytes(16), prio=1)
    assert p.flow.admit(ping, 0) == ping


def test_int_writes_a_hop_record_as_the_frame_starts():
    f = build_frame(1, 2, PacketType.MSG, empty_int(3) + MSG.pack(7, 0, 100, 0) + bytes(100), flags=FLAG_INT)
    p, sq = _port(QueueSpec(int_telemetry=True))
    for t in (0, 0):
        p.hand_over(p.flow.admit(f, t), t, None)
    p.start_ready(0)
    p.start_ready(p.free_at)
    n = len(f) + 4
    (s1, _, w1, _), (s2, _, w2, _) = p.pending
    assert int_hops(w1[:-4]) == [(n, n, 0, 100_000)]  # one frame behind it, its own bytes sent
    assert int_hops(w2[:-4]) == [(0, 2 * n, s2, 100_000)] and s2 == p._ser(n)
    assert p.flow.stats == {"int_stamped": 2}
    from emu.wire.host import MACK
    ack = build_frame(2, 1, PacketType.MACK, empty_int(3) + MACK.pack(7, 100), flags=FLAG_INT, prio=1)
    p.hand_over(p.flow.admit(ack, p.free_at), p.free_at, None)
    p.start_ready(p.free_at)
    assert p.pending[-1][2][:-4] == ack  # an ack echoing its segment's stack is not stamped


def _bottleneck(queues, pcap=False):
    """h0 -(100 Gbit/s)- s0 -(10 Gbit/s)- h1."""
    t = Topology("bottleneck")
    t.add_host("h0")
    t.add_host("h1")
    t.add_switch("s0", SwitchSpec(queues=queues))
    t.add_link("h0", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**11), a_port=0, b_port=0)
    t.add_link("h1", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**10), a_port=0, b_port=1)
    t.routes = {"s0": [0, 1]}
    return t


async def _burst(queues, n, recv=None):
    async with emu.Cluster(_bottleneck(queues), run=RunConfig(capture=True)) as net:
        a = {"h0": (apps.send_to, "h1", 1024 * n, 0, 1)}  # n full segments
        if recv is not None:
            a["h1"] = (apps.recv_count, recv)
        await net.run(a)
        recs = await net.capture_records()
        base = net.plan.iface_base["s0"]
        m = net.metrics
    return recs, base, m


async def test_a_pause_leaves_exactly_when_an_ingress_reaches_xoff_and_scapy_decodes_it():
    for xoff, nth in ((3 * WIRE, 4), (3 * WIRE + 1, 5)):
        q = QueueSpec(pfc_classes="0", xoff_bytes=xoff, xon_bytes=WIRE, headroom_bytes=20 * WIRE)
        recs, base, m = await _burst(q, 12, recv=1)
        arrivals = [t for t, i, d, f in recs if i == base and d == DIR_IN]
        pauses = [(t, f) for t, i, d, f in recs if i == base and d == DIR_OUT and is_pause(f)]
        # frame 1 leaves at once; frames 2.. wait behind the slow line, each holding its bytes at the
        # ingress until it starts: the k-th arrival finds k-1 held, so XOFF = 3 frames is the 4th's
        assert pauses[0][0] == arrivals[nth - 1]
        assert parse_pause(pauses[0][1]) == {0: 65535} and parse_pause(pauses[1][1]) == {0: 0}
        pkt = Ether(pauses[0][1][:-4])
        pfc = pkt[MACControlClassBasedFlowControl]
        assert pkt.dst == "01:80:c2:00:00:01" and pkt.type == 0x8808 and len(pauses[0][1]) == 64
        assert pfc._op_code == 0x0101 and pfc.c0_enabled == 1 and pfc.c1_enabled == 0
        assert pfc.c0_pause_time == 65535
        link = m.per_link()
        assert link["s0-p0"]["xoff_tx"] == link["h0-nic0"]["pause_rx"] // 2 >= 1
        assert link["h0-nic0"]["paused_ns"] > 0 and "tail_drops" not in link["s0-p1"]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (apt-get install tshark)")
async def test_wireshark_decodes_the_pause_frames(tmp_path):
    cap = tmp_path / "pfc.pcapng"
    q = QueueSpec(pfc_classes="0", xoff_bytes=3 * WIRE, xon_bytes=WIRE, headroom_bytes=20 * WIRE)
    async with emu.Cluster(_bottleneck(q), capture=cap) as net:
        await net.run({"h0": (apps.send_to, "h1", 12_000, 0, 1), "h1": (apps.recv_count, 1)})
    out = subprocess.run(["tshark", "-r", str(cap), "-Y", "macc.opcode == 0x0101", "-T", "fields",
                          "-e", "frame.interface_name", "-e", "macc.cbfc.enbv.c0", "-e", "macc.cbfc.pause_time.c0"],
                         capture_output=True, text=True, check=True)
    rows = [line.split("\t") for line in out.stdout.strip().splitlines()]
    assert rows and {r[0] for r in rows} == {"s0-p0", "h0-nic0"}  # sent by s0, received by h0
    assert {r[2] for r in rows} == {"65535", "0"} and {r[1] for r in rows} in ({"1"}, {"True"})


def _dt_drops(arrivals, buffer, alpha, delay=50):
    """By hand: one queue of a shared buffer (dynamic thresholds) deciding as frames of WIRE bytes
    arrive (the bytes in it: admitted frames whose last bit has not left), the admitted ones handed to
    the slow port ``delay`` after they arrived. The indices of the dropped ones."""
    done, free, dropped = [], 0, []
    for i, a in enumerate(arrivals):
        t = a + delay
        q = WIRE * sum(1 for d in done if d > a)
        if q + WIRE > buffer or q >= alpha * (buffer - q):
            dropped.append(i)
            continue
        free = max(t, free) + SLOW
        done.append(free)
    return dropped


async def test_tail_drops_under_an_overload_are_the_dynamic_threshold_arithmetic():
    n, buffer = 30, 8 * WIRE
    recs, base, m = await _burst(QueueSpec(buffer_bytes=buffer, alpha=0.5), n)
    arrivals = [t for t, i, d, f in recs if i == base and d == DIR_IN]
    drops = _dt_drops(arrivals, buffer, 0.5)
    assert len(arrivals) == n and 0 < len(drops) < n
    assert m.per_link()["s0-p1"]["tail_drops"] == len(drops)
    assert len([1 for t, i, d, f in recs if i == base + 1 and d == DIR_OUT | DROPPED]) == len(drops)
    assert m.per_link()["s0-p1"]["frames"] == n - len(drops)


async def test_trimming_sends_the_headers_of_what_tail_drop_would_drop():
    n, buffer = 30, 8 * WIRE
    recs, base, m = await _burst(QueueSpec(buffer_bytes=buffer, alpha=0.5, trim=True), n)
    ins = [f for t, i, d, f in recs if i == base and d == DIR_IN]
    outs = [f for t, i, d, f in recs if i == base + 1 and d == DIR_OUT]
    cut = [f for f in outs if f[FLAGS_OFF] & FLAG_TRIM]
    assert len(cut) == m.per_link()["s0-p1"]["trimmed"] > 0 and len(outs) == n
    assert not any(d & DROPPED for t, i, d, f in recs)
    want = []
    for f in ins:  # the frame as the switch forwards it (one more hop), cut by emu.wire.cc.trim
        b = bytearray(f[:-4])
        b[HOPS_OFF] += 1
        want.append(trim(bytes(b)))
    got = [f[:-4] for f in cut]
    assert all(g in want for g in got) and len(got[0]) == 14 + 16 + MSG.size
    assert got[0][23] == 7  # priority 7: ahead of the full segments


def _incast(*sets):
    return build("star:n=5", settings=parse_settings(["queues.buffer_bytes=20000", *sets]))


async def _run_incast(t):
    async with emu.Cluster(t) as net:
        r = await net.run({**{f"h{i}": (apps.send_to, "h4", 30_000, 0, 2) for i in range(4)},
                           "h4": (apps.recv_count, 8)})
        return r, net.metrics


async def test_a_lossless_class_loses_no_byte_under_incast_where_a_lossy_one_drops():
    # headroom: what arrives after the XOFF -- a round trip of the 100 ns, 100 Gbit/s link (2500 bytes)
    # and a frame on the line each way -- fits in 5000 bytes
    pfc = ["queues.pfc_classes=0", "queues.xoff_bytes=6000", "queues.xon_bytes=3000", "queues.headroom_bytes=5000"]
    r, m = await _run_incast(_incast(*pfc))
    assert r["h4"][0] == 8 * 30_000
    link = m.per_link()
    assert not any(v.get("tail_drops") or v.get("headroom_drops") for v in link.values())
    assert sum(v.get("xoff_tx", 0) for v in link.values()) == m.summary()["xoff_tx"] > 0
    assert m.summary()["dropped"] == 0 and "tail_drops" not in m.summary()
    async with emu.Cluster(_incast()) as net:  # the same buffer, lossy: the incast overflows it
        await net.run({f"h{i}": (apps.send_to, "h4", 30_000, 0, 2) for i in range(4)})
        assert net.metrics.per_link()["s0-p4"]["tail_drops"] > 0


async def _figures(t, tmp_path, name, **kw):
    cap = tmp_path / name
    async with emu.Cluster(t, capture=cap, seed=3, **kw) as net:
        r = await net.run({**{f"h{i}": (apps.send_to, "h4", 30_000, 0, 2) for i in range(4)},
                           "h4": (apps.recv_count, 8)})
        m = net.metrics
    return r["h4"], m.per_link(), m.completion_ns, hashlib.sha256(cap.read_bytes()).hexdigest()


async def test_the_same_figures_over_processes_and_transports(tmp_path):
    t = lambda: _incast("queues.pfc_classes=0", "queues.xoff_bytes=6000", "queues.xon_bytes=3000",  # noqa: E731
                        "queues.headroom_bytes=5000", "queues.ecn=red", "queues.kmin_bytes=2000",
                        "queues.kmax_bytes=20000", "queues.pmax=0.5")
    a = await _figures(t(), tmp_path, "a")
    b = await _figures(t(), tmp_path, "b", processes=2)
    c = await _figures(t(), tmp_path, "c", direct=True)
    assert a == b == c
    assert sum(v.get("ecn_marked", 0) for v in a[1].values()) > 0


@pytest.mark.parametrize("sets, says", [
    (["queues.pfc_classes=3", "queues.xon_bytes=200", "queues.xoff_bytes=100"], "xon_bytes=200 is above queues.xoff_bytes=100"),
    (["queues.ecn=red", "queues.kmin_bytes=300", "queues.kmax_bytes=200"], "kmin_bytes=300 is not below"),
    (["queues.pfc_classes=0", "queues.buffer_bytes=1000"], "buffer_bytes=1000 is smaller than one ingress's"),
    (["queues.pfc_classes=9"], "traffic classes are 0..7"),
    (["queues.ecn=yes"], "queues.ecn 'yes' is not one of off, red, step"),
    (["queues.pmax=2"], "probability within 0..1"),
    (["queues.trim=true"], "an unbounded buffer drops nothing"),
    (["queues.ecn=step", "switch.vc_buffer_bytes=2000"], "set switch.vc_buffer_bytes=0"),
    (["queues.ecn=step", "switch.model=input_queued"], "switch.model=input_queued has none"),
])
def test_settings_that_cannot_work_are_refused_in_one_line(sets, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(".", r"\.")) as e:
        build("star:n=2", settings=parse_settings(sets))
    assert "\n" not in str(e.value)


def test_the_cli_refuses_xon_above_xoff_before_anything_starts():
    out = subprocess.run([sys.executable, "-m", "emu", "run", "--topo", "star:n=2", "--set", "queues.pfc_classes=0",
                          "--set", "queues.xon_bytes=9", "--set", "queues.xoff_bytes=8"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    said = (out.stdout + out.stderr).strip()
    assert "queues.xon_bytes=9 is above queues.xoff_bytes=8" in said and len(said.splitlines()) == 1


def test_class_lists():
    from emu.config import class_mask
    assert [class_mask("x", v) for v in ("", "3", "0+3", "0,3", "2-4", "all")] == [0, 8, 9, 9, 28, 255]
    assert build("star:n=2", settings=parse_settings(["queues.pfc_classes=1+2"])).nodes["s0"].spec.queues.pfc_mask == 6


def test_off_by_default_so_the_compiled_core_keeps_plain_switches():
    t = build("star:n=2")
    assert not t.nodes["s0"].spec.queues.on
    from emu.build import make_engine
    assert make_engine(t, "s0").plain_table is not None
    t2 = build("star:n=2", settings=parse_settings(["queues.ecn=step"]))
    assert make_engine(t2, "s0").plain_table is None  # its frames take the Python path


async def test_a_cycle_of_paused_queues_is_named_a_pfc_deadlock():
    ideal = ["switch.model=output_queued", "switch.cut_through=false", "switch.vcs=1", "switch.vc_policy=by_class"]
    t = build("torus:k=4,n=2", settings=parse_settings([*ideal, "queues.pfc_classes=0", "queues.xoff_bytes=1000",
                                                        "queues.xon_bytes=1", "queues.headroom_bytes=5000"]))
    from emu.nodes.collectives.run import run_collective
    async with emu.Cluster(t) as net:
        with pytest.raises(emu.DeadlockError, match=r"PFC deadlock at \d+ ns: \d+ frame\(s\) wait in queues paused by "
                                                    r"PFC.*cyclic wait: (s\d+-p\d prio0 -> ){4}s\d+-p\d prio0"):
            await run_collective(net, "alltoall", count=2048, dtype="int32")


def test_a_topology_file_keeps_the_queue_settings(tmp_path):
    from emu.topologies.files import dumps
    t = build("star:n=2", settings=parse_settings(["queues.ecn=step", "queues.pfc_classes=3"]))
    p = tmp_path / "t.json"
    p.write_text(dumps(t, "json"))
    q = build(str(p)).nodes["s0"].spec.queues
    assert (q.ecn, q.pfc_mask, q.buffer_bytes) == ("step", 8, 0)


async def test_a_pause_of_few_quanta_lapses_and_the_next_frame_above_xoff_pauses_again():
    q = QueueSpec(pfc_classes="0", xoff_bytes=3 * WIRE, xon_bytes=WIRE, headroom_bytes=20 * WIRE, pause_quanta=100)
    recs, base, m = await _burst(q, 12, recv=1)
    h0 = base - 2  # h0's interface (h0, h1, then s0's)
    sent = [t for t, i, d, f in recs if i == h0 and d == DIR_OUT]
    got = [t for t, i, d, f in recs if i == h0 and d == DIR_IN and is_pause(f) and parse_pause(f)[0]]
    lapse = 100 * 512 // 100  # 100 quanta of 512 bit times at 100 Gbit/s: 512 ns
    assert len(got) >= 2
    for tp in got:  # h0 starts nothing from the PAUSE's arrival until it lapses, then at once
        later = [t for t in sent if t >= tp]
        if later:
            assert later[0] == tp + lapse
    assert m.per_link()["h0-nic0"]["paused_ns"] == lapse * len(got)
    assert m.per_link()["s0-p0"]["xoff_tx"] == len(got)


async def test_a_headroom_too_small_for_the_link_loses_frames_and_says_so():
    q = QueueSpec(pfc_classes="0", xoff_bytes=3 * WIRE, xon_bytes=WIRE, headroom_bytes=WIRE)
    recs, base, m = await _burst(q, 12)
    lost = [f for t, i, d, f in recs if i == base and d == DIR_IN | DROPPED]
    assert len(lost) == m.per_link()["s0-p0"]["headroom_drops"] > 0
    assert m.per_link()["s0-p1"]["frames"] == 12 - len(lost)


def test_the_classes_of_a_port_are_served_in_strict_priority():
    p, _ = _port(QueueSpec(ecn="step"))
    for c in (1, 5, 0, 2):
        f = build_frame(1, 2, PacketType.MSG, MSG.pack(c, 0, 100, 0) + bytes(100), prio=c)
        p.hand_over(p.flow.admit(f, 0), 0, None)
    order = []
    while p.flow.waiting():
        p.start_ready(p.free_at)
        order.append(p.pending[-1][2][23])
    assert order == [5, 2, 1, 0]


@pytest.mark.parametrize("sets, mine, theirs", [
    (["host.cc=dcqcn", "queues.ecn=step", "queues.k_bytes=20000"], "ecn_marked", "ecn_marked_received"),
    (["host.cc=hpcc", "queues.int_telemetry=true"], "int_stamped", "segments_sent"),
    (["host.cc=ndp", "queues.buffer_bytes=60000", "queues.trim=true"], "trimmed", "trimmed_received"),
])
async def test_the_hosts_transports_read_what_the_switch_writes(sets, mine, theirs):
    """An incast under each host.cc with its switch signal: every byte arrives, and what the switch
    counts it wrote (marks, INT records on one switch's crossing, trims) the receivers counted."""
    async with emu.Cluster(build("star:n=5", settings=parse_settings(sets))) as net:
        r = await net.run({**{f"h{i}": (apps.send_to, "h4", 60_000, 0, 1) for i in range(4)},
                           "h4": (apps.recv_count, 4)})
        s = net.metrics.summary()
    assert r["h4"][0] == 4 * 60_000 and s["cc"]["messages_failed"] == 0
    assert s[mine] == s["cc"][theirs] > 0


def test_deficit_round_robin_gives_each_class_its_weighted_share_within_one_frame():
    """queues.arbiter=drr, weights 1+3: with both classes always backlogged, class 1 sends three bytes
    for each of class 0's, within one frame, at every point of a long run; strict priority (the
    default) sends all of class 1 first."""
    f0 = _segment()
    f1 = build_frame(1, 2, PacketType.MSG, MSG.pack(7, 0, 1 << 20, 0) + bytes(1000), prio=1)
    n = len(f0) + 4
    for arbiter, weights in (("drr", "1+3"), ("drr", ""), ("strict", "")):
        p, _ = _port(QueueSpec(arbiter=arbiter, weights=weights))
        p.flow.quanta = QueueSpec(arbiter=arbiter, weights=weights).quanta  # (what emu.build sets)
        for _ in range(400):
            for f in (f0, f1):
                p.hand_over(p.flow.admit(f, 0), 0, None)
        sent, t = [0, 0], 0
        for _ in range(300):
            p.start_ready(t)
            sent[p.flow.line_class] += p.flow.line_bytes
            t = p.free_at
            if arbiter == "drr":
                w = 3 if weights else 1
                assert abs(sent[1] - w * sent[0]) <= w * n + 2048 * w, (weights, sent)
        if arbiter == "strict":
            assert sent == [0, 300 * n]
        else:
            share = sent[1] / sum(sent)
            assert abs(share - (0.75 if weights else 0.5)) * sum(sent) <= n, (weights, sent)


def test_drr_settings_are_checked():
    assert QueueSpec(arbiter="drr", weights="1+3").quanta[:3] == [2048, 6144, 2048] and QueueSpec().quanta is None
    assert QueueSpec(arbiter="drr").on and not QueueSpec().on
    for bad, says in ((dict(arbiter="wrr"), "not one of strict, drr"), (dict(weights="1+3"), "set queues.arbiter=drr"),
                      (dict(arbiter="drr", weights="1+0"), "whole numbers 1..1000")):
        with pytest.raises(ConfigError, match=says):
            QueueSpec(**bad)


async def test_drr_shares_a_bottleneck_between_two_classes_by_their_weights():
    """h0 (class 0) and h2 (class 1) each send 100 segments to h1 over s0's 10 Gbit/s port. Strict
    priority: class 1's message ends after its 100 frames' line time, class 0's after 200. DRR 1+3:
    class 1 gets three quarters of the line while both wait, so it ends after 100 / (3/4) = 133.3
    line times; class 0 still after 200. Equal weights: both near 200."""
    from emu.config import HostSpec

    def topo(queues):
        t = Topology("two-classes")
        t.add_host("h0", HostSpec(traffic_class=0))
        t.add_host("h1")
        t.add_host("h2", HostSpec(traffic_class=1))
        t.add_switch("s0", SwitchSpec(queues=queues))
        t.add_link("h0", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**11), a_port=0, b_port=0)
        t.add_link("h1", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**10), a_port=0, b_port=1)
        t.add_link("h2", "s0", LinkSpec(latency_ns=100, bandwidth_bps=10**11), a_port=0, b_port=2)
        t.routes = {"s0": [0, 1, 2]}
        return t

    ends = {}
    for name, q in (("strict", QueueSpec(buffer_bytes=1 << 30)), ("drr13", QueueSpec(arbiter="drr", weights="1+3")),
                    ("drr11", QueueSpec(arbiter="drr"))):
        async with emu.Cluster(topo(q), run=RunConfig(direct=True)) as net:
            res = await net.run({"h0": (apps.send_to, "h1", 1024 * 100, 0), "h2": (apps.send_to, "h1", 1024 * 100, 1),
                                 "h1": (apps.recv_n, 2)})
        ends[name] = {tag: t for _s, tag, _n, t, *_ in res["h1"]}
    line = SLOW  # one segment's time on the 10 Gbit/s line
    assert ends["strict"][1] < ends["strict"][0] and abs(ends["strict"][1] - 100 * line) <= 3 * line
    assert abs(ends["drr13"][1] - 400 * line / 3) <= 3 * line and abs(ends["drr13"][0] - 200 * line) <= 3 * line
    assert abs(ends["drr11"][1] - ends["drr11"][0]) <= 3 * line and abs(ends["drr11"][0] - 200 * line) <= 3 * line
