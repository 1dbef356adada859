"""Nonblocking and persistent collectives (MPI 3 / MPI 4), and Alltoallw: every rank prints
'ok <rank>'. Valid MPI (MPICH runs it too)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
R = np.arange(n)[:, None]

comm.Ibarrier().Wait()
x = np.arange(10, dtype="i4") if r == 0 else np.zeros(10, "i4")
comm.Ibcast(x, 0).Wait()
assert (x == np.arange(10)).all()

# several at once, waited in another order than called: they match in call order
y, z = np.empty(10, "i4"), np.empty(10, "i4")
q1 = comm.Iallreduce(np.full(10, r + 1, "i4"), y)
q2 = comm.Iallreduce(np.full(10, r + 2, "i4"), z)
big = np.arange(40_000, dtype="i4") if r == 1 else np.zeros(40_000, "i4")  # over the eager limit
q3 = comm.Ibcast(big, 1)
MPI.Request.Waitall([q3, q2, q1])
assert (y == n * (n + 1) // 2).all() and (z == n * (n + 1) // 2 + n).all() and (big == np.arange(40_000)).all()

# a nonblocking barrier and point-to-point traffic: rank 0 receives inside its Wait's reach,
# rank 1 sends only after the barrier completed (rendezvous: the receive must be matched meanwhile)
b = comm.Ibarrier()
if r == 0:
    got = np.empty(50_000, "u1")
    comm.Recv(got, 1, 3)
    b.Wait()
    assert (got == 1).all()
elif r == 1:
    b.Wait()
    comm.Send(np.ones(50_000, "u1"), 0, 3)
else:
    b.Wait()

# a nonblocking barrier still pending while a communicator is made and a long message goes: rank 1's
# Send waits for rank 0, which is in Dup (whose barrier runs the pending Ibarrier first, as rank 1 does)
b = comm.Ibarrier()
if r == 0:
    got = np.empty(40_000, "u1")
    q = comm.Irecv(got, 1, 11)
    d = comm.Dup()
    q.Wait()
    assert (got == 1).all()
elif r == 1:
    comm.Send(np.ones(40_000, "u1"), 0, 11)
    d = comm.Dup()
else:
    d = comm.Dup()
b.Wait()
d.Free()

g = np.empty((n, 3), "i4")
comm.Igather(np.full(3, r, "i4"), g if r == 0 else None, 0).Wait()
assert r != 0 or (g == R).all()
counts = [k + 1 for k in range(n)]
gv = np.empty(sum(counts), "i4")
comm.Igatherv(np.full(r + 1, r, "i4"), [gv, counts] if r == n - 1 else None, n - 1).Wait()
assert r != n - 1 or (gv == np.repeat(np.arange(n), counts)).all()
s = np.empty(3, "i4")
comm.Iscatter(np.repeat(np.arange(n, dtype="i4"), 3) if r == 0 else None, s, 0).Wait()
assert (s == r).all()
sv = np.empty(r + 1, "i4")
comm.Iscatterv([np.repeat(np.arange(n, dtype="i4"), counts), counts] if r == 0 else None, sv, 0).Wait()
assert (sv == r).all()
ag = np.empty((n, 2), "i4")
comm.Iallgather(np.full(2, r, "i4"), ag).Wait()
assert (ag == R).all()
agv = np.empty(sum(counts), "i4")
comm.Iallgatherv(np.full(r + 1, r, "i4"), [agv, counts]).Wait()
assert (agv == np.repeat(np.arange(n), counts)).all()
a2 = np.empty((n, 2), "i4")
comm.Ialltoall((np.arange(n, dtype="i4")[:, None] + 10 * r).repeat(2, 1), a2).Wait()
assert (a2 == 10 * R + r).all()
sc = [r + 1] * n
rc = counts
a2v = np.empty(sum(rc), "i4")
comm.Ialltoallv([np.full(n * (r + 1), r, "i4"), sc], [a2v, rc]).Wait()
assert (a2v == np.repeat(np.arange(n), rc)).all()
# Alltoallw: to each rank an int32 block, displacements in bytes
sw = np.arange(n, dtype="i4") + 100 * r
rw = np.empty(n, "i4")
w = ([sw, [1] * n, [4 * k for k in range(n)], [MPI.INT] * n], [rw, [1] * n, [4 * k for k in range(n)], [MPI.INT] * n])
comm.Ialltoallw(*w).Wait()
assert (rw == 100 * np.arange(n) + r).all()
rw[:] = -1
comm.Alltoallw(*w)
assert (rw == 100 * np.arange(n) + r).all()

red = np.empty(4, "f8") if r == 0 else None
comm.Ireduce(np.full(4, r, "f8"), red, MPI.SUM, 0).Wait()
assert r != 0 or (red == sum(range(n))).all()
rs = np.empty(2, "i4")
comm.Ireduce_scatter_block(np.ones(2 * n, "i4"), rs).Wait()
assert (rs == n).all()
rs2 = np.empty(r + 1, "i4")
comm.Ireduce_scatter(np.ones(sum(counts), "i4"), rs2, counts).Wait()
assert (rs2 == n).all()
sn = np.empty(1, "i4")
comm.Iscan(np.array([r + 1], "i4"), sn).Wait()
assert sn[0] == (r + 1) * (r + 2) // 2
ex = np.zeros(1, "i4")
comm.Iexscan(np.array([r + 1], "i4"), ex).Wait()
assert r == 0 or ex[0] == r * (r + 1) // 2

# persistent (MPI 4): started twice, the buffers read at each Start
v = np.empty(4, "f8")
src = np.empty(4, "f8")
p = comm.Allreduce_init(src, v)
for k in range(2):
    src[:] = r + k
    p.Start()
    p.Wait()
    assert (v == sum(range(n)) + n * k).all()
p.Free()
pb = comm.Barrier_init()
MPI.Prequest.Startall([pb])
pb.Wait()
pb.Free()
bb = np.zeros(3, "i4")
pc = comm.Bcast_init(bb, 0)
for k in range(2):
    if r == 0:
        bb[:] = k + 7
    pc.Start()
    pc.Wait()
    assert (bb == k + 7).all()
pc.Free()
t = comm.Ibarrier()
while not t.Test():
    pass
print(f"ok {r}", flush=True)
