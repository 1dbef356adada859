"""The fast path of plain NumPy arrays (rank side): such an array is its message whole.

A plain array -- C-contiguous, native byte order, an element code that names a predefined datatype
of its own size (``PLAIN``) -- is what ``buffers.Msg`` would find: every element, in memory order,
of the datatype its buffer format names. The calls of point to point (``emu.rank.intracomm``) and
the reductions and broadcasts (``emu.rank.blockcoll``) take its bytes with ``tobytes()`` and fill it
by one copy, without parsing a specification; anything else takes ``Msg``'s general way, with its
checks and errors.
"""

from __future__ import annotations

from numpy import ndarray

from .mpierr import ERR_TRUNCATE
from .types import Exception

PLAIN = frozenset("bBhHiIlLqQfd")
"""Element codes of a NumPy array whose buffer format names a predefined datatype of its own size
(``dtype.from_format``)."""


def plain(buf) -> bool:
    return type(buf) is ndarray and buf.flags.c_contiguous and buf.dtype.char in PLAIN and buf.dtype.isnative


class Whole:
    """The receive buffer of a plain array (``plain``): the message's bytes from its start."""

    def __init__(self, arr):
        self.arr = arr

    def unpack(self, data) -> None:
        arr = self.arr
        if len(data) > arr.nbytes:
            raise Exception(ERR_TRUNCATE, f"MPI_ERR_TRUNCATE: a message of {len(data)} bytes for a buffer of {arr.nbytes}")
        n = len(data)
        if n:  # (one copy through the array's own memory: the callers hand over writable arrays only)
            memoryview(arr).cast("B")[:n] = data


_FIELDS: dict[str, dict] = {}


def type_fields(arr) -> dict:
    """What a reduction tells the emulator of a plain array's element type: ``Msg(arr).type_fields()``,
    found once per element code."""
    code = arr.dtype.char
    f = _FIELDS.get(code)
    if f is None:
        from .buffers import Msg

        f = _FIELDS[code] = Msg(arr.reshape(-1)[:0]).type_fields()
    return f
