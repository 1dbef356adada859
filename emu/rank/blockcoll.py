"""The blocking collectives of ``MPI.Comm`` (emulated ``mpi4py.MPI``, rank side): a mixin of the
communicator class (``emu.rank.intracomm.Comm``), and the argument checks they share."""

from __future__ import annotations

from .buffers import IN_PLACE, Msg
from .channel import CHANNEL
from .comm import _op, _pickle, _pickles
from .consts import CONSTANTS
from .pickling import PICKLE
from .plain import Whole, plain, type_fields
from .types import Exception, OPS


def _locked(key: str):
    """A lowercase collective holds the communicator's lock ``key`` (``MPI._comm_lock``), as mpi4py's do."""
    def wrap(fn):
        def locked(self, *a, **k):
            from .misc import _comm_lock

            with _comm_lock(self, key):
                return fn(self, *a, **k)
        locked.__name__, locked.__qualname__, locked.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        return locked
    return wrap


class BlockingCollectives:
    """Barrier, Bcast, reductions, scans, gathers, scatters and all-to-all: each one ``coll`` call to
    the emulator (the communicator gives ``_ok``, ``_size`` and ``_rank``)."""

    def _coll(self, kind: str, call: str, payload=b"", **head):
        ctx = self._ok()
        if "root" in head and not 0 <= head["root"] < self._size:
            raise Exception(CONSTANTS["ERR_ROOT"], f"MPI_ERR_ROOT: invalid root {head['root']} (the communicator "
                                                   f"has {self._size} ranks)")
        return CHANNEL.call("coll", payload, ctx=ctx, kind=kind, call=call, **head)

    def Barrier(self) -> None:
        self._coll("barrier", "Barrier")

    @_locked("barrier")
    def barrier(self) -> None:
        self._coll("barrier", "barrier")

    @_locked("bcast")
    def bcast(self, obj=None, root: int = 0):
        me = self._rank == root
        head, data = self._coll("bcast", "bcast", _pickle(obj) if me else b"", root=root, n=-1)
        return obj if me else PICKLE.loads(data)

    def Bcast(self, buf, root: int = 0) -> None:
        me = self._rank == root
        if plain(buf) and (me or buf.flags.writeable):  # (emu.rank.plain: what Msg would find)
            head, data = self._coll("bcast", "Bcast", buf.tobytes() if me else b"", root=root, n=buf.nbytes)
            if not me:
                Whole(buf).unpack(data)
            return
        msg = Msg(buf, writable=self._rank != root)
        head, data = self._coll("bcast", "Bcast", msg.pack() if me else b"", root=root, n=msg.nbytes)
        if not me:
            msg.unpack(data)

    # reductions
    def _reduce_obj(self, obj, op, root: int, every: bool, call: str):
        head, data = self._coll("reduce", call, _pickle(obj), rop=_op(op, objects=True).key, pickled=True, root=root,
                                all=every)
        return None if head.get("none") else PICKLE.loads(data)

    @_locked("reduce")
    def reduce(self, sendobj, op=OPS["SUM"], root: int = 0):
        return self._reduce_obj(sendobj, op, root, False, "reduce")

    @_locked("allreduce")
    def allreduce(self, sendobj, op=OPS["SUM"]):
        return self._reduce_obj(sendobj, op, 0, True, "allreduce")

    def _in(self, sendbuf, recvbuf):
        return Msg(recvbuf) if _inplace(sendbuf) else Msg(sendbuf)

    def _reduce_buf(self, sendbuf, recvbuf, op, root: int, every: bool, call: str) -> None:
        mine = every or self._rank == root
        if self._plain_reduce(sendbuf, recvbuf, op, root, every, call, mine):
            return
        out = Msg(recvbuf, writable=True) if mine else None
        src = out if _inplace(sendbuf) and mine else Msg(sendbuf)
        if out is not None and not _inplace(sendbuf):
            _same_shape(src, out)
        head, data = self._coll("reduce", call, src.pack(), rop=_op(op).key, root=root, all=every, **src.type_fields())
        if not head.get("none"):
            out.unpack(data)

    def _plain_reduce(self, sendbuf, recvbuf, op, root: int, every: bool, call: str, mine: bool) -> bool:
        """The reduction of plain arrays (``emu.rank.plain``) as the general way makes it: the same
        head and bytes, the result filled in by one copy. False (nothing done) for anything else --
        and for buffers that do not match, whose errors the general way raises."""
        inplace = _inplace(sendbuf)
        src = recvbuf if inplace else sendbuf
        if not plain(src):
            return False
        if mine:
            if not (plain(recvbuf) and recvbuf.flags.writeable):
                return False
            if not inplace and (recvbuf.dtype.char != src.dtype.char or recvbuf.size != src.size):
                return False
        elif inplace:
            return False
        head, data = self._coll("reduce", call, src.tobytes(), rop=_op(op).key, root=root, all=every,
                                **type_fields(src))
        if not head.get("none"):
            Whole(recvbuf).unpack(data)
        return True

    def Reduce(self, sendbuf, recvbuf, op=OPS["SUM"], root: int = 0) -> None:
        self._reduce_buf(sendbuf, recvbuf, op, root, False, "Reduce")

    def Allreduce(self, sendbuf, recvbuf, op=OPS["SUM"]) -> None:
        self._reduce_buf(sendbuf, recvbuf, op, 0, True, "Allreduce")

    def _scan(self, sendbuf, recvbuf, op, ex: bool, call: str) -> None:
        src = self._in(sendbuf, recvbuf)
        if not _inplace(sendbuf):
            _same_shape(src, Msg(recvbuf, writable=True))
        head, data = self._coll("scan", call, src.pack(), rop=_op(op).key, ex=ex, **src.type_fields())
        if not head.get("none"):
            Msg(recvbuf, writable=True).unpack(data)

    def Scan(self, sendbuf, recvbuf, op=OPS["SUM"]) -> None:
        self._scan(sendbuf, recvbuf, op, False, "Scan")

    def Exscan(self, sendbuf, recvbuf, op=OPS["SUM"]) -> None:
        self._scan(sendbuf, recvbuf, op, True, "Exscan")

    @_locked("scan")
    def scan(self, sendobj, op=OPS["SUM"]):
        head, data = self._coll("scan", "scan", _pickle(sendobj), rop=_op(op, objects=True).key, pickled=True,
                                ex=False)
        return PICKLE.loads(data)

    @_locked("exscan")
    def exscan(self, sendobj, op=OPS["SUM"]):
        head, data = self._coll("scan", "exscan", _pickle(sendobj), rop=_op(op, objects=True).key, pickled=True,
                                ex=True)
        return None if head.get("none") else PICKLE.loads(data)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=OPS["SUM"]) -> None:
        out = Msg(recvbuf, writable=True)
        src = Msg(recvbuf) if _inplace(sendbuf) else Msg(sendbuf)
        n = out.nbytes if not _inplace(sendbuf) else src.nbytes // self._size
        head, data = self._coll("reduce_scatter", "Reduce_scatter_block", src.pack(), rop=_op(op).key,
                                lens=[n] * self._size, uniform=True, **src.type_fields())
        out.unpack(data)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=OPS["SUM"]) -> None:
        """As mpi4py: without ``recvcounts`` every rank's receive count is gathered (each rank's own
        receive buffer's count: an allgather on the fabric inside the call), and the counts are
        checked against the buffers."""
        out = Msg(recvbuf, writable=True)
        src = Msg(recvbuf) if _inplace(sendbuf) else Msg(sendbuf)
        counts = None
        if recvcounts is None and _inplace(sendbuf):
            raise ValueError("Reduce_scatter with IN_PLACE needs recvcounts")
        if recvcounts is not None:
            counts = [int(c) for c in recvcounts]
            if len(counts) != self._size:
                raise ValueError(f"expecting {self._size} receive counts, got {len(counts)}")
            _check_scatter_counts(self._rank, counts, src, out, _inplace(sendbuf))
        per = src.dt.packed
        kw = {"lens": [c * per for c in counts]} if counts is not None else {"mine": out.count * per}
        head, data = self._coll("reduce_scatter", "Reduce_scatter", src.pack(), rop=_op(op).key, **kw,
                                **src.type_fields())
        if counts is None:
            counts = [n // per if per else 0 for n in head["lens"]]
            _check_scatter_counts(self._rank, counts, src, out, False)
        out.unpack(data, counts[self._rank])

    # gathers and scatters
    @_locked("gather")
    def gather(self, sendobj, root: int = 0):
        head, data = self._coll("gather", "gather", _pickle(sendobj), root=root)
        return None if head.get("none") else _objects(head["lens"], data)

    @_locked("allgather")
    def allgather(self, sendobj):
        head, data = self._coll("gather", "allgather", _pickle(sendobj), all=True)
        return _objects(head["lens"], data)

    @_locked("scatter")
    def scatter(self, sendobj, root: int = 0):
        parts = _pickles(sendobj, self._size) if self._rank == root else []
        head, data = self._coll("scatter", "scatter", b"".join(parts), root=root, lens=[len(p) for p in parts])
        return PICKLE.loads(data)

    @_locked("alltoall")
    def alltoall(self, sendobj):
        parts = _pickles(sendobj, self._size)
        head, data = self._coll("alltoall", "alltoall", b"".join(parts), lens=[len(p) for p in parts])
        return _objects(head["lens"], data)

    def _gather_buf(self, sendbuf, recvbuf, root: int, every: bool, vector: bool, call: str) -> None:
        me = every or self._rank == root
        out = Msg(recvbuf, writable=True, vector=vector, blocks=self._size) if me else None
        if _inplace(sendbuf):
            at = out.displs[self._rank] if vector else self._rank * out.count
            mine = out.pack(out.counts[self._rank] if vector else out.count, at)
        else:
            mine = Msg(sendbuf).pack()
        head, data = self._coll("gather", call, mine, root=root, all=every, uniform=every and not vector)
        if head.get("none"):
            return
        at = 0
        for r, n in enumerate(head["lens"]):
            displ = out.displs[r] if vector else r * out.count
            cnt = out.counts[r] if vector else out.count
            out.unpack(data[at:at + n], cnt, displ)
            at += n

    def Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._gather_buf(sendbuf, recvbuf, root, False, False, "Gather")

    def Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._gather_buf(sendbuf, recvbuf, root, False, True, "Gatherv")

    def Allgather(self, sendbuf, recvbuf) -> None:
        self._gather_buf(sendbuf, recvbuf, 0, True, False, "Allgather")

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        self._gather_buf(sendbuf, recvbuf, 0, True, True, "Allgatherv")

    def _scatter_buf(self, sendbuf, recvbuf, root: int, vector: bool, call: str) -> None:
        me = self._rank == root
        parts = []
        if me:
            src = Msg(sendbuf, vector=vector, blocks=self._size)
            for r in range(self._size):
                parts.append(src.pack(src.counts[r], src.displs[r]) if vector else src.pack(src.count, r * src.count))
        head, data = self._coll("scatter", call, b"".join(parts), root=root, lens=[len(p) for p in parts])
        if not _inplace(recvbuf):
            Msg(recvbuf, writable=True).unpack(data)

    def Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._scatter_buf(sendbuf, recvbuf, root, False, "Scatter")

    def Scatterv(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._scatter_buf(sendbuf, recvbuf, root, True, "Scatterv")

    def _alltoall_buf(self, sendbuf, recvbuf, vector: bool, call: str) -> None:
        out = Msg(recvbuf, writable=True, vector=vector, blocks=self._size)
        src = out if _inplace(sendbuf) else Msg(sendbuf, vector=vector, blocks=self._size)
        if vector:
            parts = [src.pack(src.counts[r], src.displs[r]) for r in range(self._size)]
        else:
            parts = [src.pack(src.count, r * src.count) for r in range(self._size)]
        head, data = self._coll("alltoall", call, b"".join(parts), lens=[len(p) for p in parts],
                                uniform=not vector and len({len(p) for p in parts}) == 1)
        at = 0
        for r, n in enumerate(head["lens"]):
            out.unpack(data[at:at + n], out.counts[r] if vector else out.count,
                       out.displs[r] if vector else r * out.count)
            at += n

    def Alltoall(self, sendbuf, recvbuf) -> None:
        self._alltoall_buf(sendbuf, recvbuf, False, "Alltoall")

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        self._alltoall_buf(sendbuf, recvbuf, True, "Alltoallv")


def _inplace(buf) -> bool:
    """mpi4py's ``is_IN_PLACE``: ``None`` is IN_PLACE in a collective's send buffer too."""
    return buf is None or buf is IN_PLACE


def _check_scatter_counts(rank: int, counts: list[int], src, out, inplace: bool) -> None:
    """Reduce_scatter's counts against its buffers, as mpi4py checks them."""
    if not inplace:
        if src.dt != out.dt:
            raise ValueError("mismatch in send and receive MPI datatypes")
        if src.count != sum(counts):
            raise ValueError(f"mismatch in send count {src.count} and sum(counts) {sum(counts)}")
        if out.count != counts[rank]:
            raise ValueError(f"mismatch in receive count {out.count} and counts[{rank}] {counts[rank]}")
    elif out.count != sum(counts):
        raise ValueError(f"mismatch in receive count {out.count} and sum(counts) {sum(counts)}")


def _same_shape(src, out) -> None:
    """A reduction's send and receive buffers, checked as mpi4py checks them (``chk_cro_args``)."""
    if src.dt != out.dt:
        raise ValueError("mismatch in send and receive MPI datatypes")
    if src.count != out.count:
        raise ValueError(f"mismatch in send count {src.count} and receive count {out.count}")


def _objects(lens, data) -> list:
    out, at = [], 0
    for n in lens:
        out.append(PICKLE.loads(data[at:at + n]))
        at += n
    return out
