"""High-priority frames overtake at the port: QsNet packets at segment boundaries (spec 03)."""

import pytest

import emu
from emu.config import ConfigError, LinkSpec
from emu.port import FIRST_SEG_END, OutPort
from emu.wire import PacketType, build_frame
from emu.topologies import build

BIG = build_frame(0, 1, PacketType.QPKT, bytes(4000))        # 4030 bytes + FCS: 4034 ns at 1 byte/ns
MSG = build_frame(0, 1, PacketType.MSG, bytes(4000))
ACK = build_frame(1, 0, PacketType.QACK, bytes(16), prio=1)  # 46 bytes + FCS: 50 ns


def port(priority=True):
    return OutPort(0, "s0-p0", 0, 0, "h1", "h1-nic0", 100, 8_000_000_000, priority=priority)  # 1 byte per ns


def entries(p):
    return [(s, a, len(f)) for s, a, f, _ in p.pending]


def test_an_ack_goes_out_at_the_next_segment_boundary_of_a_qsnet_packet_on_the_line():
    p = port()
    assert p.enqueue(BIG, 0) == 0
    assert p.enqueue(ACK, 100) == FIRST_SEG_END == 286          # the first segment ends 286 bytes in
    assert p.enqueue(ACK, 300) == 336                            # right after the first ACK
    assert p.enqueue(ACK, 400) == 386 + 256                      # the packet's second segment ran 386..642
    assert entries(p) == [(286, 436, 50), (336, 486, 50), (642, 792, 50), (0, 4034 + 150 + 100, 4034)]
    assert p.free_at == 4034 + 150 and p.overtakes == 3
    assert [a for _s, a, _n in entries(p)] == sorted(a for _s, a, _n in entries(p))  # arrivals in order


def test_an_ack_waits_for_a_frame_that_has_no_segments_but_overtakes_those_queued_behind_it():
    p = port()
    p.enqueue(MSG, 0)
    p.enqueue(BIG, 0)                 # queued: starts at 4034
    assert p.enqueue(ACK, 100) == 4034
    assert entries(p) == [(0, 4134, 4034), (4034, 4184, 50), (4084, 4084 + 4034 + 100, 4034)]
    q = port()
    q.enqueue(BIG, 0)
    q.enqueue(MSG, 0)
    assert q.enqueue(ACK, 3000) == 286 + 11 * 256  # into the QsNet packet, ahead of the waiting message
    assert entries(q) == [(3102, 3252, 50), (0, 4084 + 100, 4034), (4084, 4084 + 4034 + 100, 4034)]
    assert q.enqueue(ACK, 5000) == 8118             # the message is on the line, unsegmented: after it


def test_without_priority_the_port_is_fifo():
    p = port(priority=False)
    p.enqueue(BIG, 0)
    assert p.enqueue(ACK, 100) == 4034 and p.overtakes == 0
    with pytest.raises(ConfigError, match="LinkSpec.priority must be true or false"):
        LinkSpec(priority="yes")


async def test_acks_overtaking_data_speed_up_puts_both_ways():
    from emu.front.checks import Options, run_check

    out = {}
    for pr in (True, False):
        async with emu.Cluster(build("star:n=2", settings={"link": {"priority": pr}})) as net:
            r = await run_check(net, "put", Options(seed=0, extra={"size": "256KiB"}))
            st = await net.stats()
        assert r.ok, r.error
        out[pr] = (r.figures["time_max_ns"], sum(p["overtakes"] for s in st for p in s["ports"]))
    assert out[True][1] > 0 and out[False][1] == 0
    assert out[True][0] < out[False][0]
