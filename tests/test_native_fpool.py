"""The core's pool of bytes let go (emu/csrc/fpool.h): a frame copied into a datagram (take) and a
datagram a link forgets, held by nobody else, lend their buffers to the next datagram or received
frame of their length. What is written into a buffer used again must be exactly what a new one
would hold: the same bytes as Python's ``LinkSender.take``, and a hash computed afresh."""

import pathlib
import random
import subprocess
import sys
from collections import deque

import pytest

import emu.element  # noqa: F401  (the core learns the classes it reads: its take needs them)
from emu import native
from emu.link import LinkSender
from emu.port import OutPort

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _fresh(data: bytes) -> bytes:
    """A copy of ``data`` nobody else holds (the queue entry made with it will be its only holder)."""
    return bytes(bytearray(data))


def _take(a: LinkSender, b: LinkSender, frames: list[bytes], window: int, t: int) -> list[bytes]:
    """The core's take of ``frames`` on ``a`` and Python's on ``b``: the same datagrams."""
    got = CORE.take(a, deque((0, t + k, _fresh(f), k % 2 == 1) for k, f in enumerate(frames)), t + 10**6, window)
    want = b.take(deque((0, t + k, _fresh(f), k % 2 == 1) for k, f in enumerate(frames)), t + 10**6, window)
    assert got == want and list(a.retained) == list(b.retained)
    for d in got[0]:
        assert hash(d) == hash(bytes(bytearray(d)))  # (no hash of the buffer's last contents kept)
    return got[0]


def check_buffers_let_go_are_used_again_and_written_over_exactly():
    rng = random.Random(5)
    a, b = LinkSender(0xC0FFEE, 4), LinkSender(0xC0FFEE, 4)
    port = OutPort(index=0, name="p", iface=0, link_id=4, peer="x", peer_port_name="x-p", latency_ns=100,
                   bandwidth_bps=10**10, link=a)
    reused = CORE.counts()["reused"]
    n = 700 + rng.randrange(300)
    _take(a, b, [rng.randbytes(n)], 1, 0)  # the frame, copied, lends its buffer
    hash(a.retained[0][3])  # (a hash cached on the datagram, to be forgotten when it is used again)
    [d] = _take(a, b, [rng.randbytes(n - 28)], 2, 100)  # a datagram of n bytes: that buffer
    assert len(d) == n and CORE.counts()["reused"] == reused + 1
    del d
    CORE.forget([port], 2)  # both datagrams let go: theirs lent too (n + 28 and n bytes)
    b.forget(2)
    assert not a.retained and not b.retained
    [d3] = _take(a, b, [rng.randbytes(n - 28)], 3, 200)  # the second datagram's buffer
    [d4] = _take(a, b, [rng.randbytes(n)], 4, 300)  # the first's, its hash cached before
    assert CORE.counts()["reused"] == reused + 3 and len(d3) == n and len(d4) == n + 28


def check_a_frame_someone_else_holds_is_not_lent():
    """A frame the sender's caller still holds keeps its bytes: the pool takes only what nobody holds."""
    a = LinkSender(1, 2)
    n = 4000 + random.Random(7).randrange(900)
    frame = bytes(range(256)) * (n // 256) + bytes(n % 256)
    reused = CORE.counts()["reused"]
    CORE.take(a, deque([(0, 5, frame, False)]), 100, 1)
    CORE.take(a, deque([(0, 6, _fresh(bytes(n - 28)), False)]), 100, 1)  # (a datagram of n bytes)
    assert frame == bytes(range(256)) * (n // 256) + bytes(n % 256) and CORE.counts()["reused"] == reused


@needs_core
@pytest.mark.parametrize("check", ["check_buffers_let_go_are_used_again_and_written_over_exactly",
                                   "check_a_frame_someone_else_holds_is_not_lent"])
def test_pool(check):
    """Each check in a process of its own: a pool nothing else has used (its lengths are few)."""
    code = f"import sys; sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r}); import test_native_fpool as t; t.{check}()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
