"""The emulated ``mpi4py.MPI`` a rank started by ``emu mpirun`` imports (``emu.rank.__main__``).

Module-level calls answer as a real MPI would: MPI is initialised when this module is imported (as
mpi4py does by default) and finalised when the program ends; the emulated library serialises calls
from threads (``THREAD_SERIALIZED``). What it does not have raises ``NotImplementedError`` naming
the call (an ``AttributeError`` too, so ``hasattr`` answers False)."""

from __future__ import annotations

import sys

from .consts import CONSTANTS

globals().update(CONSTANTS)  # MPICH's integer constants; those below are the emulated library's own

from .buffers import BOTTOM, IN_PLACE  # noqa: E402
from .bufobj import BUFFER_AUTOMATIC, BottomType, BufferAutomaticType, InPlaceType  # noqa: E402,F401 -- mpi4py.typing imports them
from .channel import CHANNEL  # noqa: E402
from .comm import (ANY_SOURCE, ANY_TAG, CONGRUENT, IDENT, PROC_NULL, ROOT, SIMILAR, TAG_UB_KEY, UNDEFINED,  # noqa: E402
                   UNEQUAL, Grequest, Group, Prequest, Request, Status, Unsupported, _null_request)
from .errors import (Add_error_class, Add_error_code, Add_error_string, Get_error_class, Get_error_string,  # noqa: E402
                     Remove_error_class, Remove_error_code, Remove_error_string)
from .handle import Handle, Impl, _addressof, _handleof, _sizeof, predefine_null  # noqa: E402
from .info import (ERRHANDLER_NULL, ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, INFO_ENV, INFO_NULL,  # noqa: E402
                   Errhandler, Info)
from .intracomm import COMM_NULL, Comm, Intracomm  # noqa: E402
from .inter import COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_RESOURCE_GUIDED, COMM_TYPE_SHARED, Intercomm  # noqa: E402,E501
from .topo import CART, DIST_GRAPH, GRAPH, UNWEIGHTED, WEIGHTS_EMPTY, Cartcomm, Distgraphcomm, Graphcomm, Topocomm  # noqa: E402,E501
from .dims import compute_dims as Compute_dims  # noqa: E402
from .misc import (MESSAGE_NO_PROC, MESSAGE_NULL, Message,  # noqa: E402
                   Pcontrol, Get_hw_resource_info, Pickle, pickle_,
                   _comm_lock, _comm_lock_table, _commctx_inter, _commctx_intra)
from .ports import Close_port, Lookup_name, Open_port, Publish_name, Unpublish_name  # noqa: E402
from . import spawn as _spawn  # noqa: E402,F401 -- Intracomm.Spawn, Spawn_multiple, Comm.Get_parent
from . import ulfm as _ulfm  # noqa: E402,F401 -- Comm.Agree, Shrink, Get_failed ...
from .errors import Exception  # noqa: E402
from .session import SESSION_NULL, Session  # noqa: E402
from . import bsend as _bsend  # noqa: E402

_bsend.install(Comm, Session)  # Comm's and Session's Attach_buffer, Detach_buffer, Flush_buffer, Iflush_buffer
from .win import (LOCK_EXCLUSIVE, LOCK_SHARED, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOPUT, MODE_NOSTORE,  # noqa: E402
                  MODE_NOSUCCEED, WIN_BASE, WIN_CREATE_FLAVOR, WIN_DISP_UNIT, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_CREATE,
                  WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED, WIN_MODEL, WIN_NULL, WIN_SEPARATE, WIN_SIZE, WIN_UNIFIED, Win)
from .types import CONSTANTS as TYPE_NAMES, OPS, TYPES, Datatype, Op  # noqa: E402

TAG_UB = TAG_UB_KEY
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
VERSION, SUBVERSION = 4, 1
"""The MPI standard the emulated library claims: 4.1 -- what mpi4py's test suite asks of a 4.1 library
(sessions, partitioned and large-count calls, the hardware-guided ``Split_type`` kinds, buffers attached
to communicators and sessions) it has; a call it lacks raises NotImplementedError naming it."""
pickle = pickle_
REQUEST_NULL = predefine_null(Request(), "REQUEST_NULL")
GROUP_NULL = predefine_null(Group(), "GROUP_NULL")
GROUP_EMPTY = Group._make([])._predefine("GROUP_EMPTY")
globals().update(TYPES)
globals().update(OPS)
globals().update(TYPE_NAMES)  # emu.rank.types: combiners, orders, type classes, Get_address, Aint_add/diff

CHANNEL.open()
COMM_WORLD = Intracomm._make(0, CHANNEL.size, CHANNEL.world_rank)._predefine("COMM_WORLD")
COMM_SELF = Intracomm._make(1, 1, 0)._predefine("COMM_SELF")
_rc = getattr(sys.modules.get("mpi4py"), "rc", None)
_state = {"init": bool(getattr(_rc, "initialize", True)), "final": False, "thread": THREAD_SERIALIZED}
"""MPI is initialised at import unless ``mpi4py.rc.initialize`` was set False before it (then
``Init``/``Init_thread`` initialise it, as with mpi4py); the library serialises the program's calls."""


