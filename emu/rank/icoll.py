"""Nonblocking and persistent collectives of the emulated ``mpi4py.MPI`` (rank side), and ``Alltoallw``:
a mixin of ``Comm`` (``emu.rank.intracomm``).

``Ibcast``, ``Iallreduce``, ... send the same call as the blocking collective with ``nb``: the
emulator queues it and answers with a request (``emu.front.mpinbc`` says when it runs). Its
``Wait``/``Test`` (alone or in ``Waitall``, ...) bring back the answer, which is unpacked into the
receive buffer then -- by the blocking method itself, run on a thread of its own (``_Deferred``),
so that both take their buffers alike. ``Bcast_init``, ... (MPI 4) return a persistent request whose
``Start`` issues the nonblocking call, reading the buffers as they are at that moment.
"""

from __future__ import annotations

import json
import struct
import threading

from .buffers import IN_PLACE, MsgW
from .channel import CHANNEL
from .comm import Prequest, Request, Status, _null_request
from .errors import Exception

_LEN = struct.Struct("!I")


class CollRequest(Request):
    """The request of a nonblocking collective: ``post(head, data)`` unpacks its answer."""

    @classmethod
    def _coll(cls, rid: int, post=None) -> "CollRequest":
        req = cls._make(rid, "coll")
        req._h.post = post
        return req

    def _finish(self, row, data) -> None:
        n = _LEN.unpack_from(data)[0]
        head = json.loads(bytes(data[4:4 + n]))
        if self._h.post is not None:
            self._h.post(head, data[4 + n:])
        self._last = Status()  # a collective's status: empty
        self._done()


class PcollRequest(Prequest):
    """A persistent collective request (``Bcast_init``, ...): ``Start`` begins it again."""

    def Start(self) -> None:
        h = self._h
        if h is None:
            raise Exception(19, "MPI_ERR_REQUEST: invalid request (REQUEST_NULL)")
        if h.rid is not None:
            raise Exception(19, "MPI_ERR_REQUEST: the persistent request is active (Start before its Wait)")
        inner = h.start()
        h.inner, h.inactive = inner, False
        if inner._h is None or inner._h.rid is None:  # nothing to wait for (a communicator of one)
            h.rid, h.done, h.row = None, True, None
        else:
            h.rid, h.kind, h.done = inner._h.rid, "coll", False

    def _finish(self, row, data) -> None:
        self._h.inner._finish(row, data)
        self._last = self._h.inner._last
        self._done()


class _Deferred:
    """A blocking collective of ``Comm`` carried out as a nonblocking one: the blocking method runs
    in a thread of its own on a copy of the communicator whose ``_coll`` (its one channel call) asks
    for the nonblocking call instead, hands its request over and waits for the answer, which
    ``CollRequest._finish`` gives it; the method then unpacks the answer into the receive buffer as
    it always does, and the thread ends before ``Wait`` returns. So the nonblocking collectives take
    their buffers exactly as the blocking ones do. Only one thread uses the channel at a time: the
    caller waits until the call was made."""

    def __init__(self, comm, method, name: str, args, kw):
        self.name, self.ctx = name, comm._ok()
        self.ready, self.answered = threading.Event(), threading.Event()
        self.rid = self.result = self.error = None
        proxy = type(comm)(comm)  # another handle to the same communicator
        proxy._coll = self._coll  # (an attribute of the copy: the communicator itself is untouched)
        self.thread = threading.Thread(target=self._run, args=(method, proxy, args, kw), daemon=True,
                                       name=f"emulated MPI {name}")
        self.thread.start()
        self.ready.wait()
        if self.rid is None:  # it failed (or returned) before its call: as the blocking one would
            self.thread.join()
            if self.error is not None:
                raise self.error

    def _coll(self, kind: str, call: str, payload=b"", **head):
        h, _ = CHANNEL.call("coll", payload, ctx=self.ctx, kind=kind, call=self.name, nb=True, **head)
        self.rid = h["req"]
        self.ready.set()
        self.answered.wait()
        return self.result

    def _run(self, method, proxy, args, kw) -> None:
        try:
            method(proxy, *args, **kw)
        except BaseException as e:  # noqa: BLE001 -- raised in the caller's thread (the call or its Wait)
            self.error = e
        finally:
            self.ready.set()

    def finish(self, head: dict, data) -> None:
        self.result = (head, data)
        self.answered.set()
        self.thread.join()
        if self.error is not None:
            raise self.error


def _nonblocking(name: str, blocking: str):
    def call(self, *args, **kw) -> CollRequest:
        d = _Deferred(self, getattr(type(self), blocking), name, args, kw)
        if d.rid is None:
            return _null_request("coll")
        return CollRequest._coll(d.rid, d.finish)

    call.__name__ = name
    call.__doc__ = f"MPI 3's nonblocking ``{blocking}``: a request; ``Wait`` completes it."
    return call


class CollectivesMixin:
    """The nonblocking (``I...``) and persistent (``..._init``) collectives, ``Alltoallw``."""

    def _icoll(self, kind: str, call: str, payload=b"", post=None, **head) -> CollRequest:
        h, _ = CHANNEL.call("coll", payload, ctx=self._ok(), kind=kind, call=call, nb=True, **head)
        return CollRequest._coll(h["req"], post)

    def Ialltoallw(self, sendbuf, recvbuf) -> CollRequest:
        return self._ialltoallw(sendbuf, recvbuf, "Ialltoallw")

    def _ialltoallw(self, sendbuf, recvbuf, call: str) -> CollRequest:
        """Each block its own count, byte displacement and datatype (``buffers.MsgW``, as mpi4py reads
        an Alltoallw specification)."""
        size = self._size
        out = MsgW(recvbuf, writable=True, blocks=size)
        src = out if sendbuf is IN_PLACE else MsgW(sendbuf, blocks=size)
        parts = [src.pack(r) if src.counts[r] else b"" for r in range(size)]

        def post(h, data):
            at = 0
            for r, n in enumerate(h["lens"]):
                if out.counts[r]:
                    out.unpack(r, data[at:at + n])
                at += n

        return self._icoll("alltoall", call, b"".join(parts), post, lens=[len(p) for p in parts])

    def Alltoallw(self, sendbuf, recvbuf) -> None:
        """The nonblocking one, waited for at once (it runs inside the Wait)."""
        self._ialltoallw(sendbuf, recvbuf, "Alltoallw").Wait()


for _name in ("Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
              "Alltoallv", "Reduce", "Allreduce", "Reduce_scatter_block", "Reduce_scatter", "Scan", "Exscan"):
    setattr(CollectivesMixin, "I" + _name[0].lower() + _name[1:], _nonblocking("I" + _name[0].lower() + _name[1:], _name))


def _persistent(name: str):
    inow = "I" + name[0].lower() + name[1:-len("_init")]  # Bcast_init -> Ibcast

    def init(self, *args, **kw) -> PcollRequest:
        fn = getattr(self, inow)
        return PcollRequest._persistent(lambda: fn(*args, **kw))

    init.__name__ = name
    init.__doc__ = f"MPI 4's persistent ``{name}``: ``Start`` issues ``{inow}`` (the buffers as they are then)."
    return init


for _name in ("Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
              "Alltoallv", "Alltoallw", "Reduce", "Allreduce", "Reduce_scatter_block", "Reduce_scatter", "Scan",
              "Exscan"):
    setattr(CollectivesMixin, _name + "_init", _persistent(_name + "_init"))
