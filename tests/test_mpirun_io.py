"""MPI-IO under ``emu mpirun`` (``emu.rank.mpiio``): real files written through views, collective and
ordered calls, compared byte by byte with what MPICH's mpiexec writes for the same program."""

import os
import shutil
import struct
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(__file__), "mpi")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable))


def _run_emu(mpirun, tmp_path, n=3, name="emu"):
    out = tmp_path / name
    out.mkdir()
    res = mpirun(os.path.join(HERE, "io_views.py"), n=n, topo=f"star:n={n}", args=(str(out),))
    assert res.returncode == 0, res
    return res, (out / "data.bin").read_bytes()


@pytest.mark.skipif(MPIEXEC is None, reason="MPICH's mpiexec is not installed (the mpi extra)")
def test_views_collective_and_ordered_writes_give_mpichs_bytes(mpirun, tmp_path):
    res, data = _run_emu(mpirun, tmp_path)
    ref_dir = tmp_path / "mpich"
    ref_dir.mkdir()
    ref = subprocess.run([MPIEXEC, "-n", "3", sys.executable, os.path.join(HERE, "io_views.py"), str(ref_dir)],
                         capture_output=True, text=True, timeout=120)
    assert ref.returncode == 0, ref.stderr[-600:]
    assert res.stdout == ref.stdout
    assert data == (ref_dir / "data.bin").read_bytes()


def test_the_file_is_what_the_views_say(mpirun, tmp_path):
    import numpy as np

    res, data = _run_emu(mpirun, tmp_path)
    ints = np.frombuffer(data[:168], "<i4").reshape(-1, 3, 2)  # tiles of two ints of each rank in turn
    for r in range(3):
        assert ints[:4, r].ravel().tolist() == list(range(100 * r, 100 * r + 8))
        assert ints[4:6, r].ravel().tolist() == list(range(1000 * r, 1000 * r + 4))
        assert ints[6, r].tolist() == [-r - 1, -r - 1]
    assert data[168:177] == b"AABBBCCCC"  # Write_ordered: rank order at the shared pointer
    doubles = np.frombuffer(data[177:], ">f8")  # external32: big-endian
    assert doubles.tolist() == [0.5, 0.0, 1.5, -1e10, 2.5, -2e10]
    lines = res.stdout.splitlines()
    assert "1: read [100, 101, 102, 103, 104, 105, 106, 107, 1000, 1001, 1002, 1003, -2, -2] count 14" in lines
    assert "2: pos 8 byteoffsets [16, 20, 40, 44, 64]" in lines
    assert res.figures["frames"] > 0  # opening, ordered writes and shared-pointer seeks are fabric traffic
    again, data2 = _run_emu(mpirun, tmp_path, name="two")  # a name as long: the same messages (paths in errors)
    assert data2 == data and again.figures["virtual_ns"] == res.figures["virtual_ns"]
    assert again.figures["frames"] == res.figures["frames"]


SHARED = """
import sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
path = sys.argv[1]
fh = MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE)
for i in range(20):
    fh.Write_shared(bytes([65 + comm.rank]) * (comm.rank + 1))
comm.Barrier()
pos = fh.Get_position_shared()
try:
    MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_EXCL)
    excl = "opened"
except MPI.Exception as e:
    excl = e.Get_error_class() == MPI.ERR_FILE_EXISTS
eh = MPI.FILE_NULL.Get_errhandler() == MPI.ERRORS_RETURN and fh.Get_errhandler() == MPI.ERRORS_RETURN
fh.Close()
if comm.rank == 0:
    data = open(path, "rb").read()
    print(pos, len(data), data.count(b"A"), data.count(b"B"), data.count(b"C"), excl, eh)
"""


