"""A ping-pong of SIZE bytes, N round trips: rank 0 prints the virtual ns they took
(argv: SIZE N). Used by tests/test_mpirun.py and tests/test_mpirun_protocol.py."""
import sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
size, n = int(sys.argv[1]), int(sys.argv[2])
buf = bytearray(size)
comm.Barrier()
t0 = MPI.Wtime()
for _ in range(n):
    if comm.rank == 0:
        comm.Send(buf, 1, 1)
        comm.Recv(buf, 1, 1)
    else:
        comm.Recv(buf, 0, 1)
        comm.Send(buf, 0, 1)
if comm.rank == 0:
    print(round((MPI.Wtime() - t0) * 1e9))
