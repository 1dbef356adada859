"""The emulated ``mpi4py.MPI`` a rank started by ``emu mpirun`` imports (``emu.rank.__main__``).

Module-level calls answer as a real MPI would: MPI is initialised when this module is imported (as
mpi4py does by default) and finalised when the program ends; the emulated library serialises calls
from threads (``THREAD_SERIALIZED``). What it does not have raises ``NotImplementedError`` naming
the call (an ``AttributeError`` too, so ``hasattr`` answers False)."""

from __future__ import annotations

from .channel import BOTTOM, CHANNEL, IN_PLACE
from .comm import (ANY_SOURCE, ANY_TAG, CONGRUENT, IDENT, PROC_NULL, ROOT, SIMILAR, TAG_UB_KEY, UNDEFINED, UNEQUAL,
                   Group, Prequest, Request, Status, Unsupported)
from .intracomm import COMM_NULL, Comm, Intracomm
from .types import OPS, TYPES, Datatype, Exception, Op
from .win import (LOCK_EXCLUSIVE, LOCK_SHARED, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOPUT, MODE_NOSTORE,  # noqa: F401
                  MODE_NOSUCCEED, WIN_BASE, WIN_CREATE_FLAVOR, WIN_DISP_UNIT, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_CREATE,
                  WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED, WIN_MODEL, WIN_NULL, WIN_SEPARATE, WIN_SIZE, WIN_UNIFIED,
                  Get_address, Win)

TAG_UB = TAG_UB_KEY
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
SUCCESS, ERR_BUFFER, ERR_COUNT, ERR_TYPE, ERR_TAG, ERR_COMM, ERR_RANK, ERR_ROOT, ERR_GROUP = 0, 1, 2, 3, 4, 5, 6, 7, 8
ERR_OP, ERR_ARG, ERR_TRUNCATE, ERR_OTHER, ERR_INTERN, ERR_REQUEST = 9, 12, 14, 15, 16, 19  # MPICH's error classes
MAX_PROCESSOR_NAME, BSEND_OVERHEAD, VERSION, SUBVERSION = 128, 96, 3, 1
REQUEST_NULL = Request(None)
GROUP_EMPTY = Group([])
globals().update(TYPES)
globals().update(OPS)

CHANNEL.open()
COMM_WORLD = Intracomm(0, CHANNEL.size, CHANNEL.rank)
COMM_SELF = Intracomm(1, 1, 0)
_state = {"init": True, "final": False, "thread": THREAD_SERIALIZED}


def Init() -> None:
    raise Exception(ERR_OTHER, "Cannot call MPI_INIT or MPI_INIT_THREAD more than once")


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    Init()


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
            f"rank {CHANNEL.rank} of {CHANNEL.size} on {CHANNEL.name}")


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
    CHANNEL.abort(errorcode)


def Attach_buffer(buf) -> None:
    CHANNEL.bsend_buffer = buf


def Detach_buffer():
    buf, CHANNEL.bsend_buffer = CHANNEL.bsend_buffer, None
    return buf


def Compute_dims(nnodes: int, dims):
    raise NotImplementedError("the emulated MPI has no MPI.Compute_dims")


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    raise Unsupported(f"the emulated MPI (emu mpirun) has no MPI.{name}")
