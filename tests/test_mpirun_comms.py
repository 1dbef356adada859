"""``emu mpirun``: intercommunicators, Create_group, Split_type and process topologies with their
neighbor collectives (``emu.rank.inter``, ``emu.rank.topo``, ``emu.front.mpicomms``).

tests/mpi/comms_inter_topo.py prints what every rank got; MPICH prints the same lines. The virtual
figures are deterministic (``--compute zero``)."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
PROGRAM = HERE / "comms_inter_topo.py"


@pytest.mark.parametrize("n", [2, 4])
def test_intercomms_and_topologies_on_the_fabric(mpirun, n):
    res = mpirun(PROGRAM, n=n, topo=f"star:n={n}")
    assert res.returncode == 0, res
    lines = res.stdout.splitlines()
    half = n // 2
    # the local groups in reverse order (Split's key -rank): world rank 0 is the last of its group
    assert f"0 inter True {half - 1} {half} {half} {half}" in lines
    assert f"0 merge False {half - 1} {n}" in lines and f"0 merge True {n - 1} {n}" in lines  # high goes last
    assert f"{n - 1} merge False 0 {n}" in lines and f"{n - 1} merge True {half} {n}" in lines
    assert f"0 dup Intercomm {half} {half} 1" in lines  # CONGRUENT
    assert "0 split (1, 1)" in lines
    calls = res.calls(0)
    assert calls["Create_intercomm"]["count"] == 1
    assert calls["Bcast"]["algorithms"] == ["intercomm (point to point)"]
    assert calls["Neighbor_alltoall"]["algorithms"] == ["neighbors (point to point)"]
    assert res.figures["frames"] > 0


@pytest.mark.skipif(MPIEXEC is None, reason="MPICH's mpiexec is not installed (the mpi extra)")
def test_the_same_lines_as_mpich(mpirun, tmp_path):
    mine, ref = tmp_path / "emu", tmp_path / "mpich"
    mine.mkdir()
    ref.mkdir()
    res = mpirun(PROGRAM, n=4, topo="star:n=4", args=(mine,))
    run = subprocess.run([MPIEXEC, "-n", "4", sys.executable, str(PROGRAM), str(ref)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == run.returncode == 0, (res, run.stderr[-400:])
    for rank in range(4):
        assert (mine / f"{rank}.txt").read_text() == (ref / f"{rank}.txt").read_text()


PINGPONG = """
from mpi4py import MPI
w = MPI.COMM_WORLD
color = 0 if w.rank < 2 else 1
intra = w.Split(color, 0)
inter = intra.Create_intercomm(0, w, 2 if color == 0 else 0)
buf = bytearray(4096)
for comm, peer in ((w, (w.rank + 2) % 4), (inter, inter.rank)):
    if w.rank in (0, 2):
        for i in range(4):  # the first round trip lines the two up; rank 0 times the next 3
            if i == 1:
                t0 = MPI.Wtime()
            if w.rank == 0:
                comm.Send(buf, peer, 1)
                comm.Recv(buf, peer, 1)
            else:
                comm.Recv(buf, peer, 1)
                comm.Send(buf, peer, 1)
        if w.rank == 0:
            print(round((MPI.Wtime() - t0) * 1e9))
"""


def test_an_intercomm_message_costs_what_an_intracomm_one_does(mpirun):
    res = mpirun(PINGPONG, n=4, topo="star:n=4")
    assert res.returncode == 0, res
    world_ns, inter_ns = map(int, res.lines())
    assert world_ns == inter_ns > 0  # the same hosts, the same envelope: the same virtual time


SPLIT_TYPE = """
from mpi4py import MPI
w = MPI.COMM_WORLD
shared = w.Split_type(MPI.COMM_TYPE_SHARED, key=0)
assert (shared.size, shared.rank) == (1, 0), shared.size       # every rank on a host of its own
assert w.Split_type(MPI.UNDEFINED) == MPI.COMM_NULL
assert w.Split_type(MPI.COMM_TYPE_HW_GUIDED) == MPI.COMM_NULL  # no mpi_hw_resource_type asked for
unguided = w.Split_type(MPI.COMM_TYPE_HW_UNGUIDED)
assert unguided.size == 1 and MPI.COMM_SELF.Split_type(MPI.COMM_TYPE_HW_UNGUIDED) == MPI.COMM_NULL
color = w.rank % 2
intra = w.Split(color, 0)
inter = intra.Create_intercomm(0, w, 1 - color)
assert inter.Split_type(MPI.COMM_TYPE_SHARED) == MPI.COMM_NULL  # no remote rank on this host
evens = w.Get_group().Incl([0, 2])
if w.rank in (0, 2):
    g = w.Create_group(evens)
    assert (g.size, g.rank, g.allreduce(w.rank)) == (2, w.rank // 2, 2)
try:
    inter.reduce(1, op=MPI.SUM, root=5)
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_ROOT, e
else:
    raise AssertionError("root 5 of a remote group of 2 accepted")
try:
    intra.Create_intercomm(9, w, 0)
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_RANK, e
else:
    raise AssertionError("local leader 9 accepted")
print("ok", w.rank)
"""


def test_split_type_create_group_and_bad_roots(mpirun):
    res = mpirun(SPLIT_TYPE, n=4, topo="star:n=4")
    assert res.returncode == 0, res
    assert sorted(res.lines()) == [f"ok {r}" for r in range(4)]
    assert res.calls(1)["Split_type"]["count"] == 6  # COMM_SELF's and the intercomm's too


NEIGHBORS = """
import numpy as np
from mpi4py import MPI
w = MPI.COMM_WORLD
cart = w.Create_cart([4], periods=[False])
got = np.full(2, -1, "i")
cart.Neighbor_allgather(np.array([w.rank], "i"), got)
print(w.rank, got.tolist(), MPI.Wtime() > 0)
"""


def test_a_neighbor_collective_sends_only_to_neighbors(mpirun):
    res = mpirun(NEIGHBORS, n=4, topo="star:n=4")
    assert res.returncode == 0, res
    assert sorted(res.lines()) == ["0 [-1, 1] True", "1 [0, 2] True", "2 [1, 3] True", "3 [2, -1] True"]
    assert res.calls(0)["Neighbor_allgather"]["algorithms"] == ["neighbors (point to point)"]
    without = mpirun(NEIGHBORS.replace("cart.Neighbor_allgather(", "(lambda *a: None)("), n=4, topo="star:n=4")
    # a chain of 4 has 6 directed edges: 6 messages of one frame each, nothing to PROC_NULL
    assert res.figures["frames"] - without.figures["frames"] == 6
