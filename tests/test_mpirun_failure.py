"""``emu mpirun`` when a rank fails as mpiexec's do: killed by a signal, stopped, or orphaned.

A rank killed by a signal ends the job with hydra's (MPICH's mpiexec) message and exit status; a
stopped rank is reported with its rank and pid (``EMU_MPIRUN_CHECK_S`` makes the looks at it
frequent here); a rank that computes long is left alone; the emulator's death takes the ranks with
it; an ``MPI.Exception`` leaves the library usable."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from emu.front.mpirun import run_program
from emu.front.mpiwatch import bad_termination, proc_state

KILLED = """
import os, signal
from mpi4py import MPI
if MPI.COMM_WORLD.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
else:
    MPI.COMM_WORLD.barrier()
"""


def _banner(text: str) -> list[str]:
    """hydra's message, its PID line aside (the pid and the host differ)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("====="))
    return [ln for ln in lines[at:] if not ln.startswith("=   PID ")]


def test_a_killed_rank_ends_the_job_as_mpiexec_says_it(tmp_path):
    res = run_program(KILLED, n=2, topo="star:n=2", workdir=str(tmp_path))
    assert res.returncode == 9, res
    assert "Traceback" not in res.stderr and "RankFailed" not in res.stderr
    assert "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in res.stderr
    assert "=   EXIT CODE: 9" in res.stderr
    assert "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)" in res.stderr
    assert " RUNNING AT h1 (rank 1)" in res.stderr
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    if mpiexec is None:
        pytest.skip("no MPICH mpiexec beside this Python to compare with")
    prog = tmp_path / "killed.py"
    prog.write_text(KILLED)
    ref = subprocess.run([mpiexec, "-n", "2", sys.executable, str(prog)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=""))
    assert ref.returncode == res.returncode
    assert _banner(ref.stdout + ref.stderr) == _banner(res.stderr)


def test_the_banner_of_an_exit_code():
    text = bad_termination(42, "h3 (rank 3)", 3)
    assert "=   PID 42 RUNNING AT h3 (rank 3)" in text and "=   EXIT CODE: 3" in text
    assert "EXIT STRING" not in text  # hydra says that only of a signal


STOPPED = """
import os, signal
from mpi4py import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    print("pid", os.getpid(), flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
comm.Barrier()
print("not reached")
"""


def test_a_stopped_rank_is_reported_with_its_rank_and_pid(tmp_path, monkeypatch):
    monkeypatch.setenv("EMU_MPIRUN_CHECK_S", "0.2")
    res = run_program(STOPPED, n=2, topo="star:n=2", workdir=str(tmp_path), timeout_s=120)
    assert res.returncode == 1, res
    pid = int(next(ln.split()[1] for ln in res.stdout.splitlines() if ln.startswith("pid ")))
    assert f"rank 1 (h1) failed: the process (pid {pid}) is stopped" in res.stderr, res.stderr
    assert "not reached" not in res.stdout
    assert proc_state(pid) in (None, "Z")  # ended with the job


LONG = """
import time
from mpi4py import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    t = time.monotonic()
    while time.monotonic() - t < 1.5:  # computing, far longer than the looks at it (0.1 s)
        sum(range(1000))
    time.sleep(0.5)
comm.Barrier()
print("done", comm.rank)
"""


def test_a_rank_computing_long_is_not_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("EMU_MPIRUN_CHECK_S", "0.1")
    res = run_program(LONG, n=2, topo="star:n=2", workdir=str(tmp_path), timeout_s=120)
    assert res.returncode == 0, res
    assert sorted(res.stdout.split("\n")[:2]) == ["done 0", "done 1"]


ORPHAN = """
import os, sys
from mpi4py import MPI  # (rank 1 waits for its first answer while rank 0 computes)
with open(os.path.join(sys.argv[1], "computing"), "w") as f:
    f.write(str(os.getpid()))
while True:  # computing when the emulator dies
    sum(range(1000))
"""


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_the_emulator_dying_leaves_no_rank_behind(tmp_path):
    prog = tmp_path / "orphan.py"
    prog.write_text(ORPHAN)
    emu = subprocess.Popen([sys.executable, "-m", "emu", "mpirun", "-n", "2", "--topo", "star:n=2", str(prog),
                            str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "computing").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # (the file's content written)
        computing = int((tmp_path / "computing").read_text())
        pids = _children(emu.pid)
        assert len(pids) == 2 and computing in pids  # both ranks there: one computes, one waits
        assert all(proc_state(p) not in (None, "Z") for p in pids)
    finally:
        emu.send_signal(signal.SIGKILL)
        emu.wait()
    deadline = time.monotonic() + 30
    while any(proc_state(p) not in (None, "Z") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [proc_state(p) for p in pids if proc_state(p) not in (None, "Z")] == []


USABLE = """
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
a = np.arange(4, dtype="i8") * (rank + 1)
b = np.zeros(4, "i8")
for bad in (lambda: comm.Send(a, dest=5), lambda: comm.Recv(b, source=7), lambda: comm.Send(a, dest=1 - rank, tag=-4)):
    try:
        bad()
        print("no error")
    except MPI.Exception as e:
        print("error", e.Get_error_class())
t0 = MPI.Wtime()
if rank == 0:
    comm.Send(a, dest=1, tag=3)
    comm.Recv(b, source=1, tag=4)
else:
    comm.Recv(b, source=0, tag=3)
    comm.Send(a, dest=0, tag=4)
t1 = MPI.Wtime()
comm.Barrier()
print("got", b.tolist(), "later", t1 > t0)
"""


def test_a_failed_call_leaves_the_library_usable(tmp_path):
    res = run_program(USABLE, n=2, topo="star:n=2", tag_output=True, workdir=str(tmp_path))
    assert res.returncode == 0, res
    assert res.lines(0) == ["error 6", "error 6", "error 4", "got [0, 2, 4, 6] later True"]
    assert res.lines(1) == ["error 6", "error 6", "error 4", "got [0, 1, 2, 3] later True"]


STOPPED_IN_A_CALL = """
import os, signal, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
path = os.path.join(sys.argv[1], "pid1")
if comm.rank == 1:
    with open(path, "w") as f:
        f.write(str(os.getpid()))
comm.Barrier()
if comm.rank == 0:
    pid = int(open(path).read())
    os.kill(pid, signal.SIGSTOP)  # rank 1 waits in its Recv below (or is about to)
    while open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "T":
        time.sleep(0.01)
    print("pid", pid, flush=True)
comm.recv(source=1 - comm.rank)
"""


def test_a_rank_stopped_in_a_call_is_reported_not_a_deadlock(tmp_path, monkeypatch):
    monkeypatch.setenv("EMU_MPIRUN_CHECK_S", "0.2")
    res = run_program(STOPPED_IN_A_CALL, n=2, topo="star:n=2", args=[str(tmp_path)], workdir=str(tmp_path),
                      timeout_s=120)
    assert res.returncode == 1, res
    pid = int(next(ln.split()[1] for ln in res.stdout.splitlines() if ln.startswith("pid ")))
    assert f"rank 1 (h1) failed: the process (pid {pid}) is stopped" in res.stderr, res.stderr
    assert "deadlock" not in res.stderr
