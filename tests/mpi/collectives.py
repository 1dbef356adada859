"""Collectives, buffer-based and lowercase, with the built-in operators, IN_PLACE, the v-variants,
scans, MINLOC, and an operator of the program's own. Every rank checks its results against numpy
and prints 'ok <rank>'."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
vals = [np.arange(6, dtype="i") * (r + 1) + r for r in range(size)]
mine = vals[rank]

comm.Barrier()
comm.barrier()
b = np.arange(5, dtype="d") if rank == 0 else np.empty(5, "d")
comm.Bcast(b, root=0)
assert (b == np.arange(5)).all()
assert comm.bcast({"root": 1} if rank == 1 else None, root=1) == {"root": 1}

for op, ref in ((MPI.SUM, np.sum), (MPI.PROD, np.prod), (MPI.MAX, np.max), (MPI.MIN, np.min),
                (MPI.BAND, np.bitwise_and.reduce), (MPI.BOR, np.bitwise_or.reduce), (MPI.BXOR, np.bitwise_xor.reduce)):
    out = np.empty(6, "i")
    comm.Allreduce(mine, out, op=op)
    assert (out == ref(np.stack(vals), axis=0)).all(), op
    out = np.zeros(6, "i")
    comm.Reduce(mine, out, op=op, root=size - 1)
    if rank == size - 1:
        assert (out == ref(np.stack(vals), axis=0)).all(), op
for op, ref in ((MPI.LAND, np.logical_and), (MPI.LOR, np.logical_or), (MPI.LXOR, np.logical_xor)):
    out = np.empty(6, "i")
    comm.Allreduce(mine % 2, out, op=op)
    assert (out == ref.reduce(np.stack(vals) % 2, axis=0)).all(), op
inplace = mine.astype("d")
comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.SUM)
assert (inplace == np.sum(vals, axis=0)).all()
assert comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2
assert comm.reduce([rank], op=MPI.SUM, root=0) == (list(range(size)) if rank == 0 else None)
assert comm.allreduce((rank % 2, rank), op=MPI.MINLOC) == (0, 0)
assert comm.allreduce((rank % 3, rank), op=MPI.MAXLOC) == (2, 2) if size > 2 else True
pair = np.zeros(1, dtype=np.dtype([("v", "d"), ("i", "i")], align=True))
pair["v"], pair["i"] = -float(rank % 2), rank
res = np.empty_like(pair)
comm.Allreduce([pair, MPI.DOUBLE_INT], [res, MPI.DOUBLE_INT], op=MPI.MINLOC)
assert (res["v"][0], res["i"][0]) == (-1.0 if size > 1 else 0.0, 1 if size > 1 else 0)

def absmax(inbuf, inoutbuf, datatype):  # an operator of the program's own, on buffers
    a, b = np.frombuffer(inbuf, "i"), np.frombuffer(inoutbuf, "i")
    b[:] = np.where(np.abs(a) > np.abs(b), a, b)

op = MPI.Op.Create(absmax, commute=True)
out = np.empty(6, "i")
comm.Allreduce(-mine, out, op=op)
assert (out == -np.max(np.stack(vals), axis=0)).all()
op.Free()
assert comm.allreduce(str(rank), op=MPI.Op.Create(lambda a, b, dt: a + b)) == "".join(map(str, range(size)))

g = np.empty((size, 6), "i")
comm.Allgather(mine, g)
assert (g == np.stack(vals)).all()
g = np.zeros((size, 6), "i")
comm.Gather(mine, g, root=1)
if rank == 1:
    assert (g == np.stack(vals)).all()
assert comm.gather(rank ** 2, root=0) == ([r ** 2 for r in range(size)] if rank == 0 else None)
assert comm.allgather(chr(65 + rank)) == [chr(65 + r) for r in range(size)]
s = np.empty(6, "i")
comm.Scatter(np.stack(vals) if rank == 0 else None, s, root=0)
assert (s == mine).all()
assert comm.scatter([r * 3 for r in range(size)] if rank == 2 % size else None, root=2 % size) == rank * 3
t = np.empty((size, 2), "i")
comm.Alltoall(np.array([[rank, d] for d in range(size)], "i"), t)
assert (t == np.array([[s_, rank] for s_ in range(size)])).all()
assert comm.alltoall([(rank, d) for d in range(size)]) == [(s_, rank) for s_ in range(size)]

# v-variants: rank r has r + 1 elements
counts = [r + 1 for r in range(size)]
displs = [sum(counts[:r]) for r in range(size)]
mv = np.full(rank + 1, rank, "i")
allv = np.empty(sum(counts), "i")
comm.Allgatherv(mv, [allv, counts, displs, MPI.INT])
assert allv.tolist() == [r for r in range(size) for _ in range(r + 1)]
gv = np.zeros(sum(counts), "i")
comm.Gatherv(mv, [gv, (counts, displs), MPI.INT], root=0)
if rank == 0:
    assert gv.tolist() == allv.tolist()
sv = np.empty(rank + 1, "i")
comm.Scatterv([allv, counts, displs, MPI.INT] if rank == 0 else None, sv, root=0)
assert (sv == rank).all()
sc = [(d + 1) for d in range(size)]
sd = [sum(sc[:d]) for d in range(size)]
send = np.concatenate([np.full(d + 1, rank * 10 + d, "i") for d in range(size)])
rc = [rank + 1] * size
rd = [k * (rank + 1) for k in range(size)]
recv = np.empty(sum(rc), "i")
comm.Alltoallv([send, sc, sd, MPI.INT], [recv, rc, rd, MPI.INT])
assert recv.tolist() == [s_ * 10 + rank for s_ in range(size) for _ in range(rank + 1)]

rs = np.empty(2, "i")
comm.Reduce_scatter_block(np.arange(2 * size, dtype="i") + rank, rs, op=MPI.SUM)
assert (rs == size * (np.arange(2 * rank, 2 * rank + 2)) + size * (size - 1) // 2).all()
rv = np.empty(counts[rank], "i")
comm.Reduce_scatter(np.ones(sum(counts), "i"), rv, counts, op=MPI.SUM)
assert (rv == size).all()
sc_ = np.empty(3, "d")
comm.Scan(np.full(3, rank + 1.0), sc_, op=MPI.SUM)
assert (sc_ == (rank + 1) * (rank + 2) / 2).all()
ex = np.zeros(3, "d")
comm.Exscan(np.full(3, rank + 1.0), ex, op=MPI.SUM)
if rank > 0:
    assert (ex == rank * (rank + 1) / 2).all()
assert comm.scan(rank) == rank * (rank + 1) // 2
assert comm.exscan(rank) == (None if rank == 0 else rank * (rank - 1) // 2)
print(f"ok {rank}", flush=True)
