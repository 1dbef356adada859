"""QsNet packets on the wire (spec 03): segments, the transaction header, the trailer, ACK tokens.

A QsNet packet travels as one fabric frame (``ptype`` QPKT) whose body is the packet exactly as the
adapter cuts it into 256-byte segments::

    QsSegment   8 B  vc(5) prio(1) rsvd(2) | length(8) | dest(16) | tstamp(16) | crc16(16)
    payload        up to 248 B (the first bytes of the payload are the QsTxn header)
    QsCont      4 B  vc(5) prio(1) last(1) rsvd(1) | length(8) | index(16)
    payload        up to 252 B
    ...            one QsCont per further segment
    QsTrailer   8 B  crc32(32) over the whole payload and the packet id | pkt_id(32)

so a 1 KiB payload takes 5 segments (248 + 3 x 252 + 20 bytes). Field widths are not published;
these are ours: 5 bits of VC for 32 VCs, 8-bit segment length, 16-bit destination (4096 nodes and
group ids fit), the sender's virtual time in ns modulo 2^16 as time stamp, CRC-16/CCITT (XMODEM:
polynomial 0x1021, initial 0; ``binascii.crc_hqx``) over the segment header's first 6 bytes. The
payload CRC is the IEEE CRC-32 (``zlib.crc32``) of the payload followed by the 4-byte packet id
(:func:`payload_crc`); ``pkt_id`` is the source adapter's packet number.

The payload starts with the 24-byte transaction header (:class:`QsTxn`: operation, flags, the
source rank, transfer id, this packet's offset in the transfer, the transfer's size, the target
virtual address); a put's data follows. Acknowledgements are ACK tokens (ptype QACK,
:class:`QsAck`, 16 bytes, not segmented): ACK or NACK with a reason, the packet id acknowledged,
and a 64-bit value (a fetch-and-add's old value, a network conditional's result).

A packet is one frame on the emulated wire, but a port honours its segments: a frame of priority
> 0 (an ACK token, say) handed to a port while a QsNet packet leaves goes out at the packet's next
segment boundary, the rest of the packet after it, and ahead of priority-0 frames that wait
(``emu.port.OutPort._overtake``; ``LinkSpec.priority``).
"""

from __future__ import annotations

import binascii
import enum
import struct
import zlib

from .codec import DecodeError, StructCodec, declarations

SEG_BYTES = 256
FIRST_DATA = 248
CONT_DATA = 252
MAX_PACKET = 4096
"""Largest payload of one packet (transaction header included)."""


class QsOp(enum.IntEnum):
    """Transaction operations (``QsTxn.op``)."""

    PUT = 1        # write the data at addr + offset on the target
    GET = 2        # read `total` bytes at addr on the target; it puts them back (GET_REPLY)
    GET_REPLY = 3  # a get's data coming back: written at the requester's addr + offset
    FADD = 4       # fetch-and-add a 64-bit word at addr (the value in the data); the ACK carries the old one
    COND = 5       # network conditional: read the 64-bit word at addr, ACK if equal to (GE: at least) the data else NACK
    EVENT = 6      # count one at the counted event of the barrier at addr (tree barrier); data: seq, position, reduction part


class AckKind(enum.IntEnum):
    ACK = 0
    NACK = 1


class Reason(enum.IntEnum):
    """Why a NACK (``QsAck.reason``)."""

    NONE = 0
    CRC = 1         # the payload failed its CRC-32 at the destination
    NO_ROUTE = 2    # a router could not reach the destination (invalid-destination trap)
    COND_FALSE = 3  # a network conditional compared unequal
    BAD_ADDR = 4    # the target has no memory at that address


TXN_FLAGS = ["LAST", "BCAST", "GE", "R3", "R4", "R5", "R6", "R7"]
TXN_LAST = 0x01
TXN_BCAST = 0x02
TXN_GE = 0x04
"""A conditional compares ``word >= data`` instead of ``==`` (the polled barrier's "every process
reached sequence n")."""
ACK_FLAGS = ["DONE", "BCAST", "R2", "R3", "R4", "R5", "R6", "R7"]
ACK_DONE = 0x01
"""The acknowledged packet's data is in the target's memory and its transfer is complete there."""
ACK_BCAST = 0x02
"""The ACK of a broadcast packet: switches of the group's tree combine these into one per packet;
``value`` counts the members whose transfer this packet completed."""


