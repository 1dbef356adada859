"""What mpi4py's own test suite still found missing under emu mpirun (round 3 of issue 40), printed so that
the lines compare with MPICH's (tests/test_mpirun_suite_gaps3.py runs it both ways): the buffer constants,
handles read and written through ctypes, topology constructors, the ABI calls, an MPI 4.1 library's
Split_type kinds and buffered-send buffers, a contiguous type beyond INT_MAX, docstrings, mpi4py.profile."""
import ctypes
import operator
import pickle
import warnings

import mpi4py
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []

# MPI.BOTTOM, IN_PLACE, BUFFER_AUTOMATIC: integers by value, empty buffers of no object, pickled by name
for c in (MPI.BOTTOM, MPI.IN_PLACE, MPI.BUFFER_AUTOMATIC):
    m = memoryview(c)
    try:
        c + 1
        add = "added"
    except TypeError:
        add = "TypeError"
    out.append(("constant", repr(c), int(c), c == int(c), c != int(c), c == None, hash(c) == hash(int(c)),  # noqa: E711
                bool(c), m.nbytes, m.obj is None, m.readonly, MPI.Get_address(c) == c, type(c)() == c,
                pickle.loads(pickle.dumps(c)) is c, add))
out.append(("bottom_index", operator.index(MPI.BOTTOM)))

# a handle's memory: ctypes reads the handle there, and writing one there makes the object that handle
sized = {ctypes.sizeof(ctypes.c_int): ctypes.c_int, ctypes.sizeof(ctypes.c_void_p): ctypes.c_void_p}
same, values = [], []
for obj in (MPI.DATATYPE_NULL, MPI.INT, MPI.DOUBLE, MPI.REQUEST_NULL, MPI.INFO_NULL, MPI.INFO_ENV, MPI.ERRORS_RETURN,
            MPI.GROUP_NULL, MPI.GROUP_EMPTY, MPI.WIN_NULL, MPI.OP_NULL, MPI.SUM, MPI.MAX, MPI.FILE_NULL,
            MPI.MESSAGE_NULL, MPI.MESSAGE_NO_PROC, MPI.COMM_NULL, MPI.COMM_SELF, MPI.COMM_WORLD):
    t = sized[MPI._sizeof(obj)]
    new = type(obj)()
    t.from_address(MPI._addressof(new)).value = t.from_address(MPI._addressof(obj)).value
    same.append(obj == new)
    values.append((t.from_address(MPI._addressof(obj)).value or 0) == MPI._handleof(obj))
dup = MPI.INT.Dup()
at = MPI._addressof(dup)
dup.Free()  # freed: the handle in memory is the null one again
out.append(("ctypes_handles", all(same), all(values), dup == MPI.DATATYPE_NULL, at == MPI._addressof(dup)))

# a topology's constructor takes a communicator of that topology only
cart, graph = MPI.COMM_SELF.Create_cart([1]), MPI.COMM_SELF.Create_graph([0, 1], [0])
dist = MPI.COMM_SELF.Create_dist_graph([], [], [])
refused = []
for cls, c in ((MPI.Graphcomm, cart), (MPI.Distgraphcomm, cart), (MPI.Cartcomm, graph), (MPI.Distgraphcomm, graph),
               (MPI.Cartcomm, dist), (MPI.Graphcomm, dist)):
    try:
        cls(c)
        refused.append(False)
    except TypeError:
        refused.append(True)
out.append(("topo_constructors", refused, MPI.Cartcomm(cart) == cart, type(MPI.Topocomm(graph)).__name__))
for c in (cart, graph, dist):
    c.Free()

# the MPI 5.0 ABI calls, as mpi4py answers them for a library without a standard ABI
info = MPI.Get_abi_info()
out.append(("abi", MPI.Get_abi_version(), sorted(info.items())))
info.Free()

