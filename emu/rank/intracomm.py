"""``MPI.Comm`` of the emulated ``mpi4py.MPI``: point to point and collectives (rank side)."""

from __future__ import annotations

from .attrs import Attributes
from . import bsend
from .blockcoll import BlockingCollectives
from .buffers import Msg
from .channel import CHANNEL
from .comm import (ANY_SOURCE, ANY_TAG, CONGRUENT, IDENT, PROC_NULL, SIMILAR, TAG_UB, TAG_UB_KEY, UNDEFINED,
                   UNEQUAL, Group, Prequest, Request, Status, _fill, _pickle, _tag_ok, _unsupported)
from .consts import CONSTANTS
from .handle import Handle, Impl, predefine_null
from .icoll import CollectivesMixin
from .info import ERRORS_RETURN, Errhandler, Info, call_errhandler, create_errhandler
from .part import precv_init, psend_init
from .pickling import PICKLE
from .plain import Whole, plain
from .types import Exception


class Comm(CollectivesMixin, BlockingCollectives, Attributes, Handle, family=True):
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
            return CHANNEL.appnum
        if keyval == CONSTANTS["UNIVERSE_SIZE"]:  # emu mpirun --universe-size (emu.front.mpispawn)
            return CHANNEL.universe
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
    def _made(self, head, cls=None) -> "Comm":
        """The new intracommunicator of an answer (COMM_NULL if none), an ``Intracomm`` (``Split``,
        ``Create`` ...) or of class ``cls`` (``Dup``: the class of the one duplicated, as mpi4py's)."""
        if head["ctx"] is None:
            return COMM_NULL
        info, _ = CHANNEL.call("info", ctx=head["ctx"], call="Comm_info")
        return (cls or Intracomm)._make(head["ctx"], len(info["ranks"]), info["rank"])

    def Dup(self, info=None) -> "Comm":
        new = self._made(CHANNEL.call("dup", ctx=self._ok(), call="Dup")[0], type(self))
        self._copy_attrs_to(new)
        new._h.errhandler = self._h.errhandler
        if info is not None:
            new.Set_info(info)
        return new

    def Dup_with_info(self, info) -> "Comm":
        return self.Dup(info)

    def Idup(self, info=None):
        """``Comm.Idup``: the duplicate, made at once, and a completed request."""
        from .comm import _null_request

        return self.Dup(info), _null_request()

    def Idup_with_info(self, info):
        return self.Idup(info)

    def Clone(self) -> "Comm":
        return self.Dup()

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
        if not nb and mode == "std" and call != "Bsend" and call != "bsend":  # (the commonest: framed directly)
            CHANNEL.send_std(payload, self._ok(), int(dest), _tag_ok(tag, False), call)
            return None
        kw = {"bsend": True} if call.lower() in ("bsend", "ibsend") else {}  # buffered sends complete locally
        head, _ = CHANNEL.call("send", payload, ctx=self._ok(), dest=int(dest), tag=_tag_ok(tag, False), mode=mode,
                               nb=nb, call=call, **kw)
        return Request._make(head["req"], "send") if nb else None

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self._send(_pickle(obj), dest, tag, "std", False, "send")

    def bsend(self, obj, dest: int, tag: int = 0) -> None:
        self._send(_room(self, _pickle(obj)), dest, tag, "std", False, "bsend")

    def ssend(self, obj, dest: int, tag: int = 0) -> None:
        self._send(_pickle(obj), dest, tag, "sync", False, "ssend")

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._send(_pickle(obj), dest, tag, "std", True, "isend")

    def ibsend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._send(_room(self, _pickle(obj)), dest, tag, "std", True, "ibsend")

    def issend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._send(_pickle(obj), dest, tag, "sync", True, "issend")

    def recv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None):
        if buf is not None:
            import warnings

            warnings.warn("the buf argument of recv() is not used (the emulated MPI sizes the message itself)",
                          UserWarning, stacklevel=2)
        head, data = CHANNEL.recv_blocking(self._ok(), int(source), _tag_ok(tag, True), "recv")
        _fill(status, head["st"])
        return PICKLE.loads(data) if head["st"][1] != PROC_NULL and len(data) else None  # 0 bytes: None

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
        return PICKLE.loads(data) if head["st"][1] != PROC_NULL and len(data) else None  # 0 bytes: None

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
        self._send(_room(self, _out(buf, dest)), dest, tag, "std", False, "Bsend")

    def Rsend(self, buf, dest: int, tag: int = 0) -> None:
        self._send(_out(buf, dest), dest, tag, "std", False, "Rsend")

    def Ssend(self, buf, dest: int, tag: int = 0) -> None:
        self._send(_out(buf, dest), dest, tag, "sync", False, "Ssend")

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_out(buf, dest), dest, tag, "std", True, "Isend")

    def Ibsend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_room(self, _out(buf, dest)), dest, tag, "std", True, "Ibsend")

    def Irsend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_out(buf, dest), dest, tag, "std", True, "Irsend")

    def Issend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._send(_out(buf, dest), dest, tag, "sync", True, "Issend")

    def Recv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        msg = _into(buf, source)
        head, data = CHANNEL.recv_blocking(self._ok(), int(source), _tag_ok(tag, True), "Recv")
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

    def Isendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = ANY_SOURCE,
                  recvtag: int = ANY_TAG) -> Request:
        """``Isendrecv`` (MPI 4.0): the receive posted, the send started; one request completes both."""
        out = _out(sendbuf, dest)
        msg = _into(recvbuf, source)
        head, _ = CHANNEL.call("sendrecv", out, ctx=self._ok(), dest=int(dest), sendtag=_tag_ok(sendtag, False),
                               source=int(source), recvtag=_tag_ok(recvtag, True), nb=True, call="Isendrecv")
        return Request._make(head["req"], "recv_buf", msg)

    def Isendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                          recvtag: int = ANY_TAG) -> Request:
        """``Isendrecv_replace`` (MPI 4.0): the send packs ``buf`` now, the receive fills it."""
        return self.Isendrecv(buf, dest, sendtag, buf, source, recvtag)

    def Send_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Isend(buf, dest, tag))

    def Bsend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Ibsend(buf, dest, tag))

    def Rsend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Irsend(buf, dest, tag))

    def Ssend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return Prequest._persistent(lambda: self.Issend(buf, dest, tag))

    def Psend_init(self, buf, partitions: int, dest: int, tag: int = 0, info=None):
        """A partitioned send (MPI 4.0; ``emu.rank.part``)."""
        return psend_init(self, buf, partitions, dest, tag, info)

    def Precv_init(self, buf, partitions: int, source: int = ANY_SOURCE, tag: int = ANY_TAG, info=None):
        """A partitioned receive (MPI 4.0; ``emu.rank.part``)."""
        return precv_init(self, buf, partitions, source, tag, info)

    def Recv_init(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        return Prequest._persistent(lambda: self.Irecv(buf, source, tag))

def _out(buf, dest: int) -> bytes:
    """The packed message of a send; nothing parsed for PROC_NULL (as mpi4py: any buffer goes)."""
    if dest == PROC_NULL:
        return b""
    return buf.tobytes() if plain(buf) else Msg(buf).pack()


def _into(buf, source: int):
    """The receive buffer of a receive; none for PROC_NULL (nothing arrives; any buffer goes)."""
    if source == PROC_NULL:
        return _Nothing()
    return Whole(buf) if plain(buf) and buf.flags.writeable else Msg(buf, writable=True)


class _Nothing:
    """Where a receive from PROC_NULL puts its (empty) message."""

    def unpack(self, data, *a) -> None:
        pass


def _room(comm: Comm, payload: bytes) -> bytes:
    bsend.room(comm._h, len(payload))
    return payload


class Intracomm(Comm):
    _strict = True  # MPI.Intracomm(an intercommunicator): TypeError


COMM_NULL = predefine_null(Comm(), "COMM_NULL")
