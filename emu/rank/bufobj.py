"""The memory behind a buffer argument of the emulated ``mpi4py.MPI`` (rank side), as mpi4py 4.1 takes it.

``acquire(obj, writable)`` accepts what mpi4py's ``getbuffer`` accepts, in its order: the buffer
protocol (C- or Fortran-contiguous; a strided view is refused with a ``BufferError``), then DLPack
(``__dlpack__``/``__dlpack_device__``, v1 or v0 capsules) and ``__cuda_array_interface__``, whose
memory is used at its address as a CUDA-aware MPI would (here it must be host memory). The result
is a ``Mem``: a byte array over the memory, its absolute address and its element format.
``MPI.BOTTOM`` (and ``None``) is address 0: a datatype's displacements are then absolute
(``MPI.Get_address``), read and written through ctypes."""

from __future__ import annotations

import ctypes

import numpy as np

from .winbuf import install_empty

_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "l"}


class _Constant:
    """``MPI.BOTTOM``, ``MPI.IN_PLACE``: one object of each class (``type(MPI.BOTTOM)()`` is it)."""

    _name, _value = "", 0

    def __new__(cls):
        if "_it" not in cls.__dict__:
            cls._it = object.__new__(cls)
        return cls._it

    def __repr__(self) -> str:
        return self._name

    def __int__(self) -> int:
        return self._value

    def __reduce__(self) -> str:
        return self._name

    def __bool__(self) -> bool:
        return self._value != 0

    def __hash__(self) -> int:
        return hash(self._value)

    def __eq__(self, other):
        if isinstance(other, type(self)):
            return True
        if isinstance(other, _Constant) or not _integral(other):
            return NotImplemented
        return self._value == int(other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq


def _integral(x) -> bool:
    try:
        x.__index__()
    except (AttributeError, TypeError):
        return False
    return True


install_empty(_Constant)  # memoryview(MPI.BOTTOM): no bytes, no object (before the subclasses: they inherit it)


class BottomType(_Constant):
    __module__ = "mpi4py.MPI"
    _name, _value = "BOTTOM", 0

    def __index__(self) -> int:  # as mpi4py's: BOTTOM alone is an index
        return self._value


class InPlaceType(_Constant):
    __module__ = "mpi4py.MPI"
    _name, _value = "IN_PLACE", -1


class BufferAutomaticType(_Constant):
    """``MPI.BUFFER_AUTOMATIC`` (MPI 4.1): buffered sends take the room they need."""

    __module__ = "mpi4py.MPI"
    _name, _value = "BUFFER_AUTOMATIC", -2


BOTTOM = BottomType()
IN_PLACE = InPlaceType()
BUFFER_AUTOMATIC = BufferAutomaticType()


def is_bottom(obj) -> bool:
    return obj is None or obj is BOTTOM


class Mem:
    """A buffer's bytes (``arr``, a numpy uint8 array; None for BOTTOM), address, format and itemsize."""

    __slots__ = ("arr", "addr", "format", "itemsize", "keep", "readonly", "device")

    def __init__(self, arr, addr: int, fmt: str = "B", itemsize: int = 1, keep=None, readonly: bool = False,
                 device: int = 0):
        self.arr, self.addr, self.format, self.itemsize, self.keep = arr, addr, fmt, itemsize, keep
        self.readonly = readonly
        self.device = device
        """DLPack's device type of the memory (0: the buffer protocol's; 2: CUDA, as the CUDA array
        interface says; the emulated MPI reads it as host memory, as a CUDA-aware MPI would)."""

    def cpu(self) -> None:
        """mpi4py's ``check_cpu_accessible``: Python may touch the memory itself."""
        if self.device not in (0, 1, 3, 13):  # none, kDLCPU, kDLCUDAHost, kDLCUDAManaged
            raise BufferError("buffer is not CPU-accessible")

    @property
    def nbytes(self) -> int:
        return 0 if self.arr is None else len(self.arr)


def absolute(lo: int, hi: int) -> np.ndarray:
    """The process's memory [lo, hi) at absolute addresses (MPI.BOTTOM), as a writable byte array."""
    if hi <= lo:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * (hi - lo)).from_address(lo))