def Init() -> None:
    if _state["init"] or _state["final"]:
        raise Exception(ERR_OTHER, "Cannot call MPI_INIT or MPI_INIT_THREAD more than once")
    _state["init"] = True


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    Init()
    return min(int(required), _state["thread"])


def Is_initialized() -> bool:
    return _state["init"]


def Is_finalized() -> bool:
    return _state["final"]


def Finalize() -> None:
    if _state["final"]:
        raise Exception(ERR_OTHER, "MPI_Finalize called twice")
    _state["final"] = CHANNEL.finalized = True


def Query_thread() -> int:
    return _state["thread"]


def Is_thread_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def Get_version() -> tuple[int, int]:
    return VERSION, SUBVERSION


def Get_library_version() -> str:
    return ("hpc-emu emulated MPI (emu mpirun): every call is traffic of an emulated host; "
            f"rank {CHANNEL.world_rank} of {CHANNEL.size} on {CHANNEL.name}")


def Get_abi_version() -> tuple[int, int]:
    """No standard MPI ABI (MPI 5.0): (-1, -1), as mpi4py answers for a library without ``MPI_Abi_get_version``."""
    return -1, -1


def Get_abi_info() -> Info:
    """The sizes of the address, count and offset integers, as mpi4py's fallback (``mpiapi50.h``) gives them."""
    info = Info.Create()
    for name in ("aint", "count", "offset"):
        info.Set(f"mpi_{name}_size", str(TYPES[name.upper()].Get_size()))
    return info


def Get_abi_fortran_info() -> Info:
    """The Fortran types' sizes and which sized ones the library has, as mpi4py's fallback (``mpiapi50.h``)
    gives them (INFO_NULL without the four basic ones)."""
    sizes = [TYPES[k].Get_size() if TYPES.get(k) else 0 for k in ("LOGICAL", "INTEGER", "REAL", "DOUBLE_PRECISION")]
    if not any(sizes):
        return Info()
    info = Info.Create()
    for name, size in zip(("logical", "integer", "real", "double_precision"), sizes):
        info.Set(f"mpi_{name}_size", str(size))
    for kind, sizes in (("logical", (1, 2, 4, 8, 16)), ("integer", (1, 2, 4, 8, 16)), ("real", (2, 4, 8, 16)),
                        ("complex", (4, 8, 16, 32)), ("double_complex", ("",))):
        for n in sizes:
            t = TYPES.get(f"{kind}{n}".upper())
            info.Set(f"mpi_{kind}{n}_supported", "true" if t and t.Get_size() > 0 else "false")
    return info


def get_vendor() -> tuple[str, tuple[int, int, int]]:
    return "hpc-emu", (0, 1, 0)


def Get_processor_name() -> str:
    return CHANNEL.name


def Wtime() -> float:
    """Virtual seconds: the host's clock (and the computation since the last call, scaled)."""
    return CHANNEL.wtime()


def Wtick() -> float:
    return 1e-9


def Abort(errorcode: int = 0):
    """Terminate the MPI execution environment (the job ends, as ``COMM_WORLD.Abort``)."""
    CHANNEL.abort(errorcode)


def _set_abort_status(status: int) -> None:
    """``mpi4py.run``'s helper (a program it ran ended by an exception): the process aborts the job with
    ``status`` when it ends, as mpi4py's exit handler does (``emu.rank.__main__``)."""
    CHANNEL.abort_status = int(status)


def Attach_buffer(buf) -> None:
    """The buffer buffered sends need room in (``BUFFER_AUTOMATIC`` or None: as much as they take);
    read-only memory refused (BufferError), as mpi4py."""
    from .bsend import take

    CHANNEL.bsend_buffer, CHANNEL.bsend_bytes = take(buf)


def Detach_buffer():
    buf, CHANNEL.bsend_buffer = CHANNEL.bsend_buffer, None
    return buf


def Flush_buffer() -> None:
    """MPI 4.1: the buffered messages are sent (the emulated NIC took each at once)."""


def Iflush_buffer() -> Request:
    """MPI 4.1: a request complete when made (``Flush_buffer``)."""
    return _null_request()


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    raise Unsupported(f"the emulated MPI (emu mpirun) has no MPI.{name}")


from .charging import install as _charging  # noqa: E402 -- last: the program's CPU time apart from the library's

_charging(globals())
from .mpiio import FILE_NULL, File, Register_datarep  # noqa: E402 -- MPI-IO

from .handle import mark_constants as _mark_constants  # noqa: E402

_mark_constants(globals())

del sys, _spawn, _ulfm, _bsend  # modules are not the MPI module's names (mpi4py's has none)
del predefine_null  # the library's own helper
from .mpidoc import apply as _apply_docs  # noqa: E402

_apply_docs(globals())  # mpi4py's docstrings (emu.rank.mpidoc)
del _apply_docs
