"""The smaller handle classes and module functions of the emulated ``mpi4py.MPI``: matched messages
(``Comm.Mprobe``/``Improbe`` and ``Message.Recv``) and the internals mpi4py's pure-Python modules call."""

from __future__ import annotations


from .buffers import Msg
from .channel import CHANNEL
from .comm import PROC_NULL, TAG_UB, Request, Status, _fill
from .consts import CONSTANTS
from .handle import MODULE, Handle, Impl, predefine_null
from .types import Exception


class Message(Handle, family=True):
    """A message taken off the unexpected queue by a matched probe: received by its own ``Recv``."""

    def _free(self) -> None:  # as mpi4py's: a message is not freed, it is received
        pass

    @classmethod
    def _make(cls, mid, st) -> "Message":
        return cls._of(Impl(mid=mid, st=st))

    def _take(self):
        h = self._h
        if h is None:
            raise Exception(CONSTANTS["ERR_REQUEST"], "MPI_ERR_REQUEST: invalid message (MESSAGE_NULL)")
        if self is not MESSAGE_NO_PROC:  # the predefined handle itself stays what it is
            self._h = None
        return h

    def Recv(self, buf, status: Status | None = None) -> None:
        h = self._take()
        if h.mid is None:  # MESSAGE_NO_PROC
            _fill(status, [0, PROC_NULL, CONSTANTS["ANY_TAG"], 0, False])
            return
        msg = Msg(buf, writable=True)
        head, data = CHANNEL.call("mrecv", mid=h.mid, call="Mrecv")
        msg.unpack(data)
        _fill(status, head["st"])

    def recv(self, status: Status | None = None):
        h = self._take()
        if h.mid is None:
            _fill(status, [0, PROC_NULL, CONSTANTS["ANY_TAG"], 0, False])
            return None
        head, data = CHANNEL.call("mrecv", mid=h.mid, call="mrecv")
        _fill(status, head["st"])
        return pickle_.loads(data) if len(data) else None  # as mpi4py: a message of 0 bytes is None

    def Irecv(self, buf) -> Request:
        status = Status()
        self.Recv(buf, status)
        req = _completed(status)
        return req

    def irecv(self) -> Request:
        status = Status()
        value = self.recv(status)
        req = _completed(status)
        req._value = value
        return req

    @classmethod
    def Probe(cls, comm, source: int = CONSTANTS["ANY_SOURCE"], tag: int = CONSTANTS["ANY_TAG"],
              status: Status | None = None) -> "Message":
        return comm.Mprobe(source, tag, status)

    @classmethod
    def Iprobe(cls, comm, source: int = CONSTANTS["ANY_SOURCE"], tag: int = CONSTANTS["ANY_TAG"],
               status: Status | None = None):
        return comm.Improbe(source, tag, status)

    probe = Probe
    iprobe = Iprobe


def _completed(status: Status) -> Request:
    from .comm import _null_request

    req = _null_request("recv")
    req._h.row = [0, status.source, status.tag, status.count, False]
    return req


def mprobe(comm, source: int, tag: int, nb: bool, status: Status | None):
    """``Comm.Mprobe`` / ``Improbe``: the matched message (or None when a nonblocking probe finds none)."""
    from .comm import _tag_ok

    head, _ = CHANNEL.call("mprobe", ctx=comm._ok(), source=int(source), tag=_tag_ok(tag, True), nb=nb,
                           call="Improbe" if nb else "Mprobe")
    if not head["found"]:
        return None
    _fill(status, head["st"])
    if head["st"][1] == PROC_NULL:
        return Message(MESSAGE_NO_PROC)
    return Message._make(head["mid"], head["st"])


MESSAGE_NULL = predefine_null(Message(), "MESSAGE_NULL")
MESSAGE_NO_PROC = Message._of(Impl(mid=None, st=None))._predefine("MESSAGE_NO_PROC")


def Pcontrol(level: int) -> None:
    if not isinstance(level, int):
        raise TypeError("Pcontrol level must be an int")


def Get_hw_resource_info():
    from .info import Info

    return Info.Create({"mpi_hw_resource_type": "emulated host"})




from .pickling import PICKLE as pickle_, Pickle  # noqa: E402,F401 -- MPI.pickle, MPI.Pickle


# -- the internals mpi4py's pure-Python modules (mpi4py.util.pkl5, util.dtlib) call --------------------
def _comm_lock_table(comm) -> dict:
    h = comm._h
    if h is None:
        raise Exception(CONSTANTS["ERR_COMM"], "MPI_ERR_COMM: invalid communicator (COMM_NULL)")
    if not hasattr(h, "locks"):
        h.locks = {}
    return h.locks


def _comm_lock(comm, key=None):
    import threading

    table = _comm_lock_table(comm)
    lock = table.get(key)
    if lock is None:
        lock = table[key] = threading.Lock()
    return lock


def _commctx(comm) -> dict:
    """A library's own context of ``comm`` (mpi4py's ``PyMPI_Commctx``): a duplicate made collectively on
    first use, the next tag on it, and for an intercommunicator its local group's intracommunicator."""
    h = comm._h
    if h is None:
        raise Exception(CONSTANTS["ERR_COMM"], "MPI_ERR_COMM: invalid communicator (COMM_NULL)")
    ctx = getattr(h, "commctx", None)
    if ctx is None:
        own = next(k for k in type(comm).__mro__ if k.__module__ == MODULE)  # the library's class, not a subclass's
        ctx = h.commctx = {"dup": own(comm.Dup()), "tag": 0, "local": None, "low": False}
    if ctx["tag"] >= TAG_UB:
        ctx["tag"] = 0
    return ctx


def _next_tag(ctx: dict) -> int:
    tag = ctx["tag"]
    ctx["tag"] += 1
    return tag


def _commctx_intra(comm):
    """The duplicate of ``comm`` for a library's own traffic, and the tag to use on it this time."""
    ctx = _commctx(comm)
    return ctx["dup"], _next_tag(ctx)


def _commctx_inter(comm):
    """``_commctx_intra`` of an intercommunicator, with its local group's intracommunicator and whether
    this side is the low group -- as mpi4py makes them (``Merge`` with the larger side high, then
    ``Create`` of the local group)."""
    ctx = _commctx(comm)
    if ctx["local"] is None:
        lsize, rsize = comm.Get_size(), comm.Get_remote_size()
        merged = comm.Merge(lsize > rsize)
        ctx["low"] = False if lsize > rsize else True if lsize < rsize else merged.Get_rank() < lsize
        group = comm.Get_group()
        ctx["local"] = merged.Create(group)
        group.Free()
        merged.Free()
    return ctx["dup"], _next_tag(ctx), ctx["local"], ctx["low"]
