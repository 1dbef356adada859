"""Congestion controls at the NIC (host.cc, issue #47): exact steps on crafted frames, and whole runs
with the signals a switch would set (ECN, INT, trimming) written by hand into the frames in flight."""

import pytest

from emu.config import ConfigError, HostSpec
from emu.sim import EngineNet
from emu.topologies import star
from emu.wire import FCS_LEN, HDR_LEN, MACK, MSG, PacketType, add_fcs, build_frame, parse_frame
from emu.wire.cc import CNP, FLAG_ECN, FLAG_INT, NACK, PULL, empty_int, int_hops, int_push, trim
from emu.wire.fabric import FLAGS_OFF
from emu.nodes.nic.engine import NicEngine
from emu.nodes.nic.cc import CCS, cc_class, register_cc
from emu.nodes.nic.cc.base import CcTransport
import apps

LINE = 100_000_000_000
NAMES = ["h0", "h1"]


def nic(name="h0", node=0, **spec):
    return NicEngine(name, node, HostSpec(mtu_bytes=1000, **spec), None, {"h0": 0, "h1": 1}, NAMES)


class H:
    """One NIC stepped by hand; ``out`` collects every frame it hands to its port."""

    def __init__(self, name="h0", node=0, **spec):
        self.n = nic(name, node, **spec)
        self.tr = self.n.transport
        self.out = []

    def send(self, dst, size, t=0):
        self.n.now, self.n._out = t, self.out
        self.n.send_message(dst, 0, bytes(size), t)
        self.n.timer = self.n.timers.next  # (as receive and on_timer leave it)

    def rx(self, frame, t):
        self.out.extend(self.n.receive(frame, 0, t))

    def run(self, until=500_000):  # (before any retransmission timeout: the first is 1 ms)
        while self.n.timer is not None and self.n.timer <= until:
            self.out.extend(self.n.on_timer(self.n.timer))

    def frames(self, ptype):
        return [(f, at) for _, f, at in self.out if parse_frame(f)[4] == ptype]


def segment(src, dst, msg_id, off, total, flags=0, stack=b"", hops=0, tag=0):
    n = min(1000, total - off)
    body = stack + MSG.pack(msg_id, tag, total, off) + bytes(n)
    return build_frame(src, dst, PacketType.MSG, body, flags=flags | (FLAG_INT if stack else 0), hops=hops)


# -- DCQCN ------------------------------------------------------------------------------------------
def test_dcqcn_rate_after_cnps_is_the_formula():
    h = H(cc="dcqcn", dcqcn_rate_decrease_interval_ns=0)  # (the decrease on the CNP itself: the paper's reading)
    h.send(1, 50_000)
    f = h.tr.flows[1]
    assert f.rate == LINE and h.tr.line_bps == LINE
    g, K, T = h.n.spec.dcqcn_g, h.n.spec.dcqcn_alpha_timer_ns, h.n.spec.dcqcn_rate_timer_ns
    cnp = build_frame(1, 0, PacketType.CNP, CNP.pack(0, 1, 0))
    h.rx(cnp, 1000)
    # first CNP, alpha = 1: Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1 - g) alpha + g
    assert f.rate == LINE * (1 - 1 / 2) and f.cc.target == LINE and f.cc.alpha == (1 - g) + g
    assert h.tr.stats["cnps_received"] == 1 and h.tr.stats["rate_changes"] == 1
    # two rate-timer events of fast recovery: Rc = (Rt + Rc) / 2 each (T = K: the timers fire at the same times)
    h.run(1000 + 2 * T)
    rc = (LINE + (LINE + LINE / 2) / 2) / 2
    assert f.rate == rc
    # a CNP after two alpha periods without one: alpha decayed twice first
    h.rx(cnp, 1000 + 2 * K + 1)
    a = 1.0 * (1 - g) * (1 - g)
    assert f.cc.target == rc and f.rate == rc * (1 - a / 2) and f.cc.alpha == (1 - g) * a + g


