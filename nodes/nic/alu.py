"""The NIC's ALU (spec 01): 32- and 64-bit operands, every operation, locations for MAXLOC/MINLOC.

Operands travel in a descriptor's data words (see ``emu.wire.coll``); here they are numpy arrays
of the operand type plus a parallel array of locations (the rank holding each value).
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import OPS
from emu.wire.coll import MAX_DATA_BYTES, PAIRS, RdType, RopCode

NIC_TYPES: dict[tuple[int, int], np.dtype] = {
    (RdType.FLOAT, 1): np.dtype("float64"), (RdType.FLOAT, 0): np.dtype("float32"),
    (RdType.INT, 1): np.dtype("int64"), (RdType.INT, 0): np.dtype("int32"),
    (RdType.UINT, 1): np.dtype("uint64"), (RdType.UINT, 0): np.dtype("uint32"),
}
_CODES = {v.name: k for k, v in NIC_TYPES.items()}
OP_CODES = {"sum": RopCode.SUM, "max": RopCode.MAX, "min": RopCode.MIN, "maxloc": RopCode.MAXLOC,
            "minloc": RopCode.MINLOC, "land": RopCode.LAND, "lor": RopCode.LOR, "lxor": RopCode.LXOR,
            "band": RopCode.BAND, "bor": RopCode.BOR, "bxor": RopCode.BXOR}
_OP_NAMES = {code: name for name, code in OP_CODES.items()}
_INTEGER_ONLY = {RopCode.LAND, RopCode.LOR, RopCode.LXOR, RopCode.BAND, RopCode.BOR, RopCode.BXOR}


def type_code(dtype: np.dtype) -> tuple[int, int]:
    """(Rdtype, Rbit) of a numpy type the ALU handles."""
    try:
        return _CODES[np.dtype(dtype).name]
    except KeyError:
        raise ConfigError(f"the NIC ALU works on 32- and 64-bit operands (float32/64, int32/64, uint32/64), "
                          f"not {np.dtype(dtype).name}") from None


def op_code(op: str, dtype: np.dtype) -> int:
    code = OP_CODES.get(op)
    if code is None:
        raise ConfigError(f"the NIC ALU has no operation {op!r}; it has {', '.join(OP_CODES)}")
    if code in _INTEGER_ONLY and np.dtype(dtype).kind == "f":
        raise ConfigError(f"the NIC ALU does {op} on integer operands only, not {np.dtype(dtype).name}")
    return code


def per_descriptor(dtype: np.dtype) -> int:
    """Operands one descriptor carries: 48 bytes of them."""
    return MAX_DATA_BYTES // np.dtype(dtype).itemsize


def pack(values: np.ndarray, locs: np.ndarray) -> tuple[list[int], list[int]]:
    """Operands and locations into the 7 data words and 7 location words (zero padded)."""
    wide = values.dtype.itemsize == 8
    if wide:
        data = values.view(np.uint64).tolist()
        loc = locs.astype(np.uint64).tolist()
    else:
        v32 = np.zeros(2 * PAIRS, np.uint32)
        v32[:len(values)] = values.view(np.uint32)
        l32 = np.zeros(2 * PAIRS, np.uint32)
        l32[:len(locs)] = locs.astype(np.uint32)
        data = ((v32[0::2].astype(np.uint64) << 32) | v32[1::2]).tolist()
        loc = ((l32[0::2].astype(np.uint64) << 32) | l32[1::2]).tolist()
    return data + [0] * (PAIRS - len(data)), loc + [0] * (PAIRS - len(loc))


def unpack(data: list[int], loc: list[int], n: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` operands and locations of a descriptor's words."""
    d = np.array(data, np.uint64)
    l = np.array(loc, np.uint64)
    if dtype.itemsize == 8:
        return d[:n].view(dtype).copy(), l[:n].astype(np.int64)
    v32 = np.empty(2 * PAIRS, np.uint32)
    v32[0::2], v32[1::2] = (d >> 32).astype(np.uint32), (d & 0xFFFFFFFF).astype(np.uint32)
    l32 = np.empty(2 * PAIRS, np.uint32)
    l32[0::2], l32[1::2] = (l >> 32).astype(np.uint32), (l & 0xFFFFFFFF).astype(np.uint32)
    return v32[:n].view(dtype).copy(), l32[:n].astype(np.int64)


def combine(rop: int, a: np.ndarray, al: np.ndarray, b: np.ndarray, bl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One ALU pass over the operands: (values, locations), by the shared reduction kernel."""
    name = _OP_NAMES.get(rop)
    if name is None:
        raise ValueError(f"unknown ALU operation {rop}")
    return OPS[name].combine_located(a, al, b, bl)
