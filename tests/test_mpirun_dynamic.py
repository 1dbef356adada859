"""emu mpirun against MPICH on MPI 4 sessions, ports and Spawn (issue 40, rounds 3 and 4): ``Session.Init`` and its
process sets, groups and communicators made from them, errors on null and bad arguments; ``Open_port``,
``Accept``/``Connect`` both ways between a rank and a group of two, the name service, ``Comm.Join``
over a TCP socket the ranks connect themselves (a rank waiting in ``accept`` outside MPI while the one it
waits for must go on: ``emu.front.mpiwatch``); ``Spawn_multiple`` and the children's ``Get_parent``, their
COMM_WORLD, APPNUM, collectives over the intercommunicator and ``Merge``; a Spawn beyond the universe refused."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time

import pytest

from emu.front.mpirun import run_program
from emu.front.mpiwatch import outside_call

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable))

ROW = """
import sys
def row(obj):  # one write: hydra hands a rank's output over in pieces
    sys.stdout.write(f"ROW{r} {obj!r}\\n")
    sys.stdout.flush()
"""
SESSIONS = """
from mpi4py import MPI
r = MPI.COMM_WORLD.rank
""" + ROW + """
s = MPI.Session.Init()
n = s.Get_num_psets()
names = [s.Get_nth_pset(i) for i in range(n)]
sizes = []
for name in names:
    info = s.Get_pset_info(name)
    sizes.append(info.Get("mpi_size"))
    info.Free()
g = s.Create_group("mpi://WORLD")
comm = MPI.Intracomm.Create_from_group(g, "org.test")
total = comm.allreduce(r + 1)
me = MPI.Group.Create_from_session_pset(s, "mpi://SELF")
errs = []
for call, arg in ((s.Get_nth_pset, -1), (s.Get_nth_pset, n), (s.Get_pset_info, "mpi://world"),
                  (s.Create_group, "@qerty!#$"), (MPI.SESSION_NULL.Get_num_psets, None)):
    try:
        call() if arg is None else call(arg)
        errs.append(0)
    except MPI.Exception as e:
        errs.append(e.Get_error_class())
eh = s.Get_errhandler()
row((n, names, sizes, g.size, g.rank, comm.size, comm.rank, total, me.size, me.rank, errs,
          eh == MPI.ERRORS_RETURN, s == MPI.Session(s), bool(s)))
eh.Free(); me.Free(); g.Free(); comm.Free()
s.Finalize()
row(("finalized", bool(s), s == MPI.SESSION_NULL))
"""


def _rows(text: str) -> list[str]:
    """Each rank's rows, sorted -- split where a row starts, not at line ends (hydra may hand two ranks'
    output over with a line end lost between them)."""
    return sorted(r.strip() for r in re.split(r"(?=ROW\d)", text) if r.startswith("ROW"))


def _mpich(program: str, n: int, tmp_path) -> list[str]:
    path = tmp_path / "program.py"
    path.write_text(program)
    ref = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(path)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=""))
    assert ref.returncode == 0, ref.stderr
    return _rows(ref.stdout)


def test_sessions_as_mpich(tmp_path):
    res = run_program(SESSIONS, n=2, topo="star:n=2", timeout_s=120)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    assert ("ROW0 (2, ['mpi://WORLD', 'mpi://SELF'], ['2', '1'], 2, 0, 2, 0, 3, 1, 0, [12, 12, 12, 12, 75], "
                       "True, True, True)") in rows, rows
    assert "ROW1 ('finalized', False, True)" in rows
    if MPIEXEC is None:
        pytest.skip("no mpiexec beside this Python (pip install mpich) to compare with")
    assert rows == _mpich(SESSIONS, 2, tmp_path)


PORTS = """
import socket
from mpi4py import MPI
world = MPI.COMM_WORLD
r = world.rank
""" + ROW + """
others = world.Create(world.Get_group().Excl([0]))
out = []
for acceptor_is_0 in (True, False):
    if r == 0:
        if acceptor_is_0:
            port = MPI.Open_port()
            world.send(port, dest=1)
            inter = MPI.COMM_SELF.Accept(port)
            MPI.Close_port(port)
        else:
            inter = MPI.COMM_SELF.Connect(world.recv(source=1))
    else:
        port = None
        if r == 1 and not acceptor_is_0:
            port = MPI.Open_port()
            world.send(port, dest=0)
        elif r == 1:
            port = world.recv(source=0)
        inter = others.Accept(port) if not acceptor_is_0 else others.Connect(port)
        if port is not None and not acceptor_is_0:
            MPI.Close_port(port)
    got = inter.bcast(["hello", r] if r == 0 else None, MPI.ROOT if r == 0 else 0)
    out.append((inter.size, inter.rank, inter.remote_size, got))
    inter.Free()