# an MPI 4.1 library: the hardware-guided Split_type kinds (on COMM_SELF: this rank alone)
out.append(("version", MPI.Get_version() >= (4, 1)))
for kind in (MPI.COMM_TYPE_HW_GUIDED, MPI.COMM_TYPE_RESOURCE_GUIDED):
    row = [MPI.COMM_SELF.Split_type(kind) == MPI.COMM_NULL]
    info = MPI.Info.Create()
    info.Set("mpi_hw_resource_type", "@dont-thread-on-me@")
    row.append(MPI.COMM_SELF.Split_type(kind, info=info) == MPI.COMM_NULL)
    info.Set("mpi_hw_resource_type", "mpi_shared_memory")
    c = MPI.COMM_SELF.Split_type(kind, info=info)
    row += [c.Get_size(), info.Get("mpi_hw_resource_type")]
    c.Free()
    info.Free()
    out.append(("split_type", kind, row))
info = MPI.Info.Create()
out.append(("split_unguided_self", MPI.COMM_SELF.Split_type(MPI.COMM_TYPE_HW_UNGUIDED, info=info) == MPI.COMM_NULL))
info.Free()

# MPI 4.1 buffered-send buffers: a communicator's own, BUFFER_AUTOMATIC, flushes
c = comm.Dup()
buf = MPI.Alloc_mem(1 << 12)
c.Attach_buffer(buf)
peer = (rank + 1) % size
c.Bsend(bytearray(100), peer, 7)
got = bytearray(100)
c.Recv(got, (rank - 1) % size, 7)
c.Flush_buffer()
c.Iflush_buffer().Wait()
old = c.Detach_buffer()
row = [old.address == buf.address, old.nbytes == buf.nbytes]
small, c2 = MPI.Alloc_mem(16), comm.Dup()
try:
    c2.Attach_buffer(small)  # smaller than BSEND_OVERHEAD
    row.append("attached")
except MPI.Exception as e:
    row.append(e.Get_error_class() == MPI.ERR_BUFFER)
MPI.Free_mem(small)
small = MPI.Alloc_mem(200)
c.Attach_buffer(small)
try:
    c.Bsend(bytearray(1000), peer, 8)
    row.append("sent")
except MPI.Exception as e:
    row.append(e.Get_error_class() == MPI.ERR_BUFFER)
c.Detach_buffer()
c.Attach_buffer(MPI.BUFFER_AUTOMATIC)
c.Bsend(bytearray(1 << 16), peer, 9)
c.Recv(bytearray(1 << 16), (rank - 1) % size, 9)
row.append(c.Detach_buffer() == MPI.BUFFER_AUTOMATIC)
MPI.Attach_buffer(None)
MPI.Flush_buffer()
MPI.Iflush_buffer().Wait()
row.append(MPI.Detach_buffer() == MPI.BUFFER_AUTOMATIC)
out.append(("buffers", row))
MPI.Free_mem(buf)
MPI.Free_mem(small)
c.Free()

# a contiguous type of more than INT_MAX elements (an MPI 4 library's large counts)
int_max = (1 << 31) - 1
t = MPI.BYTE.Create_contiguous(int_max + int_max // 1024)
base, combiner, params = t.decode()
out.append(("big_contiguous", t.size, base == MPI.BYTE, combiner, params))
t.Free()

# docstrings as mpi4py's: the signature, then what the call does
out.append(("doc", MPI.Comm.Get_rank.__doc__, MPI.Init.__doc__, MPI.Comm.rank.__doc__))

# mpi4py.profile finds the library (ValueError if not) and warns when it cannot load it
row = []
try:
    mpi4py.profile("@querty", path=["/usr/lib"])
except ValueError:
    row.append("ValueError")
with warnings.catch_warnings():
    warnings.simplefilter("error", UserWarning)
    try:
        mpi4py.profile("hosts", path=["/etc"])
    except UserWarning:
        row.append("UserWarning")
out.append(("profile", row))

for r in range(size):  # one rank after the other (hydra interleaves what two ranks write at once)
    if r == rank:
        print("".join(f"{rank} {row!r}\n" for row in out), end="", flush=True)
    comm.Barrier()
