"""Datatypes and operators of the emulated ``mpi4py.MPI`` (rank side): the names the rank's other
modules import. Datatypes are ``dtype`` (handles, named types, packing) with the constructors of
``typector``; type maps are ``typemap``; operators are ``ops``; buffer memory is ``bufobj``.
Nothing here imports the channel: ``emu.rank.types`` can be imported (and tested) on its own."""

from __future__ import annotations

import numpy as np

from . import typector  # noqa: F401 -- sets the constructors on Datatype
from .bufobj import address
from .dtype import (COMBINERS, DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC, DISTRIBUTE_DFLT_DARG, DISTRIBUTE_NONE,  # noqa: F401
                    FORMATS, ORDER_C, ORDER_F, PAIRS, TYPECLASS_COMPLEX, TYPECLASS_INTEGER, TYPECLASS_LOGICAL,
                    TYPECLASS_REAL, TYPES, Datatype, from_format)
from .mpibuf import Alloc_mem, Free_mem, buffer
from .mpierr import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_OP, ERR_TYPE, Exception  # noqa: F401
from .ops import OPS, PY_OPS, Op, numpy_combine  # noqa: F401
from .typemap import MAX_PACK_BYTES  # noqa: F401


def Get_address(location) -> int:
    """``MPI.Get_address``: the absolute address of a buffer's memory (0 for BOTTOM or None)."""
    return address(location)


def Aint_add(base: int, disp: int) -> int:
    return int(base) + int(disp)


def Aint_diff(addr1: int, addr2: int) -> int:
    return int(addr1) - int(addr2)


_ALIGN = {"?": 1, "b": 1, "h": 2, "i": 4, "l": 8, "q": 8, "B": 1, "H": 2, "I": 4, "L": 8, "Q": 8, "e": 2, "f": 4,
          "d": 8, "g": 16, "E": 2, "F": 4, "D": 8, "G": 16, "c": 1, "S": 1, "U": 4, "p": 8, "P": 8}
"""The C alignment of each type character (x86-64), as mpi4py's ``typealign``."""


def _typecode(datatype: Datatype) -> str | None:
    """mpi4py's ``MPI._typecode`` (``mpi4py.util.dtlib`` uses it)."""
    try:
        return datatype.tocode()
    except ValueError:
        return None


def _typealign(datatype: Datatype) -> int | None:
    """mpi4py's ``MPI._typealign``: a named type's alignment (a pair's: its parts' largest)."""
    if not datatype:
        return None
    if datatype.Get_name() in ("MPI_REAL16", "MPI_COMPLEX32"):
        return 16
    align = _ALIGN.get(datatype.typechar, 0)
    key = datatype._t.key
    if not align and key in PAIRS:
        align = max(np.dtype(PAIRS[key][0]).alignment, 4)
    return align or None


CONSTANTS = {**{f"COMBINER_{k}": v for k, v in COMBINERS.items()},
             "ORDER_C": ORDER_C, "ORDER_F": ORDER_F, "ORDER_FORTRAN": ORDER_F,
             "DISTRIBUTE_BLOCK": DISTRIBUTE_BLOCK, "DISTRIBUTE_CYCLIC": DISTRIBUTE_CYCLIC,
             "DISTRIBUTE_NONE": DISTRIBUTE_NONE, "DISTRIBUTE_DFLT_DARG": DISTRIBUTE_DFLT_DARG,
             "TYPECLASS_REAL": TYPECLASS_REAL, "TYPECLASS_INTEGER": TYPECLASS_INTEGER,
             "TYPECLASS_COMPLEX": TYPECLASS_COMPLEX, "TYPECLASS_LOGICAL": TYPECLASS_LOGICAL,
             "Get_address": Get_address, "Aint_add": Aint_add, "Aint_diff": Aint_diff,
             "buffer": buffer, "memory": buffer, "Alloc_mem": Alloc_mem, "Free_mem": Free_mem,
             "_typecode": _typecode, "_typealign": _typealign}
"""Module-level names of ``mpi4py.MPI`` this module adds (``mpi.py``: ``globals().update(CONSTANTS)``)."""
