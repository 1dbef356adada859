"""Process topologies of the emulated ``mpi4py.MPI`` (rank side): ``Topocomm`` and its
``Cartcomm``, ``Graphcomm``, ``Distgraphcomm``; ``Intracomm.Create_cart``, ``Create_graph``,
``Create_dist_graph(_adjacent)``, ``Cart_map``, ``Graph_map`` and ``MPI.Compute_dims``.

A topology is what its ranks know of it: each rank holds the arrays it was given (a Cartesian grid,
a graph, its own edges of a distributed graph -- ``Create_dist_graph`` gathers the edges every rank
named), and the communicator under it is a new one on the emulator (the ranks kept in their order:
``reorder`` is allowed not to move them, and does not). The neighbor collectives go point to point
between neighbors on the emulated fabric (``emu.front.mpicomms.h_neighbor``).
"""

from __future__ import annotations

import math
import struct

from .buffers import Msg
from .channel import CHANNEL
from .comm import PROC_NULL, UNDEFINED, Request, _pickle, _pickles
from .inter import _blocks, attach, w_pack, w_unpack
from .blockcoll import _objects
from .icoll import _persistent
from .intracomm import COMM_NULL, Comm, Intracomm
from .pickling import PICKLE
from .types import Exception

GRAPH, CART, DIST_GRAPH = 1, 2, 3
"""MPICH's values."""
ERR_ARG, ERR_RANK, ERR_TOPOLOGY, ERR_DIMS = 12, 6, 10, 11
UNWEIGHTED = type("Unweighted", (), {"__repr__": lambda self: "<emulated MPI.UNWEIGHTED>"})()
WEIGHTS_EMPTY = type("WeightsEmpty", (), {"__repr__": lambda self: "<emulated MPI.WEIGHTS_EMPTY>"})()
_LEN = struct.Struct("<q")


class _NeighborRequest(Request):
    """A nonblocking neighbor collective's request: its parts go to the receive buffer when it ends."""

    @classmethod
    def _neighbor(cls, rid: int, deliver) -> "_NeighborRequest":
        req = cls._make(rid, "neighbor")
        req._h.deliver = deliver
        return req

    def _finish(self, row, data) -> None:
        self._status()._set(row)
        self._h.deliver(data)
        self._done()


def _received(data, n: int) -> list:
    """The parts a neighbor collective received, in in-edge order (None: from PROC_NULL)."""
    lens = [_LEN.unpack_from(data, 8 * i)[0] for i in range(n)]
    out, at = [], 8 * n
    for k in lens:
        out.append(None if k < 0 else bytes(data[at:at + k]))
        at += max(k, 0)
    return out


def _vspec(spec, blocks: int):
    """``[buf, count, T]`` in a v-variant: ``count`` for every block, one after the other."""
    if isinstance(spec, (list, tuple)) and len(spec) == 3 and isinstance(spec[1], int):
        return [spec[0], ([spec[1]] * blocks, [spec[1] * i for i in range(blocks)]), spec[2]]
    return spec