def _from_memoryview(mv: memoryview, writable: bool) -> Mem:
    if writable and mv.readonly:
        raise BufferError("Object is not writable.")
    if not (mv.c_contiguous or mv.f_contiguous):
        raise BufferError("ndarray is not contiguous")
    if mv.nbytes == 0:  # no bytes (a zero in its shape: memoryview cannot cast it)
        arr = np.zeros(0, np.uint8)
    elif mv.c_contiguous:
        flat = mv if (mv.format == "B" and mv.ndim == 1) else mv.cast("B")
        arr = np.frombuffer(flat, np.uint8)
    else:  # Fortran order: its memory is contiguous too
        arr = np.asarray(mv).T.view(np.uint8).reshape(-1)
    addr = arr.ctypes.data if arr.size else 0
    return Mem(arr, addr, mv.format, mv.itemsize, mv, mv.readonly)


def acquire(obj, writable: bool = False) -> Mem:
    """``obj``'s memory, or the error mpi4py raises for it."""
    if isinstance(obj, Mem):
        return obj
    try:
        mv = memoryview(obj)
    except TypeError:
        if hasattr(obj, "__dlpack__"):
            return _dlpack(obj, writable)
        if hasattr(obj, "__cuda_array_interface__"):
            return _cai(obj, writable)
        raise TypeError(f"a bytes-like object is required, not '{type(obj).__name__}'") from None
    return _from_memoryview(mv, writable)


def address(obj) -> int:
    """``MPI.Get_address``: where ``obj``'s memory starts (0 for BOTTOM or None)."""
    if isinstance(obj, _Constant):  # BOTTOM, IN_PLACE, BUFFER_AUTOMATIC: their values (MPICH's addresses)
        return obj._value
    return 0 if obj is None else acquire(obj).addr


def _host_bytes(addr: int, nbytes: int, keep, fmt: str, itemsize: int, readonly: bool, device: int) -> Mem:
    arr = absolute(addr, addr + nbytes) if nbytes else np.zeros(0, np.uint8)
    return Mem(arr, addr, fmt, itemsize, keep, readonly, device)


def _contig(shape, strides, itemsize: int) -> bool:
    def one(order):
        size = itemsize
        dims = range(len(shape)) if order == "F" else range(len(shape) - 1, -1, -1)
        for i in dims:
            if shape[i] > 1 and strides[i] != size:
                return False
            size *= shape[i]
        return True

    return strides is None or one("C") or one("F")


def _kind_format(kind: str, itemsize: int) -> str:
    if kind == "b" and itemsize == 1:
        return "?"
    if kind in "iu" and itemsize in _INT_FORMATS:
        f = _INT_FORMATS[itemsize]
        return f if kind == "i" else f.upper()
    if kind == "f":
        return {2: "e", 4: "f", 8: "d", 16: "g"}.get(itemsize, "B")
    if kind == "c":
        return {4: "Ze", 8: "Zf", 16: "Zd", 32: "Zg"}.get(itemsize, "B")
    return "B"


