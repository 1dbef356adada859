"""Calls mpi4py's own test suite found refused or wrong under emu mpirun (round 2 of issue 40), printed
so that the lines compare with MPICH's (tests/test_mpirun_suite_gaps.py runs it both ways)."""
import os
import pickle

import numpy as np
from mpi4py import MPI
from mpi4py.util import pkl5

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []

# windows: over BOTTOM (no memory), info and error handlers, a dynamic one with memory attached
w = MPI.Win.Create(MPI.BOTTOM, 1, MPI.INFO_NULL, comm)
out.append(("win_bottom", w.Get_attr(MPI.WIN_SIZE), w.attrs[:2], w.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_CREATE))
eh = w.Get_errhandler()
w.Set_errhandler(MPI.ERRORS_RETURN)
out.append(("win_errhandler", eh == MPI.ERRORS_ARE_FATAL or eh == MPI.ERRORS_RETURN, w.Get_errhandler() == MPI.ERRORS_RETURN))
info = w.Get_info()
out.append(("win_info", type(info) is MPI.Info, bool(info)))
info.Free()
w.Free()
w = MPI.Win.Create_dynamic(MPI.INFO_NULL, comm)
mem = MPI.Alloc_mem(16)
w.Attach(mem)
out.append(("win_dynamic", w.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_DYNAMIC, w.Get_attr(MPI.WIN_SIZE)))
w.Detach(mem)
w.Free()
MPI.Free_mem(mem)
w = MPI.Win.Allocate(8, 1, MPI.INFO_NULL, comm)
w.Fence()
w.Put(np.full(8, rank + 1, "u1"), (rank + 1) % size)
w.Fence()
out.append(("win_put", np.frombuffer(w.tomemory(), "u1").tolist()))
w.Free()

# memoryview(win) is the window's memory; mpi4py.util.sync's mutex (ranks spin with Sync/Flush) and counter
w = MPI.Win.Allocate(8, 1, MPI.INFO_NULL, comm)
mv = memoryview(w)
mv.cast("i")[0], mv.cast("i")[1] = -1, 40 + rank
out.append(("win_memoryview", mv.nbytes, mv.format, mv.readonly, np.frombuffer(w.tomemory(), "i").tolist()))
mv.release()
w.Free()
from mpi4py.util import sync  # noqa: E402

mutex = sync.Mutex(comm=comm)
counter = sync.Counter(comm=comm)
for _ in range(3):
    with mutex:
        counter.next()
comm.Barrier()
out.append(("util_sync", mutex.locked(), counter.next(0) if rank == 0 else None))
counter.free()
mutex.free()

# argument checks as mpi4py's: a target spec of another kind, Reduce_scatter of two datatypes
w = MPI.Win.Allocate(8, 1, MPI.INFO_NULL, MPI.COMM_SELF)
w.Fence()
for target in ({1: 2}, (0, 1, MPI.BYTE, None)):
    try:
        w.Put([bytearray(1), MPI.BYTE], 0, target)
        out.append(("rma_target", "accepted"))
    except ValueError:
        out.append(("rma_target", "ValueError"))
w.Fence()
w.Free()
try:
    MPI.COMM_SELF.Reduce_scatter([np.zeros(1, "i"), MPI.INT], [np.zeros(1, "f"), MPI.FLOAT], [1])
    out.append(("reduce_scatter_types", "accepted"))
except ValueError:
    out.append(("reduce_scatter_types", "ValueError"))

# Alltoallw and Neighbor_alltoallw over MPI.BOTTOM (displacements are addresses)
sbuf, rbuf = np.arange(2 * size, dtype="i") + 100 * rank, np.full(2 * size, -1, "i")
sa, ra = MPI.Get_address(sbuf), MPI.Get_address(rbuf)
comm.Alltoallw([MPI.BOTTOM, ([2] * size, [sa + 8 * i for i in range(size)]), [MPI.INT] * size],
               [MPI.BOTTOM, ([2] * size, [ra + 8 * i for i in range(size)]), [MPI.INT] * size])
out.append(("alltoallw_bottom", rbuf.tolist()))
cart = comm.Create_cart([size], [True])
nb = 2  # a ring: left and right neighbors
sbuf, rbuf = np.arange(nb, dtype="d") + 10 * rank, np.full(nb, -1.0)
sa, ra = MPI.Get_address(sbuf), MPI.Get_address(rbuf)
cart.Neighbor_alltoallw([MPI.BOTTOM, ([1] * nb, [sa + 8 * i for i in range(nb)]), [MPI.DOUBLE] * nb],
                        [MPI.BOTTOM, ([1] * nb, [ra + 8 * i for i in range(nb)]), [MPI.DOUBLE] * nb])
out.append(("neighbor_alltoallw_bottom", rbuf.tolist()))
sbuf, rbuf = np.full(2, rank + 1, "i"), np.full(2 * nb, -1, "i")
preq = cart.Neighbor_allgather_init(sbuf, rbuf)  # persistent (MPI 4): started twice
for k in range(2):
    sbuf[:] = 10 * k + rank + 1
    preq.Start()
    preq.Wait()
    out.append(("neighbor_allgather_init", k, rbuf.tolist()))
preq.Free()
cart.Free()

# lowercase scatter and all-to-all of None, and of an iterator
out.append(("scatter_none", comm.scatter(None, root=0), comm.scatter(iter(range(size)), root=0)))
out.append(("alltoall_none", comm.alltoall(None), comm.alltoall([rank * 10 + i for i in range(size)])))

# a subclass of a handle class: its constructor takes a handle of its kind; Dup keeps the class
c = pkl5.Intracomm(comm)
d = c.Dup()
out.append(("subclass", type(c) is pkl5.Intracomm, type(d) is pkl5.Intracomm, c.Get_size(),
            type(comm.Split(0, rank)) is MPI.Intracomm, type(MPI.Comm(comm).Dup()) is MPI.Comm))
