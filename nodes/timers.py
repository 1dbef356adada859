"""One virtual-time timer queue per node, shared by the parts of an engine (NIC and host)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class Timers:
    """Calls ``fn(arg)`` at virtual times; ties run in the order they were set (DESIGN.md
    principle 10). ``next`` is what the engine reports as its ``timer``."""

    __slots__ = ("_heap", "_seq", "_cancelled")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable, Any]] = []
        self._seq = 0
        self._cancelled: set[int] = set()

    def at(self, t: int, fn: Callable, arg: Any) -> int:
        """Call ``fn(arg)`` at virtual time ``t``; returns an id for :meth:`cancel`."""
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn, arg))
        return self._seq

    def cancel(self, timer_id: int) -> None:
        """Forget a timer: it neither runs nor keeps the element (and the run) going."""
        self._cancelled.add(timer_id)

    def run_due(self, now: int) -> None:
        """Run every timer due at or before ``now``, in order."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, tid, fn, arg = heapq.heappop(heap)
            if tid in self._cancelled:
                self._cancelled.discard(tid)
                continue
            fn(arg)

    @property
    def next(self) -> int | None:
        heap = self._heap
        while heap and heap[0][1] in self._cancelled:
            self._cancelled.discard(heapq.heappop(heap)[1])
        return heap[0][0] if heap else None
