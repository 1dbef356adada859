"""The program's own CPU time, apart from the emulated library's (rank side).

By default (``--cpu-scale``, not ``--compute zero``) a rank's host computes, in virtual time, for
the CPU time the rank's process spent between two MPI calls. That should be the program's time
only: the emulated library's own Python work (packing buffers, the channel to the emulator) stands
in for what a real MPI library does in a few hundred nanoseconds, which the host model already
charges (``send_overhead_ns``, ``recv_overhead_ns``). So every public callable of the emulated
``mpi4py.MPI`` is wrapped once, at import: on entry from the program it adds the CPU time since the
library last returned to ``CHANNEL.app_cpu`` (which the next call carries to the emulator), and on
return it notes the time again; what reading that clock costs (``CHANNEL.clock_cost``) is the
library's too, taken off each stretch of the program's. Calls within calls (``Waitall`` through ``Request._call``, a
``Comm`` method using another) count once, at the outermost. With ``--compute zero`` nothing is
wrapped: no CPU time is measured at all.
"""

from __future__ import annotations

import functools
import time
import types

from .channel import CHANNEL


def _timed(fn):
    if getattr(fn, "__emu_timed__", False):
        return fn
    clock, ch = time.process_time, CHANNEL

    @functools.wraps(fn)
    def public(*args, **kwargs):
        if ch.depth:
            return fn(*args, **kwargs)
        t = clock()
        gap = t - ch.t_out - ch.clock_cost  # (the clock's own reading is the library's)
        if gap > 0.0:
            ch.app_cpu += gap
        ch.depth = 1
        try:
            return fn(*args, **kwargs)
        finally:
            ch.depth = 0
            ch.t_out = clock()

    public.__emu_timed__ = True
    return public


def _ours(obj) -> bool:
    """Defined by the emulated library (its classes say they are of ``mpi4py.MPI``, as mpi4py's do)."""
    mod = getattr(obj, "__module__", None) or ""
    return mod.startswith("emu.rank") or mod == "mpi4py.MPI"


def _wrap_class(cls: type) -> None:
    for name, attr in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(attr, types.FunctionType):
            setattr(cls, name, _timed(attr))
        elif isinstance(attr, staticmethod):
            setattr(cls, name, staticmethod(_timed(attr.__func__)))
        elif isinstance(attr, classmethod):
            setattr(cls, name, classmethod(_timed(attr.__func__)))
        elif isinstance(attr, property):
            setattr(cls, name, property(attr.fget and _timed(attr.fget), attr.fset and _timed(attr.fset),
                                        attr.fdel, attr.__doc__))


def install(namespace: dict) -> int:
    """Wrap the public functions of ``namespace`` (the emulated ``mpi4py.MPI``) and the public
    methods of its classes (and their bases) from ``emu.rank``; how many classes. Nothing when the
    ranks' computation is not charged."""
    if CHANNEL.scale <= 0:
        return 0
    done: set[type] = set()
    for name, obj in list(namespace.items()):
        if name.startswith("_") or not _ours(obj):
            continue
        if isinstance(obj, type):
            for cls in obj.__mro__:
                if cls not in done and _ours(cls) and not issubclass(cls, BaseException):
                    done.add(cls)
                    _wrap_class(cls)
        elif isinstance(obj, types.FunctionType):
            namespace[name] = _timed(obj)
    return len(done)
