"""The buffer protocol of ``MPI.Win`` (emulated ``mpi4py.MPI``): ``memoryview(win)`` is the window's
memory (this rank's copy), as mpi4py's ``Win.__getbuffer__`` gives it -- ``mpi4py.util.sync`` reads
and writes its counters through it.

Python 3.12 lets a class export a buffer with ``__buffer__``; 3.11 only through a C slot. There the
slot of the class (``tp_as_buffer->bf_getbuffer`` of its heap type) is set to a ctypes callback that
hands out a buffer of the window's ``memoryview`` (``PyObject_GetBuffer``, so the view holds the
memory, not the window). The layout is checked before anything is written (the slot must point into
the class's own type object, and ``object``'s must be empty); if it is not CPython's as expected,
nothing is done and ``memoryview(win)`` raises TypeError, as before."""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_TP_AS_BUFFER = 20 * ctypes.sizeof(ctypes.c_void_p)
"""Offset of ``tp_as_buffer`` in CPython's ``PyTypeObject`` (3.8 to 3.13: after the var-object head and
17 slots: tp_name ... tp_setattro)."""

_GETBUFFER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_int)
_keep: list = []  # the callbacks (alive as long as the classes)


def _slot_address(cls: type) -> int | None:
    """The address of ``cls``'s ``bf_getbuffer`` slot, or None where the layout is not the expected one."""
    if sys.implementation.name != "cpython":
        return None
    read = ctypes.c_void_p.from_address
    if read(id(object) + _TP_AS_BUFFER).value is not None or read(id(bytes) + _TP_AS_BUFFER).value is None:
        return None
    procs = read(id(cls) + _TP_AS_BUFFER).value
    if procs is None or not id(cls) < procs < id(cls) + type.__sizeof__(cls):
        return None  # not a heap type's own PyBufferProcs
    if read(procs).value is not None:
        return None  # it has one already
    return procs


def install(cls: type, memory) -> bool:
    """Make ``memoryview(obj)`` of every ``cls`` (and subclass made later) the buffer ``memory(obj)``
    returns (a writable one-dimensional memoryview). True when done."""
    if sys.version_info >= (3, 12):
        cls.__buffer__ = lambda self, flags: memoryview(memory(self))
        return True
    at = _slot_address(cls)
    if at is None:
        log.info("emu.rank.winbuf: no buffer protocol for %s on this Python", cls.__name__)
        return False
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int], ctypes.c_int

    def getbuffer(obj, view, flags):
        try:
            return get(memory(obj), view, flags)
        except BaseException as e:  # noqa: BLE001 -- a C callback cannot raise: an empty buffer instead
            log.warning("memoryview of %s: %s; an empty buffer instead", type(obj).__name__, e)
            return get(bytearray(), view, flags)

    fn = _GETBUFFER(getbuffer)
    _keep.append(fn)
    ctypes.c_void_p.from_address(at).value = ctypes.cast(fn, ctypes.c_void_p).value
    return True


def install_empty(cls: type) -> bool:
    """Make ``memoryview(obj)`` of every ``cls`` (and subclass made later) an empty writable buffer that
    belongs to no object (``.obj`` None), as mpi4py's constants export theirs (``PyBuffer_FillInfo`` with no
    exporter: ``MPI.BOTTOM``, ``MPI.IN_PLACE``, ``MPI.BUFFER_AUTOMATIC``). True when done."""
    if sys.version_info >= (3, 12):
        cls.__buffer__ = lambda self, flags: memoryview(bytearray())
        return True
    at = _slot_address(cls)
    if at is None:
        log.info("emu.rank.winbuf: no buffer protocol for %s on this Python", cls.__name__)
        return False
    fill = ctypes.pythonapi.PyBuffer_FillInfo
    fill.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_int]
    fill.restype = ctypes.c_int

    def getbuffer(obj, view, flags):
        return fill(view, None, None, 0, 0, flags)

    fn = _GETBUFFER(getbuffer)
    _keep.append(fn)
    ctypes.c_void_p.from_address(at).value = ctypes.cast(fn, ctypes.c_void_p).value
    return True
