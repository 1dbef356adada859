"""``MPI.Comm`` of the emulated ``mpi4py.MPI``: point to point and collectives (rank side)."""

from __future__ import annotations


from .attrs import Attributes
from .buffers import IN_PLACE, Msg
from .channel import CHANNEL
from .comm import (ANY_SOURCE, ANY_TAG, CONGRUENT, IDENT, PROC_NULL, SIMILAR, TAG_UB, TAG_UB_KEY, UNDEFINED,
                   UNEQUAL, Group, Prequest, Request, Status, _fill, _op, _pickle, _tag_ok, _unsupported)
from .consts import CONSTANTS
from .handle import Handle, Impl, predefine_null
from .icoll import CollectivesMixin
from .info import ERRORS_RETURN, Errhandler, Info, call_errhandler, create_errhandler
from .pickling import PICKLE
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


class Comm(CollectivesMixin, Attributes, Handle, family=True):
    """A communicator: its context id (every member's the same), size and this rank's rank."""

    _kind = "comm"

    @classmethod
    def _make(cls, ctx: int, size: int, rank: int) -> "Comm":
        return cls._of(Impl(ctx=ctx, size=size, rank=rank, name=None, errhandler=ERRORS_RETURN, info=None))

    ctx = property(lambda self: None if self._h is None else self._h.ctx)
    _size = property(lambda self: self._h.size)
    _rank = property(lambda self: self._h.rank)

    def _ok(self) -> int:
        if self._h is None:
            raise Exception(5, "MPI_ERR_COMM: invalid communicator (COMM_NULL)")
        return self._h.ctx

    def __getattr__(self, name):
        _unsupported("Comm.", name)

    # -- what it is ---------------------------------------------------------------------------------
    def Get_rank(self) -> int:
        self._ok()
        return self._rank

    def Get_size(self) -> int:
        self._ok()
        return self._size

    rank = property(Get_rank)
    size = property(Get_size)

    def Get_name(self) -> str:
        if self._h is None:
            return "MPI_COMM_NULL"
        return self._h.name if self._h.name is not None else {0: "MPI_COMM_WORLD", 1: "MPI_COMM_SELF"}.get(
            self._h.ctx, "")

    def Set_name(self, name: str) -> None:
        self._ok()
        self._h.name = str(name)

    name = property(Get_name, Set_name)

    def Is_inter(self) -> bool:
        self._ok()
        return False

    def Is_intra(self) -> bool:
        self._ok()
        return True

    is_inter = property(lambda self: self.Is_inter())
    is_intra = property(lambda self: self.Is_intra())

    def Get_topology(self) -> int:
        self._ok()
        return UNDEFINED

    topology = property(lambda self: self.Get_topology())  # a topology's own Get_topology
    is_topo = property(lambda self: self.Get_topology() != UNDEFINED)

    def _builtin_attr(self, keyval: int):
        self._ok()
        if keyval == TAG_UB_KEY:
            return TAG_UB
        if keyval == CONSTANTS["WTIME_IS_GLOBAL"]:
            return False
        if keyval == CONSTANTS["IO"]:
            return CONSTANTS["ANY_SOURCE"]
        if keyval == CONSTANTS["APPNUM"]:
            return 0
        if keyval == CONSTANTS["UNIVERSE_SIZE"]:
            return CHANNEL.size
        if keyval == CONSTANTS["LASTUSEDCODE"]:
            from .errors import last_used_code

            return last_used_code()
        return None

    def Get_group(self) -> Group:
        head, _ = CHANNEL.call("info", ctx=self._ok(), call="Get_group")
        return Group._make(head["ranks"])

    group = property(Get_group)

    def Compare(self, other: "Comm") -> int:
        self._ok()
        other._ok()
        if self._h is other._h:
            return IDENT
        a, b = self.Get_group().ranks, other.Get_group().ranks
        if a == b:
            return CONGRUENT
        return SIMILAR if sorted(a) == sorted(b) else UNEQUAL

    # -- error handlers and info ---------------------------------------------------------------------
    def Get_errhandler(self) -> Errhandler:
        self._ok()
        return Errhandler(self._h.errhandler)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        self._ok()
        if not isinstance(errhandler, Errhandler) or not errhandler:
            raise Exception(CONSTANTS["ERR_ARG"], "MPI_ERR_ARG: invalid errhandler")
        self._h.errhandler = Errhandler(errhandler)

    def Call_errhandler(self, errorcode: int) -> None:
        self._ok()
        call_errhandler(self, self._h.errhandler, errorcode)

    @classmethod
    def Create_errhandler(cls, errhandler_fn) -> Errhandler:
        return create_errhandler(errhandler_fn)

    def Get_info(self) -> Info:
        self._ok()
        return Info.Create(self._h.info.items() if self._h.info else None)

    def Set_info(self, info: Info) -> None:
        self._ok()
        self._h.info = info.Dup() if info else None

    info = property(Get_info, Set_info)

    # -- making communicators --------------------------------------------------------------------------
    def _made(self, head) -> "Comm":
        if head["ctx"] is None:
            return COMM_NULL
        info, _ = CHANNEL.call("info", ctx=head["ctx"], call="Comm_info")
        return Intracomm._make(head["ctx"], len(info["ranks"]), info["rank"])

    def Dup(self, info=None) -> "Comm":
        new = self._made(CHANNEL.call("dup", ctx=self._ok(), call="Dup")[0])
        self._copy_attrs_to(new)
        new._h.errhandler = self._h.errhandler
        if info is not None:
            new.Set_info(info)
        return new

    def Dup_with_info(self, info) -> "Comm":
        return self.Dup(info)

    @classmethod
    def Get_parent(cls) -> "Comm":
        """The parent of a spawned process: none here (no process is spawned)."""
        return COMM_NULL

    def Idup(self, info=None):
        """``Comm.Idup``: the duplicate, made at once, and a completed request."""
        from .comm import _null_request

        return self.Dup(info), _null_request()

    def Idup_with_info(self, info):
        return self.Idup(info)

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> "Comm":
        return self._made(CHANNEL.call("split", ctx=self._ok(), color=int(color), key=int(key), call="Split")[0])

    def Create(self, group: Group) -> "Comm":
        return self._made(CHANNEL.call("create", ctx=self._ok(), ranks=group.ranks, call="Create")[0])

    def Free(self) -> None:
        ctx = self._ok()
        self._delete_attrs()
        CHANNEL.call("free", ctx=ctx, call="Free")
        self._h = None

    def Disconnect(self) -> None:
        self.Free()

    def py2f(self) -> int:
        return self.handle

    def Abort(self, errorcode: int = 0):
        CHANNEL.abort(errorcode)

    # -- point to point, Python objects -------------------------------------------------------------------
    def _send(self, payload, dest: int, tag: int, mode: str, nb: bool, call: str):
        head, _ = CHANNEL.call("send", payload, ctx=self._ok(), dest=int(dest), tag=_tag_ok(tag, False), mode=mode,
                               nb=nb, call=call)
        return Request._make(head["req"], "send") if nb else None

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self._send(_pickle(obj), dest, tag, "std", False, "send")

    def bsend(self, obj, dest: int, tag: int = 0) -> None:
        self._send(_room(_pickle(obj)), dest, tag, "std", False, "bsend")

    def ssend(self, obj, dest: int, tag: int = 0) -> None:
        self._send(_pickle(obj), dest, tag, "sync", False, "ssend")

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._send(_pickle(obj), dest, tag, "std", True, "isend")

    def ibsend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._send(_room(_pickle(obj)), dest, tag, "std", True, "ibsend")

    def issend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._send(_pickle(obj), dest, tag, "sync", True, "issend")

    def recv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None):
        if buf is not None:
            import warnings

            warnings.warn("the buf argument of recv() is not used (the emulated MPI sizes the message itself)",
                          UserWarning, stacklevel=2)
        head, data = CHANNEL.call("recv", ctx=self._ok(), source=int(source), tag=_tag_ok(tag, True), call="recv")
        _fill(status, head["st"])
        return PICKLE.loads(data) if head["st"][1] != PROC_NULL else None

    def irecv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        head, _ = CHANNEL.call("recv", ctx=self._ok(), source=int(source), tag=_tag_ok(tag, True), nb=True,
                               call="irecv")
        return Request._make(head["req"], "recv_obj")

    def sendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None):
        head, data = CHANNEL.call("sendrecv", _pickle(sendobj), ctx=self._ok(), dest=int(dest),
                                  sendtag=_tag_ok(sendtag, False), source=int(source), recvtag=_tag_ok(recvtag, True),
                                  call="sendrecv")
        _fill(status, head["st"])
        return PICKLE.loads(data) if head["st"][1] != PROC_NULL else None

    def _probe(self, source, tag, nb: bool, status, call: str) -> bool:
        head, _ = CHANNEL.call("probe", ctx=self._ok(), source=int(source), tag=_tag_ok(tag, True), nb=nb, call=call)
        if head["found"]:
            _fill(status, head["st"])
        return head["found"]

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        return self._probe(source, tag, False, status, "probe")

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        return self._probe(source, tag, True, status, "iprobe")

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        self._probe(source, tag, False, status, "Probe")

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        return self._probe(source, tag, True, status, "Iprobe")

    def Mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None):
        from .misc import mprobe

        return mprobe(self, source, tag, False, status)

    def Improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None):
        from .misc import mprobe

        return mprobe(self, source, tag, True, status)

    mprobe = Mprobe
    improbe = Improbe

    # -- point to point, buffers ----------------------------------------------------------------------------
    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self._send(_out(buf, dest), dest, tag, "std", False, "Send")

    def Bsend(self, buf, dest: int, tag: int = 0) -> None:
        self._send(_room(_out(buf, dest)), dest, tag, "std", False, "Bsend")

    def Rsend(self, buf, dest: int, tag: int = 0) -> None:
        self._send(_out(buf, dest), dest, tag, "std", False, "Rsend")

    def Ssend(self, buf, dest: int, tag: int = 0) -> None:
        self._send(_out(buf, dest), dest, tag, "sync", False, "Ssend")

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_out(buf, dest), dest, tag, "std", True, "Isend")

    def Ibsend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_room(_out(buf, dest)), dest, tag, "std", True, "Ibsend")

    def Irsend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_out(buf, dest), dest, tag, "std", True, "Irsend")

    def Issend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_out(buf, dest), dest, tag, "sync", True, "Issend")

    def Recv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        msg = _into(buf, source)
        head, data = CHANNEL.call("recv", ctx=self._ok(), source=int(source), tag=_tag_ok(tag, True), call="Recv")
        msg.unpack(data)
        _fill(status, head["st"])

    def Irecv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        msg = _into(buf, source)
        head, _ = CHANNEL.call("recv", ctx=self._ok(), source=int(source), tag=_tag_ok(tag, True), nb=True,
                               call="Irecv")
        return Request._make(head["req"], "recv_buf", msg)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None) -> None:
        out = _out(sendbuf, dest)
        msg = _into(recvbuf, source)
        head, data = CHANNEL.call("sendrecv", out, ctx=self._ok(), dest=int(dest), sendtag=_tag_ok(sendtag, False),
                                  source=int(source), recvtag=_tag_ok(recvtag, True), call="Sendrecv")
        msg.unpack(data)
        _fill(status, head["st"])

    def Sendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                         status: Status | None = None) -> None:
        self.Sendrecv(buf, dest, sendtag, buf, source, recvtag, status)

    def Send_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Isend(buf, dest, tag))

    def Bsend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Ibsend(buf, dest, tag))

    def Rsend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Irsend(buf, dest, tag))

    def Ssend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Issend(buf, dest, tag))

    def Recv_init(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        return Prequest._persistent(lambda: self.Irecv(buf, source, tag))

    # -- collectives ------------------------------------------------------------------------------------
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
        msg = Msg(buf, writable=self._rank != root)
        me = self._rank == root
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
        out = Msg(recvbuf, writable=True) if mine else None
        src = out if _inplace(sendbuf) and mine else Msg(sendbuf)
        if out is not None and not _inplace(sendbuf):
            _same_shape(src, out)
        head, data = self._coll("reduce", call, src.pack(), rop=_op(op).key, root=root, all=every, **src.type_fields())
        if not head.get("none"):
            out.unpack(data)

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
        parts = [_pickle(o) for o in sendobj] if self._rank == root else []
        if self._rank == root and len(parts) != self._size:
            raise ValueError(f"expecting {self._size} items, got {len(parts)}")
        head, data = self._coll("scatter", "scatter", b"".join(parts), root=root, lens=[len(p) for p in parts])
        return PICKLE.loads(data)

    @_locked("alltoall")
    def alltoall(self, sendobj):
        parts = [_pickle(o) for o in sendobj]
        if len(parts) != self._size:
            raise ValueError(f"expecting {self._size} items, got {len(parts)}")
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


def _out(buf, dest: int) -> bytes:
    """The packed message of a send; nothing parsed for PROC_NULL (as mpi4py: any buffer goes)."""
    return b"" if dest == PROC_NULL else Msg(buf).pack()


def _into(buf, source: int):
    """The receive buffer of a receive; none for PROC_NULL (nothing arrives; any buffer goes)."""
    return _Nothing() if source == PROC_NULL else Msg(buf, writable=True)


class _Nothing:
    """Where a receive from PROC_NULL puts its (empty) message."""

    def unpack(self, data, *a) -> None:
        pass


def _check_scatter_counts(rank: int, counts: list[int], src, out, inplace: bool) -> None:
    """Reduce_scatter's counts against its buffers, as mpi4py checks them."""
    if not inplace:
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


def _room(payload: bytes) -> bytes:
    CHANNEL.bsend_room(len(payload))
    return payload


def _objects(lens, data) -> list:
    out, at = [], 0
    for n in lens:
        out.append(PICKLE.loads(data[at:at + n]))
        at += n
    return out


class Intracomm(Comm):
    _strict = True  # MPI.Intracomm(an intercommunicator): TypeError


COMM_NULL = predefine_null(Comm(), "COMM_NULL")
