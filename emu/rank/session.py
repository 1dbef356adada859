"""``MPI.Session`` of the emulated ``mpi4py.MPI``: MPI 4 sessions (MPI 4.0 §11.3), rank side.

A session is local to its process, as in MPI: ``Session.Init`` starts nothing and crosses no
fabric. It names the job's two process sets, ``mpi://WORLD`` (every rank ``emu mpirun`` started)
and ``mpi://SELF`` (this rank), as MPICH does; ``Create_group`` gives the pset's group, from which
``Intracomm.Create_from_group`` makes a communicator (a collective over the group's members, carried
by the emulator as ``Create_group`` is). Names are matched as MPICH matches them: exactly by
``Get_pset_info``, case-insensitively by ``Create_group``. Errors go to the session's error handler
(``ERRORS_RETURN`` unless ``Init`` was given another). A session's buffered-send buffer (MPI 4.1) is
``emu.rank.bsend``'s: a communicator made from one of its groups uses it.
"""

from __future__ import annotations

import sys

from .channel import CHANNEL
from .consts import CONSTANTS
from .errors import Exception
from .group import Group
from .handle import Handle, Impl, predefine_null
from .info import ERRORS_RETURN, Errhandler, Info, call_errhandler, create_errhandler

ERR_ARG, ERR_SESSION = CONSTANTS["ERR_ARG"], CONSTANTS["ERR_SESSION"]
PSETS = ("mpi://WORLD", "mpi://SELF")
_THREADS = ("MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE")


def _members(name: str) -> list[int]:
    """World ranks of the process set ``name`` (one of ``PSETS``)."""
    return list(CHANNEL.world) if name == PSETS[0] else [CHANNEL.rank]


class Session(Handle, family=True):
    """An MPI session: the job's process sets, and the groups of them."""

    _free_predefined = False

    @classmethod
    def Init(cls, info=None, errhandler: Errhandler | None = None) -> "Session":
        if errhandler is not None and (not isinstance(errhandler, Errhandler) or not errhandler):
            raise Exception(ERR_ARG, "MPI_ERR_ARG: invalid errhandler")
        if info is not None and not isinstance(info, Info):
            raise TypeError(f"expecting an Info object, got {type(info).__name__}")
        eh = Errhandler(errhandler if errhandler is not None else ERRORS_RETURN)
        return cls._of(Impl(errhandler=eh))

    def _ok(self) -> Impl:
        if self._h is None:
            raise Exception(ERR_SESSION, "MPI_ERR_SESSION: invalid session (SESSION_NULL)")
        return self._h

    def _fail(self, text: str, code: int = ERR_ARG):
        """An erroneous call on a valid session: its error handler, then the exception (ERRORS_RETURN)."""
        call_errhandler(self, self._h.errhandler, code)
        raise Exception(code, text)

    def Finalize(self) -> None:
        self._ok()
        self._h = None

    def _free(self) -> None:  # mpi4py's ``free()`` of a session finalises it
        self.Finalize()

    # -- process sets ------------------------------------------------------------------------------
    def Get_num_psets(self, info=None) -> int:
        self._ok()
        return len(PSETS)

    def Get_nth_pset(self, n: int, info=None) -> str:
        self._ok()
        n = int(n)
        if not 0 <= n < len(PSETS):
            self._fail(f"MPI_ERR_ARG: invalid pset number {n} (the session has {len(PSETS)}: 0 to {len(PSETS) - 1})")
        return PSETS[n]

    def Get_pset_info(self, pset_name: str) -> Info:
        self._ok()
        if pset_name not in PSETS:
            self._fail(f"MPI_ERR_ARG: invalid pset name {pset_name!r} (the session has {', '.join(PSETS)})")
        return Info.Create({"mpi_size": str(len(_members(pset_name)))})

    def Create_group(self, pset_name: str) -> Group:
        self._ok()
        name = next((p for p in PSETS if p.lower() == str(pset_name).lower()), None)
        if name is None:
            self._fail(f"MPI_ERR_ARG: invalid pset name {pset_name!r} (the session has {', '.join(PSETS)})")
        group = Group._make(_members(name))
        group._h.session = self._h  # a communicator made of it uses the session's buffered-send buffer
        return group

    def Get_info(self) -> Info:
        self._ok()
        mpi = sys.modules.get("mpi4py.MPI")
        level = mpi.Query_thread() if mpi is not None else 2
        return Info.Create({"thread_level": _THREADS[level], "strict_finalize": "0"})

    # -- error handling ----------------------------------------------------------------------------
    @classmethod
    def Create_errhandler(cls, errhandler_fn) -> Errhandler:
        return create_errhandler(errhandler_fn, "session")

    def Get_errhandler(self) -> Errhandler:
        return Errhandler(self._ok().errhandler)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        h = self._ok()
        if not isinstance(errhandler, Errhandler) or not errhandler:
            raise Exception(ERR_ARG, "MPI_ERR_ARG: invalid errhandler")
        h.errhandler = Errhandler(errhandler)

    def Call_errhandler(self, errorcode: int) -> None:
        call_errhandler(self, self._ok().errhandler, errorcode)


SESSION_NULL = predefine_null(Session(), "SESSION_NULL")


def create_from_session_pset(cls, session: Session, pset_name: str) -> Group:
    """``Group.Create_from_session_pset(session, pset_name)``."""
    if not isinstance(session, Session):
        raise TypeError(f"expecting a Session object, got {type(session).__name__}")
    return session.Create_group(pset_name)


Group.Create_from_session_pset = classmethod(create_from_session_pset)
