"""Fast struct codecs of the headers scapy declares, and the declarations made when first asked for.

A header is declared once, as a scapy ``Packet`` (``fields_desc``): the specification, which
Wireshark's dissector (``emu.dissector``) and scapy's views of captures read. The per-frame path
packs and unpacks it with a precompiled :class:`struct.Struct` (:class:`StructCodec`) built from its
*layout*, a short text of its fields in order (``"src:I dst:I vc:B ..."``: a struct format letter
per field, ``name/bits`` for bit fields). :func:`layout_of` reads a layout off a declaration, and a
test proves that every codec's layout is its declaration's (``tests/test_wire_layouts.py``), so the
two cannot disagree about order, widths or byte order; property tests prove the bytes identical.

The codecs are made from their layouts written beside the declarations, so that a run of the
emulator never imports scapy (a fifth of a second per process): the declarations themselves are
made when something first asks for one (``emu.wire.fabric.Fabric``, ``emu.wire.MsgSegment``, the
dissector, a test) or imports scapy's Ethernet layer (``emu.wire.l2``), all of them at once, so that
scapy's layering of a frame is whole (:func:`declarations`).

Supported fields are those with a fixed struct format (``ByteField``, ``ShortField``, ``IntField``,
``LongField``, their ``X``/``Enum``/signed variants, ``MACField`` as 6 raw bytes) and runs of
bit fields (``BitField``, ``BitEnumField``, ``FlagsField``) that add up to 8, 16, 32 or 64 bits
(packed most significant bit first, as scapy does).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

_FORMATS = frozenset(("B", "H", "I", "Q", "b", "h", "i", "q", "6s"))
"""What a layout's field may be (besides ``name/bits``): network byte order, one value each."""


class DecodeError(ValueError):
    """A buffer is not a valid encoding of the header (too short, bad value)."""


_BIT_GROUP_FMT = {8: "B", 16: "H", 32: "I", 64: "Q"}


def layout_of(cls) -> str:
    """The layout of a scapy declaration (``cls.fields_desc``): ``name:F`` per field of a fixed
    struct format (``MACField``: ``6s``), ``name/bits`` per bit field. TypeError for a field that
    has no fixed format."""
    from scapy import fields as F

    fixed = (F.ByteField, F.ShortField, F.IntField, F.LongField, F.SignedByteField, F.SignedShortField,
             F.SignedIntField, F.SignedLongField, F._EnumField)
    out = []
    for f in cls.fields_desc:
        if isinstance(f, F._BitField):
            out.append(f"{f.name}/{f.size}")
            continue
        if isinstance(f, F.MACField):
            out.append(f"{f.name}:6s")
            continue
        ffmt = getattr(f, "fmt", "")
        if not isinstance(f, fixed) or len(ffmt) != 2 or ffmt[0] not in "!>" or ffmt[1] not in _FORMATS:
            raise TypeError(f"{cls.__name__}.{f.name}: field type {type(f).__name__} has no fixed struct format")
        out.append(f"{f.name}:{ffmt[1]}")
    return " ".join(out)


class StructCodec:
    """Pack and unpack one header as a flat tuple of field values, in declaration order.

    ``MACField`` values are 6-byte ``bytes`` here (scapy shows them as strings); everything else is
    an ``int``. ``StructCodec(cls)``: from a scapy declaration; ``StructCodec.of(name, layout)``:
    from its layout (no scapy).
    """

    def __init__(self, cls):
        self.cls = cls
        self._setup(cls.__name__, layout_of(cls))

    @classmethod
    def of(cls, name: str, layout: str) -> StructCodec:
        """The codec of header ``name`` (its declaration's class name) laid out as ``layout``."""
        codec = cls.__new__(cls)
        codec._setup(name, layout)
        return codec

    def _setup(self, name: str, layout: str) -> None:
        self.name, self.layout = name, layout
        fields = [(f.partition("/")[0], int(f.partition("/")[2])) if "/" in f else tuple(f.split(":"))
                  for f in layout.split()]
        self.names: tuple[str, ...] = tuple(f[0] for f in fields)
        fmt = "!"
        # _bitgroups: (first field index, [bit sizes]) for each run of BitFields
        self._bitgroups: list[tuple[int, list[int]]] = []
        run: list[int] | None = None
        run_start = 0
        for i, (fname, kind) in enumerate(fields):
            if isinstance(kind, int):
                if run is None:
                    run, run_start = [], i
                run.append(kind)
                total = sum(run)
                # a group closes at a 64-bit word boundary, or where the run of bit fields ends
                if total == 64 or (total in _BIT_GROUP_FMT and (
                        i + 1 == len(fields) or not isinstance(fields[i + 1][1], int))):
                    fmt += _BIT_GROUP_FMT[total]
                    self._bitgroups.append((run_start, run))
                    run = None
                continue
            if run is not None:
                raise TypeError(f"{name}: bit fields before {fname!r} do not fill whole bytes")
            if kind not in _FORMATS:
                raise TypeError(f"{name}.{fname}: {kind!r} is not a fixed struct format")
            fmt += kind
        if run is not None:
            raise TypeError(f"{name}: trailing bit fields do not fill 8/16/32/64 bits")
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
            raise DecodeError(f"{self.name}: need {self.size} bytes, have {len(buf) - offset}")
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


# -- the declarations, made on first use -------------------------------------------------------------

_pending: list[tuple[dict, Callable[[], dict]]] = []
_made = False
DECLARED: dict[str, tuple[str, ...]] = {}
"""{wire module: the names of the declarations it registered}."""


def declarations(namespace: dict, make: Callable[[], dict], names: tuple[str, ...]) -> Callable[[str], Any]:
    """Register a wire module's scapy declarations: ``make()`` declares them (and binds its layers)
    and returns them by name (``names``), put into the module's ``namespace`` when first asked for.
    Returns the module's ``__getattr__``: ``module.Name`` (or ``from module import Name``) makes the
    declarations of every wire module imported so far (:func:`declare`); those of a module imported
    later are made as it is imported."""
    DECLARED[namespace["__name__"]] = names
    _pending.append((namespace, make))
    if _made:
        declare()

    def __getattr__(name: str):
        if name in names:
            declare()
            return namespace[name]
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")

    return __getattr__


def declare() -> None:
    """Make every registered declaration now, in the order their modules were imported (a module
    imports those whose layers it binds to first)."""
    global _made
    _made = True
    while _pending:
        namespace, make = _pending.pop(0)
        made = make()
        for name, cls in made.items():  # (declared inside a function: named as at module level, for pickle)
            cls.__qualname__ = name
        namespace.update(made)
