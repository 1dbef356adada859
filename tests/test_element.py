"""The element driver's receive path: foreign, malformed, duplicate and out-of-order input."""

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.config import RunConfig, SwitchSpec
from emu.domain import Domain
from emu.element import Element
from emu.port import InPort, OutPort
from emu.wire import MAGIC, OUTER, VERSION, PacketType, build_frame
from switch.forward import SwitchEngine

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


def record(link, seq, ts, frame, cid=CID, magic=MAGIC, kind=0):
    return OUTER.pack(magic, VERSION, kind, cid, link, seq, ts, len(frame), 0) + frame


FRAME = build_frame(0, 1, PacketType.MSG, b"payload")


@pytest.fixture
def el():
    e, peer = make()
    yield e
    e.sock.close()
    peer.close()


def test_valid_records_are_accepted_in_sequence(el):
    assert el.on_datagram(record(11, 0, 500, FRAME) + record(11, 1, 600, FRAME)) == 2
    assert el.in_by_link[11].expected == 2 and len(el.heap) == 2
    assert el.on_datagram(record(11, 1, 600, FRAME)) == 0
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
    assert el.on_datagram(dgram) == 0
    assert el.stats[counter] == 1
    assert not el.heap
    # and the element carries on
    assert el.on_datagram(record(11, 0, 5, FRAME)) == 1


def test_gap_asks_the_sender_to_go_back(el):
    el.on_datagram(record(11, 0, 5, FRAME))
    assert el.on_datagram(record(11, 2, 7, FRAME)) == 0
    assert el.stats["gaps"] == 1 and el.stats["nacks_sent"] == 1
    el.on_datagram(record(11, 3, 8, FRAME))  # the same gap does not ask twice
    assert el.stats["nacks_sent"] == 1


def test_nack_retransmits_retained_datagrams():
    el, peer = make()
    try:
        el.engine.receive  # switch forwards h0 -> h1 on port 1
        el.on_datagram(record(11, 0, 1000, FRAME))
        el.run_window(2000, 1)
        first = peer.recv(65536)
        nack = OUTER.pack(MAGIC, VERSION, 1, CID, 12, 0, 0, 0, 0)
        el.on_datagram(nack)
        assert peer.recv(65536) == first and el.stats["retransmitted"] == 1
        el.forget(1)
        el.on_datagram(nack)
        assert el.stats["retransmitted"] == 1
    finally:
        el.sock.close()
        peer.close()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_kill_the_element(buf):
    e, peer = make()
    try:
        accepted = e.on_datagram(buf)
        e.run_window(10**6, 1)
        counted = sum(v for k, v in e.stats.items() if not k.startswith("datagrams"))
        assert accepted == 0 and (counted >= 1 or not buf)
    finally:
        e.sock.close()
        peer.close()


def test_malformed_inner_frame_is_counted_by_the_engine_and_captured():
    e, peer = make(capture=True)
    try:
        assert e.on_datagram(record(11, 0, 50, b"\x01\x02garbage-inner-frame")) == 1
        e.run_window(1000, 1)
        assert e.engine.stats["malformed"] == 1
        assert e.capture and e.capture[0][3] == b"\x01\x02garbage-inner-frame"
    finally:
        e.sock.close()
        peer.close()