port = MPI.Open_port()
MPI.Publish_name(f"svc-{r}", port)
world.Barrier()
found = MPI.Lookup_name(f"svc-{(r + 1) % world.size}") != port
world.Barrier()
MPI.Unpublish_name(f"svc-{r}", port)
MPI.Close_port(port)
try:
    MPI.Lookup_name(f"svc-{r}")
    missing = 0
except MPI.Exception as e:
    missing = e.Get_error_class()
row((out, found, missing))
# Join: ranks 0 and 1 connect a TCP socket themselves (rank 0 waits in accept outside MPI)
if r < 2:
    if r == 0:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        world.send(server.getsockname(), dest=1)
    else:
        address = world.recv(source=0)  # (it comes after rank 0 went into accept)
    if r == 0:
        sock = server.accept()[0]
        server.close()
    else:
        sock = socket.create_connection(address)
    inter = MPI.Comm.Join(sock.fileno())
    sock.close()
    got = inter.bcast("joined" if r == 0 else None, MPI.ROOT if r == 0 else 0)
    row(("join", inter.size, inter.remote_size, got))
    inter.Free()
"""


def test_ports_accept_connect_names_and_join_as_mpich(tmp_path):
    res = run_program(PORTS, n=3, topo="star:n=3", timeout_s=120)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    assert "ROW0 ('join', 1, 1, None)" in rows and "ROW0 ([(1, 0, 2, None), (1, 0, 2, None)], True, 33)" in rows, rows
    assert "ROW2 ([(2, 1, 1, ['hello', 0]), (2, 1, 1, ['hello', 0])], True, 33)" in rows
    assert "ROW1 ('join', 1, 1, 'joined')" in rows
    if MPIEXEC is None:
        pytest.skip("no mpiexec beside this Python (pip install mpich) to compare with")
    assert rows == _mpich(PORTS, 3, tmp_path)


ULFM = """
import struct
from mpi4py import MPI
comm = MPI.COMM_WORLD.Dup()
r, n = comm.rank, comm.size
""" + ROW + """
flag = memoryview(MPI.buffer.allocate(struct.calcsize("i"))).cast("i")
seen = []
for root in range(n):  # the root's Iagree waits for the others, who enter it after a barrier
    comm.Barrier()
    if r == root:
        flag[0] = 0b1011
        req = comm.Iagree(flag)
        seen.append(req.Test())
        comm.Send([b"x", MPI.BYTE], (r + 1) % n, tag=5)  # a program's own message, received with ANY_TAG
        comm.Barrier()
    else:
        flag[0] = 0b1101
        comm.Barrier()
        req = comm.Iagree(flag)
    if r == (root + 1) % n:
        st = MPI.Status()
        comm.Recv(bytearray(1), MPI.ANY_SOURCE, MPI.ANY_TAG, st)
        seen.append(st.Get_tag())
    req.Wait()
    seen.append(flag[0])
failed = comm.Get_failed()
shrunk = comm.Shrink()
inter = comm.Split(r % 2).Create_intercomm(0, comm, 1 - r % 2 if n > 1 else 0) if n > 1 else None
row((seen, comm.Agree(r + 6), failed.size, comm.Ack_failed(), shrunk.size, shrunk.rank,
     inter.Agree(7 if r else 5) if inter else None))
