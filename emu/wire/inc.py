"""In-network allreduce of spec 04 on the wire: the data header and the control-plane messages.

Data (ptype INC): a 16-byte :class:`IncData` header, then ``count`` elements of the allreduce's type
(dense), or ``count`` (index u32, value) pairs (flag SPARSE). Field widths are ours:

    aid(16) flags(8) dtype(8) block(32) shard(16) shards(16) count(16) rsvd(16)

``aid`` names the allreduce (assigned by the network manager), ``block`` the packet's position in the
vector (the reduction block); a block may take several packets from one sender (sparse data): they
are its ``shard`` 0, 1, ...; the last (flag LAST) carries ``shards``, their number, so a switch
counts the sender done when it has them all. RESULT marks an aggregated packet on its way down.

Control (ptype INCCTL): an 8-byte :class:`IncCtl` header -- op, status, seq, aid, count -- then a body
by operation: a host's REQUEST for a communicator (:class:`IncRequest` + ``count`` member addresses
u32), the manager's GRANT (:class:`IncGrant`) or REJECT, the manager's INSTALL to a switch
(:class:`IncInstall`: children, parent port, algorithm, memory share) and the switch's INSTALLED or
FULL, RELEASE and RELEASED at the end.
"""

from __future__ import annotations

import enum
import struct

import numpy as np
import zlib

from ..config.host import INC_SCHEDULES
from .codec import DecodeError, StructCodec, declarations

INC_FLAGS = ["LAST", "RESULT", "SPARSE", "RETX", "R4", "R5", "R6", "R7"]
F_LAST, F_RESULT, F_SPARSE, F_RETX = 0x01, 0x02, 0x04, 0x08


class DType(enum.IntEnum):
    """Element types by wire code (``IncData.dtype``); ``register_dtype`` adds more."""

    INT8 = 1
    INT16 = 2
    INT32 = 3
    INT64 = 4
    UINT8 = 5
    UINT16 = 6
    UINT32 = 7
    UINT64 = 8
    FLOAT16 = 9
    FLOAT32 = 10
    FLOAT64 = 11


DTYPE_CODES: dict[int, np.dtype] = {c.value: np.dtype(c.name.lower()) for c in DType}
"""Wire code -> numpy type (big-endian on the wire: ``np.dtype(...).newbyteorder('>')``)."""


def dtype_code(dt: np.dtype) -> int:
    for code, d in DTYPE_CODES.items():
        if d == np.dtype(dt):
            return code
    raise ValueError(f"element type {np.dtype(dt)} has no wire code; register_dtype() it")


def register_dtype(code: int, dt: np.dtype) -> None:
    """A user-defined element type (any fixed-size numpy type, structured ones included) by code."""
    if not 16 <= code <= 255 or code in DTYPE_CODES:
        raise ValueError(f"user element type codes are 16..255 and unused, got {code}")
    DTYPE_CODES[code] = np.dtype(dt)


def wire_dtype(code: int) -> np.dtype:
    """The numpy type of code ``code`` as it is on the wire (big-endian)."""
    dt = DTYPE_CODES.get(code)
    if dt is None:
        raise DecodeError(f"unknown element type code {code}")
    return dt.newbyteorder(">") if dt.fields is None else dt


class CtlOp(enum.IntEnum):
    REQUEST = 1    # host -> manager: an allreduce for these members
    GRANT = 2      # manager -> host: aid, elements per packet, blocks in flight
    REJECT = 3     # manager -> host: no tree has room; fall back to host allreduce
    INSTALL = 4    # manager -> switch: the handler, children, parent, memory share
    INSTALLED = 5  # switch -> manager
    FULL = 6       # switch -> manager: no memory left for another allreduce
    RELEASE = 7    # host -> manager, manager -> switch: the allreduce is over
    RELEASED = 8   # switch -> manager, manager -> host


class Algo(enum.IntEnum):
    SINGLE = 1     # one buffer per block, a critical section per packet
    MULTI2 = 2     # two buffers per block
    MULTI4 = 4     # four buffers per block
    TREE = 8       # a buffer per packet, combined in a fixed tree (reproducible when pinned to ports)


