"""User-level failure mitigation (ULFM: ``MPIX_Comm_*`` of MPICH and Open MPI, mpi4py's ``Comm.Agree``,
``Shrink``, ...) of the emulated ``mpi4py.MPI``, as a job of ``emu mpirun`` has it: a rank that fails ends
the job (``emu.front.mpirun``, as mpiexec does), so no call ever sees a failed process. Hence:
``Get_failed`` is the empty group, ``Ack_failed`` acknowledges none, ``Agree``/``Iagree`` are the
bitwise AND of every process's flag (of the remote group's, on an intercommunicator; ``Iagree`` by
messages of its own on an intracommunicator), ``Shrink``/``Ishrink``
a duplicate (no process to leave out). ``Revoke`` is not in the library -- NotImplementedError, as
mpi4py raises it over an MPICH built without ULFM -- so ``Is_revoked`` is always False.
"""

from __future__ import annotations

from .channel import CHANNEL
from .comm import ANY_TAG, PROC_NULL, Group, Request, _null_request, _pickle
from .inter import Intercomm, attach
from .intracomm import Comm
from .types import OPS, TYPES

BAND, INT = OPS["BAND"], TYPES["INT"]
AGREE_TAG = -32
"""Tag of ``Iagree``'s messages: negative, so no program's receive matches one (``ANY_TAG`` takes the
tags from 0 up: ``emu.front.mpiserve.RankState._matches``)."""


def get_failed(self) -> Group:
    """``Comm.Get_failed``: the processes of the communicator known to have failed -- none."""
    self._ok()
    return Group._make([])


def ack_failed(self, num_to_ack: int | None = None) -> int:
    """``Comm.Ack_failed``: how many failed processes are acknowledged -- none failed."""
    self._ok()
    return 0


def is_revoked(self) -> bool:
    self._ok()
    return False


def _agree_inter(comm: Intercomm, flag: int) -> int:
    """On an intercommunicator: the AND of the remote group's flags (as ULFM defines it, and MPICH does)."""
    return comm.allreduce(flag, op=BAND)


def agree(self, flag: int) -> int:
    """``Comm.Agree(flag)``: the bitwise AND of the flags of every process of the communicator."""
    if not isinstance(flag, int) or isinstance(flag, bool):
        raise TypeError(f"Agree: the flag must be an int, got {type(flag).__name__}")
    self._ok()
    if isinstance(self, Intercomm):
        return _agree_inter(self, int(flag))
    return self.allreduce(int(flag), op=BAND)


class AgreeRequest(Request):
    """The request of ``Iagree`` on an intracommunicator: each process sent its flag to every other one
    (tag ``AGREE_TAG``) and posted a receive from each; complete when those are, the AND then written
    into the flag buffer. Its ``Test`` does not block (the messages move on their own)."""

    @classmethod
    def _agree(cls, flag, ints, inner: list) -> "AgreeRequest":
        req = cls._make(None, "agree")
        req._h.flag, req._h.ints, req._h.inner = flag, ints, inner
        return req

    def _local_done(self) -> bool:
        return Request.Testall(self._h.inner)

    def _local_finish(self) -> None:
        h = self._h
        value = h.ints[0]
        for r in h.inner:
            if r._value is not None:
                value &= r._value
        h.ints[0] = value
        self._status()._set([0, PROC_NULL, ANY_TAG, 0, False])
        self._done()

    def Wait(self, status=None) -> bool:
        if self._h is not None:
            Request.Waitall(self._h.inner)
            self._local_finish()
        return super().Wait(status)



def iagree(self, flag):
    """``Comm.Iagree(flag)``: ``flag`` is a buffer of one C int, the AND written into it when the request
    completes. On an intracommunicator every process sends its flag to every other one and receives
    theirs, on a tag no program's message has (``AGREE_TAG``): a real nonblocking exchange, which no
    other collective of the communicator waits for. On an intercommunicator it is agreed at the call
    (an ``allreduce`` over it) and the request comes back completed."""
    if isinstance(flag, int):
        raise TypeError(f"Iagree: the flag must be a buffer of one C int, got {type(flag).__name__}")
    view = memoryview(flag)
    if view.nbytes != INT.Get_size():
        raise ValueError(f"Iagree: the flag must be a buffer of one C int ({INT.Get_size()} bytes), got "
                         f"{view.nbytes} bytes")
    ctx = self._ok()
    ints = view.cast("B").cast("i")
    if isinstance(self, Intercomm):
        ints[0] = _agree_inter(self, ints[0])
        return _null_request("coll")
    me, inner = self.Get_rank(), []
    for other in range(self.Get_size()):
        if other != me:
            inner.append(Request._make(CHANNEL.call("recv", ctx=ctx, source=other, tag=AGREE_TAG, nb=True,
                                                    call="Iagree")[0]["req"], "recv_obj"))
    data = _pickle(int(ints[0]))
    for other in range(self.Get_size()):
        if other != me:
            inner.append(Request._make(CHANNEL.call("send", data, ctx=ctx, dest=other, tag=AGREE_TAG, mode="std",
                                                    nb=True, call="Iagree")[0]["req"], "send"))
    return AgreeRequest._agree(flag, ints, inner)


def shrink(self) -> Comm:
    """``Comm.Shrink``: the communicator of its processes that have not failed -- all of them."""
    return self.Dup()


def ishrink(self):
    """``Comm.Ishrink``: as ``Idup``, the new communicator and its request."""
    new = self.Dup()
    return new, _null_request("coll")


attach(Comm, {"Get_failed": get_failed, "Ack_failed": ack_failed, "Is_revoked": is_revoked, "Agree": agree,
              "Iagree": iagree, "Shrink": shrink, "Ishrink": ishrink})