class TrapKind(enum.IntEnum):
    LINK_DOWN = 1     # a router's link failed
    INVALID_DEST = 2  # a router could not reach a destination on the way down (it NACKed)
    LINK_UP = 3       # a router's link came back
    BRINGUP = 4       # a link's bring-up test: ``count`` frames of its pattern lost or damaged (both ways)
    MISCABLED = 5     # bring-up found ``dest`` (port ``count``) on a port the cabling plan gives another peer
    BRINGUP_ONEWAY = 6  # the answering end's count: ``count`` of the pattern frames from ``dest`` lost or damaged (one way)


class MgmtOp(enum.IntEnum):
    """Network manager commands (``QsMgmt.op``), source-routed to a router."""

    SET_ROUTES = 1  # body: ``count`` entries (dest u32, n u8, n ports): the router's table from now on
    DONE = 2        # the router's answer to request ``seq``: installed
    SET_GROUP = 3   # body: gid u32, then ``count`` ports: the group's tree at this router
    HELLO = 4       # link bring-up, to the peer: body: node id u32, port u8; ``count``: pattern frames to come
    HELLO_ACK = 5   # the peer's answer: body: its node id u32, its port u8
    PATTERN = 6     # one test-pattern frame (``seq``: its index; body: the pattern)
    END = 7         # the pattern is over: ``count`` frames were sent
    RESULT = 8      # the peer's count of good pattern frames (``count``); it sends its own pattern next
    ADMIT = 9       # the manager lets port ``count`` carry traffic although its bring-up failed
    INC_INSTALL = 10  # spec 04: body IncInstall (``emu.wire.inc``), for allreduce ``count``
    INC_RELEASE = 11  # spec 04: allreduce ``count`` is over here
    REFUSED = 12      # the router's answer instead of DONE: it cannot (no memory for another allreduce)
    RESET = 13        # spec 03: take port ``count`` out of service (0xFFFF: every port but the manager's)


def _declare() -> dict:
    """scapy's declarations (the specification; the codecs below are their layouts). The headers
    that follow the fabric header directly are bound under it (the segmented body is walked by
    :func:`decode_packet` and the dissector, not by scapy's layering)."""
    from scapy.fields import (BitEnumField, BitField, ByteEnumField, ByteField, FlagsField, IntField, LongField,
                              ShortField, XIntField, XLongField, XShortField)
    from scapy.packet import Packet, bind_layers

    from .fabric import Fabric, PacketType

    class QsSegment(Packet):
        """The 8-byte header of a packet's first segment (``crc16`` None: computed)."""

        name = "QsSegment"
        fields_desc = [
            BitField("vc", 0, 5),
            BitField("prio", 0, 1),
            BitField("rsvd", 0, 2),
            BitField("length", 0, 8),
            ShortField("dest", 0),
            ShortField("tstamp", 0),
            XShortField("crc16", None),
        ]

        def post_build(self, pkt: bytes, pay: bytes) -> bytes:
            if self.crc16 is None:
                pkt = pkt[:6] + struct.pack("!H", binascii.crc_hqx(pkt[:6], 0))
            return pkt + pay

    class QsCont(Packet):
        """The 4-byte header of every further segment of a packet."""

        name = "QsCont"
        fields_desc = [
            BitField("vc", 0, 5),
            BitField("prio", 0, 1),
            BitField("last", 0, 1),
            BitField("rsvd", 0, 1),
            BitField("length", 0, 8),
            ShortField("index", 1),
        ]

    class QsTxn(Packet):
        """The transaction header: the first 24 bytes of a packet's payload."""

        name = "QsTxn"
        fields_desc = [
            ByteEnumField("op", QsOp.PUT, {o.value: o.name for o in QsOp}),
            FlagsField("flags", 0, 8, TXN_FLAGS),
            ShortField("rank", 0),
            IntField("xfer", 0),
            IntField("offset", 0),
            IntField("total", 0),
            XLongField("addr", 0),
        ]

    class QsTrailer(Packet):
        """After the last segment: CRC-32 of the payload and the packet id."""

        name = "QsTrailer"
        fields_desc = [
            XIntField("crc32", 0),
            IntField("pkt_id", 0),
        ]

    class QsAck(Packet):
        """An ACK or NACK token for one packet."""

        name = "QsAck"
        fields_desc = [
            BitEnumField("kind", AckKind.ACK, 8, {k.value: k.name for k in AckKind}),
            BitEnumField("reason", Reason.NONE, 8, {r.value: r.name for r in Reason}),
            FlagsField("flags", 0, 8, ACK_FLAGS),
            BitField("rsvd", 0, 8),
            IntField("pkt_id", 0),
            LongField("value", 0),
        ]

    class QsTrap(Packet):
        """A router's trap to the network manager (ptype TRAP)."""

        name = "QsTrap"
        fields_desc = [
            ByteEnumField("kind", TrapKind.LINK_DOWN, {k.value: k.name for k in TrapKind}),
            BitField("port", 0, 8),
            ShortField("count", 1),
            IntField("router", 0),
            IntField("dest", 0),
            LongField("t_ns", 0),
        ]

    class QsMgmt(Packet):
        """A network manager's command to a router, or the router's answer (ptype MGMT). Followed by
        ``nhops`` route bytes (the output port at each router on the way; ``hop`` is the next one to
        use), ``nhops`` back bytes (each router writes the port the command came in by: the answer's
        route) and the body ``op`` names. A router answers DONE along the reversed back bytes. Link
        bring-up frames (HELLO..RESULT) cross one link and carry no route bytes."""

        name = "QsMgmt"
        fields_desc = [
            ByteEnumField("op", MgmtOp.SET_ROUTES, {k.value: k.name for k in MgmtOp}),
            ByteField("hop", 0),
            ByteField("nhops", 0),
            ByteField("rsvd", 0),
            ShortField("seq", 0),
            ShortField("count", 0),
        ]

    bind_layers(Fabric, QsSegment, ptype=PacketType.QPKT)
    bind_layers(Fabric, QsAck, ptype=PacketType.QACK)
    bind_layers(Fabric, QsTrap, ptype=PacketType.TRAP)
    return {"QsSegment": QsSegment, "QsCont": QsCont, "QsTxn": QsTxn, "QsTrailer": QsTrailer, "QsAck": QsAck,
            "QsTrap": QsTrap, "QsMgmt": QsMgmt}