def _declare() -> dict:
    """scapy's declarations (the specification; the codecs below are their layouts)."""
    from scapy.fields import ByteEnumField, ByteField, FlagsField, IntField, LongField, ShortField
    from scapy.packet import Packet

    class IncData(Packet):
        name = "IncData"
        fields_desc = [
            ShortField("aid", 0),
            FlagsField("flags", 0, 8, INC_FLAGS),
            ByteEnumField("dtype", DType.FLOAT32, {c.value: c.name for c in DType}),
            IntField("block", 0),
            ShortField("shard", 0),
            ShortField("shards", 1),
            ShortField("count", 0),
            ShortField("rsvd", 0),
        ]

    class IncCtl(Packet):
        name = "IncCtl"
        fields_desc = [
            ByteEnumField("op", CtlOp.REQUEST, {c.value: c.name for c in CtlOp}),
            ByteField("status", 0),
            ShortField("seq", 0),
            ShortField("aid", 0),
            ShortField("count", 0),
        ]

    class IncRequest(Packet):
        """A REQUEST's body (then ``count`` member addresses, u32 each, in rank order)."""

        name = "IncRequest"
        fields_desc = [
            ByteEnumField("dtype", DType.FLOAT32, {c.value: c.name for c in DType}),
            ByteField("reproducible", 0),
            ShortField("algo", 0),       # an Algo code the host asks for (0: the manager picks by size)
            IntField("comm", 0),
            LongField("nbytes", 0),
            ShortField("op", 0),         # op_code(name) of the operator
            ShortField("elems", 0),      # elements per packet the host would like (0: the manager's choice)
            IntField("span", 0),         # sparse: elements a block spans (0: dense)
        ]

    class IncGrant(Packet):
        """A GRANT's body."""

        name = "IncGrant"
        fields_desc = [
            ShortField("elems", 0),      # elements per packet
            ShortField("window", 0),     # blocks a host may have in flight (the switch's buffers, Little's law)
            ByteField("algo", 0),        # Algo code the switches run
            ByteField("depth", 0),       # levels of the reduction tree
            ShortField("switches", 0),   # switches in the tree
            IntField("latency_ns", 0),   # the model's time for the blocks of one window to come back
            ShortField("group", 0),      # blocks the staggered ranks' starting blocks spread over (0: the window)
        ]

    class IncInstall(Packet):
        """An INSTALL's body: what one switch of the tree runs for allreduce ``aid``."""

        name = "IncInstall"
        fields_desc = [
            LongField("children", 0),    # bitmap of the ports its children are on
            ByteField("nchildren", 0),
            ByteField("parent", 255),    # port toward the parent (255: the root)
            ByteEnumField("algo", Algo.TREE, {c.value: c.name for c in Algo}),
            ByteField("reproducible", 0),
            ByteEnumField("dtype", DType.FLOAT32, {c.value: c.name for c in DType}),
            ByteField("sparse", 0),      # blocks come as (index, value) shards
            ShortField("elems", 0),      # elements (dense) or pairs (sparse) per packet
            ShortField("buffers", 0),    # aggregation buffers of this allreduce here (its memory share)
            ShortField("op", 0),         # op_code(name) of the operator
            IntField("span", 0),         # sparse: elements a block spans
        ]

    return {"IncData": IncData, "IncCtl": IncCtl, "IncRequest": IncRequest, "IncGrant": IncGrant,
            "IncInstall": IncInstall}


__getattr__ = declarations(globals(), _declare, ("IncData", "IncCtl", "IncRequest", "IncGrant", "IncInstall"))

DATA = StructCodec.of("IncData", "aid:H flags/8 dtype:B block:I shard:H shards:H count:H rsvd:H")
CTL = StructCodec.of("IncCtl", "op:B status:B seq:H aid:H count:H")
REQUEST = StructCodec.of("IncRequest", "dtype:B reproducible:B algo:H comm:I nbytes:Q op:H elems:H span:I")
GRANT = StructCodec.of("IncGrant", "elems:H window:H algo:B depth:B switches:H latency_ns:I group:H")
INSTALL = StructCodec.of("IncInstall", "children:Q nchildren:B parent:B algo:B reproducible:B dtype:B sparse:B "
                         "elems:H buffers:H op:H span:I")
DATA_LEN, CTL_LEN = DATA.size, CTL.size
assert (DATA_LEN, CTL_LEN, REQUEST.size, GRANT.size, INSTALL.size) == (16, 8, 24, 14, 24)
MEMBER = struct.Struct("!I")


def op_code(name: str) -> int:
    """An operator's 16-bit code on the wire: a hash of its name (``emu.reduce`` registry), so that
    user-defined operators need no table agreed between processes."""
    return zlib.crc32(name.encode()) & 0xFFFF


def op_by_code(code: int):
    """The registered operator (``emu.reduce.Op``) whose name hashes to ``code``."""
    from emu.reduce import OPS

    for name, op in OPS.items():
        if op_code(name) == code:
            return op
    raise DecodeError(f"no operator with code {code:#06x} is registered here")


