"""The element driver's receive path: foreign, malformed, duplicate and out-of-order input."""

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.config import RunConfig, SwitchSpec
from emu.domain import Domain
from emu.element import Element
from emu.port import InPort, OutPort
from emu.wire import MAGIC, OUTER, VERSION, PacketType, add_fcs, build_frame
from emu.switch.forward import SwitchEngine

CID = 0x1234567


def make(capture=False):
    dom = Domain(0, 2, RunConfig())  # peers live in "domain 1" (the test plays them)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    peer.setblocking(False)
    outs = [OutPort(i, f"s0-p{i}", i, 10 + 2 * i, f"h{i}", f"h{i}-nic0", 100, 10**11, peer_domain=1,
                    peer_addr=peer.getsockname()) for i in range(2)]
    ins = [InPort(i, f"s0-p{i}", i, 11 + 2 * i, f"h{i}", f"h{i}-nic0", peer_addr=peer.getsockname()) for i in range(2)]
    el = Element("s0", SwitchEngine("s0", 5, SwitchSpec(), [0, 1]), cluster_id=CID, domain=dom,
                 outs=outs, ins=ins, capture=capture, seed=1,
                 lookahead_ns=150)
    dom.add(el)
    return el, peer


def record(link, seq, ts, frame, cid=CID, magic=MAGIC, kind=0, fcs=True):
    """A DATA record as the genuine sender writes it: the frame ends with its FCS."""
    if fcs:
        frame = add_fcs(frame)
    return OUTER.pack(magic, VERSION, kind, cid, link, seq, ts, len(frame), 0) + frame


def feed(e, dgram, sender=None):
    """Hand a datagram to the element as if it came from the peers' socket (or ``sender``)."""
    return e.on_datagram(dgram, sender or e.ins[0].peer_addr)


FRAME = build_frame(0, 1, PacketType.MSG, b"payload")


@pytest.fixture
def el():
    e, peer = make()
    yield e
    e.sock.close()
    peer.close()


def test_valid_records_are_accepted_in_sequence(el):
    assert feed(el, record(11, 0, 500, FRAME) + record(11, 1, 600, FRAME)) == 2
    assert el.in_by_link[11].link.expected == 2 and len(el.heap) == 2
    assert feed(el, record(11, 1, 600, FRAME)) == 0
    assert el.stats["duplicates"] == 1


@pytest.mark.parametrize("dgram,counter", [
    (record(11, 0, 5, FRAME, cid=0xBAD), "foreign_cluster"),
    (record(11, 0, 5, FRAME, magic=0x1234), "bad_magic"),
    (record(99, 0, 5, FRAME), "bad_link"),
    (record(11, 0, 5, FRAME)[:-3], "truncated"),
    (record(11, 0, 5, FRAME)[:20], "truncated"),
    (record(11, 0, 5, FRAME, kind=7), "bad_magic"),
    (b"GET / HTTP/1.1\r\n\r\n" * 3, "bad_magic"),
])
def test_foreign_or_malformed_datagrams_are_counted_and_dropped(el, dgram, counter):
    assert feed(el, dgram) == 0
    assert el.stats[counter] == 1
    assert not el.heap
    # and the element carries on
    assert feed(el, record(11, 0, 5, FRAME)) == 1


def test_empty_datagram_is_counted_as_malformed(el):
    assert feed(el, b"") == 0 and el.stats["truncated"] == 1


def test_records_from_a_socket_that_does_not_own_the_link_are_dropped(el):
    """A stranger who knows the cluster id, link id and next sequence number cannot take the
    genuine frame's place, nor provoke a causality error, nor trigger retransmission."""
    stranger = ("127.0.0.1", 9)
    assert feed(el, record(11, 0, 500, b"forged"), stranger) == 0
    assert feed(el, record(11, 0, 0, b"forged, stamped in the past"), stranger) == 0
    el.safe_time = 400
    assert feed(el, OUTER.pack(MAGIC, VERSION, 1, CID, 10, 0, 0, 0, 0), stranger) == 0  # a NACK
    assert el.stats["wrong_sender"] == 3 and el.stats["retransmitted"] == 0
    assert not el.heap and el.in_by_link[11].link.expected == 0
    assert feed(el, record(11, 0, 500, FRAME)) == 1   # the genuine frame still gets its place
    assert el.heap[0][3] == add_fcs(FRAME)  # stripped when handled


def test_frame_failing_its_fcs_is_counted_captured_and_dropped():
    e, peer = make(capture=True)
    try:
        good = add_fcs(FRAME)
        for bit in (0, 8 * len(FRAME) + 3):  # a bit of the frame, a bit of the FCS itself
            bad = bytearray(good)
            bad[bit // 8] ^= 0x80 >> (bit % 8)
            seq = e.in_by_link[11].link.expected
            dgram = OUTER.pack(MAGIC, VERSION, 0, CID, 11, seq, 500, len(bad), 0) + bytes(bad)
            assert feed(e, dgram) == 1  # received (the link's count goes on) ...
        assert feed(e, record(11, 2, 600, FRAME)) == 1
        e.run_window(1000, 1)         # ... checked at its arrival time, and never handed to the engine
        assert e.in_by_link[11].fcs_errors == 2 and e.in_by_link[11].link.expected == 3
        assert [c[2] for c in e.capture if c[2] & 1] == [1 | 32, 1 | 32, 1]
        assert e.engine.stats["forwarded"] == 1 and e.port_stats()[0]["fcs_errors"] == 2
    finally:
        e.sock.close()
        peer.close()


def test_gap_asks_the_sender_to_go_back(el):
    feed(el, record(11, 0, 5, FRAME))
    assert feed(el, record(11, 2, 7, FRAME)) == 0
    assert el.stats["gaps"] == 1 and el.stats["nacks_sent"] == 1
    feed(el, record(11, 3, 8, FRAME))  # the same gap does not ask twice
    assert el.stats["nacks_sent"] == 1


def test_nack_retransmits_retained_datagrams():
    el, peer = make()
    try:
        el.engine.receive  # switch forwards h0 -> h1 on port 1
        feed(el, record(11, 0, 1000, FRAME))
        el.run_window(2000, 1)
        first = peer.recv(65536)
        nack = OUTER.pack(MAGIC, VERSION, 1, CID, 12, 0, 0, 0, 0)
        feed(el, nack)
        assert peer.recv(65536) == first and el.stats["retransmitted"] == 1
        el.forget(1)
        feed(el, nack)
        assert el.stats["retransmitted"] == 1
    finally:
        el.sock.close()
        peer.close()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_kill_the_element(buf):
    e, peer = make()
    try:
        accepted = feed(e, buf)
        e.run_window(10**6, 1)
        counted = sum(v for k, v in e.stats.items() if not k.startswith("datagrams"))
        assert accepted == 0 and counted >= 1  # an empty datagram too
    finally:
        e.sock.close()
        peer.close()


def test_malformed_inner_frame_is_counted_by_the_engine_and_captured():
    e, peer = make(capture=True)
    try:
        assert feed(e, record(11, 0, 50, b"\x01\x02garbage-inner-frame")) == 1
        e.run_window(1000, 1)
        assert e.engine.stats["malformed"] == 1
        assert e.capture and e.capture[0][3] == add_fcs(b"\x01\x02garbage-inner-frame")
    finally:
        e.sock.close()
        peer.close()