class Topocomm(Intracomm):
    """An intracommunicator with a process topology. ``MPI.Topocomm(comm)`` (and each kind's
    constructor) of a communicator without that topology raises TypeError, as mpi4py's does."""

    _topology = UNDEFINED

    _strict = True

    @classmethod
    def _with(cls, comm: Comm, **topo):
        """``comm`` (a new communicator) with this topology: the same handle, of this class."""
        if not comm:
            return COMM_NULL
        obj = cls._of(comm._h)
        obj._h.__dict__.update(topo)
        obj._h.__dict__.pop("_nbrs", None)
        obj._h.cls = cls
        return obj

    def __getattr__(self, name):
        if name.startswith("_t_") and self._h is not None and name in self._h.__dict__:
            return self._h.__dict__[name]
        return super().__getattr__(name)

    def _topo(self) -> dict:
        return {k: v for k, v in self._h.__dict__.items() if k.startswith("_t_")}

    def Get_topology(self) -> int:
        return self._topology

    is_topo = property(lambda self: True)

    def Dup(self, info=None):
        return type(self)._with(Intracomm.Dup(self), **self._topo())

    Clone = Dup

    # -- neighbors ---------------------------------------------------------------------------------
    def _edges(self) -> tuple[list[int], list[int]]:
        raise NotImplementedError

    def _nbrs(self) -> tuple[list[int], list[int]]:
        """``_edges``, worked out once per communicator (its topology does not change): the neighbor
        collectives' in- and out-edges, not to be changed."""
        h = self._h
        if h is None:
            self._ok()  # (raises: COMM_NULL)
        d = h.__dict__
        e = d.get("_nbrs")
        if e is None:
            e = d["_nbrs"] = self._edges()
        return e

    degrees = property(lambda self: (len(self._edges()[0]), len(self._edges()[1])))
    indegree = property(lambda self: len(self._edges()[0]))
    outdegree = property(lambda self: len(self._edges()[1]))
    inedges = property(lambda self: list(self._edges()[0]))
    outedges = property(lambda self: list(self._edges()[1]))
    inoutedges = property(lambda self: tuple(list(e) for e in self._edges()))

    def _tags(self) -> dict:
        """How a receive from an in-edge is told from another of the same rank: by the order of the
        messages (a graph's edges), unless the topology says otherwise."""
        return {}

    def _neighbor(self, parts: list[bytes], call: str, deliver, nb: bool):
        srcs, dsts = self._nbrs()
        if len(parts) != len(dsts):
            raise ValueError(f"expecting {len(dsts)} items, got {len(parts)}")
        head, data = CHANNEL.call("neighbor", b"".join(parts), ctx=self._ok(), srcs=srcs, dsts=dsts,
                                  lens=[len(p) for p in parts], nb=nb, call=call, **self._tags())
        n = len(srcs)
        if nb:
            return _NeighborRequest._neighbor(head["req"], lambda d: deliver(_received(d, n)))
        return deliver(_received(data, n))

    def _gather_buf(self, sendbuf, recvbuf, vector: bool, call: str, nb: bool):
        srcs, dsts = self._nbrs()
        mine = Msg(sendbuf).pack()
        spec = _vspec(recvbuf, len(srcs)) if vector else recvbuf
        out = Msg(spec, writable=True, vector=vector, blocks=max(len(srcs), 1))
        return self._neighbor([mine] * len(dsts), call, lambda got: _fill(out, vector, got), nb)

    def _alltoall_buf(self, sendbuf, recvbuf, vector: bool, call: str, nb: bool):
        srcs, dsts = self._nbrs()
        if vector:
            sendbuf, recvbuf = _vspec(sendbuf, len(dsts)), _vspec(recvbuf, len(srcs))
        src = Msg(sendbuf, vector=vector, blocks=max(len(dsts), 1))
        out = Msg(recvbuf, writable=True, vector=vector, blocks=max(len(srcs), 1))
        return self._neighbor(_blocks(src, vector, len(dsts)), call, lambda got: _fill(out, vector, got), nb)

    def _alltoallw(self, sendbuf, recvbuf, call: str, nb: bool):
        srcs, dsts = self._nbrs()

        def deliver(got):
            skip = {i for i, p in enumerate(got) if p is None}
            w_unpack(recvbuf, len(srcs), [len(p or b"") for p in got], b"".join(p or b"" for p in got), skip)

        return self._neighbor(w_pack(sendbuf, len(dsts)), call, deliver, nb)

    def Neighbor_allgather(self, sendbuf, recvbuf) -> None:
        self._gather_buf(sendbuf, recvbuf, False, "Neighbor_allgather", False)

    def Neighbor_allgatherv(self, sendbuf, recvbuf) -> None:
        self._gather_buf(sendbuf, recvbuf, True, "Neighbor_allgatherv", False)

    def Neighbor_alltoall(self, sendbuf, recvbuf) -> None:
        self._alltoall_buf(sendbuf, recvbuf, False, "Neighbor_alltoall", False)

    def Neighbor_alltoallv(self, sendbuf, recvbuf) -> None:
        self._alltoall_buf(sendbuf, recvbuf, True, "Neighbor_alltoallv", False)

    def Neighbor_alltoallw(self, sendbuf, recvbuf) -> None:
        self._alltoallw(sendbuf, recvbuf, "Neighbor_alltoallw", False)

    def Ineighbor_allgather(self, sendbuf, recvbuf) -> Request:
        return self._gather_buf(sendbuf, recvbuf, False, "Ineighbor_allgather", True)

    def Ineighbor_allgatherv(self, sendbuf, recvbuf) -> Request:
        return self._gather_buf(sendbuf, recvbuf, True, "Ineighbor_allgatherv", True)

    def Ineighbor_alltoall(self, sendbuf, recvbuf) -> Request:
        return self._alltoall_buf(sendbuf, recvbuf, False, "Ineighbor_alltoall", True)

    def Ineighbor_alltoallv(self, sendbuf, recvbuf) -> Request:
        return self._alltoall_buf(sendbuf, recvbuf, True, "Ineighbor_alltoallv", True)

    def Ineighbor_alltoallw(self, sendbuf, recvbuf) -> Request:
        return self._alltoallw(sendbuf, recvbuf, "Ineighbor_alltoallw", True)

    def neighbor_allgather(self, sendobj) -> list:
        out = self._neighbor([_pickle(sendobj)] * len(self._nbrs()[1]), "neighbor_allgather", _objs, False)
        return out

    def neighbor_alltoall(self, sendobj) -> list:
        return self._neighbor(_pickles(sendobj, len(self._nbrs()[1])), "neighbor_alltoall", _objs, False)


