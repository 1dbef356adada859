"""``emu mpirun``: how the emulator tells a rank that computes from one that stopped or died.

While a rank computes, the emulator waits for its next call on the rank's channel. It looks at
the rank's process every ``EMU_MPIRUN_CHECK_S`` seconds (default 2) of that wait: a process
stopped (``/proc/PID/stat`` state ``T``: SIGSTOP, SIGTSTP) at two looks in a row, or gone (a
zombie, or no longer there), is a failure the job ends with; one that runs or sleeps is computing,
however long -- it is never ended for that, and every ``PROGRESS_S`` seconds a note says so.
"""

from __future__ import annotations

import logging
import os
import signal
import time

log = logging.getLogger(__name__)
DEFAULT_CHECK_S = 2.0
PROGRESS_S = 60.0


def check_interval() -> float:
    """Seconds between two looks at a rank that keeps the emulator waiting (``EMU_MPIRUN_CHECK_S``)."""
    raw = os.environ.get("EMU_MPIRUN_CHECK_S", "")
    try:
        v = float(raw) if raw else DEFAULT_CHECK_S
    except ValueError:
        v = DEFAULT_CHECK_S
    return v if 0.01 <= v <= 3600 else DEFAULT_CHECK_S


def proc_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (R, S, D, T, t, Z, ...); None when it is not there."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


class Watch:
    """The looks at one rank's process while the emulator waits for its next call."""

    def __init__(self, rank: int, pid: int):
        self.rank, self.pid = rank, pid
        self.since = 0.0
        self.stopped = 0
        self.noted = 0.0

    def start(self) -> None:
        """The wait begins (the rank got its answer and runs the program)."""
        self.since, self.stopped, self.noted = time.monotonic(), 0, 0.0

    def look(self) -> str | None:
        """One look, after an interval without a call: why the rank is a failure, or None."""
        now = time.monotonic()
        if not self.since:
            self.since = now - check_interval()
        state = proc_state(self.pid)
        if state is None or state in ("Z", "X", "x"):
            return "gone"
        if state == "T":
            self.stopped += 1
            return "stopped" if self.stopped >= 2 else None
        self.stopped = 0
        if now - self.since >= PROGRESS_S * (1 + self.noted):
            self.noted += 1
            log.warning("emu mpirun: rank %d (pid %d) has computed for %d s since its last MPI call "
                        "(state %s); still waiting", self.rank, self.pid, now - self.since, state)
        return None


def signal_text(returncode: int) -> str:
    """How a process ended, as a person reads it: ``Killed (signal 9)``, ``exit code 3``."""
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.strsignal(sig) or signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"{name} (signal {sig})"
    return f"exit code {returncode}"


def bad_termination(pid: int, where: str, returncode: int) -> str:
    """The lines hydra (MPICH's mpiexec) prints when a rank's process ends badly, for this one."""
    code = -returncode if returncode < 0 else returncode
    bar = "=" * 83
    lines = ["", bar, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", f"=   PID {pid} RUNNING AT {where}",
             f"=   EXIT CODE: {code}", "=   CLEANING UP REMAINING PROCESSES",
             "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES", bar]
    if returncode < 0:
        lines += [f"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: {signal_text(returncode)}",
                  "This typically refers to a problem with your application.",
                  "Please see the FAQ page for debugging suggestions"]
    return "\n".join(lines)