def test_dcqcn_a_cnp_respaces_the_next_segment_at_the_new_rate():
    h = H(cc="dcqcn", dcqcn_rate_decrease_interval_ns=0)
    h.send(1, 5000)
    [(seg, t0)] = h.frames(PacketType.MSG)
    wire = len(seg) + FCS_LEN
    assert h.n.timer == t0 + -(-wire * 8 // 100) - h.n.spec.nic_delay_ns  # the next at the line rate...
    h.rx(build_frame(1, 0, PacketType.CNP, CNP.pack(0, 1, 0)), 1)
    h.run(50_000)
    times = [at for _, at in h.frames(PacketType.MSG)]
    half = -(-wire * 8_000_000_000 // (LINE // 2))
    assert times == [t0 + i * half for i in range(5)]  # ... and from the CNP on at half of it


def test_dcqcn_decreases_at_the_next_4us_check_once_for_every_cnp_since_the_last():
    """ns-3's CheckRateDecreaseMlx: the checks run every RateDecreaseInterval (4 us) from the first CNP
    + 1 ns; a check with a CNP since the last one decreases once. CNPs at 1,000 and 3,000 ns: the rate
    stays the line rate until the check at 5,001, then halves (alpha 1) -- one change for two CNPs. A CNP
    at 6,000 waits for the check at 9,001 (the grid, not 6,000 + 4 us)."""
    h = H(cc="dcqcn")
    assert h.n.spec.dcqcn_rate_decrease_interval_ns == 4000
    h.send(1, 50_000)
    f = h.tr.flows[1]
    cnp = build_frame(1, 0, PacketType.CNP, CNP.pack(0, 1, 0))
    h.rx(cnp, 1000)
    h.rx(cnp, 3000)
    h.run(5000)
    assert f.rate == LINE and h.tr.stats["cnps_received"] == 2 and h.tr.stats["rate_changes"] == 0
    h.run(5001)
    g = h.n.spec.dcqcn_g
    assert f.rate == LINE / 2 and f.cc.target == LINE and f.cc.alpha == (1 - g) + g and h.tr.stats["rate_changes"] == 1
    h.rx(cnp, 6000)
    h.run(9000)
    assert f.rate == LINE / 2
    h.run(9001)
    a = f.cc.alpha
    assert f.rate == LINE / 4 and f.cc.target == LINE / 2 and a == (1 - g) * 1.0 + g
    # with no CNP since, the checks decrease nothing (and no timer is left for them)
    h.run(30_000)
    assert f.rate == LINE / 4 and f.cc.check is None and h.tr.stats["rate_changes"] == 2


def test_dcqcn_increase_stages_fast_recovery_then_additive():
    h = H(cc="dcqcn", dcqcn_byte_counter_bytes=0, dcqcn_f=2, dcqcn_rai_mbps=40, dcqcn_rhai_mbps=200,
          dcqcn_rate_decrease_interval_ns=0)
    h.send(1, 2000)
    f = h.tr.flows[1]
    h.rx(build_frame(1, 0, PacketType.CNP, CNP.pack(0, 1, 0)), 0)
    T = h.n.spec.dcqcn_rate_timer_ns
    rc, rt = LINE / 2, float(LINE)
    for i in range(1, 5):  # timer only: fast recovery while T < F, then additive (no byte counter: never hyper)
        h.run(i * T)
        if i > 2:
            rt = min(LINE, rt + 40e6)
        rc = min(LINE, (rt + rc) / 2)
        assert f.rate == rc and f.cc.target == rt and f.cc.t_stage == i


def test_dcqcn_stage_of_an_increase_event_from_timer_and_byte_counts():
    h = H(cc="dcqcn", dcqcn_f=3, dcqcn_rai_mbps=40, dcqcn_rhai_mbps=200)
    h.send(1, 2000)
    f = h.tr.flows[1]
    for t_stage, bc_stage, step in ((2, 2, 0), (3, 0, 40e6), (0, 3, 40e6), (3, 2, 40e6), (3, 3, 200e6), (7, 4, 200e6)):
        f.cc.t_stage, f.cc.bc_stage, f.cc.target, f.rate = t_stage, bc_stage, 40e9, 30e9
        h.tr._increase(f)
        assert f.cc.target == 40e9 + step and f.rate == (40e9 + step + 30e9) / 2


def test_dcqcn_byte_counter_counts_bytes_sent_after_a_cnp():
    h = H(cc="dcqcn", dcqcn_byte_counter_bytes=2500, dcqcn_rate_decrease_interval_ns=0)
    h.send(1, 10_000)
    f = h.tr.flows[1]
    h.rx(build_frame(1, 0, PacketType.CNP, CNP.pack(0, 1, 0)), 0)
    h.run(h.n.spec.dcqcn_rate_timer_ns - 1)  # the other 9 segments (the first left before the CNP)
    assert f.cc.bc_stage == 9000 // 2500 and f.cc.bytes == 9000 % 2500 and f.cc.t_stage == 0


def test_dcqcn_receiver_sends_at_most_one_cnp_per_interval():
    h = H("h1", 1, cc="dcqcn")
    for i, t in enumerate((0, 1000, 49_999, 50_000, 60_000)):
        h.out = []
        h.rx(segment(0, 1, 0, i * 1000, 10_000, flags=FLAG_ECN), t)
        cnps = h.frames(PacketType.CNP)
        assert len(cnps) == (1 if t in (0, 50_000) else 0)
        if cnps:
            assert CNP.unpack(cnps[0][0], HDR_LEN)[:2] == (0, 1 if t == 0 else 3)
            assert cnps[0][1] == t + h.n.spec.nic_delay_ns
    assert h.tr.stats["cnps_sent"] == 2 and h.tr.stats["ecn_marked_received"] == 5


# -- go-back-N and selective repeat ------------------------------------------------------------------
def test_go_back_n_receiver_drops_a_gap_counts_it_and_nacks_the_expected_segment():
    h = H("h1", 1, cc="dcqcn")
    h.rx(segment(0, 1, 0, 0, 5000), 0)
    h.out = []
    h.rx(segment(0, 1, 0, 2000, 5000), 10)
    h.rx(segment(0, 1, 0, 3000, 5000), 20)  # the same gap: no second NACK
    assert [NACK.unpack(f, HDR_LEN) for f, _ in h.frames(PacketType.NACK)] == [(0, 1000)]
    assert h.tr.stats["out_of_order"] == 2 and not h.frames(PacketType.MACK)
    assert h.n._partial[(0, 0)].got == 1000  # the segments past the gap were not taken
    h.rx(segment(0, 1, 0, 1000, 5000), 30)
    [(ack, _)] = h.frames(PacketType.MACK)
    assert MACK.unpack(ack, HDR_LEN) == (0, 2000)  # cumulative


def test_go_back_n_sender_goes_back_to_the_nacked_segment():
    s = H(cc="dcqcn")
    s.send(1, 5000)
    s.run()
    assert s.tr.stats["segments_sent"] == 5
    s.out = []
    s.rx(build_frame(1, 0, PacketType.MACK, MACK.pack(0, 1000)), 20_000)
    s.rx(build_frame(1, 0, PacketType.NACK, NACK.pack(0, 1000)), 20_001)
    s.run(30_000)
    offs = [MSG.unpack(f, HDR_LEN)[3] for f, _ in s.frames(PacketType.MSG)]
    assert offs == [1000, 2000, 3000, 4000] and s.tr.stats["segments_resent"] == 4
    assert s.tr.stats["nacks_received"] == 1


@pytest.mark.parametrize("cc", ["dcqcn", "hpcc", "swift", "ndp"])
def test_reordered_and_lost_frames_every_message_arrives_intact(cc):
    net = EngineNet(star(3, host=HostSpec(cc=cc, mtu_bytes=1000)), seed=3, reorder=0.2, reorder_ns=3000, drop=0.02)
    res = net.run({"h0": (apps.send_to, "h2", 30_000, 1, 2), "h1": (apps.send_to, "h2", 20_000, 2, 2),
                   "h2": (apps.recv_n, 4)})
    got = sorted((src, tag, n, head) for src, tag, n, _t, _h, head in res["h2"])
    head = bytes((i * 7 + 3) & 0xFF for i in range(8))
    assert got == [("h0", 1, 30_000, head)] * 2 + [("h1", 2, 20_000, head)] * 2
    rx = net.engines["h2"].transport.stats
    tx = [net.engines[h].transport.stats for h in ("h0", "h1")]
    assert rx["out_of_order"] > 0 and sum(s["segments_resent"] for s in tx) > 0
    assert sum(s["messages_acked"] for s in tx) == 4 and sum(s["messages_failed"] for s in tx) == 0


# -- HPCC -------------------------------------------------------------------------------------------
def test_hpcc_segments_carry_an_empty_int_stack_and_the_ack_echoes_it():
    s = H(cc="hpcc")
    s.send(1, 3000)
    seg = s.frames(PacketType.MSG)[0][0]
    assert seg[FLAGS_OFF] & FLAG_INT and int_hops(seg) == []
    assert seg[HDR_LEN:HDR_LEN + len(empty_int(5))] == empty_int(5)
    seg = int_push(int_push(seg, 4000, 123, 555, 100_000), 0, 7, 556, 400_000)
    r = H("h1", 1, cc="hpcc")
    r.rx(seg, 5000)
    [(ack, at)] = r.frames(PacketType.MACK)
    assert ack[FLAGS_OFF] & FLAG_INT and at == 5000 + r.n.spec.nic_delay_ns
    assert int_hops(ack) == [(4000, 123, 555, 100_000), (0, 7, 556, 400_000)]
    assert MACK.unpack(ack, HDR_LEN + len(empty_int(5))) == (0, 1000)
    assert r.n._partial[(0, 0)].got == 1000  # the segment's data, without the stack


def _int_ack(end, hop):
    return int_push(build_frame(1, 0, PacketType.MACK, empty_int(5) + MACK.pack(0, end), flags=FLAG_INT), *hop)


def test_hpcc_utilisation_follows_measure_inflight():
    T = 10_000
    s = H(cc="hpcc", hpcc_base_rtt_ns=T)
    s.send(1, 200_000)
    s.run(5000)
    f = s.tr.flows[1]
    B = 100_000 * 1e6 / 8e9  # the hop's line rate, bytes per ns
    w_init, w_ai = LINE * T / 8e9, 10 * LINE / 25e9 * 1e6 * T / 8e9
    s.rx(_int_ack(1000, (0, 0, 1000, 100_000)), 20_000)  # the first: the telemetry is remembered
    assert f.cc.U == 0 and f.cc.hops == [(0, 0, 1000, 100_000)] and f.cwnd == w_init
    s.rx(_int_ack(2000, (50_000, 12_500, 2000, 100_000)), 21_000)
    u = 0 / (B * T) + 12_500 / 1000 / B  # min(q, q') = 0; txRate = 12.5 B/ns, the line rate
    U = (1 - 1000 / T) * 0 + 1000 / T * u
    assert f.cc.U == pytest.approx(U, rel=1e-12) and f.cwnd == min(w_init, w_init + w_ai)  # U < eta: additive
    s.rx(_int_ack(3000, (50_000, 40_000, 3000, 100_000)), 22_000)
    u2 = 50_000 / (B * T) + 27_500 / 1000 / B
    U2 = (1 - 1000 / T) * U + 1000 / T * u2
    assert f.cc.U == pytest.approx(U2, rel=1e-12)


def test_hpcc_multiplicative_decrease_when_utilisation_is_over_target():
    T = 10_000
    s = H(cc="hpcc", hpcc_base_rtt_ns=T)
    s.send(1, 200_000)
    f = s.tr.flows[1]
    hp = f.cc
    hp.Wc, hp.U = 50_000.0, 0.0
    s.tr.update(f, [(250_000, 250_000, 11_000, 100_000)], [(250_000, 0, 1000, 100_000)], True)
    U = 250_000 / (12.5 * T) + 25.0 / 12.5  # 2 + 2; tau = T: U is this sample alone
    w_ai = 10 * LINE / 25e9 * 1e6 * T / 8e9
    assert hp.U == pytest.approx(U) and f.cwnd == pytest.approx(50_000 / (U / 0.95) + w_ai)
    assert hp.inc_stage == 0 and hp.Wc == f.cwnd and f.rate == pytest.approx(f.cwnd * 8e9 / T)


@pytest.mark.parametrize("stages", [0, 5])
def test_hpcc_max_stage_zero_is_the_hpcc_codes_mi_thresh_0_every_update_multiplicative(stages):
    T = 10_000
    s = H(cc="hpcc", hpcc_base_rtt_ns=T, hpcc_max_stage=stages)
    s.send(1, 200_000)
    f = s.tr.flows[1]
    hp = f.cc
    hp.Wc, hp.U = 50_000.0, 0.0
    s.tr.update(f, [(0, 62_500, 11_000, 100_000)], [(0, 0, 1000, 100_000)], True)  # U = 0.5, under eta
    w_ai = 10 * LINE / 25e9 * 1e6 * T / 8e9
    assert hp.U == pytest.approx(0.5)
    if stages:  # additive: the window grows by W_AI, one stage counted
        assert f.cwnd == pytest.approx(50_000 + w_ai) and hp.inc_stage == 1
    else:  # ns-3 MiThresh 0 (mix/config.txt): W = Wc / (U / eta) + W_AI even under the target
        assert f.cwnd == pytest.approx(min(50_000 / (0.5 / 0.95) + w_ai, LINE * T / 8e9)) and hp.inc_stage == 0
        hp.U = 0.0
        s.tr.update(f, [(0, 0, 11_000 + T, 100_000)], [(0, 0, 11_000, 100_000)], True)  # U = 0: no division
        assert hp.U == 0 and f.cwnd == pytest.approx(LINE * T / 8e9)  # ns-3's Wc / 0 = inf, capped at B T
    with pytest.raises(ConfigError, match="hpcc_max_stage must be an integer >= 0"):
        HostSpec(hpcc_max_stage=-1)


# -- Swift ------------------------------------------------------------------------------------------
def test_swift_decrease_and_increase_follow_the_delay_and_its_hop_scaled_target():
    s = H(cc="swift")
    s.send(1, 40_000)
    s.run()
    f, sp = s.tr.flows[1], s.n.spec
    sent = {MSG.unpack(fr, HDR_LEN)[3]: at for fr, at in s.frames(PacketType.MSG)}
    assert f.cc.cwnd == 12.0 and f.cwnd == 12 * 1000 and len(sent) == 12  # the initial window, then it waits
    target = sp.swift_base_target_ns + 2 * sp.swift_hop_scale_ns
    d = target + 30_000  # over the target: multiplicative decrease
    s.rx(build_frame(1, 0, PacketType.MACK, MACK.pack(0, 1000), hops=2), sent[0] + d)
    w = 12 * max(1 - sp.swift_beta * (d - target) / d, 1 - sp.swift_max_mdf)
    assert f.cc.cwnd == w
    s.rx(build_frame(1, 0, PacketType.MACK, MACK.pack(0, 2000), hops=2), sent[1000] + 5000)  # under the target
    assert f.cc.cwnd == w + sp.swift_ai * 1 / w


def test_swift_paces_below_one_segment_and_a_timeout_cuts_the_window():
    s = H(cc="swift")
    s.send(1, 40_000)
    f, sp, tr = s.tr.flows[1], s.n.spec, s.tr
    tr.rtt.sample(40_000)
    f.cc.cwnd = 0.5
    tr._apply(f)
    assert f.rate == 0.5 * 1000 * 8e9 / 40_000 and f.cwnd == 1000  # one segment out, one per srtt / cwnd
    f.cc.cwnd, f.cc.last_decrease = 8.0, None
    tr.on_timeout_cc(f)
    assert f.cc.cwnd == 8.0 * (1 - sp.swift_max_mdf) and f.rate is None
    f.cc.retx = sp.swift_retx_reset - 1
    tr.on_timeout_cc(f)
    assert f.cc.cwnd == sp.swift_min_cwnd


# -- NDP --------------------------------------------------------------------------------------------
def test_ndp_first_window_blind_then_one_segment_per_pull():
    s = H(cc="ndp")
    s.send(1, 30_000)
    s.run()
    assert len(s.frames(PacketType.MSG)) == s.n.spec.ndp_iw_segments == 15
    s.out = []
    s.rx(build_frame(1, 0, PacketType.PULL, PULL.pack(0, 2, 1, 0)), 50_000)  # pulls 1 and 2 (1 was lost)
    s.run()
    assert len(s.frames(PacketType.MSG)) == 2
    s.rx(build_frame(1, 0, PacketType.PULL, PULL.pack(0, 2, 1, 0)), 60_000)  # stale: nothing new
    s.run()
    assert len(s.frames(PacketType.MSG)) == 2 and s.tr.stats["pulls_received"] == 2


def test_ndp_releases_the_pulls_of_a_message_that_has_arrived_and_the_next_message_starts_blind():
    """As htsim's NdpSink (release_pulls): pulls still queued when their message is whole are not
    sent. The sender's next message, with nothing out and no credit left, then goes as a new burst."""
    r = H("h1", 1, cc="ndp")
    for i in range(3):  # three segments at once: the first pull goes, the other two wait for the line
        r.rx(segment(0, 1, 0, 1000 * i, 3000), 0)
    r.run()
    assert len(r.frames(PacketType.PULL)) == 1
    assert r.tr.stats["pulls_sent"] == 1 and r.tr.stats["pulls_released"] == 2
    s = H(cc="ndp")
    s.send(1, 15_000)  # message 0: the blind window exactly
    s.send(1, 5_000)   # message 1 waits for credit
    s.run()
    assert len(s.frames(PacketType.MSG)) == 15
    for i in range(15):  # every segment of message 0 acknowledged, no pull (released)
        s.rx(build_frame(1, 0, PacketType.MACK, MACK.pack(0, 1000 * (i + 1))), 20_000 + i)
    s.run(until=30_000)  # (before message 1's retransmission timeout)
    sent = [(MSG.unpack(f, HDR_LEN)[0], at) for f, at in s.frames(PacketType.MSG)]
    assert [m for m, _ in sent] == [0] * 15 + [1] * 5 and s.tr.stats["bursts"] == 1
    assert min(at for m, at in sent if m == 1) > 20_014  # after the last acknowledgement


def test_ndp_trimmed_header_is_nacked_and_pulls_are_paced_at_the_line_rate():
    r = H("h1", 1, cc="ndp")
    r.rx(segment(0, 1, 0, 0, 5000), 0)
    r.rx(trim(segment(0, 1, 0, 1000, 5000)), 10)
    r.rx(segment(0, 1, 0, 2000, 5000), 20)
    r.run()
    assert [NACK.unpack(f, HDR_LEN) for f, _ in r.frames(PacketType.NACK)] == [(0, 1000)]
    pulls = r.frames(PacketType.PULL)
    gap = -(-(HDR_LEN + MSG.size + 1000 + FCS_LEN) * 8_000_000_000 // LINE)
    assert [PULL.unpack(f, HDR_LEN)[1] for f, _ in pulls] == [1, 2, 3]
    assert [at for _, at in pulls] == [100, 100 + gap, 100 + 2 * gap]
    st = r.tr.stats
    assert st["trimmed_received"] == 1 and st["out_of_order"] == 1 and st["pulls_sent"] == 3
    # the sender queues the trimmed segment and sends it with the next pull
    s = H(cc="ndp")
    s.send(1, 30_000)
    s.run()
    s.out = []
    s.rx(build_frame(1, 0, PacketType.NACK, NACK.pack(0, 1000)), 30_000)
    s.run()
    assert not s.frames(PacketType.MSG)  # no credit left: the first window went
    s.rx(build_frame(1, 0, PacketType.PULL, PULL.pack(0, 1, 1, 0)), 30_001)
    s.run()
    [(seg, _)] = s.frames(PacketType.MSG)
    assert MSG.unpack(seg, HDR_LEN)[3] == 1000 and s.tr.stats["segments_resent"] == 1


def _tamper(fn):
    def t(node, port, frame):
        body = frame[:-FCS_LEN]
        if node == "s0" and parse_frame(body)[4] == PacketType.MSG:
            new = fn(body)
            if new is not None:
                return add_fcs(new)
        return frame
    return t


def test_ndp_incast_with_trimming_every_byte_arrives():
    net = EngineNet(star(4, host=HostSpec(cc="ndp", mtu_bytes=1000)))
    count = [0]

    def cut(f):
        count[0] += 1
        return trim(f) if count[0] % 4 == 0 else None
    net.tamper = _tamper(cut)
    res = net.run({"h0": (apps.send_to, "h3", 20_000, 1), "h1": (apps.send_to, "h3", 20_000, 2),
                   "h2": (apps.send_to, "h3", 20_000, 3), "h3": (apps.recv_n, 3)})
    assert sorted(n for _s, _t, n, *_ in res["h3"]) == [20_000] * 3
    rx = net.engines["h3"].transport.stats
    resent = sum(net.engines[h].transport.stats["segments_resent"] for h in ("h0", "h1", "h2"))
    assert rx["trimmed_received"] > 0 and rx["nacks_sent"] == rx["trimmed_received"] == resent
    assert sum(net.engines[h].transport.stats["timeouts"] for h in ("h0", "h1", "h2")) == 0


def test_dcqcn_marks_on_the_way_slow_the_sender_and_every_byte_arrives():
    done = {}
    for marked in (False, True):
        net = EngineNet(star(3, host=HostSpec(cc="dcqcn", mtu_bytes=1000)))
        if marked:
            net.tamper = _tamper(lambda f: f[:FLAGS_OFF] + bytes((f[FLAGS_OFF] | FLAG_ECN,)) + f[FLAGS_OFF + 1:])
        res = net.run({"h0": (apps.send_to, "h2", 200_000, 1), "h2": (apps.recv_n, 1)})
        assert res["h2"][0][2] == 200_000
        done[marked] = res["h2"][0][3]
    tx, rx = net.engines["h0"].transport, net.engines["h2"].transport
    assert rx.stats["cnps_sent"] == tx.stats["cnps_received"] >= 1 and tx.stats["rate_changes"] >= 1
    assert done[True] > done[False]  # at half the line rate after the first CNP
    # the rate timer rests once everything is acknowledged: nothing is left to run when the last
    # acknowledgement is in (it ran on at 55 us a step to the line rate: 140 ms of virtual time)
    assert tx.flows[2].cc.timer is None and tx.flows[2].rate < tx.line_bps
    assert net.now - done[True] < 5_000


# -- names and settings -----------------------------------------------------------------------------
def test_none_is_the_old_path_and_unknown_names_are_refused_in_one_line():
    assert nic().transport is None and nic(transport="reliable").transport.__class__.__name__ == "Transport"
    with pytest.raises(ConfigError, match=r"unknown host.cc 'bogus'; known: none, dcqcn, hpcc, swift, ndp"):
        nic(cc="bogus")
    with pytest.raises(ConfigError, match="host.cc_recovery"):
        HostSpec(cc="dcqcn", cc_recovery="fast")
    with pytest.raises(ConfigError, match="swift_min_cwnd"):
        HostSpec(swift_min_cwnd=20)
    for name in ("dcqcn", "hpcc", "swift", "ndp"):
        assert issubclass(cc_class(name), CcTransport) and cc_class(name).cc_name == name


def test_a_registered_algorithm_is_chosen_by_name_and_recovery_is_settable():
    @register_cc("halfrate")
    class Half(CcTransport):
        def flow_init(self, flow):
            flow.rate = self.line_bps / 2
    try:
        h = H(cc="halfrate", cc_recovery="sr")
        h.send(1, 3000)
        h.run()
        [(_, t0), (_, t1), _] = h.frames(PacketType.MSG)
        assert h.tr.sr and t1 - t0 == -(-(HDR_LEN + MSG.size + 1000 + FCS_LEN) * 8_000_000_000 // (LINE // 2))
    finally:
        CCS.pop("halfrate")


async def test_ndp_gives_the_same_figures_over_the_wire_in_memory_and_two_processes():
    import emu
    from emu.topologies import build

    topo = build("star:n=4", settings={"host": {"cc": "ndp", "mtu_bytes": 1000}})
    apps_of = {"h0": (apps.send_to, "h3", 30_000, 1), "h1": (apps.send_to, "h3", 30_000, 2),
               "h2": (apps.send_to, "h3", 30_000, 3), "h3": (apps.recv_n, 3)}
    figures = []
    for kw in ({}, {"direct": True}, {"processes": 2}):
        async with emu.Cluster(topo, **kw) as net:
            res = await net.run(apps_of)
            figures.append((sorted(res["h3"]), net.metrics.summary(), net.metrics.per_link()))
    assert figures[0][1]["cc"]["pulls_sent"] == figures[0][1]["cc"]["segments_sent"] == 90
    assert figures[1] == figures[0] and figures[2] == figures[0]


def test_a_cc_with_a_second_transport_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"host.cc=ndp brings its own transport .* leave host.transport at none"):
        HostSpec(cc="ndp", transport="reliable")
    assert HostSpec(cc="ndp").transport == "none" and HostSpec(transport="reliable").cc == "none"


def test_an_unknown_name_is_refused_in_one_line_before_the_run():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "emu", "run", "--topo", "star:n=2", "--set", "host.cc=bogus"],
                       capture_output=True, text=True, timeout=120)
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode != 0 and lines == ["refused: unknown host.cc 'bogus'; known: none, dcqcn, hpcc, swift, ndp"]
