"""Calls of issue 40's reproductions that gave wrong data or were refused; printed so that the lines
compare with MPICH's (tests/test_mpirun_objects.py runs it both ways)."""
import pickle

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
s = np.arange(3 * size, dtype="i") + rank
r = np.full(3, -1, dtype="i")
comm.Reduce_scatter(s, r, None)  # counts from every rank's own receive buffer
out.append(("reduce_scatter", r.tolist()))
comm.Ireduce_scatter(s, r, None).Wait()
out.append(("ireduce_scatter", r.tolist()))
same = MPI.Intracomm(comm)
out.append(("intracomm", same == comm, MPI.Comm() == MPI.COMM_NULL, bool(MPI.Comm())))
g = comm.Get_group()
out.append(("group", MPI.Group.Compare(g, g.Dup()), g.Compare(g.Range_incl([(size - 1, 0, -1)])) in
            (MPI.SIMILAR, MPI.IDENT)))
out.append(("replace", comm.reduce(rank, op=MPI.REPLACE, root=0), comm.allreduce(rank, op=MPI.NO_OP)))
peer = (rank + 1) % size
reqs = [comm.irecv(source=(rank - 1) % size, tag=t) for t in range(3)]
for t in range(3):
    comm.send(t * 10 + rank, dest=peer, tag=t)
got = []
while any(reqs):
    idx, objs = MPI.Request.waitsome(reqs)
    if idx is None:
        break
    got += objs
out.append(("waitsome", sorted(got)))
st = MPI.Status()
comm.Send(np.arange(2, dtype="d"), dest=peer, tag=7)
msg = comm.Mprobe(source=(rank - 1) % size, tag=7, status=st)
buf = np.empty(2, "d")
msg.Recv(buf)
out.append(("mprobe", st.Get_source(), st.Get_tag(), st.Get_count(MPI.DOUBLE), buf.tolist()))
info = MPI.Info.Create({"a": "1"})
out.append(("info", info.items(), pickle.loads(pickle.dumps(MPI.COMM_WORLD)) is MPI.COMM_WORLD))
key = MPI.Comm.Create_keyval(copy_fn=True)
comm.Set_attr(key, [rank])
dup = comm.Dup()
out.append(("attr", dup.Get_attr(key), MPI.Get_error_string(MPI.ERR_TRUNCATE), int(MPI.Exception(MPI.ERR_ROOT))))
dup.Free()
try:
    comm.bcast(None, root=size)
except MPI.Exception as e:
    out.append(("badroot", e.Get_error_class() == MPI.ERR_ROOT))
for row in comm.gather(out, root=0) or []:
    if rank == 0:
        print(row)
