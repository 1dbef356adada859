"""Fast struct codecs derived from the scapy declarations.

A header is declared once, as a scapy ``Packet`` (``fields_desc``). :class:`StructCodec` reads that
declaration and builds a precompiled :class:`struct.Struct` for the per-frame path, so the two cannot
disagree about order, widths or byte order; property tests prove the bytes are identical anyway.

Supported fields are those with a fixed struct format (``ByteField``, ``ShortField``, ``IntField``,
``LongField``, their ``X``/``Enum``/signed variants, ``MACField`` as 6 raw bytes) and runs of
bit fields (``BitField``, ``BitEnumField``, ``FlagsField``) that add up to 8, 16, 32 or 64 bits (packed most significant bit first, as scapy does).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from scapy import fields as F
from scapy.fields import MACField, _BitField
from scapy.packet import Packet


# field classes whose value is one fixed-width integer in network byte order
_FIXED = (F.ByteField, F.ShortField, F.IntField, F.LongField, F.SignedByteField, F.SignedShortField,
          F.SignedIntField, F.SignedLongField, F._EnumField)


class DecodeError(ValueError):
    """A buffer is not a valid encoding of the header (too short, bad value)."""


_BIT_GROUP_FMT = {8: "B", 16: "H", 32: "I", 64: "Q"}


class StructCodec:
    """Pack and unpack one header as a flat tuple of field values, in declaration order.

    ``MACField`` values are 6-byte ``bytes`` here (scapy shows them as strings); everything else is
    an ``int``.
    """

    def __init__(self, cls: type[Packet]):
        self.cls = cls
        self.names: tuple[str, ...] = tuple(f.name for f in cls.fields_desc)
        fmt = "!"
        # _bitgroups: (first field index, [bit sizes]) for each run of BitFields
        self._bitgroups: list[tuple[int, list[int]]] = []
        run: list[int] | None = None
        run_start = 0
        for i, f in enumerate(cls.fields_desc):
            if isinstance(f, _BitField):
                if run is None:
                    run, run_start = [], i
                run.append(f.size)
                total = sum(run)
                # a group closes at a 64-bit word boundary, or where the run of bit fields ends
                if total == 64 or (total in _BIT_GROUP_FMT and (
                        i + 1 == len(cls.fields_desc) or not isinstance(cls.fields_desc[i + 1], _BitField))):
                    fmt += _BIT_GROUP_FMT[total]
                    self._bitgroups.append((run_start, run))
                    run = None
                continue
            if run is not None:
                raise TypeError(f"{cls.__name__}: bit fields before {f.name!r} do not fill whole bytes")
            if isinstance(f, MACField):
                fmt += "6s"
                continue
            ffmt = getattr(f, "fmt", "")
            if not isinstance(f, _FIXED) or len(ffmt) != 2 or ffmt[0] not in "!>":
                raise TypeError(f"{cls.__name__}.{f.name}: field type {type(f).__name__} has no fixed struct format")
            fmt += ffmt[1:]
        if run is not None:
            raise TypeError(f"{cls.__name__}: trailing bit fields do not fill 8/16/32/64 bits")
        self.struct = struct.Struct(fmt)
        self.size: int = self.struct.size
        # a "group" that is one whole-width field (e.g. an 8-bit FlagsField) needs no shifting
        self._flat = all(len(sizes) == 1 for _, sizes in self._bitgroups)

    # -- encode ---------------------------------------------------------------------------------
    def _to_raw(self, values: Sequence[Any]) -> tuple:
        if self._flat:
            return tuple(values)
        raw: list[Any] = []
        i = 0
        groups = iter(self._bitgroups)
        nxt = next(groups, None)
        while i < len(values):
            if nxt is not None and nxt[0] == i:
                word = 0
                for bits, v in zip(nxt[1], values[i:i + len(nxt[1])]):
                    if v < 0 or v >> bits:
                        raise struct.error(f"bit field value {v} does not fit in {bits} bits")
                    word = (word << bits) | v
                raw.append(word)
                i += len(nxt[1])
                nxt = next(groups, None)
            else:
                raw.append(values[i])
                i += 1
        return tuple(raw)

    def pack(self, *values: Any) -> bytes:
        return self.struct.pack(*self._to_raw(values))

    def pack_into(self, buf: bytearray, offset: int, *values: Any) -> None:
        self.struct.pack_into(buf, offset, *self._to_raw(values))

    # -- decode ---------------------------------------------------------------------------------
    def unpack(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple:
        if len(buf) - offset < self.size:
            raise DecodeError(f"{self.cls.__name__}: need {self.size} bytes, have {len(buf) - offset}")
        raw = self.struct.unpack_from(buf, offset)
        if self._flat:
            return raw
        out: list[Any] = []
        j = 0
        groups = iter(self._bitgroups)
        nxt = next(groups, None)
        i = 0
        while j < len(raw):
            if nxt is not None and nxt[0] == i:
                word = raw[j]
                sizes = nxt[1]
                shift = sum(sizes)
                for bits in sizes:
                    shift -= bits
                    out.append((word >> shift) & ((1 << bits) - 1))
                i += len(sizes)
                nxt = next(groups, None)
            else:
                out.append(raw[j])
                i += 1
            j += 1
        return tuple(out)

    def as_dict(self, buf: bytes, offset: int = 0) -> dict[str, Any]:
        return dict(zip(self.names, self.unpack(buf, offset)))
