"""``emu mpirun``: how the emulator tells a rank that computes from one that stopped or died.

While a rank computes, the emulator waits for its next call on the rank's channel. It looks at
the rank's process every ``EMU_MPIRUN_CHECK_S`` seconds (default 2) of that wait: a process
stopped (``/proc/PID/stat`` state ``T``: SIGSTOP, SIGTSTP) at two looks in a row, or gone (a
zombie, or no longer there), is a failure the job ends with; one that runs or sleeps is computing,
however long -- it is never ended for that, and every ``PROGRESS_S`` seconds a note says so.

A rank whose every thread sleeps, at a look and at a second one ``OUTSIDE_RELOOK_S`` later, in a
system call that waits for a file descriptor or a child (``accept``, ``connect``, ``read``, ``poll``,
``select``, ``wait4``...; not a timed sleep), its CPU time unchanged between the two, waits for
something outside MPI -- another rank's socket, a pipe, a process: its *outside* wait
(``wait_outside``). Since the emulator runs the ranks one at a time, waiting for this one would hold
the one it waits for; instead the world goes on in virtual time, in steps of ``OUTSIDE_STEP_NS``,
until the rank's next call comes (taken at the virtual time it comes). Only such waits -- never a computing or sleeping rank -- move virtual time by
what happens in wall time. (x86-64 Linux, where ``/proc/PID/task/TID/syscall`` says the call.)
"""

from __future__ import annotations

import logging
import os
import platform
import select
import signal
import time

from emu.rank.wire import FLUSH_SIGNAL

log = logging.getLogger(__name__)
DEFAULT_CHECK_S = 2.0
PROGRESS_S = 60.0
OUTSIDE_STEP_NS = 1000
"""Virtual time that passes between two looks at the channel of a rank waiting outside MPI."""
OUTSIDE_RELOOK_S = 0.2
"""Seconds between the two looks that find a rank waiting outside MPI."""
WAITING_CALLS = {0: "read", 7: "poll", 19: "readv", 23: "select", 42: "connect", 43: "accept", 45: "recvfrom",
                 47: "recvmsg", 61: "wait4", 232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll",
                 281: "epoll_pwait", 288: "accept4", 441: "epoll_pwait2"}
"""x86-64 system calls that wait for a file descriptor or a child, by number."""
TIMED_SLEEPS = {35, 230}
"""nanosleep, clock_nanosleep: a thread in one of them wakes by itself (the rank is not waiting outside)."""


class Outside(Exception):
    """The rank waits outside MPI (``Watch.look``): the emulator goes on without its next call."""


def outside_call(pid: int) -> str | None:
    """The system call process ``pid`` waits in when every thread of it sleeps and one waits for a file
    descriptor or a child (none in a timed sleep); else None -- also where the kernel does not say."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    found = None
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "S":
                    return None
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                first = f.read().split()[0]
            if first == "running" or not first.lstrip("-").isdigit():
                return None
            nr = int(first)
            if nr in TIMED_SLEEPS:
                return None
            found = found or WAITING_CALLS.get(nr)
    except (OSError, IndexError, ValueError):
        return None
    return found


def cpu_ticks(pid: int) -> int | None:
    """User and system CPU time of process ``pid`` (all its threads), in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


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
        self.outside: tuple[str, int] | None = None
        """(system call, CPU ticks) when a look last found the rank waiting outside MPI."""

    def start(self) -> None:
        """The wait begins (the rank got its answer and runs the program)."""
        self.since, self.stopped, self.noted = time.monotonic(), 0, 0.0
        self.outside = None

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
        call = outside_call(self.pid) if state == "S" else None
        if call is not None:  # a second look, a moment later: the same call, no CPU time spent between
            ticks = cpu_ticks(self.pid)
            time.sleep(OUTSIDE_RELOOK_S)
            if outside_call(self.pid) == call and cpu_ticks(self.pid) == ticks:
                self.outside = (call, ticks)
                return "outside"
        if now - self.since >= PROGRESS_S * (1 + self.noted):
            self.noted += 1
            log.warning("emu mpirun: rank %d (pid %d) has computed for %d s since its last MPI call "
                        "(state %s); still waiting", self.rank, self.pid, now - self.since, state)
        return None


async def wait_outside(st) -> tuple[dict, bytearray]:
    """Rank ``st`` waits outside MPI: ask it for the calls it holds (``FLUSH_SIGNAL``), and let virtual
    time pass, a step at a time, until its next call is on its channel; that call. A look at its
    process every ``check_interval()`` (stopped, gone)."""
    watch, reader = st.job.watches[st.rank], st.job.readers[st.rank]
    if not st.outside:
        log.info("emu mpirun: rank %d (pid %d) waits outside MPI (%s) at %d ns: the other ranks go on",
                 st.rank, watch.pid, watch.outside[0] if watch.outside else "?", st.host.now)
        try:  # the calls it holds (sends that need no answer) are to go now
            os.kill(watch.pid, FLUSH_SIGNAL)
        except OSError:
            pass
    every, last = check_interval(), time.monotonic()
    while not reader.pending():
        if select.select([st.conn], [], [], 0.001)[0]:
            break
        if time.monotonic() - last >= every:
            last = time.monotonic()
            st.job.look(st.rank, outside=False)
        await st.host.sleep(OUTSIDE_STEP_NS)
    head, payload = st.read()
    st.outside = bool(head.get("quiet"))  # it still waits outside: its next call comes the same way
    return head, payload


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