__getattr__ = declarations(globals(), _declare,
                           ("QsSegment", "QsCont", "QsTxn", "QsTrailer", "QsAck", "QsTrap", "QsMgmt"))

SEG = StructCodec.of("QsSegment", "vc/5 prio/1 rsvd/2 length/8 dest:H tstamp:H crc16:H")
CONT = StructCodec.of("QsCont", "vc/5 prio/1 last/1 rsvd/1 length/8 index:H")
TXN = StructCodec.of("QsTxn", "op:B flags/8 rank:H xfer:I offset:I total:I addr:Q")
TRAILER = StructCodec.of("QsTrailer", "crc32:I pkt_id:I")
ACK = StructCodec.of("QsAck", "kind/8 reason/8 flags/8 rsvd/8 pkt_id:I value:Q")
TRAP = StructCodec.of("QsTrap", "kind:B port/8 count:H router:I dest:I t_ns:Q")
MGMT = StructCodec.of("QsMgmt", "op:B hop:B nhops:B rsvd:B seq:H count:H")
ROUTE_ENTRY = struct.Struct("!IB")
"""One SET_ROUTES entry: destination address and a count n of ports, the n ports following (the
first is the static choice, all are the adaptive candidates; none: no route)."""
SEG_LEN, CONT_LEN, TXN_LEN, TRAILER_LEN, ACK_LEN = SEG.size, CONT.size, TXN.size, TRAILER.size, ACK.size
assert (SEG_LEN, CONT_LEN, TXN_LEN, TRAILER_LEN, ACK_LEN) == (8, 4, 24, 8, 16)

_H = struct.Struct("!H")
_BBH = struct.Struct("!BBH")
_SEG6 = struct.Struct("!BBHH")
_TRAILER = TRAILER.struct


def payload_crc(payload: bytes, pkt_id: int) -> int:
    """The trailer's CRC-32: over the payload, then the packet id (big-endian)."""
    return zlib.crc32(pkt_id.to_bytes(4, "big"), zlib.crc32(payload))