"""


def test_ulfm_agree_iagree_shrink_as_mpich(tmp_path):
    res = run_program(ULFM, n=3, topo="star:n=3", timeout_s=120)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    # 6 & 7 & 8, 0b1011 & 0b1101; on the intercommunicator the remote group's flags only (rank 1's 7)
    assert rows[0] == "ROW0 ([False, 9, 9, 5, 9], 0, 0, 0, 3, 0, 7)", rows
    assert rows[1] == "ROW1 ([5, 9, False, 9, 9], 0, 0, 0, 3, 1, 5)", rows
    if MPIEXEC is None:
        pytest.skip("no mpiexec beside this Python (pip install mpich) to compare with")
    assert rows == _mpich(ULFM, 3, tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.machine() != "x86_64",
                    reason="/proc/PID/task/TID/syscall (Linux, x86-64 system call numbers)")
def test_a_process_waiting_in_accept_waits_outside_and_one_sleeping_does_not():
    accept = subprocess.Popen([sys.executable, "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); "
                               "s.listen(1); print('ready', flush=True); s.accept()"], stdout=subprocess.PIPE, text=True)
    sleep = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert accept.stdout.readline() == "ready\n" and sleep.stdout.readline() == "ready\n"
        time.sleep(0.3)
        if open(f"/proc/{accept.pid}/task/{accept.pid}/syscall").read().split()[0] == "running":
            time.sleep(1)
        assert outside_call(accept.pid) in ("accept", "accept4")
        assert outside_call(sleep.pid) is None
        assert outside_call(os.getpid()) is None  # running
    finally:
        accept.kill()
        sleep.kill()
        accept.wait()
        sleep.wait()


SPAWN = """
import sys
from mpi4py import MPI
world = MPI.COMM_WORLD
parent = MPI.Comm.Get_parent()
r = world.rank if parent == MPI.COMM_NULL else 10 + world.rank
""" + ROW + """
if parent == MPI.COMM_NULL:
    codes = []
    inter = world.Spawn_multiple([sys.executable] * 2, [[__file__, "a"], [__file__, "b", "c"]], [1, 2], root=0,
                                 errcodes=codes)
    got = inter.allreduce(r + 100)  # (the remote group's sum)
    inter.bcast(["from", "parents"] if r == 0 else None, MPI.ROOT if r == 0 else MPI.PROC_NULL)
    row((inter.size, inter.rank, inter.remote_size, codes, got, inter.Get_remote_group().size, inter.Is_inter()))
    inter.Disconnect()
    bad = None
    if r == 0:  # (MPICH refuses at the root only: the others would wait)
        try:
            MPI.COMM_SELF.Spawn(sys.executable, [__file__], -1)
            bad = 0
        except MPI.Exception as e:
            bad = e.Get_error_class()
    merged = None
    child = MPI.COMM_SELF.Spawn(sys.executable, ["-c", "from mpi4py import MPI; p = MPI.Comm.Get_parent(); "
                                                 "m = p.Merge(True); m.bcast(m.rank, root=1); m.Free(); p.Disconnect()"], 1) if r == 0 else None
    if child is not None:
        merged = child.Merge(False)
        merged = (merged.size, merged.rank, merged.bcast(None, root=1))
    row((bad, merged, MPI.Comm.Get_parent() == MPI.COMM_NULL, world.Get_attr(MPI.APPNUM)))
else:
    row((world.size, world.rank, sys.argv[1:], world.Get_attr(MPI.APPNUM), parent.size, parent.remote_size,
         parent.rank, parent.allreduce(world.rank), world.allreduce(1), parent.bcast(None, 0)))
    parent.Disconnect()
    row((MPI.Comm.Get_parent() == MPI.COMM_NULL, parent == MPI.COMM_NULL))
