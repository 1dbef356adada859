"""Buffers in host memory that are not Python buffers -- DLPack (CPU) and CUDA-array-interface objects
-- as numpy arrays over the same memory, for the buffers ``emu.rank.mpiio`` hands to ``Msg``.

A stopgap of the MPI-IO branch: ``Msg`` (``emu.rank.channel``) takes only Python buffers today; where
the buffer layer takes these objects itself (``emu.rank.bufobj``), ``host_spec`` is not needed."""

from __future__ import annotations

import ctypes
import math


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_keep: list = []
"""The capsules of the arrays made (their memory stays valid while they live): the last few."""


def _over(addr: int, nbytes: int, dtype: str, shape, keep):
    import numpy as np

    if nbytes == 0:
        return np.zeros(shape, dtype)
    raw = (ctypes.c_char * nbytes).from_address(addr)
    arr = np.frombuffer(raw, dtype).reshape(shape)
    _keep.append((keep, raw))
    del _keep[:-64]
    return arr


def _dlpack(obj):
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))
    kind, lanes = _KINDS.get(t.dtype.code), t.dtype.lanes
    if kind == "f" and lanes == 2:  # a complex number as two floats (long double complex)
        kind, lanes = "c", 1
        size = t.dtype.bits // 4
    else:
        size = t.dtype.bits // 8
    if kind is None or lanes != 1 or t.device.device_type != 1:
        raise TypeError("the emulated MPI-IO takes DLPack tensors of CPU memory and plain numeric types only")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    dtype = "?" if kind == "b" else f"{kind}{size}"
    return _over(t.data + t.byte_offset, math.prod(shape) * size, dtype, shape, capsule)


def _cai(obj):
    cai = obj.__cuda_array_interface__
    addr, _ = cai["data"]
    shape = tuple(cai["shape"])
    import numpy as np

    dt = np.dtype(cai["typestr"])
    return _over(addr, math.prod(shape) * dt.itemsize, dt, shape, obj)


def host_buffer(obj):
    try:
        memoryview(obj)
        return obj
    except TypeError:
        pass
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cai(obj)
    return obj


def host_spec(spec):
    """Buffer specification ``spec`` with its buffer as a numpy array when it is not a Python buffer."""
    if isinstance(spec, (list, tuple)) and spec:
        return [host_buffer(spec[0]), *spec[1:]]
    return host_buffer(spec)
