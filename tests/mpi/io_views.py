"""MPI-IO through views and collective calls; run as ``PROG DIR``: writes DIR/data.bin, rank 0 prints what
every rank saw (the same lines under MPICH's mpiexec and under emu mpirun)."""

import os
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
path = os.path.join(sys.argv[1], "data.bin")


def err(label, fn):
    try:
        fn()
        out.append(f"{label} ok")
    except MPI.Exception as e:
        out.append(f"{label} {e.Get_error_class()}")


amode = MPI.MODE_RDWR | MPI.MODE_CREATE
fh = MPI.File.Open(comm, path, amode)
# 1. interleaved blocks: two ints of each rank in turn, a vector filetype tiling the file
INT = MPI.INT
ftype = INT.Create_vector(1, 2, 2 * size).Create_resized(0, 2 * size * INT.extent).Commit()
fh.Set_view(rank * 2 * INT.extent, INT, ftype)
fh.Write_all(np.arange(8, dtype="i4") + 100 * rank)
out.append(f"pos {fh.Get_position()} byteoffsets {[fh.Get_byte_offset(i) for i in range(5)]}")
req = fh.Iwrite_at(8, np.arange(4, dtype="i4") + 1000 * rank)
req.Wait()
tail = np.full(2, -rank - 1, dtype="i4")
fh.Write_at_all_begin(12, tail)
st = MPI.Status()
fh.Write_at_all_end(tail, st)
out.append(f"split count {st.Get_count(MPI.BYTE)}")
back = np.zeros(14, "i4")
fh.Sync()
comm.Barrier()
fh.Sync()
fh.Read_at_all(0, back, st)
out.append(f"read {back.tolist()} count {st.Get_count(INT)}")
end = fh.Get_size()
# 2. ordered and shared writes of bytes after it
fh.Set_view(0, MPI.BYTE, MPI.BYTE)
fh.Seek_shared(0, MPI.SEEK_END)
fh.Write_ordered(bytes([65 + rank]) * (rank + 2))
out.append(f"shared after ordered {fh.Get_position_shared()}")
comm.Barrier()
fh.Seek_shared(0, MPI.SEEK_END)
base = fh.Get_position_shared()
# 3. external32 doubles at explicit offsets (big-endian in the file)
fh.Set_view(base, MPI.DOUBLE, MPI.DOUBLE, "external32")
fh.Write_at_all(2 * rank, np.array([rank + 0.5, -rank * 1e10]))
fh.Sync()
comm.Barrier()
fh.Sync()
d = np.zeros(2 * size)
fh.Read_at_all(0, d)
out.append(f"external32 {d.tolist()} view {fh.Get_view()[0] == base} {fh.Get_view()[3]}")
out.append(f"type extent {fh.Get_type_extent(MPI.INT)} size {fh.Get_size() - end}")
fh.Set_view(0, MPI.BYTE, MPI.BYTE)
raw = bytearray(fh.Get_size())
fh.Read_at_all(0, raw)
out.append(f"crc {sum(raw) % 65521} len {len(raw)}")
fh.Set_atomicity(True)
out.append(f"atomic {fh.Get_atomicity()} amode {fh.Get_amode() == amode}")
err("set_view bogus datarep", lambda: fh.Set_view(0, MPI.BYTE, MPI.BYTE, "bogus"))
err("seek negative", lambda: fh.Seek(-1))
fh.Close()
ftype.Free()
# 4. access modes and their errors
err("open missing", lambda: MPI.File.Open(comm, path + ".missing", MPI.MODE_RDONLY))
err("amode rdonly create", lambda: MPI.File.Open(comm, path, MPI.MODE_RDONLY | MPI.MODE_CREATE))
err("amode two modes", lambda: MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_WRONLY))
ro = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
err("write rdonly", lambda: ro.Write_at(0, b"x"))
ro.Close()
wo = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_APPEND)
out.append(f"append pos {wo.Get_position()} shared {wo.Get_position_shared()}")
err("read wronly", lambda: wo.Read_at(0, bytearray(1)))
wo.Close()
sq = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_SEQUENTIAL)
err("seq write_at", lambda: sq.Write_at(0, b"x"))
err("seq seek", lambda: sq.Seek(0))
sq.Close()
tmp = MPI.File.Open(comm, path + ".tmp", MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_DELETE_ON_CLOSE)
tmp.Close()
comm.Barrier()
out.append(f"deleted on close {not os.path.exists(path + '.tmp')}")
err("register datarep", lambda: MPI.Register_datarep("io-test-rep", None, None, lambda t: t.extent))
err("register datarep again", lambda: MPI.Register_datarep("io-test-rep", None, None, lambda t: t.extent))
every = comm.gather(out, 0)
if rank == 0:
    for r, lines in enumerate(every):
        for line in lines:
            print(f"{r}: {line}")
