"""Intercommunicators, Create_group and process topologies: every rank prints what it got, in lines
that MPICH prints the same (tests/test_mpirun_comms.py compares them). Run with 2 or 4 ranks. With a
folder as argument each rank writes its lines to RANK.txt there instead (mpiexec's relay of the
ranks' output may join two ranks' lines)."""

import os
import sys

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
out = []


def say(*words):
    out.append(" ".join(str(w) for w in (rank, *words)))


# -- intercommunicators ---------------------------------------------------------------------------------
color = 0 if rank < size // 2 else 1
intra = world.Split(color, key=-rank)  # the local ranks in reverse order
inter = intra.Create_intercomm(0, world, size // 2 - 1 if color else size - 1, tag=7)
say("inter", inter.Is_inter(), inter.rank, inter.size, inter.remote_size, inter.remote_group.size)
for high in (color == 1, color == 0):
    m = inter.Merge(high)
    say("merge", high, m.rank, m.size)
    m.Free()
r = inter.rank
say("sendrecv", inter.sendrecv(("from", rank), dest=r, source=r))
buf = np.zeros(3, "i")
for c in (0, 1):  # each group the root's in turn: its rank 0 the root
    if color == c:
        arr = np.arange(3, dtype="i") * (c + 1)
        inter.Bcast(arr if r == 0 else None, root=MPI.ROOT if r == 0 else MPI.PROC_NULL)
        me = MPI.ROOT if r == 0 else MPI.PROC_NULL
        say("bcast obj root", inter.bcast(("obj", rank) if r == 0 else None, root=me))
        g = np.zeros((inter.remote_size, 2), "d")
        inter.Gather(None, g if r == 0 else None, root=MPI.ROOT if r == 0 else MPI.PROC_NULL)
        if r == 0:
            say("gather", g.ravel().tolist())
        s = np.arange(inter.remote_size * 2, dtype="d").reshape(-1, 2) + 10 * c
        inter.Scatter(s if r == 0 else None, None, root=MPI.ROOT if r == 0 else MPI.PROC_NULL)
        red = np.zeros(2, "l")
        inter.Reduce(None, red if r == 0 else None, op=MPI.SUM, root=MPI.ROOT if r == 0 else MPI.PROC_NULL)
        if r == 0:
            say("reduce", red.tolist())
        say("reduce obj", inter.reduce(None, op=MPI.MAX, root=MPI.ROOT if r == 0 else MPI.PROC_NULL))
    else:
        inter.Bcast(buf, root=0)
        say("bcast", buf.tolist())
        say("bcast obj", inter.bcast(None, root=0))
        inter.Gather(np.full(2, rank, "d"), None, root=0)
        mine = np.zeros(2, "d")
        inter.Scatter(None, mine, root=0)
        say("scatter", mine.tolist())
        inter.Reduce(np.array([rank, 1], "l"), None, op=MPI.SUM, root=0)
        inter.reduce(rank * 3, op=MPI.MAX, root=0)
ag = np.zeros((inter.remote_size, 2), "i")
inter.Allgather(np.full(2, rank, "i"), ag)
say("allgather", ag.ravel().tolist(), inter.allgather(rank))
a2a = np.zeros((inter.remote_size, 1), "i")
inter.Alltoall(np.arange(inter.remote_size, dtype="i").reshape(-1, 1) + 100 * rank, a2a)
say("alltoall", a2a.ravel().tolist(), inter.alltoall([(rank, j) for j in range(inter.remote_size)]))
ar = np.zeros(3, "d")
inter.Allreduce(np.array([rank, 1.5, -rank], "d"), ar, op=MPI.SUM)
say("allreduce", ar.tolist(), inter.allreduce(rank, op=MPI.PROD))
rsb = np.zeros(2, "i")
inter.Reduce_scatter_block(np.arange(2 * inter.size, dtype="i") * (rank + 1), rsb, op=MPI.SUM)
say("reduce_scatter_block", rsb.tolist())
counts = [1 + i for i in range(inter.size)]
rs = np.zeros(counts[r], "i")
inter.Reduce_scatter(np.arange(sum(counts), dtype="i") + rank, rs, counts, op=MPI.MAX)
say("reduce_scatter", rs.tolist())
n = inter.remote_size
sw, rw = np.arange(2 * n, dtype="i") + 10 * rank, np.zeros(2 * n, "i")
inter.Alltoallw([sw, ([2] * n, [8 * j for j in range(n)]), [MPI.INT] * n],
                [rw, ([2] * n, [8 * j for j in range(n)]), [MPI.INT] * n])
say("alltoallw", rw.tolist())
inter.Barrier()
d = inter.Dup()
say("dup", type(d).__name__, d.size, d.remote_size, MPI.Comm.Compare(d, inter))
s = inter.Split(r, key=0)
say("split", s == MPI.COMM_NULL or (s.size, s.remote_size))
for c in (d, s, inter, intra):
    if c != MPI.COMM_NULL:
        c.Free()

# -- Create_group ---------------------------------------------------------------------------------------
evens = world.Get_group().Incl(list(range(0, size, 2)))
if rank % 2 == 0:
    cg = world.Create_group(evens, tag=3)
    say("create_group", cg.rank, cg.size, cg.allreduce(rank))
    cg.Free()

# -- topologies -----------------------------------------------------------------------------------------
dims = MPI.Compute_dims(size, 2)
cart = world.Create_cart(dims, periods=[True, False])
say("cart", cart.topo, cart.Shift(0, 1), cart.Shift(1, 1), cart.inedges)
sub = cart.Sub([True, False])
say("sub", sub.dims, sub.rank, sub.size, sub.coords)
nb = np.full((cart.indegree, 2), -1, "i")
cart.Neighbor_allgather(np.full(2, rank, "i"), nb)
say("cart allgather", nb.ravel().tolist())
send = np.arange(cart.outdegree * 2, dtype="i").reshape(-1, 2) + 10 * rank
got = np.full((cart.indegree, 2), -1, "i")
cart.Neighbor_alltoall(send, got)
say("cart alltoall", got.ravel().tolist(), cart.neighbor_allgather(rank))
index = list(range(2, 2 * size + 1, 2))
edges = [x for i in range(size) for x in ((i - 1) % size, (i + 1) % size)]
graph = world.Create_graph(index, edges)
say("graph", graph.topo == (index, edges), graph.neighbors, graph.Get_neighbors(0),
    graph.neighbor_alltoall(["a", rank]))
dg = world.Create_dist_graph_adjacent([(rank - 1) % size], [(rank + 1) % size, (rank + 2) % size], [5], [6, 7])
say("distgraph", dg.Get_dist_neighbors(), dg.Get_dist_neighbors_count())
req = dg.Ineighbor_alltoallv([np.arange(3, dtype="i") + rank, ([1, 2], [0, 1]), MPI.INT],
                             [rr := np.zeros(2, "i"), ([2], [0]), MPI.INT])
req.Wait()
say("ineighbor_alltoallv", rr.tolist())
g2 = world.Create_dist_graph([rank], [2], [(rank + 1) % size, (rank + 3) % size], [1, 2])
src, dst, w = g2.Get_dist_neighbors()
say("dist_graph", sorted(zip(src, w[0])), sorted(zip(dst, w[1])))
for c in (cart, sub, graph, dg, g2):
    c.Free()
if rank == 0:
    for nodes in (*range(1, 49), 360, 1000, 1024):
        say("dims", nodes, [MPI.Compute_dims(nodes, k) for k in (1, 2, 3, 4, 5)])
    say("dims", MPI.Compute_dims(24, [0, 3, 0]), MPI.Compute_dims(4, []))
if len(sys.argv) > 1:
    with open(os.path.join(sys.argv[1], f"{rank}.txt"), "w") as f:
        f.write("\n".join(out) + "\n")
else:
    print("\n".join(out), flush=True)