def _objs(got) -> list:
    return [None if p is None else PICKLE.loads(p) for p in got]


def _fill(out: Msg, vector: bool, got) -> None:
    for i, p in enumerate(got):
        if p is not None:  # from PROC_NULL: the block stays as it was
            out.unpack(p, out.counts[i] if vector else out.count, out.displs[i] if vector else i * out.count)


# -- Cartesian ------------------------------------------------------------------------------------------
class Cartcomm(Topocomm):
    _topology = CART
    _strict = True  # MPI.Cartcomm(a communicator of another topology): TypeError

    def Get_dim(self) -> int:
        return len(self._t_dims)

    dim = ndim = property(Get_dim)
    dims = property(lambda self: list(self._t_dims))
    periods = property(lambda self: [int(p) for p in self._t_periods])
    """As mpi4py gives them: ints (1: periodic)."""
    coords = property(lambda self: self.Get_coords(self._rank))

    def Get_topo(self) -> tuple[list[int], list[bool], list[int]]:
        return list(self._t_dims), self.periods, self.Get_coords(self._rank)

    topo = property(Get_topo)

    def Get_cart_rank(self, coords) -> int:
        coords = [int(c) for c in coords]
        if len(coords) != len(self._t_dims):
            raise ValueError(f"expecting {len(self._t_dims)} items, got {len(coords)}")
        rank = 0
        for c, d, p in zip(coords, self._t_dims, self._t_periods):
            if not 0 <= c < d:
                if not p:
                    raise Exception(ERR_ARG, f"MPI_ERR_ARG: coordinate {c} is outside a non-periodic dimension of {d}")
                c %= d
            rank = rank * d + c
        return rank

    def Get_coords(self, rank: int) -> list[int]:
        if not 0 <= rank < self._size:
            raise Exception(ERR_RANK, f"MPI_ERR_RANK: invalid rank {rank}")
        out = []
        for d in reversed(self._t_dims):
            out.append(rank % d)
            rank //= d
        return out[::-1]

    def _moved(self, direction: int, disp: int) -> int:
        coords = self.Get_coords(self._rank)
        c, d = coords[direction] + disp, self._t_dims[direction]
        if not 0 <= c < d and not self._t_periods[direction]:
            return PROC_NULL
        coords[direction] = c % d
        return self.Get_cart_rank(coords)

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        if not 0 <= direction < len(self._t_dims):
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: invalid direction {direction}")
        return self._moved(direction, -disp), self._moved(direction, disp)

    def _edges(self):
        edges = [self._moved(i, d) for i in range(len(self._t_dims)) for d in (-1, 1)]
        return edges, edges

    def _tags(self) -> dict:
        """A Cartesian neighbor's message is told by its direction (MPI 4.0 §7.6): what a rank sends
        in dimension i's + direction fills the receiver's slot of its - neighbor, and the other way
        round -- even where both neighbors are one rank (a periodic dimension of 1 or 2), as MPICH."""
        n = 2 * len(self._t_dims)
        return {"stags": list(range(n)), "rtags": [k ^ 1 for k in range(n)]}

    def Sub(self, remain_dims) -> "Cartcomm":
        keep = [bool(k) for k in remain_dims]
        if len(keep) != len(self._t_dims):
            raise ValueError(f"expecting {len(self._t_dims)} items, got {len(keep)}")
        coords, color, key = self.Get_coords(self._rank), 0, 0
        for c, d, k in zip(coords, self._t_dims, keep):
            if k:
                key = key * d + c
            else:
                color = color * d + c
        sub = self._made(CHANNEL.call("split", ctx=self._ok(), color=color, key=key, call="Sub")[0])
        return Cartcomm._with(sub, _t_dims=[d for d, k in zip(self._t_dims, keep) if k],
                            _t_periods=[p for p, k in zip(self._t_periods, keep) if k])


