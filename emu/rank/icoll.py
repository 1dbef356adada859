"""Nonblocking and persistent collectives of the emulated ``mpi4py.MPI`` (rank side), and ``Alltoallw``:
a mixin of ``Comm`` (``emu.rank.intracomm``).

``Ibcast``, ``Iallreduce``, ... send the same call as the blocking collective with ``nb``: the
emulator queues it and answers with a request (``emu.front.mpinbc`` says when it runs). Its
``Wait``/``Test`` (alone or in ``Waitall``, ...) bring back the answer, which the request unpacks
into the receive buffer then. ``Bcast_init``, ... (MPI 4) return a persistent request whose
``Start`` issues the nonblocking call, reading the buffers as they are at that moment.
"""

from __future__ import annotations

import json
import struct

from .channel import CHANNEL

try:  # the buffer specs: emu/rank/buffers.py once they move there from channel.py
    from .buffers import IN_PLACE, Msg
except ImportError:  # pragma: no cover
    from .channel import IN_PLACE, Msg
from .comm import Prequest, Request, Status, _op
from .types import OPS

_LEN = struct.Struct("!I")


class CollRequest(Request):
    """The request of a nonblocking collective: ``post(head, data)`` unpacks its answer."""

    def __init__(self, rid: int, post=None):
        super().__init__(rid, "coll")
        self._post = post

    def _finish(self, row, data) -> None:
        n = _LEN.unpack_from(data)[0]
        head = json.loads(bytes(data[4:4 + n]))
        if self._post is not None:
            self._post(head, data[4 + n:])
        self.last = Status()  # a collective's status: empty
        self._done()


class PcollRequest(Prequest):
    """A persistent collective request (``Bcast_init``, ...): ``Start`` begins it again."""

    def __init__(self, start):
        super().__init__(start)
        self._inner: CollRequest | None = None

    def Start(self) -> None:
        if self.rid is not None:
            from .types import Exception

            raise Exception(19, "MPI_ERR_REQUEST: the persistent request is active (Start before its Wait)")
        self._inner = self._start()
        self.rid, self.kind = self._inner.rid, "coll"

    def _finish(self, row, data) -> None:
        self._inner._finish(row, data)
        self.last = self._inner.last
        self.rid = None


def _wpack(msg: Msg, count: int, byte_displ: int) -> bytes:
    """``count`` elements of ``msg``'s type at ``byte_displ`` bytes into its buffer (Alltoallw)."""
    dt, at = msg.dt, byte_displ
    if dt.contiguous():
        return bytes(msg.raw[at:at + count * dt.extent])
    import numpy as np

    return np.frombuffer(msg.raw, np.uint8)[dt.index(count) + at].tobytes()


def _wunpack(msg: Msg, data, count: int, byte_displ: int) -> None:
    dt, at = msg.dt, byte_displ
    if len(data) > count * dt.packed:
        from .types import Exception

        raise Exception(15, f"MPI_ERR_TRUNCATE: a message of {len(data)} bytes for {count} elements of {dt.name}")
    if dt.contiguous():
        msg.raw[at:at + len(data)] = data
        return
    import numpy as np

    np.frombuffer(msg.raw, np.uint8)[dt.index(count)[:len(data)] + at] = np.frombuffer(bytes(data), np.uint8)


def _wspec(spec, size: int) -> tuple:
    """``[buf, counts, displs, types]`` (displacements in bytes; one type or one per rank)."""
    buf, counts, displs, types = spec
    types = list(types) if isinstance(types, (list, tuple)) else [types] * size
    counts = [int(c) for c in counts]
    displs = [int(d) for d in displs] if displs is not None else None
    msgs = [Msg([buf, t]) if t is not None else None for t in types]
    if displs is None:  # packed one after the other, each in its own type
        displs, at = [], 0
        for c, m in zip(counts, msgs):
            displs.append(at)
            at += c * (m.dt.extent if m is not None else 0)
    return msgs, counts, displs


