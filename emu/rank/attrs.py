"""Attribute caching (MPI 4.0 §7.7) for communicators, datatypes and windows of the emulated
``mpi4py.MPI``: keyvals with copy and delete callbacks, as mpi4py calls them.

A keyval's ``copy_fn`` runs when the object is duplicated: ``None``/``False`` drops the attribute
(MPI_NULL_COPY_FN), ``True`` keeps the same value (MPI_DUP_FN), a callable ``copy_fn(obj, keyval,
value)`` returns the new value, or ``NotImplemented`` to drop it. ``delete_fn(obj, keyval, value)``
runs when the attribute is deleted, replaced, or its object freed. ``nopython=True`` keyvals hold
integers (C pointers in mpi4py), given back as ints."""

from __future__ import annotations

import itertools

from .consts import CONSTANTS

KEYVAL_INVALID = CONSTANTS["KEYVAL_INVALID"]
ERR_KEYVAL = CONSTANTS["ERR_KEYVAL"]
PREDEFINED = {CONSTANTS[k] for k in ("TAG_UB", "IO", "WTIME_IS_GLOBAL", "APPNUM", "UNIVERSE_SIZE",
                                     "LASTUSEDCODE", "WIN_BASE", "WIN_SIZE", "WIN_DISP_UNIT", "WIN_CREATE_FLAVOR",
                                     "WIN_FLAVOR", "WIN_MODEL") if k in CONSTANTS}
_next = itertools.count(0x24000001)
_keyvals: dict[int, dict] = {}


def _exc(code: int, text: str):
    from .errors import Exception

    return Exception(code, text)


def create_keyval(kind: str, copy_fn=None, delete_fn=None, nopython: bool = False) -> int:
    k = next(_next)
    _keyvals[k] = {"kind": kind, "copy": copy_fn, "delete": delete_fn, "nopython": nopython}
    return k


def free_keyval(kind: str, keyval: int) -> int:
    kv = _keyvals.get(keyval)
    if kv is None or kv["kind"] != kind:
        raise _exc(ERR_KEYVAL, f"MPI_ERR_KEYVAL: invalid {kind} keyval {keyval}")
    kv["freed"] = True
    return KEYVAL_INVALID


def _kv(kind: str, keyval: int) -> dict:
    kv = _keyvals.get(keyval)
    if kv is None or kv["kind"] != kind or kv.get("freed") and kv.get("live", 0) == 0:
        raise _exc(ERR_KEYVAL, f"MPI_ERR_KEYVAL: invalid {kind} keyval {keyval}")
    return kv


def _callback(fn, obj, keyval: int, value):
    """A program's copy or delete function, as mpi4py calls it: an exception it raises is printed
    (its traceback on stderr) and the MPI call fails with ERR_OTHER."""
    try:
        return fn(obj, keyval, value)
    except Exception:  # noqa: BLE001 -- the program's error, reported as MPI reports it
        import traceback

        traceback.print_exc()
        raise _exc(CONSTANTS["ERR_OTHER"], "MPI_ERR_OTHER: an attribute callback raised (traceback above)") from None


class Attributes:
    """Mixin: ``Set_attr``/``Get_attr``/``Delete_attr`` over ``self._h.attrs`` and the class's
    ``Create_keyval``/``Free_keyval``; ``_kind`` names the keyval family; ``_builtin_attr(keyval)``
    answers the predefined keyvals."""

    _kind = "comm"

    def _attrs(self) -> dict:
        h = self._h
        if h is None:
            raise _exc(CONSTANTS["ERR_ARG"], f"MPI_ERR_ARG: a null {self._kind} has no attributes")
        if not hasattr(h, "attrs"):
            h.attrs = {}
        return h.attrs

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython: bool = False) -> int:
        return create_keyval(cls._kind, copy_fn, delete_fn, nopython)

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        return free_keyval(cls._kind, keyval)

    def _builtin_attr(self, keyval: int):
        return None

    def Get_attr(self, keyval: int):
        if keyval in PREDEFINED:
            return self._builtin_attr(keyval)
        _kv(self._kind, keyval)
        return self._attrs().get(keyval)

    def Set_attr(self, keyval: int, attrval) -> None:
        kv = _kv(self._kind, keyval)
        attrs = self._attrs()
        if keyval in attrs:
            self._delete_one(keyval, kv, attrs[keyval])
        if kv["nopython"]:
            attrval = int(attrval)
        attrs[keyval] = attrval
        kv["live"] = kv.get("live", 0) + 1

    def Delete_attr(self, keyval: int) -> None:
        kv = _kv(self._kind, keyval)
        attrs = self._attrs()
        if keyval not in attrs:
            raise _exc(ERR_KEYVAL, f"MPI_ERR_KEYVAL: no attribute for keyval {keyval}")
        value = attrs.pop(keyval)  # gone even when its delete function fails (as MPICH)
        self._delete_one(keyval, kv, value)

    def _delete_one(self, keyval: int, kv: dict, value) -> None:
        fn = kv["delete"]
        kv["live"] = max(0, kv.get("live", 0) - 1)
        if callable(fn):
            _callback(fn, self, keyval, value)

    def _copy_attrs_to(self, new) -> None:
        """A duplicate's attributes, by each keyval's ``copy_fn``."""
        out = {}
        for keyval, value in list(self._attrs().items()):
            kv = _keyvals[keyval]
            fn = kv["copy"]
            if fn is None or fn is False:
                continue
            v = value if fn is True else _callback(fn, self, keyval, value)
            if v is NotImplemented:
                continue
            out[keyval] = v
            kv["live"] = kv.get("live", 0) + 1
        new._attrs().update(out)

    def _delete_attrs(self) -> None:
        """The object is freed: every attribute's ``delete_fn``."""
        h = self._h
        if h is None or not getattr(h, "attrs", None):
            return
        for keyval in list(h.attrs):
            self._delete_one(keyval, _keyvals[keyval], h.attrs.pop(keyval))
