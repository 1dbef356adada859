"""``MPI.Info`` and ``MPI.Errhandler`` of the emulated ``mpi4py.MPI``: objects local to the rank
(nothing of them crosses the fabric), with mpi4py's mapping methods and MPI's error classes."""

from __future__ import annotations

import os
import sys

from .consts import CONSTANTS
from .handle import Handle, Impl, predefine_null
from .types import Exception

ERR_INFO_KEY, ERR_INFO_VALUE, ERR_INFO_NOKEY, ERR_ARG = (CONSTANTS["ERR_INFO_KEY"], CONSTANTS["ERR_INFO_VALUE"],
                                                          CONSTANTS["ERR_INFO_NOKEY"], CONSTANTS["ERR_ARG"])
MAX_INFO_KEY, MAX_INFO_VAL = CONSTANTS["MAX_INFO_KEY"], CONSTANTS["MAX_INFO_VAL"]


class Info(Handle, family=True):
    """An ordered set of (key, value) strings."""

    def _d(self) -> dict:
        if self._h is None:
            raise Exception(CONSTANTS["ERR_INFO"], "MPI_ERR_INFO: invalid info object (INFO_NULL)")
        return self._h.items

    @classmethod
    def Create(cls, items=None) -> "Info":
        info = cls._of(Impl(items={}))
        if items is not None:
            if hasattr(items, "keys"):
                items = [(k, items[k]) for k in items.keys()]
            elif isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
                raise TypeError(f"expecting a mapping or a sequence of (key, value) pairs, got {type(items).__name__}")
            for k, v in items:
                info.Set(k, v)
        return info

    @classmethod
    def Create_env(cls, args=None) -> "Info":
        info = cls.Create()
        for k, v in _env_items(args):
            info.Set(k, v)
        return info

    def Free(self) -> None:
        if self._h is None or self._h is INFO_ENV._h:
            raise Exception(CONSTANTS["ERR_INFO"], "MPI_ERR_INFO: INFO_NULL and INFO_ENV cannot be freed")
        self._h = None

    def Dup(self) -> "Info":
        return type(self)._of(Impl(items=dict(self._d())))

    def Get(self, key: str) -> str | None:
        _key(key)
        return self._d().get(key)

    def Set(self, key: str, value: str) -> None:
        _key(key)
        if not isinstance(value, str):
            raise TypeError(f"info value must be a str, got {type(value).__name__}")
        if len(value) > MAX_INFO_VAL:
            raise Exception(ERR_INFO_VALUE, f"MPI_ERR_INFO_VALUE: value longer than {MAX_INFO_VAL}")
        self._d()[key] = value

    def Delete(self, key: str) -> None:
        _key(key)
        d = self._d()
        if key not in d:
            raise Exception(ERR_INFO_NOKEY, f"MPI_ERR_INFO_NOKEY: no key {key!r}")
        del d[key]

    def Get_nkeys(self) -> int:
        return len(self._d())

    def Get_nthkey(self, n: int) -> str:
        keys = list(self._d())
        if not 0 <= n < len(keys):
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: key index {n} of {len(keys)}")
        return keys[n]

    # -- mpi4py's mapping methods ----------------------------------------------------------------
    def _items(self) -> dict:
        return {} if self._h is None else self._h.items

    def __len__(self) -> int:
        return len(self._items())

    def __contains__(self, key) -> bool:
        return key in self._items()

    def __iter__(self):
        return iter(list(self._items()))

    def __getitem__(self, key: str) -> str:
        if self._h is None:
            raise KeyError(key)
        v = self.Get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: str) -> None:
        if self._h is None:
            raise KeyError(key)
        self.Set(key, value)

    def __delitem__(self, key: str) -> None:
        if self._h is None or key not in self._h.items:
            raise KeyError(key)
        self.Delete(key)

    def get(self, key: str, default=None):
        return self._items().get(key, default)

    def keys(self) -> list:
        return list(self._items())

    def values(self) -> list:
        return list(self._items().values())

    def items(self) -> list:
        return list(self._items().items())

    def update(self, items=(), **kwds) -> None:
        if self._h is None:
            raise KeyError("update on INFO_NULL")
        if hasattr(items, "keys"):
            items = [(k, items[k]) for k in items.keys()]
        for k, v in list(items) + list(kwds.items()):
            self.Set(k, v)

    def pop(self, key: str, *default):
        d = self._items()
        if key in d:
            v = d[key]
            self.Delete(key)
            return v
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        d = self._items()
        if not d:
            raise KeyError("popitem(): info is empty")
        k = list(d)[-1]
        return k, self.pop(k)

    def copy(self) -> "Info":
        return self if self._h is None else self.Dup()

    def clear(self) -> None:
        if self._h is not None:
            self._h.items.clear()

    def __reduce__(self):
        if self._is_predefined():
            return super().__reduce__()
        return (_rebuild_info, (type(self), self.items()))