class CollectivesMixin:
    """The nonblocking (``I...``) and persistent (``..._init``) collectives, ``Alltoallw``."""

    def _icoll(self, kind: str, call: str, payload=b"", post=None, **head) -> CollRequest:
        h, _ = CHANNEL.call("coll", payload, ctx=self._ok(), kind=kind, call=call, nb=True, **head)
        return CollRequest(h["req"], post)

    def Ibarrier(self) -> CollRequest:
        return self._icoll("barrier", "Ibarrier")

    def Ibcast(self, buf, root: int = 0) -> CollRequest:
        me = self._rank == root
        msg = Msg(buf, writable=not me)
        return self._icoll("bcast", "Ibcast", msg.pack() if me else b"", None if me else lambda h, d: msg.unpack(d),
                           root=root, n=msg.nbytes)

    # reductions
    def _ireduce(self, sendbuf, recvbuf, op, root: int, every: bool, call: str) -> CollRequest:
        src = self._in(sendbuf, recvbuf)
        out = Msg(recvbuf, writable=True) if (every or self._rank == root) and recvbuf is not None else None

        def post(h, d):
            if not h.get("none") and out is not None:
                out.unpack(d)

        return self._icoll("reduce", call, src.pack(), post, rop=_op(op).key, root=root, all=every, **src.type_fields())

    def Ireduce(self, sendbuf, recvbuf, op=OPS["SUM"], root: int = 0) -> CollRequest:
        return self._ireduce(sendbuf, recvbuf, op, root, False, "Ireduce")

    def Iallreduce(self, sendbuf, recvbuf, op=OPS["SUM"]) -> CollRequest:
        return self._ireduce(sendbuf, recvbuf, op, 0, True, "Iallreduce")

    def _iscan(self, sendbuf, recvbuf, op, ex: bool, call: str) -> CollRequest:
        src = self._in(sendbuf, recvbuf)
        out = Msg(recvbuf, writable=True)

        def post(h, d):
            if not h.get("none"):
                out.unpack(d)

        return self._icoll("scan", call, src.pack(), post, rop=_op(op).key, ex=ex, **src.type_fields())

    def Iscan(self, sendbuf, recvbuf, op=OPS["SUM"]) -> CollRequest:
        return self._iscan(sendbuf, recvbuf, op, False, "Iscan")

    def Iexscan(self, sendbuf, recvbuf, op=OPS["SUM"]) -> CollRequest:
        return self._iscan(sendbuf, recvbuf, op, True, "Iexscan")

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=OPS["SUM"]) -> CollRequest:
        out = Msg(recvbuf, writable=True)
        src = Msg(recvbuf) if sendbuf is IN_PLACE else Msg(sendbuf)
        n = out.nbytes if sendbuf is not IN_PLACE else src.nbytes // self._size
        return self._icoll("reduce_scatter", "Ireduce_scatter_block", src.pack(), lambda h, d: out.unpack(d),
                           rop=_op(op).key, lens=[n] * self._size, uniform=True, **src.type_fields())

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=OPS["SUM"]) -> CollRequest:
        out = Msg(recvbuf, writable=True)
        src = Msg(recvbuf) if sendbuf is IN_PLACE else Msg(sendbuf)
        counts = list(recvcounts) if recvcounts is not None else [src.count // self._size] * self._size
        lens = [c * src.dt.packed for c in counts]
        mine = counts[self._rank]
        return self._icoll("reduce_scatter", "Ireduce_scatter", src.pack(), lambda h, d: out.unpack(d, mine),
                           rop=_op(op).key, lens=lens, **src.type_fields())

    # gathers, scatters, all-to-all
    def _igather(self, sendbuf, recvbuf, root: int, every: bool, vector: bool, call: str) -> CollRequest:
        me = every or self._rank == root
        out = Msg(recvbuf, writable=True, vector=vector, blocks=self._size) if me else None
        if sendbuf is IN_PLACE:
            at = out.displs[self._rank] if vector else self._rank * out.count
            mine = out.pack(out.counts[self._rank] if vector else out.count, at)
        else:
            mine = Msg(sendbuf).pack()

        def post(h, data):
            if h.get("none"):
                return
            at = 0
            for r, n in enumerate(h["lens"]):
                out.unpack(data[at:at + n], out.counts[r] if vector else out.count,
                           out.displs[r] if vector else r * out.count)
                at += n

        return self._icoll("gather", call, mine, post, root=root, all=every, uniform=every and not vector)

    def Igather(self, sendbuf, recvbuf, root: int = 0) -> CollRequest:
        return self._igather(sendbuf, recvbuf, root, False, False, "Igather")

    def Igatherv(self, sendbuf, recvbuf, root: int = 0) -> CollRequest:
        return self._igather(sendbuf, recvbuf, root, False, True, "Igatherv")

    def Iallgather(self, sendbuf, recvbuf) -> CollRequest:
        return self._igather(sendbuf, recvbuf, 0, True, False, "Iallgather")

    def Iallgatherv(self, sendbuf, recvbuf) -> CollRequest:
        return self._igather(sendbuf, recvbuf, 0, True, True, "Iallgatherv")

    def _iscatter(self, sendbuf, recvbuf, root: int, vector: bool, call: str) -> CollRequest:
        parts = []
        if self._rank == root:
            src = Msg(sendbuf, vector=vector, blocks=self._size)
            for r in range(self._size):
                parts.append(src.pack(src.counts[r], src.displs[r]) if vector else src.pack(src.count, r * src.count))
        out = Msg(recvbuf, writable=True) if recvbuf is not IN_PLACE else None
        return self._icoll("scatter", call, b"".join(parts), (lambda h, d: out.unpack(d)) if out is not None else None,
                           root=root, lens=[len(p) for p in parts])

    def Iscatter(self, sendbuf, recvbuf, root: int = 0) -> CollRequest:
        return self._iscatter(sendbuf, recvbuf, root, False, "Iscatter")

    def Iscatterv(self, sendbuf, recvbuf, root: int = 0) -> CollRequest:
        return self._iscatter(sendbuf, recvbuf, root, True, "Iscatterv")

    def _ialltoall(self, sendbuf, recvbuf, vector: bool, call: str) -> CollRequest:
        out = Msg(recvbuf, writable=True, vector=vector, blocks=self._size)
        src = out if sendbuf is IN_PLACE else Msg(sendbuf, vector=vector, blocks=self._size)
        if vector:
            parts = [src.pack(src.counts[r], src.displs[r]) for r in range(self._size)]
        else:
            parts = [src.pack(src.count, r * src.count) for r in range(self._size)]

        def post(h, data):
            at = 0
            for r, n in enumerate(h["lens"]):
                out.unpack(data[at:at + n], out.counts[r] if vector else out.count,
                           out.displs[r] if vector else r * out.count)
                at += n

        return self._icoll("alltoall", call, b"".join(parts), post, lens=[len(p) for p in parts],
                           uniform=not vector and len({len(p) for p in parts}) == 1)

    def Ialltoall(self, sendbuf, recvbuf) -> CollRequest:
        return self._ialltoall(sendbuf, recvbuf, False, "Ialltoall")

    def Ialltoallv(self, sendbuf, recvbuf) -> CollRequest:
        return self._ialltoall(sendbuf, recvbuf, True, "Ialltoallv")

    def Ialltoallw(self, sendbuf, recvbuf) -> CollRequest:
        return self._ialltoallw(sendbuf, recvbuf, "Ialltoallw")

    def _ialltoallw(self, sendbuf, recvbuf, call: str) -> CollRequest:
        routs, rcounts, rdispls = _wspec(recvbuf, self._size)
        if sendbuf is IN_PLACE:
            souts, scounts, sdispls = routs, rcounts, rdispls
        else:
            souts, scounts, sdispls = _wspec(sendbuf, self._size)
        parts = [_wpack(souts[r], scounts[r], sdispls[r]) if scounts[r] else b"" for r in range(self._size)]

        def post(h, data):
            at = 0
            for r, n in enumerate(h["lens"]):
                if rcounts[r]:
                    _wunpack(routs[r], data[at:at + n], rcounts[r], rdispls[r])
                at += n

        return self._icoll("alltoall", call, b"".join(parts), post, lens=[len(p) for p in parts])

    def Alltoallw(self, sendbuf, recvbuf) -> None:
        """The nonblocking one, waited for at once (it runs inside the Wait)."""
        self._ialltoallw(sendbuf, recvbuf, "Alltoallw").Wait()


def _persistent(name: str):
    inow = "I" + name[0].lower() + name[1:-len("_init")]  # Bcast_init -> Ibcast

    def init(self, *args, **kw) -> PcollRequest:
        fn = getattr(self, inow)
        return PcollRequest(lambda: fn(*args, **kw))

    init.__name__ = name
    init.__doc__ = f"MPI 4's persistent ``{name}``: ``Start`` issues ``{inow}`` (the buffers as they are then)."
    return init


for _name in ("Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
              "Alltoallv", "Alltoallw", "Reduce", "Allreduce", "Reduce_scatter_block", "Reduce_scatter", "Scan",
              "Exscan"):
    setattr(CollectivesMixin, _name + "_init", _persistent(_name + "_init"))
