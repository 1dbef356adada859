"""Where a run's wall-clock time goes, process by process: with ``EMU_TIMELINE=FILE`` in the
environment, each process of the run (the ``emu`` command, its worker processes) appends a line
``PID MONOTONIC_S CPU_S WHAT`` to FILE at each step of its start-up, run and teardown
(``scripts/bench_processes.py`` reads it back). The monotonic clock is the machine's, common to
its processes; the CPU seconds are the process's own. Without the variable ``mark`` does nothing.
A cost figure only: nothing in the model depends on it."""

from __future__ import annotations

import os
import time

PATH = os.environ.get("EMU_TIMELINE") or None


def mark(what: str) -> None:
    """One step of this process reached (``what``: one word, or words joined by '-')."""
    if PATH is None:
        return
    line = f"{os.getpid()} {time.monotonic():.6f} {time.process_time():.6f} {what}\n"
    fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:  # one write of a short line with O_APPEND: the processes' lines do not interleave
        os.write(fd, line.encode())
    finally:
        os.close(fd)


async def run_begin(handles: list) -> list[float] | None:
    """With a timeline: each process's CPU seconds now (a line ``run-before CPU0 CPU1 ...``), and its
    CPU at each window's start recorded from now on (``Domain.rpc_cpu_marks``); None without one."""
    if PATH is None:
        return None
    before = [(await h.call("cpu"))["process_s"] for h in handles]
    mark("run-before " + " ".join(f"{x:.6f}" for x in before))  # (each process's CPU as the run begins)
    for h in handles:
        await h.call("cpu_marks", True)
    return before


async def run_end(handles: list, before: list[float] | None) -> None:
    """With a timeline (``before``: ``run_begin``'s): a line ``run-critical CRIT CPU0 CPU1 ...``: the
    run's critical path in CPU seconds (window by window the busiest process's CPU from one window's
    start to the next, summed: what the run would take with a core per process and instant
    messages) and each process's CPU over the run, in domain order; then ``waits``' line
    ``run-wait ...``: what the per-window imbalance costs each process."""
    if before is None:
        return
    marks = [await h.call("cpu_marks", False) for h in handles]
    after = [(await h.call("cpu"))["process_s"] for h in handles]
    crit = critical_path(before, marks, after)
    mark("run-critical " + " ".join(f"{x:.6f}" for x in [crit, *(a - b for a, b in zip(after, before))]))
    rounds, waited, slowest = waits(before, marks, after)
    mark(f"run-wait {rounds} " + " ".join(f"{x:.6f}" for x in waited) + " " + " ".join(map(str, slowest)))


def critical_path(before: list[float], marks: list[list[float]], after: list[float]) -> float:
    """Window by window the busiest process's CPU from one window's start to the next (the run's
    start and end included), summed. ``marks[d]``: process ``d``'s CPU at each window's start."""
    cuts = [[b, *m, a] for b, m, a in zip(before, marks, after)]
    if len({len(c) for c in cuts}) != 1:
        raise ValueError("the processes recorded different numbers of windows")
    return sum(max(c[i + 1] - c[i] for c in cuts) for i in range(len(cuts[0]) - 1))


def waits(before: list[float], marks: list[list[float]], after: list[float]) -> tuple[int, list[float], list[int]]:
    """In the critical path's model (``critical_path``): the number of windows (the intervals from
    one window's start to the next), how long each process waited for the busiest one, summed over
    them (its idle CPU seconds with a core per process: the cost of the per-window imbalance), and
    in how many of them each process was the busiest. With a timeline, ``run_end`` writes them as
    ``run-wait WINDOWS WAIT0 WAIT1 ... SLOWEST0 SLOWEST1 ...``."""
    cuts = [[b, *m, a] for b, m, a in zip(before, marks, after)]
    if len({len(c) for c in cuts}) != 1:
        raise ValueError("the processes recorded different numbers of windows")
    waited = [0.0] * len(cuts)
    slowest = [0] * len(cuts)
    for i in range(len(cuts[0]) - 1):
        spans = [c[i + 1] - c[i] for c in cuts]
        top = max(spans)
        slowest[spans.index(top)] += 1
        for d, x in enumerate(spans):
            waited[d] += top - x
    return len(cuts[0]) - 1, waited, slowest