"""


def test_spawn_multiple_intercomm_merge_and_errors_as_mpich(tmp_path):
    res = run_program(SPAWN, n=2, topo="star:n=6", timeout_s=180)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    # the parents: their group of 2, the sum of the 3 children's ranks, error codes per command
    assert "ROW0 (2, 0, 3, [[0], [0, 0]], 3, 3, True)" in rows, rows
    assert "ROW1 (2, 1, 3, [[0], [0, 0]], 3, 3, True)" in rows
    assert "ROW1 (None, None, True, 0)" in rows
    assert "ROW0 (12, (2, 0, 1), True, 0)" in rows  # maxprocs -1: MPI_ERR_ARG; Merge(high) puts the child last
    # the children: one COMM_WORLD of 3 in command order, APPNUM the command's index, the parents' sum 100+101
    assert "ROW10 (3, 0, ['a'], 0, 3, 2, 0, 201, 3, ['from', 'parents'])" in rows
    assert "ROW12 (3, 2, ['b', 'c'], 1, 3, 2, 2, 201, 3, ['from', 'parents'])" in rows
    assert rows.count("ROW11 (True, True)") == 1
    assert res.figures["ranks"] == 2 and res.figures["spawned"] == 4
    assert [p.get("spawn") for p in res.figures["per_rank"]] == [None, None, 1, 1, 1, 2]
    if MPIEXEC is None:
        pytest.skip("no mpiexec beside this Python (pip install mpich) to compare with")
    assert rows == _mpich(SPAWN, 2, tmp_path)


def test_spawn_beyond_the_universe_is_refused_and_the_universe_size_said():
    prog = """
import sys
from mpi4py import MPI
print("universe", MPI.COMM_WORLD.Get_attr(MPI.UNIVERSE_SIZE), flush=True)
try:
    MPI.COMM_WORLD.Spawn(sys.executable, ["-c", "pass"], 2).Disconnect()
    print("spawned", flush=True)
except MPI.Exception as e:
    print("refused", e.Get_error_class() == MPI.ERR_SPAWN, str(e).split(";")[0], flush=True)
try:
    MPI.COMM_WORLD.Spawn(sys.executable, ["no-such-program.py"], 1)
except MPI.Exception as e:
    print("missing", e.Get_error_class() == MPI.ERR_SPAWN, flush=True)
"""
    res = run_program(prog, n=1, topo="star:n=4", timeout_s=120)
    assert res.returncode == 0, res.stderr
    assert res.lines() == ["universe 4", "spawned", "missing True"], res.stdout
    res = run_program(prog, n=1, topo="star:n=4", timeout_s=120, universe=2)
    assert res.returncode == 0, res.stderr
    assert res.lines() == ["universe 2", "refused True Spawn: 2 processes asked for, but 1 of the universe's 2 hosts "
                           "are free (one process per host)", "missing True"], res.stdout


def test_what_a_spawn_runs_of_its_command(tmp_path):
    from emu.front.mpijob import MpiError
    from emu.front.mpispawn import ERR_SPAWN, program

    script = tmp_path / "child"
    script.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    script.chmod(0o755)
    data = tmp_path / "data.txt"
    data.write_text("not a program\n")
    assert program(sys.executable, ["-B", "-X", "dev", "-m", "pkg.mod", "1"], str(tmp_path), None) == ["-m", "pkg.mod", "1"]
    assert program("python3", ["child", "a"], str(tmp_path), None) == ["child", "a"]
    assert program(str(script), None, str(tmp_path), None) == [str(script)]
    assert program("child", ["x"], str(tmp_path), str(tmp_path)) == [str(script), "x"]  # found on the info key path
    for command, args in ((str(data), None), (sys.executable, None), (sys.executable, ["missing.py"]),
                          ("no-such-command", None), (sys.executable, ["-u"])):
        with pytest.raises(MpiError) as e:
            program(command, args, str(tmp_path), str(tmp_path))
        assert e.value.code == ERR_SPAWN, command
