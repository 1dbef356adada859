"""Engines driven directly (no sockets): segmentation, reassembly, echo, forwarding, bad input."""

from hypothesis import given, settings
from hypothesis import strategies as st

from emu.config import HostSpec, LinkSpec, SwitchSpec
from emu.wire import FCS_LEN, HDR_LEN, HOPS_OFF, MSG, PacketType, build_frame
from emu.sim import EngineNet
from emu.nodes.nic.engine import NicEngine
from emu.switch.forward import SwitchEngine
from emu.topologies import star
import apps


def ser(nbytes, bw=100_000_000_000):
    return -((-nbytes * 8 * 10**9) // bw)


def test_ping_rtt_is_the_analytic_model():
    link, host, sw = LinkSpec(latency_ns=250, bandwidth_bps=10**10), HostSpec(nic_delay_ns=70), SwitchSpec(processing_delay_ns=30)
    net = EngineNet(star(3, link=link, host=host, switch=sw))
    rtt = net.run({"h0": (apps.ping, "h2")})["h0"]
    one_way = host.nic_delay_ns + 2 * (ser(46 + FCS_LEN, 10**10) + link.latency_ns) + sw.processing_delay_ns
    assert rtt == 2 * one_way + host.nic_delay_ns


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 20_000), mtu=st.integers(1, 4096))
def test_messages_of_any_size_are_segmented_and_reassembled(size, mtu):
    net = EngineNet(star(2, host=HostSpec(mtu_bytes=mtu)))
    res = net.run({"h0": (apps.send_to, "h1", size, 5), "h1": (apps.recv_n, 1)})
    [(src, tag, n, t_ns, hops, head)] = res["h1"]
    assert (src, tag, n, hops) == ("h0", 5, size, 1)
    assert head == bytes((i * 7 + 3) & 0xFF for i in range(min(size, 8)))
    frames = max(1, -(-size // mtu))
    assert net.engines["h0"].stats["frames_sent"] == frames
    # two FIFO stages in tandem (h0's port, then s0's port toward h1)
    last = size - (frames - 1) * mtu
    sizes = [mtu + 46 + FCS_LEN] * (frames - 1) + [last + 46 + FCS_LEN]
    done1 = done2 = 0
    for s in sizes:
        done1 = max(300 + 100, done1) + ser(s)    # handed to h0's port after send overhead + NIC delay
        done2 = max(done1 + 100 + 50, done2) + ser(s)  # latency 100, switch delay 50
    assert t_ns == done2 + 100 + 100                # latency, then the receiving NIC's delay


def test_fan_in_queues_at_the_switch_port():
    net = EngineNet(star(4, host=HostSpec(mtu_bytes=1000)))
    res = net.run({"h1": (apps.send_to, "h0", 10_000), "h2": (apps.send_to, "h0", 10_000),
                   "h3": (apps.send_to, "h0", 10_000), "h0": (apps.recv_count, 3)})
    total, t_done = res["h0"]
    assert total == 30_000
    # 30 frames of 1050 B (1000 + 46 + FCS) leave s0 toward h0 back to back: the egress port is the bottleneck
    assert t_done >= 30 * ser(1050)


def _switch():
    return SwitchEngine("s0", 9, SwitchSpec(), [-1, 1, 2])


def test_switch_counts_malformed_and_unroutable_frames_and_keeps_forwarding():
    sw = _switch()
    assert sw.receive(b"\x00" * 10, 0, 5) == []
    assert sw.receive(b"\x00" * 40, 0, 5) == []   # wrong EtherType
    assert sw.receive(build_frame(1, 77, PacketType.MSG, b""), 0, 5) == []
    assert sw.stats == {"forwarded": 0, "malformed": 2, "no_route": 1}
    [(port, frame, at)] = sw.receive(build_frame(1, 2, PacketType.MSG, b"xy"), 0, 5)
    assert (port, at, frame[HDR_LEN - 4]) == (2, 55, 1)   # hops incremented


def _host():
    return NicEngine("h1", 1, HostSpec(), None, {"h0": 0, "h1": 1, "h2": 2}, ["h0", "h1", "h2"])


@given(st.binary(max_size=120))
def test_host_survives_any_input(buf):
    h = _host()
    h.receive(buf, 0, 10)   # never raises
    assert h.stats["malformed"] + h.stats["misdelivered"] + h.stats["frames_received"] == 1


def test_host_rejects_overrunning_segment_and_stray_echo_reply():
    h = _host()
    h.receive(build_frame(0, 1, PacketType.MSG, MSG.pack(1, 0, 4, 2) + b"abc"), 0, 10)
    h.receive(build_frame(0, 1, PacketType.PONG, bytes(16)), 0, 11)
    h.receive(build_frame(0, 1, 200, b""), 0, 12)
    assert h.stats["malformed"] == 3


def test_deadlocked_app_reports_what_it_waits_for():
    net = EngineNet(star(2))
    net.start({"h0": apps.wait_forever})
    net.step_all()
    [st] = net.engines["h0"].app_states()
    assert not st.done and st.waiting == "recv(src=h1, tag=99)"


def test_a_frame_that_has_crossed_max_hops_routers_is_dropped_counted_and_logged(caplog):
    from emu.switch.forward import MAX_HOPS

    sw = _switch()
    [(_port, out, _at)] = sw.receive(build_frame(1, 2, PacketType.MSG, b"xy", hops=MAX_HOPS - 1), 0, 5)
    assert out[HOPS_OFF] == MAX_HOPS                       # one short of the limit: forwarded, counted once more
    with caplog.at_level("WARNING"):
        assert sw.receive(out, 0, 6) == []                 # a loop's frame dies here instead of circling
    assert sw.stats["hop_limit"] == 1 and sw.stats["forwarded"] == 1 and "routing loop" in caplog.text
