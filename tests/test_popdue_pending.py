"""The compiled core's pop_due (``emu/csrc/common.h``: an output port's pending entries due before
a release, taken by hand_over and take) reads a deque's head in place, borrowed, and any other
queue by the sequence protocol (pd_pop_due_any): both take what Python's loop takes, leave what it
leaves, and a pending entry someone holds keeps its items."""

import heapq
import random
from collections import deque

import pytest

from emu import native
from emu.element import CLEAN, POOL
from emu.link import LinkSender

CORE = native.CORE
pytestmark = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


class Pending(deque):
    """A deque of another class: not read in place (its own len, [0] and popleft)."""

    __slots__ = ()


def _entries(seed: int) -> list:
    rng = random.Random(seed)
    return [(t, t + 100, bytes(rng.randrange(60, 1500)), rng.random() < 0.3) for t in range(0, 9000, 61)]


def _reference(pend: deque, heap: list, seq: int, release: int) -> tuple:
    """the loop CORE.hand_over stands in for"""
    n = nbytes = 0
    last = -1
    while pend and pend[0][1] < release:
        _, last, frame, pool = pend.popleft()
        heapq.heappush(heap, (last, 5, seq, frame, CLEAN | POOL if pool else CLEAN))
        seq = (seq + 1) & 0xFFFFFFFF
        n += 1
        nbytes += len(frame)
    return n, nbytes, seq, last


@pytest.mark.parametrize("kind", [deque, Pending])
@pytest.mark.parametrize("seed", [1, 2])
def test_hand_over_takes_what_python_takes_from_any_queue(kind, seed):
    entries = _entries(seed)
    pend, ref = kind(entries), deque(entries)
    held = [(e, list(e)) for e in entries[::7]]  # (some entries held: taken as they are, left whole)
    heap, ref_heap = [], []
    seq = ref_seq = 0xFFFFFF00
    for release in (0, 150, 151, 2000, 2000, 5100, 10**9, 10**9):
        got = CORE.hand_over(pend, heap, 5, seq, CLEAN, release, POOL)
        want = _reference(ref, ref_heap, ref_seq, release)
        assert got == want and heap == ref_heap and list(pend) == list(ref)
        seq, ref_seq = got[2], want[2]
    assert not pend and all(list(e) == copy for e, copy in held)


@pytest.mark.parametrize("kind", [deque, Pending])
def test_take_takes_what_python_takes_from_any_queue(kind):
    entries = _entries(3)
    a, b = LinkSender(0xC0FFEE, 7), LinkSender(0xC0FFEE, 7)
    pa, pb = kind(entries), deque(entries)
    for release in (0, 1000, 1000, 4000, 10**9):
        assert CORE.take(a, pa, release, 0x1234) == b.take(pb, release, 0x1234)
        assert list(pa) == list(pb) and list(a.retained) == list(b.retained) and a.seq == b.seq


def test_a_pending_entry_that_is_not_a_4_tuple_is_a_clear_error():
    for kind in (deque, Pending):
        with pytest.raises(TypeError, match="pending entry is not a 4-tuple"):
            CORE.hand_over(kind([(0, 1, b"x")]), [], 5, 0, CLEAN, 10, POOL)
