"""Point-to-point and collective semantics with messages over the eager limit (rendezvous): run with
3 ranks or more; every rank prints 'ok <rank>'. Valid MPI (MPICH runs it too)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
BIG = 50_000  # over the 16 KiB eager limit
st = MPI.Status()

# non-overtaking: a rendezvous message, then an eager one of the same tag; probe sees the first's size
if r == 0:
    comm.Send(np.full(BIG, 1, "u1"), 1, 7)
    comm.Send(np.full(10, 2, "u1"), 1, 7)
    comm.Ssend(np.full(BIG, 3, "u1"), 1, 8)
elif r == 1:
    comm.Probe(0, 7, st)
    assert st.Get_count() == BIG and st.Get_source() == 0, st.Get_count()
    a = np.empty(BIG, "u1")
    comm.Recv(a, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
    assert (a == 1).all() and st.Get_source() == 0 and st.Get_tag() == 7 and st.Get_count() == BIG
    b = np.empty(10, "u1")
    comm.Recv(b, 0, 7)
    assert (b == 2).all()
    assert comm.Iprobe(0, 8, st) in (True, False)
    c = np.empty(BIG, "u1")
    comm.Recv(c, 0, 8, st)
    assert (c == 3).all() and st.Get_count() == BIG

# a ring of rendezvous exchanges: Sendrecv, and Irecv/Isend both ways at once
s = np.full(BIG, r, "i4")
d = np.empty(BIG, "i4")
comm.Sendrecv(s, (r + 1) % n, 1, d, (r - 1) % n, 1)
assert (d == (r - 1) % n).all()
d2 = np.empty(BIG, "i4")
MPI.Request.Waitall([comm.Irecv(d2, (r + 1) % n, 2), comm.Isend(s, (r - 1) % n, 2)])
assert (d2 == (r + 1) % n).all()

# a posted receive cancelled (before the message is sent: the barrier): the rendezvous message
# matches the next receive
if r == 2:
    q = comm.Irecv(np.empty(BIG, "u1"), 0, 9)
    q.Cancel()
    q.Wait(st)
    assert st.Is_cancelled()
comm.Barrier()
if r == 2:
    e = np.empty(BIG, "u1")
    comm.Recv(e, 0, 9)
    assert (e == 9).all()
elif r == 0:
    comm.Send(np.full(BIG, 9, "u1"), 2, 9)

# collectives whose messages are long
x = np.arange(BIG, dtype="i4") if r == 0 else np.zeros(BIG, "i4")
comm.Bcast(x, 0)
assert (x == np.arange(BIG)).all()
y = np.empty(BIG, "i4")
comm.Allreduce(np.full(BIG, r + 1, "i4"), y)
assert (y == n * (n + 1) // 2).all()
g = np.empty((n, BIG), "i4")
comm.Allgather(np.full(BIG, r, "i4"), g)
assert (g == np.arange(n)[:, None]).all()
part = np.empty(BIG, "i4")
comm.Scatter(np.repeat(np.arange(n, dtype="i4"), BIG) if r == 0 else None, part, 0)
assert (part == r).all()
at = np.empty((n, BIG), "i4") if r == 1 else None
comm.Gather(np.full(BIG, r, "i4"), at, 1)
assert r != 1 or (at == np.arange(n)[:, None]).all()
t = np.empty((n, BIG), "i4")
comm.Alltoall(np.repeat(np.arange(n, dtype="i4") + 10 * r, BIG).reshape(n, BIG), t)
assert (t == 10 * np.arange(n)[:, None] + r).all()
counts = [BIG + k for k in range(n)]  # Alltoallv: the pairwise exchange
sb = np.concatenate([np.full(counts[k], r, "i4") for k in range(n)])
rb = np.empty(n * (BIG + r), "i4")
comm.Alltoallv([sb, (counts, None), MPI.INT], [rb, ([BIG + r] * n, None), MPI.INT])
assert (rb.reshape(n, BIG + r) == np.arange(n)[:, None]).all()
obj = comm.bcast(bytes(range(256)) * 300 if r == 0 else None, 0)
assert obj == bytes(range(256)) * 300
comm.Barrier()
print(f"ok {r}", flush=True)
