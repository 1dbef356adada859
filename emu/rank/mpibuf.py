"""``MPI.buffer`` (alias ``MPI.memory``), ``MPI.Alloc_mem`` and ``MPI.Free_mem`` of the emulated mpi4py.

mpi4py's buffer is a plain run of bytes over another object's memory (or memory it allocated, or an
address). Python 3.11 lets a class expose the buffer protocol only through a builtin base, so this
one is a one-dimensional numpy ``uint8`` array with mpi4py's interface on top: ``address``, ``obj``,
``readonly``, ``release()``, byte indexing (an int) and slicing (a buffer, step 1 only)."""

from __future__ import annotations

import operator

import numpy as np

from .bufobj import absolute, acquire

_NONE = object()


class buffer(np.ndarray):  # noqa: N801 -- mpi4py's name
    """``MPI.buffer``: bytes of memory, with its address and the object that owns it."""

    def __new__(cls, obj=_NONE):
        if obj is _NONE:
            b = cls._make(np.zeros(0, np.uint8), None, False)
            b._released = True  # the null buffer: no address
            return b
        if obj is None or isinstance(obj, (int, float, list, tuple)):
            raise TypeError(f"a bytes-like object is required, not '{type(obj).__name__}'")
        mem = acquire(obj)
        return cls._make(mem.arr, obj, mem.readonly, mem)

    @classmethod
    def _make(cls, arr, obj, readonly: bool, mem=None) -> "buffer":
        b = np.asarray(arr, np.uint8).reshape(-1).view(cls)
        if readonly:
            b.flags.writeable = False
        b._obj, b._ro, b._released, b._mem = obj, bool(readonly), False, mem
        return b

    def __array_finalize__(self, parent) -> None:
        self._obj = getattr(parent, "_obj", None)
        self._ro = getattr(parent, "_ro", False)
        self._mem = getattr(parent, "_mem", None)
        self._released = False

    def _cpu(self) -> None:
        if self._mem is not None:
            self._mem.cpu()

    @staticmethod
    def allocate(nbytes: int, clear: bool = False) -> "buffer":
        n = operator.index(nbytes)
        if n < 0:
            raise ValueError("expecting non-negative size")
        owner = bytearray(max(n, 1))  # as mpi4py: even 0 bytes have an address
        b = buffer._make(np.frombuffer(owner, np.uint8)[:n], owner, False)
        b._obj = memoryview(owner)[:n]
        return b

    @staticmethod
    def frombuffer(obj, readonly: bool = False) -> "buffer":
        if obj is None or isinstance(obj, (int, float, list, tuple)):
            raise TypeError(f"a bytes-like object is required, not '{type(obj).__name__}'")
        mem = acquire(obj, writable=not readonly)
        return buffer._make(mem.arr, obj, readonly, mem)

    @staticmethod
    def fromaddress(address: int, nbytes: int, readonly: bool = False) -> "buffer":
        if nbytes < 0:
            raise ValueError("expecting non-negative buffer length")
        if nbytes > 0 and not address:
            raise ValueError("expecting non-NULL address")
        return buffer._make(absolute(address, address + nbytes), None, readonly)

    # -- mpi4py's properties --------------------------------------------------------------------------------
    address = property(lambda self: 0 if self._released else int(self.ctypes.data))
    obj = property(lambda self: None if self._released else self._obj)
    nbytes = property(lambda self: 0 if self._released else int(self.size))
    readonly = property(lambda self: False if self._released else self._ro)
    format = property(lambda self: "B")

    def toreadonly(self) -> "buffer":
        return buffer._make(self.view(np.ndarray), self._obj, True)

    def release(self) -> None:
        self._released = True

    def cast(self, format: str, shape=...):  # noqa: A002 -- mpi4py's name
        self._cpu()
        mv = memoryview(self.view(np.ndarray))
        return mv.cast(format) if shape is ... else mv.cast(format, shape)

    def tobytes(self, order=None) -> bytes:
        self._cpu()
        return b"" if self._released else self.view(np.ndarray).tobytes()

    # -- bytes, as mpi4py indexes them -------------------------------------------------------------------------
    def __bool__(self) -> bool:
        """As a bytes-like object: true when it has bytes (not numpy's elementwise truth)."""
        return len(self) > 0

    def __len__(self) -> int:
        return self.nbytes

    def _index(self, item):
        if isinstance(item, slice):
            start, stop, step = item.indices(self.nbytes)
            if step != 1:
                raise IndexError("slice with step not supported")
            return slice(start, max(start, stop))
        if hasattr(item, "__index__") and not isinstance(item, np.ndarray):
            i = item.__index__()
            if i < 0:
                i += self.nbytes
            if not 0 <= i < self.nbytes:
                raise IndexError("index out of range")
            return i
        raise TypeError("index must be integer or slice")

    def __getitem__(self, item):
        self._cpu()
        i = self._index(item)
        plain = self.view(np.ndarray)
        if isinstance(i, slice):
            return buffer._make(plain[i], self, self._ro)
        return int(plain[i])

    def __setitem__(self, item, value) -> None:
        self._cpu()
        if self._ro:
            raise TypeError("buffer is read-only")
        i = self._index(item)
        plain = self.view(np.ndarray)
        if isinstance(i, slice):
            if isinstance(value, int):
                plain[i] = value
                return
            src = acquire(value).arr
            if len(src) != i.stop - i.start:
                raise ValueError("buffer contents mismatch")
            plain[i] = src
        else:
            plain[i] = value

    def __delitem__(self, item) -> None:
        raise NotImplementedError("buffer items cannot be deleted")

    def __repr__(self) -> str:
        return f"<emulated MPI.buffer of {self.nbytes} bytes at {self.address:#x}>"

    def __reduce__(self):
        return (buffer, (bytearray(self.tobytes()),))


memory = buffer


def Alloc_mem(size: int, info=None) -> buffer:
    """``MPI.Alloc_mem``: ``size`` bytes of memory (the emulated MPI takes them from Python)."""
    return buffer.allocate(size)


def Free_mem(mem: buffer) -> None:
    mem.release()