# -- graphs -------------------------------------------------------------------------------------------
class Graphcomm(Topocomm):
    _topology = GRAPH
    _strict = True  # MPI.Graphcomm(a communicator of another topology): TypeError

    def Get_dims(self) -> tuple[int, int]:
        return len(self._t_index), len(self._t_edges)

    dims = property(Get_dims)
    nnodes = property(lambda self: len(self._t_index))
    nedges = property(lambda self: len(self._t_edges))
    index = property(lambda self: list(self._t_index))
    edges = property(lambda self: list(self._t_edges))

    def Get_topo(self) -> tuple[list[int], list[int]]:
        return list(self._t_index), list(self._t_edges)

    topo = property(Get_topo)

    def Get_neighbors(self, rank: int) -> list[int]:
        if not 0 <= rank < len(self._t_index):
            raise Exception(ERR_RANK, f"MPI_ERR_RANK: invalid rank {rank}")
        return list(self._t_edges[self._t_index[rank - 1] if rank else 0:self._t_index[rank]])

    def Get_neighbors_count(self, rank: int) -> int:
        return len(self.Get_neighbors(rank))

    neighbors = property(lambda self: self.Get_neighbors(self._rank))
    nneighbors = property(lambda self: self.Get_neighbors_count(self._rank))

    def _edges(self):
        mine = self.Get_neighbors(self._rank)
        return mine, mine


class Distgraphcomm(Topocomm):
    _topology = DIST_GRAPH
    _strict = True  # MPI.Distgraphcomm(a communicator of another topology): TypeError

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        return len(self._t_sources), len(self._t_dests), self._t_weights is not None

    def Get_dist_neighbors(self):
        w = self._t_weights
        return list(self._t_sources), list(self._t_dests), (None if w is None else (list(w[0]), list(w[1])))

    def _edges(self):
        return list(self._t_sources), list(self._t_dests)


# -- making them (Intracomm's calls) -------------------------------------------------------------------
def _ints(seq, what: str) -> list[int]:
    return [int(x) for x in seq] if seq is not None else []


def _subset(self, n: int, call: str):
    """The first ``n`` ranks of ``self`` in a new communicator (COMM_NULL elsewhere)."""
    if n > self._size:
        raise Exception(ERR_TOPOLOGY, f"MPI_ERR_TOPOLOGY: {call} of {n} ranks on a communicator of {self._size}")
    color = 0 if self._rank < n else UNDEFINED
    return self._made(CHANNEL.call("split", ctx=self._ok(), color=color, key=self._rank, call=call)[0])


def _cart_args(dims, periods):
    dims = _ints(dims, "dims")
    if periods is None:
        periods = False
    if isinstance(periods, bool):
        periods = [periods] * len(dims)
    periods = [bool(p) for p in periods]
    if len(periods) != len(dims):
        raise ValueError(f"expecting {len(dims)} items, got {len(periods)}")
    if any(d <= 0 for d in dims):
        raise Exception(ERR_DIMS, f"MPI_ERR_DIMS: invalid dimensions {dims}")
    return dims, periods


def create_cart(self, dims, periods=None, reorder: bool = False) -> Cartcomm:
    dims, periods = _cart_args(dims, periods)
    return Cartcomm._with(_subset(self, math.prod(dims), "Create_cart"), _t_dims=dims, _t_periods=periods)


def cart_map(self, dims, periods=None) -> int:
    dims, periods = _cart_args(dims, periods)
    return self.Get_rank() if self.Get_rank() < math.prod(dims) else UNDEFINED


