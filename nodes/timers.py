"""One virtual-time timer queue per node, shared by the parts of an engine (NIC and host)."""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any


class Timers:
    """Calls ``fn(arg)`` at virtual times; ties run in the order they were set (DESIGN.md
    principle 10). ``next`` is what the engine reports as its ``timer``."""

    __slots__ = ("_heap", "_seq", "_cancelled", "next")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable, Any]] = []
        self._seq = 0
        self._cancelled: set[int] = set()
        """Ids of cancelled timers still in the heap (they leave it when they reach its head)."""
        self.next: int | None = None
        """Time of the earliest timer not cancelled (None: none), kept so by every method: the heap's
        head is never a cancelled timer."""

    def at(self, t: int, fn: Callable, arg: Any) -> int:
        """Call ``fn(arg)`` at virtual time ``t``; returns an id for :meth:`cancel`."""
        self._seq = seq = self._seq + 1
        heappush(self._heap, (t, seq, fn, arg))
        nxt = self.next
        if nxt is None or t < nxt:
            self.next = t
        return seq

    def cancel(self, timer_id: int) -> None:
        """Forget a timer: it neither runs nor keeps the element (and the run) going."""
        self._cancelled.add(timer_id)
        heap = self._heap
        if heap and heap[0][1] == timer_id:
            self._next_live()

    def run_due(self, now: int) -> int | None:
        """Run every timer due at or before ``now``, in order; returns :attr:`next` after them."""
        heap, cancelled = self._heap, self._cancelled
        while heap and heap[0][0] <= now:
            _, tid, fn, arg = heappop(heap)
            if cancelled and tid in cancelled:  # (the set is empty unless something was cancelled)
                cancelled.discard(tid)
                continue
            fn(arg)
        if cancelled:
            return self._next_live()
        self.next = nxt = heap[0][0] if heap else None
        return nxt

    def _next_live(self) -> int | None:
        """Drop the cancelled timers at the heap's head; :attr:`next` from what is left."""
        heap, cancelled = self._heap, self._cancelled
        while heap and heap[0][1] in cancelled:
            cancelled.discard(heappop(heap)[1])
        self.next = nxt = heap[0][0] if heap else None
        return nxt
