"""Worker processes that stop answering: reported, not waited for forever.

A worker that dies closes its control connection, and the call waiting on it fails at once
(``emu.sync.RemoteHandle``). A worker that is stopped (``SIGSTOP``, a debugger) or hung keeps its
connection open and says nothing. :func:`watch_workers` runs beside the synchroniser: a worker that
is stopped (state T or t) and leaves a call unanswered while its CPU time stays the same for
``RunConfig.worker_timeout_s`` is killed, and the run stops with an error naming its domain and
process id. A worker that is merely slow (a long window, a large capture being written) uses CPU;
one that sleeps has answered and waits for the main process to read it (which reads the workers'
answers in domain order): both are left alone. Linux only (it reads ``/proc``); elsewhere nothing
is watched.
"""

from __future__ import annotations

import math
import os
import signal

import trio

from .errors import EmuError

TICK_S = 0.5
"""How often the workers are looked at."""


def cpu_and_state(pid: int) -> tuple[str, int] | None:
    """(state letter, user + system CPU ticks) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[11]) + int(fields[12])


async def watch_workers(handles: list, timeout_s: float | None, tick_s: float = TICK_S) -> None:
    """Raise ``EmuError`` when one of ``handles`` (``RemoteHandle`` with a ``pid``) has left a call
    unanswered, stopped and using no CPU, for ``timeout_s``; runs until cancelled otherwise."""
    if timeout_s is None or not os.path.exists("/proc/self/stat"):
        return
    need = max(1, math.ceil(timeout_s / tick_s))
    seen: dict[int, tuple[int, int, int]] = {}
    """Domain -> (replies read, CPU ticks, looks in a row with neither changing)."""
    while True:
        await trio.sleep(tick_s)
        for h in handles:
            if h.pid is None or h.broken or not h._lock.locked():  # no call outstanding
                seen.pop(h.index, None)
                continue
            st = cpu_and_state(h.pid)
            if st is None or st[0] == "Z":  # gone: its connection closes, and that is reported
                continue
            state, cpu = st
            if state not in "Tt":  # running, or asleep with its answer unread: not stuck
                seen.pop(h.index, None)
                continue
            prev = seen.get(h.index)
            if prev is None or prev[:2] != (h.answered, cpu):
                seen[h.index] = (h.answered, cpu, 0)
                continue
            still = prev[2] + 1
            seen[h.index] = (h.answered, cpu, still)
            if still >= need:
                why = "it is stopped (SIGSTOP or a debugger)"
                try:
                    os.kill(h.pid, signal.SIGKILL)
                except OSError:
                    pass
                raise EmuError(f"worker process of domain {h.index} (pid {h.pid}) has not answered for "
                               f"{still * tick_s:g} s: {why}; it was killed and the run stopped "
                               "(RunConfig.worker_timeout_s)")