def encode_dense(aid: int, block: int, values: np.ndarray, *, flags: int = F_LAST, shard: int = 0,
                 shards: int = 1) -> bytes:
    """An INC data payload (header + elements, big-endian) for a dense packet."""
    code = dtype_code(values.dtype)
    return DATA.pack(aid, flags, code, block, shard, shards, len(values), 0) + \
        np.ascontiguousarray(values, wire_dtype(code)).tobytes()


def encode_sparse(aid: int, block: int, index: np.ndarray, values: np.ndarray, *, shard: int = 0, shards: int = 1,
                  last: bool = True, flags: int = 0) -> bytes:
    """A sparse packet: (index u32, value) pairs."""
    code = dtype_code(values.dtype)
    dt = np.dtype([("index", ">u4"), ("value", wire_dtype(code))])
    pairs = np.empty(len(values), dt)
    pairs["index"], pairs["value"] = index, values
    return DATA.pack(aid, flags | F_SPARSE | (F_LAST if last else 0), code, block, shard, shards, len(values), 0) + \
        pairs.tobytes()


def decode(payload: bytes, off: int = 0):
    """(header tuple, values or None, indices or None); DecodeError on anything inconsistent."""
    if len(payload) - off < DATA_LEN:
        raise DecodeError(f"INC packet of {len(payload) - off} bytes is shorter than its {DATA_LEN}-byte header")
    head = DATA.unpack(payload, off)
    _aid, flags, code, _block, shard, shards, count, _r = head
    dt = wire_dtype(code)
    body = memoryview(payload)[off + DATA_LEN:]
    if shard >= max(shards, 1) and flags & F_LAST:
        raise DecodeError(f"shard {shard} of {shards}")
    if flags & F_SPARSE:
        pair = np.dtype([("index", ">u4"), ("value", dt)])
        if len(body) != count * pair.itemsize:
            raise DecodeError(f"{len(body)} bytes for {count} sparse pairs of {pair.itemsize}")
        pairs = np.frombuffer(body, pair)
        return head, pairs["value"], pairs["index"]
    if len(body) != count * dt.itemsize:
        raise DecodeError(f"{len(body)} bytes for {count} elements of {dt.itemsize}")
    return head, np.frombuffer(body, dt), None


# -- the hosts' sending schedule: what both ends assume (hosts send so; the experiments feed a switch so)

SCHEDULES = INC_SCHEDULES
"""The orders hosts send their blocks in (``send_order``; ``elan.inc_schedule``); the first, the
source's, is the default."""


def group_widths(n: int, group: int, window: int) -> list[int]:
    """The widths of the groups ``n`` blocks are sent in: as equal as can be, each at least ``group``
    (a short last group would crowd its packets) and at most ``window`` (a rank must reach every block
    of a group while its earlier blocks are in flight, or no block of it completes)."""
    n, window = max(0, n), max(1, window)
    g = max(1, min(group, window))
    k = max(1, n // g, -(-n // window)) if n else 1
    return [(i + 1) * n // k - i * n // k for i in range(k)]


def send_order(n: int, window: int, rank: int, ranks: int = 1, schedule: str = "staggered",
               group: int = 0) -> tuple[int, list[int]]:
    """(blocks in flight, the order rank ``rank`` of ``ranks`` sends ``n`` blocks in), by groups
    (``group_widths``: of ``group`` blocks or a little more, the staggered schedule's width -- the
    manager's grant; 0: the window; the other schedules: groups of the window), each group in the
    order ``schedule`` says:

    * ``staggered`` -- the source's staggered sending: the ranks' starting blocks spread evenly over
      the group, rank r starting at block floor(r * width / ranks) and going on in order, wrapping
      around: the packets of one block reach a switch width / ranks packet slots apart (ranks that
      share a starting block, when the group is narrower than the ranks, send it together);
    * ``rotated`` -- rank r starts at block r mod width: consecutive ranks one block apart, so the
      packets of one block come one slot apart, closer than a handler takes to aggregate one;
    * ``in order`` -- every rank from the group's first block (the packets of a block together).

    Blocks in flight are at least the widest group's (never fewer than the window, and only more
    when ``window`` is below ``group``).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"sending schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
    w = max(1, min(window, n))
    ranks = max(1, ranks)
    widths = group_widths(n, group or w, w) if schedule == "staggered" else \
        [min(w, n - s) for s in range(0, n, w)]
    order: list[int] = []
    start = 0
    for width in widths:
        group_ = list(range(start, start + width))
        k = {"staggered": rank % ranks * width // ranks, "rotated": rank % width}.get(schedule, 0)
        order += group_[k:] + group_[:k]
        start += width
    return w, order