def _graph_args(self, index, edges):
    index, edges = _ints(index, "index"), _ints(edges, "edges")
    if index and index[0] == 0 and index[-1] == len(edges):  # mpi4py's 'standard' adjacency arrays
        index = index[1:]
    if any(b < a for a, b in zip([0] + index, index)) or (index and index[-1] != len(edges)):
        raise Exception(ERR_ARG, f"MPI_ERR_ARG: invalid graph index {index} for {len(edges)} edges")
    if any(not 0 <= e < len(index) for e in edges):
        raise Exception(ERR_ARG, f"MPI_ERR_ARG: an edge to a node the graph has not ({edges})")
    return index, edges


def create_graph(self, index, edges, reorder: bool = False) -> Graphcomm:
    index, edges = _graph_args(self, index, edges)
    return Graphcomm._with(_subset(self, len(index), "Create_graph"), _t_index=index, _t_edges=edges)


def graph_map(self, index, edges) -> int:
    index, edges = _graph_args(self, index, edges)
    return self.Get_rank() if self.Get_rank() < len(index) else UNDEFINED


def _weights(w, n: int):
    if w is None or w is UNWEIGHTED:
        return None
    if w is WEIGHTS_EMPTY:
        if n > 0:
            raise ValueError("empty weights but nonzero degree")
        return []
    w = [int(x) for x in w]
    if len(w) != n:
        raise ValueError(f"expecting {n} items, got {len(w)}")
    return w


def _check_ranks(self, ranks) -> None:
    bad = [r for r in ranks if not 0 <= r < self._size]
    if bad:
        raise Exception(ERR_RANK, f"MPI_ERR_RANK: invalid rank {bad[0]} (the communicator has {self._size})")


def create_dist_graph_adjacent(self, sources, destinations, sourceweights=None, destweights=None, info=None,
                               reorder: bool = False) -> Distgraphcomm:
    src, dst = _ints(sources, "sources"), _ints(destinations, "destinations")
    sw, dw = _weights(sourceweights, len(src)), _weights(destweights, len(dst))
    if (sw is None) != (dw is None):
        raise Exception(ERR_ARG, "MPI_ERR_ARG: give MPI.UNWEIGHTED for both or neither weight arguments")
    _check_ranks(self, src + dst)
    new = self._made(CHANNEL.call("dup", ctx=self._ok(), call="Create_dist_graph_adjacent")[0])
    return Distgraphcomm._with(new, _t_sources=src, _t_dests=dst, _t_weights=None if sw is None else (sw, dw))


def create_dist_graph(self, sources, degrees, destinations, weights=None, info=None,
                      reorder: bool = False) -> Distgraphcomm:
    """Every rank names some edges; each gets its own in- and out-edges (in the order of the ranks
    that named them, then of their lists): the edges are gathered from every rank."""
    src, deg, dst = _ints(sources, "sources"), _ints(degrees, "degrees"), _ints(destinations, "destinations")
    if len(deg) != len(src):
        raise ValueError(f"expecting {len(src)} items, got {len(deg)}")
    if len(dst) != sum(deg):
        raise ValueError(f"expecting {sum(deg)} items, got {len(dst)}")
    w = _weights(weights, len(dst))
    _check_ranks(self, src + dst)
    mine, k = [], 0
    for s, d in zip(src, deg):
        for _ in range(d):
            mine.append((s, dst[k], w[k] if w is not None else 1))
            k += 1
    head, data = self._coll("gather", "Create_dist_graph", _pickle(mine), all=True)
    edges = [e for part in _objects(head["lens"], data) for e in part]
    me = self._rank
    ins = [(s, wt) for s, d, wt in edges if d == me]
    outs = [(d, wt) for s, d, wt in edges if s == me]
    new = self._made(CHANNEL.call("dup", ctx=self._ok(), call="Create_dist_graph")[0])
    weighted = None if w is None else ([wt for _, wt in ins], [wt for _, wt in outs])
    return Distgraphcomm._with(new, _t_sources=[s for s, _ in ins], _t_dests=[d for d, _ in outs], _t_weights=weighted)


attach(Comm, {"topology": property(lambda self: self.Get_topology())})
attach(Intracomm, {"Create_cart": create_cart, "Create_graph": create_graph, "Cart_map": cart_map,
                   "Graph_map": graph_map, "Create_dist_graph": create_dist_graph,
                   "Create_dist_graph_adjacent": create_dist_graph_adjacent})
for _name in ("Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw"):
    setattr(Topocomm, _name + "_init", _persistent(_name + "_init"))  # MPI 4's persistent neighbor collectives
