"""emu mpirun against MPICH on what mpi4py's own test suite still found missing (round 3 of issue 40):
MPI.BOTTOM / IN_PLACE / BUFFER_AUTOMATIC as mpi4py's constants (integers, empty buffers of no object),
handles read and written through ctypes at ``MPI._addressof``, topology constructors refusing another
topology, the MPI 5.0 ABI calls, an MPI 4.1 library's Split_type kinds and buffered-send buffers (a
communicator's, BUFFER_AUTOMATIC; a buffered send completes at once, however long), a contiguous type
beyond INT_MAX, mpi4py's docstrings, ``mpi4py.profile``."""

from __future__ import annotations

import os

from test_mpirun_suite_gaps import _rows, mpich_rows  # (rows split as hydra may hand them over; MPICH's)

from emu.front.mpirun import run_program

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "mpi", "suite_gaps3.py")


def test_suite_gaps3_program_prints_what_mpich_prints():
    res = run_program(PROGRAM, n=2, topo="star:n=2", timeout_s=180)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    assert ("0 ('constant', 'IN_PLACE', -1, True, False, False, True, True, 0, True, False, True, True, True, "
            "'TypeError')") in rows
    assert "1 ('ctypes_handles', True, True, True, True)" in rows
    assert "0 ('topo_constructors', [True, True, True, True, True, True], True, 'Topocomm')" in rows
    assert "1 ('split_type', 4, [True, True, 1, 'mpi_shared_memory'])" in rows and "0 ('version', True)" in rows
    assert "1 ('buffers', [True, True, True, True, True, True])" in rows
    assert "0 ('big_contiguous', 2149580798, True, 'CONTIGUOUS', {'count': 2149580798})" in rows
    assert "0 ('profile', ['ValueError', 'UserWarning'])" in rows
    assert rows == mpich_rows(PROGRAM)


BIG_BSEND = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
MPI.Attach_buffer(MPI.Alloc_mem((1 << 20) + MPI.BSEND_OVERHEAD))
comm.Bsend(bytearray(1 << 20), 1 - rank, 0)  # both send first: a buffered send must not wait for the receive
buf = bytearray(1 << 20)
comm.Recv(buf, 1 - rank, 0)
print(rank, "received", len(buf))
"""


def test_a_long_buffered_send_completes_before_its_receive_is_posted():
    res = run_program(BIG_BSEND, n=2, topo="star:n=2", timeout_s=120)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.split("\n")[:2]) == ["0 received 1048576", "1 received 1048576"]
