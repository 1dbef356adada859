"""One-sided communication: fence, passive target (exclusive and shared locks, lock_all, flush),
PSCW, Put/Get/Accumulate/Fetch_and_op/Compare_and_swap/Rput, Create and Allocate; every rank prints
'ok <rank>'. Valid MPI (MPICH runs it too)."""

import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
mem = np.zeros(16, "i4")
win = MPI.Win.Create(mem, 4, comm=comm)
assert win.Get_attr(MPI.WIN_SIZE) == 64 and win.Get_attr(MPI.WIN_DISP_UNIT) == 4
assert win.Get_attr(MPI.WIN_BASE) == MPI.Get_address(mem)
# fence epoch: each rank puts its rank into slot r of the next rank
win.Fence()
win.Put(np.array([r + 1], "i4"), (r + 1) % n, r)
win.Fence()
assert mem[(r - 1) % n] == (r - 1) % n + 1, mem
# get
got = np.zeros(1, "i4")
win.Fence()
win.Get(got, (r + 1) % n, r)
win.Fence()
assert got[0] == r + 1, got
# accumulate into slot 15 of rank 0
win.Fence()
win.Accumulate(np.array([r + 1], "i4"), 0, 15, MPI.SUM)
win.Fence()
assert r != 0 or mem[15] == n * (n + 1) // 2, mem
# passive target: fetch-and-op counter on rank 0 slot 14, exclusive lock
old = np.zeros(1, "i4")
win.Lock(0, MPI.LOCK_EXCLUSIVE)
win.Fetch_and_op(np.array([1], "i4"), old, 0, 14, MPI.SUM)
win.Unlock(0)
comm.Barrier()
win.Lock(0, MPI.LOCK_SHARED)
v = np.zeros(1, "i4")
win.Get(v, 0, 14)
win.Unlock(0)
assert v[0] == n, v
comm.Barrier()
# compare and swap
win.Lock_all()
res = np.zeros(1, "i4")
win.Compare_and_swap(np.array([100 + r], "i4"), np.array([n], "i4"), res, 0, 14)
win.Flush(0)
win.Unlock_all()
comm.Barrier()
win.Fence()
if r == 0:
    assert mem[14] >= 100, mem
win.Fence()
# PSCW: rank 0 exposes to everyone, the others put into slots 8+
grp = comm.Get_group()
if r == 0:
    win.Post(grp.Excl([0]))
    win.Wait()
    assert all(mem[8 + k] == 1000 + k for k in range(1, min(n, 6))), mem
else:
    win.Start(grp.Incl([0]))
    win.Put(np.array([1000 + r], "i4"), 0, 8 + r)
    win.Complete()
# derived target type: every other int of rank (r+1)'s slots 0..7 via Get with a vector type
win.Fence()
req = win.Rput(np.array([7], "i4"), r, 12)
req.Wait()
win.Fence()
assert mem[12] == 7
win.Free()
w2 = MPI.Win.Allocate(32, 1, comm=comm)
m2 = w2.tomemory()
assert len(m2) == 32
w2.Fence()
w2.Put(bytearray(b"abcd"), (r + 1) % n, 4)
w2.Fence()
assert bytes(m2[4:8]) == b"abcd"
w2.Free()
print(f"ok {r}", flush=True)