def segments(payload_len: int) -> int:
    """Segments a payload of ``payload_len`` bytes takes (at least one)."""
    if payload_len <= FIRST_DATA:
        return 1
    return 1 + -(-(payload_len - FIRST_DATA) // CONT_DATA)


def packet_bytes(payload_len: int) -> int:
    """Bytes of a packet on the wire inside its fabric frame: segment headers, payload, trailer."""
    return SEG_LEN + (segments(payload_len) - 1) * CONT_LEN + payload_len + TRAILER_LEN


def encode_packet(payload: bytes, *, vc: int, prio: int, dest: int, tstamp: int, pkt_id: int) -> bytes:
    """Cut ``payload`` into segments and seal it (fast path of QsSegment/QsCont/QsTrailer)."""
    n = len(payload)
    if n > MAX_PACKET:
        raise ValueError(f"a packet carries at most {MAX_PACKET} bytes of payload, not {n}")
    b0 = (vc & 0x1F) << 3 | (prio & 1) << 2
    first = payload[:FIRST_DATA]
    head = _SEG6.pack(b0, len(first), dest & 0xFFFF, tstamp & 0xFFFF)
    parts = [head, _H.pack(binascii.crc_hqx(head, 0)), first]
    off, index = FIRST_DATA, 1
    while off < n:
        chunk = payload[off:off + CONT_DATA]
        off += len(chunk)
        parts.append(_BBH.pack(b0 | (0x02 if off >= n else 0), len(chunk), index))
        parts.append(chunk)
        index += 1
    parts.append(_TRAILER.pack(payload_crc(payload, pkt_id), pkt_id))
    return b"".join(parts)


class Damaged(DecodeError):
    """A packet whose header is sound but whose payload fails its CRC-32 (the target NACKs it)."""

    def __init__(self, msg: str, pkt_id: int, dest: int):
        super().__init__(msg)
        self.pkt_id, self.dest = pkt_id, dest


def decode_packet(body: bytes | memoryview, offset: int = 0) -> tuple[int, int, int, int, bytes, int]:
    """Check and reassemble a packet: (vc, prio, dest, tstamp, payload, pkt_id).

    Raises :class:`DecodeError` if the first segment header fails its CRC-16 or the segment
    structure does not add up (nothing in the packet can be trusted: dropped), :class:`Damaged`
    if only the payload's CRC-32 fails (the target answers with a NACK)."""
    body = memoryview(body)[offset:]
    n = len(body)
    if n < SEG_LEN + TRAILER_LEN:
        raise DecodeError(f"QsNet packet of {n} bytes is shorter than a segment header and trailer")
    b0, length, dest, tstamp = _SEG6.unpack_from(body, 0)
    if binascii.crc_hqx(body[:6], 0) != _H.unpack_from(body, 6)[0]:
        raise DecodeError("QsNet segment header fails its CRC-16")
    vc, prio = b0 >> 3, (b0 >> 2) & 1
    if length > FIRST_DATA:
        raise DecodeError(f"first segment claims {length} data bytes (at most {FIRST_DATA})")
    parts = [body[SEG_LEN:SEG_LEN + length]]
    pos, index = SEG_LEN + length, 1
    end = n - TRAILER_LEN
    last = length < FIRST_DATA
    while pos < end:
        if last:
            raise DecodeError(f"segment data after the last segment (byte {pos})")
        if end - pos < CONT_LEN:
            raise DecodeError(f"truncated continuation header at byte {pos}")
        c0, clen, cidx = _BBH.unpack_from(body, pos)
        if cidx != index or clen > CONT_DATA or pos + CONT_LEN + clen > end:
            raise DecodeError(f"continuation {cidx} (expected {index}) of {clen} bytes at byte {pos} does not fit")
        parts.append(body[pos + CONT_LEN:pos + CONT_LEN + clen])
        pos += CONT_LEN + clen
        last = bool(c0 & 0x02)
        index += 1
    if pos != end or (index > 1 and not last):
        raise DecodeError("QsNet packet structure does not end at its trailer")
    payload = b"".join(parts)
    crc, pkt_id = _TRAILER.unpack_from(body, end)
    if payload_crc(payload, pkt_id) != crc:
        raise Damaged(f"QsNet packet {pkt_id} fails its payload CRC-32", pkt_id, dest)
    return vc, prio, dest, tstamp, payload, pkt_id


_PTYPE_OFF = 14 + 10  # Ethernet, then the fabric header's ptype byte


def is_qsnet_packet(frame: bytes) -> bool:
    """Is this (possibly damaged) frame a QsNet packet, whose own CRCs protect it end to end?
    Elements hand such frames to engines even when their FCS fails (cut-through: see
    ``passes_damaged`` in :mod:`emu.element`)."""
    return len(frame) > _PTYPE_OFF and frame[12] == 0x88 and frame[13] == 0xB5 and frame[_PTYPE_OFF] == 5