def _rebuild_info(cls, items):
    info = Info.Create(items)
    return cls(info)


def _key(key) -> None:
    if not isinstance(key, str):
        raise TypeError(f"info key must be a str, got {type(key).__name__}")
    if not key or len(key) > MAX_INFO_KEY:
        raise Exception(ERR_INFO_KEY, f"MPI_ERR_INFO_KEY: key of {len(key)} characters (1..{MAX_INFO_KEY})")


def _env_items(args=None) -> list:
    """``INFO_ENV`` as MPICH fills it (MPI 4.0 §11.2.3): the command, its arguments, the ranks."""
    argv = list(sys.argv if args is None else args)
    out = [("command", argv[0] if argv else sys.executable)]
    if len(argv) > 1:
        out.append(("argv", " ".join(argv[1:])))
    out += [("maxprocs", os.environ.get("EMU_MPIRUN_SIZE", "1")), ("soft", ""), ("host", ""),
            ("arch", ""), ("wdir", os.getcwd()), ("thread_level", "MPI_THREAD_SERIALIZED")]
    return [(k, v) for k, v in out if v]


INFO_NULL = predefine_null(Info(), "INFO_NULL")
INFO_ENV = Info._of(Impl(items=dict(_env_items())))._predefine("INFO_ENV")


class Errhandler(Handle, family=True):
    """What a failing call does: raise (``ERRORS_RETURN``, mpi4py's default), or end the job."""

    _free_predefined = True

    def Free(self) -> None:
        if self._h is None:
            raise Exception(CONSTANTS["ERR_ARG"], "MPI_ERR_ARG: invalid errhandler (ERRHANDLER_NULL)")
        if self._h.kind == "user":
            self._h.fn = None  # its slot in the table is free again
        self._h = None

    def __reduce__(self):
        return super().__reduce__()


ERRHANDLER_NULL = predefine_null(Errhandler(), "ERRHANDLER_NULL")
ERRORS_RETURN = Errhandler._of(Impl(kind="return", fn=None))._predefine("ERRORS_RETURN")
ERRORS_ARE_FATAL = Errhandler._of(Impl(kind="fatal", fn=None))._predefine("ERRORS_ARE_FATAL")
ERRORS_ABORT = Errhandler._of(Impl(kind="abort", fn=None))._predefine("ERRORS_ABORT")


MAX_USER_ERRHANDLERS = 32
"""User error handlers alive at once per kind of object, as mpi4py's table of callbacks holds."""
_user_errhandlers: dict[str, set] = {}


def create_errhandler(fn, kind: str = "comm") -> Errhandler:
    if not callable(fn):
        raise TypeError("the error handler must be callable")
    live = _user_errhandlers.setdefault(kind, set())
    live -= {h for h in live if h.fn is None}
    if len(live) >= MAX_USER_ERRHANDLERS:
        raise Exception(CONSTANTS["ERR_INTERN"], f"MPI_ERR_INTERN: more than {MAX_USER_ERRHANDLERS} user error "
                                                 f"handlers for {kind} objects; free some")
    impl = Impl(kind="user", fn=fn)
    live.add(impl)
    return Errhandler._of(impl)


def call_errhandler(obj, errhandler: Errhandler, code: int) -> None:
    """``obj.Call_errhandler(code)``: what the object's handler does with an error code."""
    if code == CONSTANTS["SUCCESS"]:
        return
    h = errhandler._h
    if h is None or h.kind == "return":
        return
    if h.kind == "user":
        h.fn(obj, code)
        return
    from .channel import CHANNEL

    CHANNEL.abort(code)