out.append(("pkl5", d.allgather(rank), d.bcast({"r": rank} if rank == 0 else None, root=0)))
try:
    MPI.Intercomm(comm)
    out.append(("intercomm_of_intra", "accepted"))
except TypeError:
    out.append(("intercomm_of_intra", "TypeError"))
d.Free()

# pkl5 on an intercommunicator (a library's context: the merged local group)
if size > 1:
    half = comm.Split(rank % 2, rank)
    inter = half.Create_intercomm(0, comm, 1 - rank % 2, tag=5)
    pinter = pkl5.Intercomm(inter)
    out.append(("pkl5_inter", sorted(pinter.allgather(rank))))
    inter.Free()
    half.Free()

# requests: a list of statuses is filled; REQUEST_NULL cannot be cancelled
reqs = [comm.isend(rank, rank, tag=9) for _ in range(3)]
for _ in range(3):
    comm.recv(source=rank, tag=9)
statuses = []
while not MPI.Request.get_status_all(reqs, statuses):
    pass
out.append(("get_status_all", len(statuses), all(type(s) is MPI.Status for s in statuses)))
MPI.Request.waitall(reqs)
try:
    MPI.REQUEST_NULL.Cancel()
    out.append(("cancel_null", "no error"))
except MPI.Exception as e:
    out.append(("cancel_null", e.Get_error_class() == MPI.ERR_REQUEST))
for call in (MPI.Status().Get_count, MPI.Status().Get_elements):
    try:
        call(MPI.DATATYPE_NULL)
        out.append(("status_null_type", "no error"))
    except MPI.Exception as e:
        out.append(("status_null_type", e.Get_error_class() == MPI.ERR_TYPE))

# Isendrecv (MPI 4.0) around a ring, and Isendrecv_replace
sb, rb = np.arange(4, dtype="i") + 10 * rank, np.full(4, -1, "i")
req = comm.Isendrecv(sb, (rank + 1) % size, 3, rb, (rank - 1) % size, 3)
req.Wait()  # (its status: MPICH 5.0's is not the receive's)
rep = np.arange(3, dtype="d") * (rank + 1)
MPI.Request.Waitall([comm.Isendrecv_replace(rep, (rank + 1) % size, 4, (rank - 1) % size, 4)])
out.append(("isendrecv", rb.tolist(), rep.tolist()))

# partitioned point to point (MPI 4.0) around the ring: nothing arrives before the last Pready
sb, rb = np.arange(6, dtype="i") + 10 * rank, np.full(6, -1, "i")
sreq = comm.Psend_init(sb, 3, (rank + 1) % size, 5)
rreq = comm.Precv_init(rb, 3, (rank - 1) % size, 5)
rreq.Start()
sreq.Start()
sreq.Pready_range(0, 1)
comm.Barrier()
early = rreq.Parrived(2)
comm.Barrier()
sreq.Pready_list([2])
while not rreq.Parrived(0):
    pass
MPI.Request.Waitall([sreq, rreq])
out.append(("partitioned", early, rb.tolist(), bool(sreq), bool(rreq)))
sreq.Free()
rreq.Free()

# a message of 0 bytes is None to recv; a generalized request's raising query function fails the Wait
sreq = comm.Isend([None, 0, "B"], rank, tag=11)
out.append(("recv_empty", comm.recv(None, rank, tag=11)))
sreq.Wait()
for exc in (ValueError(42), MPI.Exception(MPI.ERR_BUFFER)):
    def query(status, exc=exc):
        raise exc
    greq = MPI.Grequest.Start(query, None, None)
    greq.Complete()
    try:
        import contextlib
        import io
        with contextlib.redirect_stderr(io.StringIO()) as err:
            greq.Wait()
        out.append(("grequest", "no error"))
    except MPI.Exception as e:
        out.append(("grequest", e.Get_error_class() == (MPI.ERR_BUFFER if isinstance(exc, MPI.Exception) else
                                                         MPI.ERR_OTHER), err.getvalue().startswith("Traceback")))

# Pickle: PROTOCOL None, out-of-band buffers above the threshold
pk = MPI.Pickle()
pk.PROTOCOL = None
pk.THRESHOLD = 64
data, bufs = pk.dumps_oob(np.arange(32, dtype="i"))
out.append(("pickle_oob", pk.PROTOCOL == pickle.HIGHEST_PROTOCOL, [type(b) is MPI.buffer for b in bufs],
            pk.loads_oob(data, bufs).tolist()[:3]))

# free(): the module's constants stay, a copy of a predefined handle becomes null, Get_parent
clone = MPI.Datatype(MPI.INT)
clone.free()
MPI.INT.free()
wc = MPI.Comm(comm)
wc.free()
eh = MPI.COMM_SELF.Get_errhandler()
eh.free()
out.append(("free", bool(clone), bool(MPI.INT), bool(wc), bool(comm), bool(eh), type(MPI.Comm.Get_parent()).__name__))
import mpi4py  # noqa: E402
import mpi4py.typing  # noqa: E402,F401 -- it imports MPI.BottomType, MPI.InPlaceType

out.append(("constants", type(MPI.BOTTOM).__name__, type(MPI.IN_PLACE).__name__, type(MPI.BOTTOM)() == MPI.BOTTOM,
            os.path.isfile(os.path.join(os.path.dirname(mpi4py.__file__), "py.typed"))))
sub = MPI.Info.Create()
out.append(("info_dup_type", type(sub.Dup()) is MPI.Info))

print("\n".join(f"{rank} {row}" for row in out), flush=True)  # one write: the ranks' lines do not mix
