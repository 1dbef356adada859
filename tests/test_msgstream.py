"""emu.sync.MsgStream: the control connection's messages -- the synchroniser's per-window ones packed
as integers (never unpickled), anything else pickled -- come out as they went in, over a socket
(direct non-blocking reads and writes) and over any other trio stream (trio's own calls)."""

import pickle
import socket

import pytest
import trio
import trio.testing

from emu import sync
from emu.errors import EmuError
from emu.sync import MsgStream

MESSAGES = [
    ("window", (1, 2, 3, 4)),  # packed
    ("ok", ([1, 2, 3], 1 << 62, 5)),  # packed (INF as the next time)
    ("ok", ([], 0, 0)),  # packed
    ("ok", ([-1, 2], -5, 7)),  # packed
    ("ok", ([1 << 64], 1, 2)),  # beyond 64 bits: pickled
    ("window", (1, 2, 3, True)),  # a bool is not an int here: pickled (and stays a bool)
    ("ok", ([1], 2, 3.0)),  # a float: pickled
    ("window", (1, 2, 3)),  # not a window request's shape: pickled
    ("err", ValueError("x")),
    ({"a": 1}, 3),
    "plain",
]


def same(a, b) -> bool:
    """Equal, and of the same types all the way down (a pickle's round trip would give ``a``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, BaseException):
        return a.args == b.args
    return a == b


def packed(obj) -> bool:
    return MsgStream.encode(obj)[0] != 0  # (the kind, in the header's top byte)


def test_window_messages_packed_the_rest_pickled():
    assert [packed(m) for m in MESSAGES] == [True] * 4 + [False] * 7


@pytest.mark.parametrize("over", ["socket", "memory"])
def test_round_trip(over, monkeypatch):
    pickled = []
    loads = pickle.loads

    def counted(data):
        pickled.append(bytes(data))
        return loads(data)

    monkeypatch.setattr(sync.pickle, "loads", counted)

    async def main():
        if over == "socket":
            a, b = trio.socket.socketpair()
            sa, sb = trio.SocketStream(a), trio.SocketStream(b)
        else:
            sa, sb = trio.testing.memory_stream_pair()
        out, inn = MsgStream(sa), MsgStream(sb)

        async def send_all():  # (more than CHECKPOINT_EVERY: the periodic checkpoint too)
            for m in MESSAGES * 100:
                await out.send(m)
            await out.aclose()

        async with trio.open_nursery() as nursery:  # (the sender waits when the socket is full)
            nursery.start_soon(send_all)
            for m in MESSAGES * 100:
                got = await inn.recv()
                assert same(got, m), (got, m)
        with pytest.raises(EOFError):
            await inn.recv()
        await inn.aclose()

    trio.run(main)
    assert len(pickled) == 7 * 100  # the packed ones were never unpickled


def test_dribbled_bytes_and_unknown_kind():
    """A message that comes a byte at a time is read whole; a header of a kind nobody sends is refused."""
    async def main():
        a, b = socket.socketpair()
        inn = MsgStream(trio.SocketStream(trio.socket.from_stdlib_socket(b)))
        data = b"".join(MsgStream.encode(m) for m in MESSAGES[:3])

        async def dribble():
            for i in range(len(data)):
                a.send(data[i:i + 1])
                await trio.sleep(0)
            a.send(MsgStream._LEN.pack(9 << 56 | 8) + bytes(8))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dribble)
            for m in MESSAGES[:3]:
                assert same(await inn.recv(), m)
            with pytest.raises(EmuError, match="unknown kind 9"):
                await inn.recv()
        a.close()
        await inn.aclose()

    trio.run(main)


def test_cancelled_while_waiting_then_read():
    """A recv cancelled while nothing had come leaves the connection usable."""
    async def main():
        a, b = trio.socket.socketpair()
        out, inn = MsgStream(trio.SocketStream(a)), MsgStream(trio.SocketStream(b))
        with trio.move_on_after(0.05) as scope:
            await inn.recv()
        assert scope.cancelled_caught
        await out.send(("window", (5, 6, 7, 8)))
        assert await inn.recv() == ("window", (5, 6, 7, 8))
        await out.aclose()
        await inn.aclose()

    trio.run(main)


def test_coordination_bench_runs():
    """scripts/bench_coordination.py's measured loop: 7 worker processes answer 20 windows' requests,
    every answer checked (its checksum), without valgrind."""
    import os
    import pathlib
    import subprocess
    import sys

    home = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(home / "scripts" / "bench_coordination.py"), "--tree", str(home),
                           "--windows", "20", "--run"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(home)})
    assert done.returncode == 0, done.stderr[-500:]
