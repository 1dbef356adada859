"""The compiled core's deque work (emu/csrc/common.h's ``dq_`` helpers) is the pure Python's twin.

The core calls collections.deque's own append/popleft, reads a deque's first item in place, and
makes an output port's queued (done, bytes) and pending (start, arrival, frame, pool) entries again
from those that left -- only when nobody else holds them. A port's queue has no limit (nothing is
dropped for room), so these check long queues (across the deque's 64-item blocks), entries that
leave and come in every order, and entries someone still holds, which must stay as they were.
"""

import heapq
import random
from collections import deque

import pytest

from emu import native
from emu.element import CLEAN, POOL
from emu.link import LinkSender
from emu.port import OutPort
from emu.wire import build_frame

CORE = native.CORE
pytestmark = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _port() -> OutPort:
    return OutPort(index=0, name="p", iface=0, link_id=0, peer="x", peer_port_name="x-p", latency_ns=100,
                   bandwidth_bps=10_000_000_000)


def _state(p: OutPort) -> tuple:
    return (p.free_at, p.busy_ns, list(p.queued), p.queued_bytes, p.peak_queue_frames, p.peak_queue_bytes,
            list(p.pending))


def _hand_over(pend: deque, heap: list, seq: int, release: int) -> int:
    """emu's loop that CORE.hand_over stands in for (tests/test_native.py's reference)."""
    while pend and pend[0][1] < release:
        _, arrival, frame, pool = pend.popleft()
        heapq.heappush(heap, (arrival, 5, seq, frame, CLEAN | POOL if pool else CLEAN))
        seq = (seq + 1) & 0xFFFFFFFF
    return seq


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_queued_and_pending_entries_made_again_are_the_ports(seed):
    """Bursts of up to 300 frames (queues across the deque's blocks) and gaps that empty them, the
    pending entries handed over in between: the core's port and heap end as Python's, step by step,
    and every entry someone kept (a list of the queues, taken now and then) is as it was."""
    rng = random.Random(seed)
    a, b = _port(), _port()
    heap_a, heap_b = [], []
    seq_a = seq_b = 0
    at = 0
    kept = []  # (a tuple someone holds, its items in a list: tuple() of a tuple is the tuple itself)
    for step in range(40):
        for _ in range(rng.choice([1, 5, 70, 300])):
            at += rng.choice([0, 0, 10, 300])
            frame = build_frame(1, 2, 1, bytes(rng.randrange(0, 1500)))
            start = CORE.enqueue(a, frame, at)
            assert start is not None and start == b.enqueue(frame, at)
            if rng.random() < 0.05:
                kept += [(e, list(e)) for e in list(a.queued)[:3] + list(a.pending)[:3]]
        release = at + rng.choice([0, 500, 50_000, 10**7])
        got = CORE.hand_over(a.pending, heap_a, 5, seq_a, CLEAN, release, POOL)
        seq_a = got[2]
        seq_b = _hand_over(b.pending, heap_b, seq_b, release)
        assert seq_a == seq_b and heap_a == heap_b and _state(a) == _state(b)
        at += rng.choice([0, 100, 10**6])
        if rng.random() < 0.3:
            heap_a.clear(), heap_b.clear()
    assert all(list(e) == copy for e, copy in kept) and len(kept) > 10


def test_take_and_enqueue_share_the_kept_entries():
    """LinkSender.take's twin (links.h, through pop_due) gives up the pending entries it takes; the
    port's next enqueues make theirs from them: datagrams, retained copies and the port as Python's."""
    rng = random.Random(5)
    a, b = _port(), _port()
    sa, sb = LinkSender(0xC0FFEE, 7), LinkSender(0xC0FFEE, 7)
    at = 0
    for step in range(30):
        for _ in range(rng.choice([1, 20, 90])):
            at += rng.choice([0, 50, 400])
            frame = build_frame(1, 2, 1, bytes(rng.randrange(0, 1500)))
            assert CORE.enqueue(a, frame, at) == b.enqueue(frame, at)
        release = at + rng.choice([0, 2000, 10**7])
        assert CORE.take(sa, a.pending, release, 0x1234) == sb.take(b.pending, release, 0x1234)
        assert list(sa.retained) == list(sb.retained) and sa.seq == sb.seq and _state(a) == _state(b)


def test_a_deque_of_pythons_entries_and_a_held_head():
    """Entries Python made (its tuples, GC-tracked) and one the caller still holds at the head: taken
    as they are, the held one left whole, and the port goes on as Python's."""
    a, b = _port(), _port()
    frames = [build_frame(1, 2, 1, bytes(n)) for n in (64, 300, 1400, 9000 - 64)]
    for k, f in enumerate(frames):
        assert a.enqueue(f, 10 * k) == b.enqueue(f, 10 * k)  # Python's entries in both
    held, copy = a.pending[0], list(a.pending[0])  # (a list: tuple() of a tuple is the tuple itself)
    heap_a, heap_b = [], []
    got = CORE.hand_over(a.pending, heap_a, 5, 0, CLEAN, 10**9, POOL)
    assert got[2] == _hand_over(b.pending, heap_b, 0, 10**9) and heap_a == heap_b
    assert list(held) == copy
    for k, f in enumerate(frames * 30):
        at = 10**6 + 97 * k
        assert CORE.enqueue(a, f, at) == b.enqueue(f, at)
    assert _state(a) == _state(b) and list(held) == copy
