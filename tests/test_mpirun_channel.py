"""The rank's end of its channel (``emu.rank.channel``): calls that need no answer -- a small
standard send, the posting of a nonblocking receive -- are held and go with the next call that
needs one, in one write; their requests are numbered by the rank; the emulator gives such a
request the rank's number (``emu.front.mpicalls``); a call that may be refused is never held."""

from __future__ import annotations

import socket
import threading

import pytest

from emu.rank import wire
from emu.rank.channel import HELD_MAX_BYTES, RID_BASE, _Channel


class Emulator:
    """The other end: answers every call that waits for one, and keeps what came, in order."""

    def __init__(self, sock):
        self.reader = wire.Reader(sock)
        self.sock = sock
        self.got: list[dict] = []
        self.reads: list[int] = []
        """Per answered call: how many messages had come since the last answer."""
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        n = 0
        try:
            while True:
                head, _ = self.reader.recv()
                self.got.append(head)
                n += 1
                if not head.get("quiet"):
                    self.reads.append(n)
                    n = 0
                    wire.send(self.sock, {"req": 7, "now": 42} if head.get("nb") else {"now": 42})
        except wire.ChannelClosed:
            pass


@pytest.fixture
def chan():
    a, b = socket.socketpair()
    ch = _Channel()
    ch.sock, ch.reader, ch.size = a, wire.Reader(a), 2
    emu = Emulator(b)
    yield ch, emu
    a.close()
    emu.thread.join(5)
    b.close()


def test_sends_and_receive_postings_go_with_the_next_call_that_waits(chan):
    ch, emu = chan
    assert ch.call("send", b"x" * 8, ctx=0, dest=1, tag=7, mode="std", nb=False, call="Send") == ({}, b"")
    r1 = ch.call("recv", ctx=0, source=1, tag=3, nb=True, call="Irecv")[0]["req"]
    r2 = ch.call("send", b"y" * 8, ctx=0, dest=1, tag=3, mode="std", nb=True, call="Isend")[0]["req"]
    assert (r1, r2) == (RID_BASE, RID_BASE + 1)  # numbered here, not by the emulator
    assert ch.unsynced and emu.got == []  # nothing written yet
    head, _ = ch.call("wait", ids=[r1, r2], mode="all", test=False, call="Waitall")
    assert not ch.unsynced and ch.now_ns == 42
    assert [h["call"] for h in emu.got] == ["Send", "Irecv", "Isend", "Waitall"]
    assert emu.reads == [4]  # one write brought the four
    assert [h.get("rid") for h in emu.got] == [None, RID_BASE, RID_BASE + 1, None]


@pytest.mark.parametrize("call", [
    dict(op="send", payload=b"x", ctx=0, dest=2, tag=0, mode="std", nb=False, call="Send"),  # no rank 2 of 2
    dict(op="send", payload=b"x", ctx=5, dest=1, tag=0, mode="std", nb=True, call="Isend"),  # another communicator
    dict(op="send", payload=b"x", ctx=0, dest=1, tag=0, mode="sync", nb=False, call="Ssend"),  # waits for the receiver
    dict(op="send", payload=b"x" * 5000, ctx=0, dest=1, tag=0, mode="std", nb=False, call="Send"),  # not eager here
    dict(op="recv", payload=b"", ctx=0, source=1, tag=0, call="Recv"),  # blocking: its data is the answer
    dict(op="recv", payload=b"", ctx=0, source=3, tag=0, nb=True, call="Irecv"),  # no rank 3
])
def test_a_call_that_may_be_refused_or_has_an_answer_waits_for_it(chan, call):
    ch, emu = chan
    call = dict(call)
    ch.call(call.pop("op"), call.pop("payload"), **call)
    assert emu.reads == [1] and "quiet" not in emu.got[0] and "rid" not in emu.got[0]


def test_held_calls_go_once_they_pass_the_bound(chan):
    ch, emu = chan
    n = 0
    while not emu.got:
        ch.call("send", b"z" * 4000, ctx=0, dest=1, tag=1, mode="std", nb=False, call="Send")
        n += 1
        assert n * 4000 <= HELD_MAX_BYTES + 8000
        emu.thread.join(0.05)
    ch.call("now")
    assert len(emu.got) == n + 1 and emu.got[-1]["op"] == "now"


@pytest.mark.parametrize("head", [
    {"ctx": 0, "dest": 1, "tag": 7, "mode": "std", "nb": True, "call": "Isend", "quiet": True, "rid": RID_BASE,
     "op": "send"},
    {"ctx": 0, "source": -2, "tag": -1, "nb": True, "call": "Irecv", "quiet": True, "rid": RID_BASE + 5, "op": "recv",
     "cpu": 2.5e-06},
    {"ids": [3, RID_BASE], "mode": "all", "test": False, "call": "Waitall", "keep": False, "op": "wait"},
])
def test_the_held_calls_heads_go_binary(head):
    b = wire.encode_head(head)
    assert b[0] & ~wire.CPU_FLAG < 0x20
    assert wire.decode_head(b) == head


def test_the_clock_reading_is_not_charged_to_the_program(monkeypatch):
    """Between the library's return and the program's next call the CPU clock is read once (a system
    call): its cost, the median of back-to-back readings, is taken off; the program's own time stays."""
    import time

    from emu.rank import channel, charging

    ticks = iter([0.0, 2e-6, 10.0, 10.000003, 20.0, 20.000002, 30.0, 30.000009, 40.0, 40.000002])
    monkeypatch.setattr(time, "process_time", lambda: next(ticks))
    assert abs(channel.clock_cost(5) - 2e-6) < 1e-12  # gaps 2, 3, 2, 9, 2 us: the median
    ch = channel.CHANNEL
    monkeypatch.setattr(ch, "clock_cost", 2e-6)
    monkeypatch.setattr(ch, "app_cpu", 0.0)
    monkeypatch.setattr(ch, "depth", 0)
    clock = iter([1.0, 1.5, 1.5000051, 1.6, 1.6000015, 1.7])
    monkeypatch.setattr(ch, "t_out", 0.0)
    monkeypatch.setattr(charging.time, "process_time", lambda: next(clock))
    f = charging._timed(lambda: None)
    monkeypatch.setattr(ch, "t_out", 1.0 - 7e-6)  # the library returned 7 us of CPU before the first call
    f()  # entry at 1.0: 7 - 2 = 5 us the program's
    f()  # 1.5 -> 1.5000051: 5.1 - 2 = 3.1 us
    f()  # 1.6 -> 1.6000015: less than the clock's cost, nothing
    assert abs(ch.app_cpu - 8.1e-6) < 1e-12, ch.app_cpu
