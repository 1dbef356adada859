"""Buffered sends' buffers of the emulated ``mpi4py.MPI`` (MPI 4.1 §3.6.1), rank side.

A buffered send needs room for its message (and ``BSEND_OVERHEAD``) in the buffer attached to its
communicator; failing that, in the one attached to the session the communicator was made from; failing
that, in the process's (``MPI.Attach_buffer``). ``MPI.BUFFER_AUTOMATIC`` (or None) attached means
"as much as it takes". The emulated NIC takes a message at once, so the room is free again when the send
returns: ``Flush_buffer`` has nothing to wait for and ``Iflush_buffer``'s request is complete when made.
This module gives ``Comm`` and ``Session`` their ``Attach_buffer``, ``Detach_buffer``, ``Flush_buffer``
and ``Iflush_buffer`` (the process's are ``emu.rank.mpi``'s)."""

from __future__ import annotations

from .bufobj import BUFFER_AUTOMATIC, acquire
from .channel import CHANNEL
from .comm import _null_request
from .mpierr import ERR_BUFFER, Exception

AUTOMATIC_BYTES = 1 << 62
"""The room of ``BUFFER_AUTOMATIC``: no message is refused."""

OVERHEAD = 96
"""``MPI.BSEND_OVERHEAD`` (MPICH's): what a buffered message takes beside its bytes."""


def take(buf) -> tuple[object, int]:
    """The buffer to keep and its room in bytes (read-only memory refused: BufferError, as mpi4py)."""
    if buf is None or buf is BUFFER_AUTOMATIC:
        return BUFFER_AUTOMATIC, AUTOMATIC_BYTES
    nbytes = acquire(buf, writable=True).nbytes
    if nbytes < OVERHEAD:  # as MPICH refuses it
        raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: buffer size of {nbytes} is smaller than MPI_BSEND_OVERHEAD "
                                    f"({OVERHEAD})")
    return buf, nbytes


def attach(holder, buf, what: str) -> None:
    """Attach ``buf`` to ``holder`` (a communicator's or a session's MPI object)."""
    if getattr(holder, "bsend", None) is not None:
        raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: {what} has a buffer attached already (Detach_buffer first)")
    holder.bsend, holder.bsend_bytes = take(buf)


def detach(holder):
    """The buffer attached to ``holder`` (None if none), detached."""
    buf = getattr(holder, "bsend", None)
    holder.bsend = None
    return buf


def room(comm_impl, nbytes: int) -> None:
    """Is there room for a buffered message of ``nbytes`` on this communicator? MPI_ERR_BUFFER if not."""
    for holder in (comm_impl, getattr(comm_impl, "session", None)):
        if getattr(holder, "bsend", None) is not None:
            if nbytes + OVERHEAD > holder.bsend_bytes:
                raise Exception(ERR_BUFFER, f"MPI_ERR_BUFFER: insufficient space in Bsend buffer; requested "
                                            f"{nbytes}, total buffer size is {holder.bsend_bytes} (Attach_buffer)")
            return
    CHANNEL.bsend_room(nbytes)


def _methods(what: str) -> dict:
    def Attach_buffer(self, buf) -> None:
        attach(self._ok_impl(), buf, what)

    def Detach_buffer(self):
        return detach(self._ok_impl())

    def Flush_buffer(self) -> None:
        self._ok_impl()

    def Iflush_buffer(self):
        self._ok_impl()
        return _null_request()

    return {"Attach_buffer": Attach_buffer, "Detach_buffer": Detach_buffer, "Flush_buffer": Flush_buffer,
            "Iflush_buffer": Iflush_buffer}


def _ok_impl(self):
    self._ok()
    return self._h


def install(comm_cls: type, session_cls: type) -> None:
    """Give ``Comm`` and ``Session`` their buffer calls (``_ok_impl``: the MPI object, or the class's error
    for a null handle)."""
    comm_cls._ok_impl = session_cls._ok_impl = _ok_impl
    for cls, what in ((comm_cls, "the communicator"), (session_cls, "the session")):
        for name, fn in _methods(what).items():
            setattr(cls, name, fn)
