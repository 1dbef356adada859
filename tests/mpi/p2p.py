"""Point to point: objects and buffers, wildcards, statuses, probes, requests, persistent requests,
cancel, PROC_NULL. Every rank checks what it got and prints 'ok <rank>'."""
import array
import mmap

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# objects: blocking, synchronous, buffered, nonblocking
comm.send(("hi", rank), dest=right, tag=1)
assert comm.recv(source=left, tag=1) == ("hi", left)
if rank == 0:
    comm.ssend({"x": [1, 2, 3]}, dest=1, tag=2)
    MPI.Attach_buffer(bytearray(1 << 12))  # a buffered send needs a buffer attached
    comm.bsend(3.5, dest=1, tag=3)
    assert len(MPI.Detach_buffer()) == 1 << 12
elif rank == 1:
    st = MPI.Status()
    assert comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st) == {"x": [1, 2, 3]}
    assert (st.Get_source(), st.Get_tag()) == (0, 2) and st.Get_count() > 0
    assert comm.recv(source=0, tag=3) == 3.5
r = comm.isend(rank * 10, dest=right, tag=4)
assert comm.irecv(source=left, tag=4).wait() == left * 10
r.wait()
assert comm.sendrecv(rank, dest=right, source=left) == left

# buffers of every kind: numpy, bytearray, array, mmap; count and datatype given or not
a = np.arange(8, dtype="d") + rank
b = np.zeros(8, dtype="d")
comm.Sendrecv(a, dest=right, recvbuf=b, source=left)
assert (b == np.arange(8) + left).all()
ba = bytearray(b"%03d" % rank)
got = bytearray(3)
comm.Sendrecv([ba, MPI.BYTE], right, 5, [got, MPI.BYTE], left, 5)
assert got == b"%03d" % left
ar = array.array("i", [rank] * 4)
ar2 = array.array("i", [0] * 4)
reqs = [comm.Irecv([ar2, 4, MPI.INT], left, 6), comm.Isend(ar, right, 6)]
MPI.Request.Waitall(reqs)
assert list(ar2) == [left] * 4 and all(q == MPI.REQUEST_NULL for q in reqs)
mm = mmap.mmap(-1, 16)
mm[:] = bytes([rank]) * 16
out = mmap.mmap(-1, 16)
comm.Sendrecv([mm, 16, MPI.BYTE], right, 7, [out, 16, MPI.BYTE], left, 7)
assert out[:] == bytes([left]) * 16
req = comm.Issend([a, 2, MPI.DOUBLE], right, 8)  # a ring of blocking Ssend would deadlock
st = MPI.Status()
comm.Recv([b, 8, MPI.DOUBLE], left, 8, st)
req.Wait()
assert st.Get_count(MPI.DOUBLE) == 2 and st.Get_count() == 16 and b[0] == left

# probe before receiving; ANY_TAG; an Iprobe that finds nothing
if rank == 0:
    comm.Send(np.arange(5, dtype="i"), dest=1, tag=42)
comm.Barrier()
if rank == 1:
    st = MPI.Status()
    comm.Probe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
    assert (st.source, st.tag, st.Get_count(MPI.INT)) == (0, 42, 5)
    assert not comm.Iprobe(0, 99)
    buf = np.empty(st.Get_count(MPI.INT), "i")
    comm.Recv(buf, st.source, st.tag)
    assert buf.tolist() == [0, 1, 2, 3, 4]

# Waitany, Waitsome, Testall, Test
reqs = [comm.Irecv(np.empty(1, "i"), left, 10 + k) for k in range(3)]
for k in (2, 0, 1):
    comm.Send(np.array([k], "i"), right, 10 + k)
seen = set()
while len(seen) < 3:
    i = MPI.Request.Waitany(reqs)
    seen.add(i)
assert seen == {0, 1, 2} and MPI.Request.Waitany(reqs) == MPI.UNDEFINED
reqs = [comm.Irecv(np.empty(1, "i"), left, 20 + k) for k in range(2)]
comm.Send(np.array([1], "i"), right, 20)
comm.Send(np.array([1], "i"), right, 21)
done = []
while len(done) < 2:
    done += MPI.Request.Waitsome(reqs) or []
assert sorted(done) == [0, 1] and MPI.Request.Testall(reqs)

# persistent requests, started three times
sbuf, rbuf = np.zeros(1, "i"), np.zeros(1, "i")
ps = comm.Send_init(sbuf, right, 30)
pr = comm.Recv_init(rbuf, left, 30)
for it in range(3):
    sbuf[0] = rank * 100 + it
    MPI.Prequest.Startall([pr, ps])
    MPI.Request.Waitall([pr, ps])
    assert rbuf[0] == left * 100 + it
ps.Free()
pr.Free()

# cancel a receive nobody sends to; PROC_NULL
r = comm.Irecv(np.empty(1, "i"), left, 999)
r.Cancel()
st = MPI.Status()
r.Wait(st)
assert st.Is_cancelled()
comm.Send(a, MPI.PROC_NULL)
st = MPI.Status()
comm.Recv(b, MPI.PROC_NULL, status=st)
assert st.Get_source() == MPI.PROC_NULL and st.Get_count() == 0

# a message longer than the buffer: MPI_ERR_TRUNCATE
if rank == 0:
    comm.Send(np.zeros(4, "i"), 1, 77)
elif rank == 1:
    try:
        comm.Recv(np.zeros(2, "i"), 0, 77)
        raise AssertionError("a truncated receive must fail")
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE
print(f"ok {rank}", flush=True)