def test_the_shared_pointer_gives_every_write_its_own_bytes(mpirun, tmp_path):
    res = mpirun(SHARED, n=3, topo="star:n=3", args=(str(tmp_path / "shared.bin"),))
    assert res.returncode == 0, res
    assert res.stdout.split() == ["120", "120", "20", "40", "60", "True", "True"]
    import tempfile

    left = [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(".emu-mpiio-shfp-shared.bin-")]
    assert not left  # the shared pointer's side file is gone with the file's Close


def test_bad_amode_is_refused_with_mpis_error_class(mpirun, tmp_path):
    prog = """
from mpi4py import MPI
try:
    MPI.File.Open(MPI.COMM_WORLD, "x", MPI.MODE_RDONLY | MPI.MODE_EXCL)
except MPI.Exception as e:
    print(e.Get_error_class() == MPI.ERR_AMODE, MPI.FILE_NULL == MPI.File())
"""
    res = mpirun(prog, n=2, topo="star:n=2")
    assert res.returncode == 0 and res.stdout.split() == ["True", "True"] * 2, res


ERRORS = """
import os
import sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
path = sys.argv[1]
amode = MPI.MODE_RDWR | MPI.MODE_CREATE | (MPI.MODE_UNIQUE_OPEN if comm.rank == 1 else 0)
try:
    MPI.File.Open(comm, path, amode)
    print("opened", flush=True)
except MPI.Exception as e:
    print("open", e.Get_error_class() == MPI.ERR_NOT_SAME, flush=True)
comm.Barrier()
print("created", os.path.exists(path), flush=True)
comm.Barrier()
MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE).Close()
fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
seen = []
fh.Set_errhandler(MPI.File.Create_errhandler(lambda f, code: seen.append((f == fh, MPI.Get_error_class(code)))))
try:
    fh.Write_at(0, b"x")
except MPI.Exception as e:
    print("handler", seen == [(True, MPI.ERR_READ_ONLY)], e.Get_error_class() == MPI.ERR_READ_ONLY, flush=True)
fh.Close()
MPI.FILE_NULL.Set_errhandler(MPI.ERRORS_ARE_FATAL)
MPI.File.Open(comm, path + ".missing", MPI.MODE_RDONLY)
print("not reached", flush=True)
"""


def test_a_rank_that_cannot_open_fails_every_rank_and_errhandlers_are_called(mpirun, tmp_path):
    res = mpirun(ERRORS, n=2, topo="star:n=2", args=(str(tmp_path / "e.bin"),))
    assert res.returncode != 0  # ERRORS_ARE_FATAL of FILE_NULL: the failed Open ends the job
    assert res.stdout.split("\n")[:-1].count("open True") == 2, res
    assert res.stdout.split("\n")[:-1].count("created False") == 2, res  # as MPICH: amodes checked first
    assert res.stdout.split("\n")[:-1].count("handler True True") == 2, res
    assert "not reached" not in res.stdout


def test_a_view_maps_the_data_stream_to_the_bytes_mpich_gives():
    from emu.rank.mpiio_view import View, external32
    from emu.rank.types import TYPES

    byte = TYPES["BYTE"]
    ftype = byte.Create_vector(3, 2, 4).Commit()  # two bytes of every four, extent 10
    v = View(3, byte, ftype, "native")
    assert [v.byte_offset(i) for i in range(8)] == [3, 4, 7, 8, 11, 12, 13, 14]  # MPICH's Get_byte_offset
    assert v.file_runs(1, 8) == [(4, 1), (7, 2), (11, 4), (17, 1)]  # runs of adjacent tiles joined
    assert v.end_offset(19) == 10 and v.end_offset(3) == 0 and v.end_offset(12) == 5
    ftype.Free()  # the view keeps its own copy
    assert v.file_runs(0, 2) == [(3, 2)]
    assert external32(struct.pack("<dd", 1.5, -2.0), TYPES["DOUBLE"]) == struct.pack(">dd", 1.5, -2.0)
    assert external32(struct.pack("<i", 7), TYPES["INT"]) == struct.pack(">i", 7)
