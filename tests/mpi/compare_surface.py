"""Compared line by line with MPICH (tests/test_mpirun.py): point to point, collectives, communicators,
derived datatypes, as an mpi4py program would use them. Rank 0 prints one line of results per rank."""
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
# point to point, objects
if rank == 0:
    comm.send({"a": 1}, dest=1, tag=3)
    out.append(comm.recv(source=1, tag=4))
elif rank == 1:
    st = MPI.Status()
    out.append(comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st))
    out.append((st.Get_source(), st.Get_tag()))
    comm.ssend([1, 2], dest=0, tag=4)
# buffers
a = np.arange(10, dtype="i") * (rank + 1)
b = np.empty(10, dtype="i")
comm.Sendrecv(a, dest=(rank + 1) % size, recvbuf=b, source=(rank - 1) % size)
out.append(int(b.sum()))
# nonblocking + waitall
reqs = [comm.Isend([a, MPI.INT], (rank + 1) % size, 7), comm.Irecv([b, MPI.INT], (rank - 1) % size, 7)]
MPI.Request.Waitall(reqs)
out.append(reqs[0] == MPI.REQUEST_NULL)
# probe
if rank == 0:
    comm.send("x" * 10, dest=1, tag=9)
if rank == 1:
    st = MPI.Status()
    comm.Probe(0, 9, st)
    out.append(("probe", st.Get_source(), st.Get_tag(), st.Get_count() > 0))
    out.append(comm.recv(source=0, tag=9))
# collectives
x = np.full(4, rank + 1.0)
y = np.empty(4)
comm.Allreduce(x, y, op=MPI.SUM)
out.append(y.tolist())
out.append(comm.allreduce(rank, op=MPI.MAX))
out.append(comm.bcast({"k": rank} if rank == 0 else None, root=0))
out.append(comm.gather(rank * 2, root=0))
out.append(comm.allgather(rank))
out.append(comm.alltoall([rank * 10 + d for d in range(size)]))
out.append(comm.scan(rank + 1))
out.append(comm.exscan(rank + 1))
g = np.empty(size * 2, "d")
comm.Allgather(np.array([rank, rank], "d"), g)
out.append(g.tolist())
pair = np.array([(float(rank % 2), rank)], dtype=np.dtype([("v", "<f8"), ("i", "<i4")], align=True))
res = np.empty_like(pair)
comm.Allreduce([pair, MPI.DOUBLE_INT], [res, MPI.DOUBLE_INT], op=MPI.MINLOC)
out.append((float(res["v"][0]), int(res["i"][0])))
# communicators
sub = comm.Split(color=rank % 2, key=-rank)
out.append((sub.Get_rank(), sub.Get_size(), sub.allreduce(rank)))
dup = comm.Dup()
out.append(dup.allreduce(1))
dup.Free(); sub.Free()
vec = MPI.INT.Create_vector(2, 1, 2).Commit()
src = np.arange(4, dtype="i") + 100 * rank
dst = np.zeros(4, dtype="i")
comm.Sendrecv([src, 1, vec], (rank + 1) % size, 0, [dst, 1, vec], (rank - 1) % size, 0)
out.append(dst.tolist())
out.append((MPI.Get_processor_name() != "", MPI.Is_initialized(), MPI.Is_finalized(), MPI.Query_thread() >= 0))
lines = comm.gather(f"{rank} {out}", root=0)  # one writer: mpiexec may split lines of several
if rank == 0:
    print("\n".join(lines))
