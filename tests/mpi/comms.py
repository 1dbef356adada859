"""Communicators and groups, derived datatypes, the module-level calls. Prints 'ok <rank>'."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# module-level calls, as a real MPI answers them
assert MPI.Is_initialized() and not MPI.Is_finalized()
assert MPI.Query_thread() in (MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE)
assert MPI.THREAD_SINGLE < MPI.THREAD_FUNNELED < MPI.THREAD_SERIALIZED < MPI.THREAD_MULTIPLE
try:
    MPI.Init()
    raise AssertionError("MPI.Init twice must fail")
except MPI.Exception:
    pass
assert isinstance(MPI.Get_version(), tuple) and isinstance(MPI.Get_library_version(), str)
assert isinstance(MPI.get_vendor()[0], str) and MPI.Wtick() > 0
EMULATED = MPI.get_vendor()[0] == "hpc-emu"
assert MPI.Get_processor_name() == f"h{rank}" or not EMULATED
t0 = MPI.Wtime()
comm.Barrier()
assert MPI.Wtime() >= t0
assert comm.Get_attr(MPI.TAG_UB) >= 32767
assert MPI.COMM_SELF.Get_size() == 1 and MPI.COMM_SELF.allreduce(5) == 5
if EMULATED:  # what the emulated library does not have says so
    try:
        MPI.Comm_spawn_nothing_here
        raise AssertionError("an unsupported call must raise")
    except NotImplementedError as e:
        assert "Comm_spawn_nothing_here" in str(e)
    assert not hasattr(MPI, "Win_allocate_nothing")

# communicators: Dup, Split, Create from a group, Free
dup = comm.Dup()
assert dup.Get_size() == size and dup.Get_rank() == rank and dup != comm
comm.send("world", dest=(rank + 1) % size, tag=1)
dup.send("dup", dest=(rank + 1) % size, tag=1)
assert dup.recv(source=(rank - 1) % size, tag=1) == "dup"  # contexts keep them apart
assert comm.recv(source=(rank - 1) % size, tag=1) == "world"
dup.Free()
assert dup == MPI.COMM_NULL
half = comm.Split(color=rank % 2, key=-rank)
members = [r for r in range(size) if r % 2 == rank % 2]
assert half.Get_size() == len(members) and half.Get_rank() == sorted(members, reverse=True).index(rank)
assert half.allreduce(rank) == sum(members)
none = comm.Split(MPI.UNDEFINED if rank == 0 else 1, 0)
assert (none == MPI.COMM_NULL) == (rank == 0)
group = comm.Get_group()
evens = group.Incl(list(range(0, size, 2)))
assert evens.Get_size() == (size + 1) // 2 and group.Excl([0]).Get_size() == size - 1
sub = comm.Create(evens)
if rank % 2 == 0:
    assert sub.Get_rank() == rank // 2 and sub.allreduce(1) == evens.Get_size()
    sub.Free()
else:
    assert sub == MPI.COMM_NULL
half.Free()

# derived datatypes: contiguous, vector, indexed, struct; sizes and extents
assert (MPI.INT.Get_size(), MPI.DOUBLE.Get_extent(), MPI.DOUBLE_INT.Get_size()) == (4, (0, 8), 12)
try:
    MPI.DATATYPE_NULL.Get_size()
    raise AssertionError("DATATYPE_NULL has no size")
except MPI.Exception:
    pass
vec = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
assert (vec.Get_size(), vec.Get_extent()) == (24, (0, 40))
src = np.arange(6, dtype="d") + 10 * rank
dst = np.zeros(6, "d")
comm.Sendrecv([src, 1, vec], (rank + 1) % size, 2, [dst, 1, vec], (rank - 1) % size, 2)
left = (rank - 1) % size
assert dst.tolist() == [10 * left, 0, 10 * left + 2, 0, 10 * left + 4, 0]
con = MPI.INT.Create_contiguous(3).Commit()
idx = MPI.INT.Create_indexed([2, 1], [0, 4]).Commit()
assert (con.size, con.extent, idx.size, idx.extent) == (12, 12, 12, 20)
st = MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.DOUBLE, MPI.INT]).Commit()
assert (st.Get_size(), st.Get_extent()[1]) == (16, 16)
rec = np.zeros(1, dtype=np.dtype([("d", "d"), ("i", "i", 2)]))
rec["d"], rec["i"] = rank + 0.5, [rank, -rank]
got = np.zeros_like(rec)
comm.Sendrecv([rec, 1, st], (rank + 1) % size, 3, [got, 1, st], left, 3)
assert got["d"][0] == left + 0.5 and got["i"][0].tolist() == [left, -left]
for t in (vec, con, idx, st):
    t.Free()
print(f"ok {rank}", flush=True)