def _cai(obj, writable: bool) -> Mem:
    """mpi4py's ``Py_GetCAIBuffer``: its checks in its order, and its errors."""
    cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict):
        raise TypeError(f"__cuda_array_interface__: expected dict, got {type(cai).__name__}")
    data, typestr, shape = cai["data"], cai["typestr"], cai["shape"]
    strides, descr, mask = cai.get("strides"), cai.get("descr"), cai.get("mask")
    for name, value, kind in (("data", data, tuple), ("typestr", typestr, str), ("shape", shape, tuple),
                              ("strides", strides, tuple), ("descr", descr, list)):
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"__cuda_array_interface__: {name} expected {kind.__name__}, got {type(value).__name__}")
    ptr, readonly = data
    size = 1
    for n in shape:
        size *= n
    if ptr is None and size == 0:
        ptr = 0
    itemsize = int(typestr[2:])
    if typestr[0] == ">" or typestr[0] not in "<>|":
        what = "non-native" if typestr[0] == ">" else "unrecognized"
        raise BufferError(f"__cuda_array_interface__: typestr {typestr!r} with {what} byte order")
    if mask is not None:
        raise BufferError("__cuda_array_interface__: cannot handle masked arrays")
    if size < 0:
        raise BufferError(f"__cuda_array_interface__: buffer with negative size (shape:{shape}, size:{size})")
    if strides is not None and not _contig(shape, strides, itemsize):
        raise BufferError(f"__cuda_array_interface__: buffer is not contiguous (shape:{shape}, strides:{strides}, "
                          f"itemsize:{itemsize})")
    if readonly and writable:
        raise BufferError("__cuda_array_interface__: buffer is not writable")
    if descr is not None and (len(descr) != 1 or tuple(descr[0]) != ("", typestr)):
        import warnings

        warnings.warn("__cuda_array_interface__: ignoring 'descr' key", RuntimeWarning, stacklevel=2)
    fmt = _kind_format(typestr[1], itemsize)
    return _host_bytes(ptr, size * itemsize, obj, fmt, itemsize if fmt != "B" else 1, bool(readonly), 2)


# -- DLPack ---------------------------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged0(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManaged1(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.argtypes, _capsule_valid.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes, _capsule_pointer.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
_DL_KIND = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool


def _dlpack(obj, writable: bool) -> Mem:
    if not hasattr(obj, "__dlpack_device__"):
        raise TypeError(f"a bytes-like object is required, not '{type(obj).__name__}'")
    device_type, device_id = obj.__dlpack_device__()
    device_type, _ = int(device_type), int(device_id)
    major, name = 1, b"dltensor_versioned"
    try:
        capsule = obj.__dlpack__(max_version=(1, 0), copy=False) if device_type == 1 else \
            obj.__dlpack__(stream=-1, max_version=(1, 0), copy=False)
    except TypeError:  # DLPack v0.x
        major, name = 0, b"dltensor"
        capsule = obj.__dlpack__() if device_type == 1 else obj.__dlpack__(stream=-1)
    if not _capsule_valid(capsule, name):
        raise BufferError("dlpack: invalid capsule object")
    ptr = _capsule_pointer(capsule, name)
    if major:
        managed = _DLManaged1.from_address(ptr)
        if managed.major < 1:
            raise BufferError("dlpack: unexpected version")
        readonly = bool(managed.flags & 1)
    else:
        managed, readonly = _DLManaged0.from_address(ptr), False
    t = managed.dl_tensor
    if t.ndim < 0:
        raise BufferError("dlpack: number of dimensions is negative")
    if t.ndim > 0 and not t.shape:
        raise BufferError("dlpack: shape is NULL")
    shape = [t.shape[i] for i in range(t.ndim)]
    if any(n < 0 for n in shape):
        raise BufferError("dlpack: shape item is negative")
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
    if strides is not None and any(n < 0 for n in strides):
        raise BufferError("dlpack: strides item is negative")
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    itemsize = (bits * lanes + 7) // 8
    if not _contig(shape, strides, 1):
        raise BufferError("dlpack: buffer is not contiguous")
    if readonly and writable:
        raise BufferError("dlpack: buffer is not writable")
    size = itemsize
    for s in shape:
        size *= s
    kind = _DL_KIND.get(code, "B") if lanes == 1 else ("c" if code == 2 and lanes == 2 else "B")
    fmt = _kind_format(kind, itemsize)
    return _host_bytes((t.data or 0) + t.byte_offset, size, capsule, fmt, itemsize if fmt != "B" else 1, readonly,
                       device_type)
