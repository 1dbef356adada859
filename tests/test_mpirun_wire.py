"""The channel between a rank and the emulator (``emu.rank.wire``): binary heads for the common calls
and answers decode to what JSON would give; any other head goes as JSON; the reader takes messages
whole however the bytes arrive."""

from __future__ import annotations

import socket
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.rank import wire

COMMON = [
    {"ctx": 0, "dest": 1, "tag": 7, "mode": "std", "nb": False, "call": "Send", "op": "send"},
    {"ctx": 0, "dest": 1, "tag": 7, "mode": "std", "nb": False, "call": "Send", "quiet": True, "op": "send",
     "cpu": 1.5e-06},
    {"ctx": 3, "source": -2, "tag": -1, "call": "Recv", "op": "recv"},
    {"ids": [1, 2, 3], "mode": "all", "test": False, "call": "Waitall", "op": "wait"},
    {"ctx": 0, "kind": "reduce", "call": "Allreduce", "rop": "sum", "root": 0, "all": True, "dtype": "<f8",
     "tname": None, "op": "coll"},
    {"now": 5}, {"req": 3, "now": 5}, {"st": [1, 0, 7, 8, False], "now": 9},
    {"st": [[1, 0, 7, 8, False], [2, 1, 3, 0, True]], "now": 9}, {"lens": [1, 2], "now": 1}, {"op": "now"},
]
OTHER = [
    {"ctx": 0, "dest": 1, "tag": 7, "mode": "ready?", "nb": False, "call": "Send", "op": "send"},  # unknown name
    {"ctx": 0.5, "dest": 1, "tag": 7, "mode": "std", "nb": False, "call": "Send", "op": "send"},  # a float for an int
    {"dest": 1, "ctx": 0, "tag": 7, "mode": "std", "nb": False, "call": "Send", "op": "send"},  # another order
    {"ctx": 0, "dest": 2**70, "tag": 7, "mode": "std", "nb": False, "call": "Send", "op": "send"},  # too large
    {"rank": 0, "size": 2, "name": "h0"}, {"err": "MPI_ERR_RANK", "code": 6, "now": 3}, {},
]


@pytest.mark.parametrize("head", COMMON)
def test_the_common_heads_go_binary(head):
    b = wire.encode_head(head)
    assert b[0] < 0x20 or b[0] & ~wire.CPU_FLAG < 0x20
    assert wire.decode_head(b) == head


@pytest.mark.parametrize("head", OTHER)
def test_any_other_head_goes_as_json(head):
    b = wire.encode_head(head)
    assert b[:1] == b"{"
    assert wire.decode_head(b) == head


@pytest.mark.parametrize("bad", [b"\x05", b"\x1f\x00", b"\x01" + b"\x00" * 5, b"[1,2]"])
def test_a_malformed_head_is_refused(bad):
    with pytest.raises(ValueError, match="malformed message head"):
        wire.decode_head(bad)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 8, 1000, 70_000, 300_000]), min_size=1, max_size=6),
       chunk=st.sampled_from([1, 7, 4096, 1 << 20]))
def test_the_reader_takes_messages_whole_however_they_arrive(sizes, chunk):
    a, b = socket.socketpair()
    msgs = [({"req": i, "now": i * 10}, bytes([i % 251]) * n) for i, n in enumerate(sizes)]
    raw = bytearray()
    for head, payload in msgs:
        h = wire.encode_head(head)
        raw += wire.PREFIX.pack(len(payload), len(h)) + h + payload

    def writer():
        for i in range(0, len(raw), chunk):
            a.sendall(raw[i:i + chunk])
        a.close()

    t = threading.Thread(target=writer)
    t.start()
    reader = wire.Reader(b)
    got = [reader.recv() for _ in msgs]
    with pytest.raises(wire.ChannelClosed):
        reader.recv()
    t.join()
    b.close()
    assert [(h, bytes(p)) for h, p in got] == msgs


def test_a_reader_waiting_looks_and_may_give_up():
    a, b = socket.socketpair()
    looks = []

    def idle():
        looks.append(1)
        if len(looks) == 3:
            raise TimeoutError("given up")

    reader = wire.Reader(b, idle, 0.01)
    with pytest.raises(TimeoutError, match="given up"):
        reader.recv()
    assert len(looks) == 3
    h = wire.encode_head({"now": 1})
    a.sendall(wire.PREFIX.pack(2, len(h)) + h + b"ok")  # after the looks, a message is read as ever
    assert reader.recv() == ({"now": 1}, bytearray(b"ok"))
    a.close()
    with pytest.raises(wire.ChannelClosed):
        reader.recv()
    b.close()


@settings(max_examples=200, deadline=None)
@given(st.integers(-2**63, 2**63 - 1), st.integers(-1, 2**31), st.integers(-2**63, 2**63 - 1),
       st.sampled_from(["Send", "Rsend", "send", "Recv", "recv"]), st.none() | st.floats(0, 1e3),
       st.binary(max_size=40))
def test_the_framed_send_and_receive_are_wire_frames(ctx, peer, tag, call, cpu, payload):
    """``emu.rank.channel``'s two calls framed without a head dict make the bytes ``wire.frame`` makes
    of the head ``Channel.call`` builds (a quiet standard send; a blocking receive), with and without
    the program's CPU time."""
    from emu.rank.channel import frame_recv, frame_send

    send = {"ctx": ctx, "dest": peer, "tag": tag, "mode": "std", "nb": False, "call": call, "quiet": True,
            "op": "send", **({} if cpu is None else {"cpu": cpu})}
    recv = {"ctx": ctx, "source": peer, "tag": tag, "call": call, "op": "recv", **({} if cpu is None else {"cpu": cpu})}
    assert frame_send(payload, ctx, peer, tag, call, cpu) == wire.frame(send, payload)
    assert frame_recv(ctx, peer, tag, call, cpu) == wire.frame(recv)
    assert wire.decode_head(frame_send(payload, ctx, peer, tag, call, cpu)[6:-len(payload) or None]) == send
