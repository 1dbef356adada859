"""Congestion signals on the wire: ECN marks, INT telemetry, trimmed packets, CNPs, pulls, NACKs.

The contract between the switches' queue mechanisms (``switch/queues``) and the NICs' congestion
controls (``nodes/nic/cc``), issue #47. Everything is in the fabric header's flags or in frames of
their own, so a capture shows every signal:

- ``FLAG_ECN`` (fabric flags bit 5): congestion experienced. A switch whose output queue marks
  (RED-style ``kmin``/``kmax``/``pmax`` or a step at ``k``) sets it on a host message segment
  (``ptype`` MSG; the segments are the ECN-capable traffic); the receiver tells the sender with a
  :class:`Cnp` (DCQCN) or echoes it in its acknowledgement.
- ``FLAG_INT`` (bit 6): an INT stack (:class:`IntShim` then ``max_hops`` × :class:`IntHop`,
  preallocated by the sender as HPCC does) sits between the fabric header and the mechanism
  header, inside the fabric ``length``. Each switch that adds telemetry writes the hop record at
  index ``nhops`` and increments it (a full stack is left as it is). Receivers strip it
  (:func:`strip_int`) before decoding the mechanism header.
- ``FLAG_TRIM`` (bit 7): a packet a full queue would have dropped, cut to its headers (fabric, INT
  if any, message segment header: :func:`trim`) and sent at high priority (``prio`` 7); the
  receiver asks for the segment again (:class:`Nack`).

Layouts (network byte order): IntShim ``nhops(1) max_hops(1)``; IntHop ``qlen_bytes(4)
tx_bytes(4) ts_ns(4) rate_mbps(4)`` (``tx_bytes`` and ``ts_ns`` modulo 2**32, as HPCC's counters
wrap). HPCC packs a hop in 8 bytes (its ns-3 ``IntHop``); these 16-byte records are readable in a
capture at the price of 8 more modelled bytes per hop.
"""

from __future__ import annotations

import struct

from .codec import StructCodec, declarations
from .fabric import FLAGS_OFF, HDR_LEN, PacketType
from .host import MSG

FLAG_ECN = 0x20
FLAG_INT = 0x40
FLAG_TRIM = 0x80
PRIO_OFF = HDR_LEN - 7  # the fabric header's prio byte
PTYPE_OFF = HDR_LEN - 6
LEN_OFF = HDR_LEN - 2   # ... and its length
TRIM_PRIO = 7


def _declare() -> dict:
    """scapy's declarations (the specification; the codecs below are their layouts)."""
    from scapy.fields import ByteField, IntField, ShortField
    from scapy.packet import Packet, bind_layers

    from .fabric import Fabric

    class IntShim(Packet):
        name = "IntShim"
        fields_desc = [ByteField("nhops", 0), ByteField("max_hops", 5)]

    class IntHop(Packet):
        name = "IntHop"
        fields_desc = [IntField("qlen_bytes", 0), IntField("tx_bytes", 0), IntField("ts_ns", 0),
                       IntField("rate_mbps", 0)]

    class Cnp(Packet):
        """A congestion notification (RoCEv2's CNP): the receiver of marked segments of message
        ``msg_id`` from the frame's destination tells that sender to slow down."""

        name = "Cnp"
        fields_desc = [IntField("msg_id", 0), ShortField("marked", 0), ShortField("rsvd", 0)]

    class Pull(Packet):
        """NDP's pull: the receiver lets the sender send ``count`` more segments of ``msg_id``;
        ``pull_no`` numbers the pulls per sender (a lost pull is covered by the next)."""

        name = "Pull"
        fields_desc = [IntField("msg_id", 0), IntField("pull_no", 0), ShortField("count", 1), ShortField("rsvd", 0)]

    class Nack(Packet):
        """NDP's negative acknowledgement: the segment at ``offset`` of ``msg_id`` arrived trimmed."""

        name = "Nack"
        fields_desc = [IntField("msg_id", 0), IntField("offset", 0)]

    bind_layers(Fabric, Cnp, ptype=PacketType.CNP)
    bind_layers(Fabric, Pull, ptype=PacketType.PULL)
    bind_layers(Fabric, Nack, ptype=PacketType.NACK)
    return {"IntShim": IntShim, "IntHop": IntHop, "Cnp": Cnp, "Pull": Pull, "Nack": Nack}


__getattr__ = declarations(globals(), _declare, ("IntShim", "IntHop", "Cnp", "Pull", "Nack"))

INT_SHIM = StructCodec.of("IntShim", "nhops:B max_hops:B")
INT_HOP = StructCodec.of("IntHop", "qlen_bytes:I tx_bytes:I ts_ns:I rate_mbps:I")
CNP = StructCodec.of("Cnp", "msg_id:I marked:H rsvd:H")
PULL = StructCodec.of("Pull", "msg_id:I pull_no:I count:H rsvd:H")
NACK = StructCodec.of("Nack", "msg_id:I offset:I")
_U16 = struct.Struct("!H")


def int_len(max_hops: int) -> int:
    """Bytes of an INT stack with room for ``max_hops`` hops."""
    return INT_SHIM.size + max_hops * INT_HOP.size


def empty_int(max_hops: int = 5) -> bytes:
    """The stack a sender puts in (no hop written yet)."""
    return INT_SHIM.pack(0, max_hops) + bytes(max_hops * INT_HOP.size)


def int_hops(frame) -> list[tuple[int, int, int, int]]:
    """The hop records written so far in a frame with ``FLAG_INT``: (qlen_bytes, tx_bytes, ts_ns,
    rate_mbps) per switch crossed, first switch first."""
    nhops, _ = INT_SHIM.unpack(frame, HDR_LEN)
    base = HDR_LEN + INT_SHIM.size
    return [INT_HOP.unpack(frame, base + i * INT_HOP.size) for i in range(nhops)]


def int_push(frame: bytes, qlen_bytes: int, tx_bytes: int, ts_ns: int, rate_mbps: int) -> bytes:
    """``frame`` with one more hop record written (unchanged when its stack is full)."""
    nhops, max_hops = INT_SHIM.unpack(frame, HDR_LEN)
    if nhops >= max_hops:
        return frame
    at = HDR_LEN + INT_SHIM.size + nhops * INT_HOP.size
    rec = INT_HOP.pack(qlen_bytes & 0xFFFFFFFF, tx_bytes & 0xFFFFFFFF, ts_ns & 0xFFFFFFFF, rate_mbps)
    return frame[:HDR_LEN] + bytes((nhops + 1, max_hops)) + frame[HDR_LEN + 2:at] + rec + frame[at + INT_HOP.size:]


def strip_int(frame: bytes) -> tuple[bytes, bytes]:
    """(the frame without its INT stack and flag, with the fabric length adjusted; the stack's
    bytes). A frame without ``FLAG_INT`` comes back unchanged with an empty stack."""
    if not frame[FLAGS_OFF] & FLAG_INT:
        return frame, b""
    _, max_hops = INT_SHIM.unpack(frame, HDR_LEN)
    n = int_len(max_hops)
    stack = frame[HDR_LEN:HDR_LEN + n]
    length = _U16.unpack_from(frame, LEN_OFF)[0] - n
    head = bytearray(frame[:HDR_LEN])
    head[FLAGS_OFF] &= ~FLAG_INT & 0xFF
    head[LEN_OFF:LEN_OFF + 2] = _U16.pack(length)
    return bytes(head) + frame[HDR_LEN + n:], stack


def trim(frame: bytes) -> bytes | None:
    """A host message segment cut to its headers (fabric, INT stack if any, segment header), with
    ``FLAG_TRIM`` and priority ``TRIM_PRIO``; None for a frame that cannot be trimmed (not a
    segment, or already trimmed)."""
    if frame[PTYPE_OFF] != PacketType.MSG or frame[FLAGS_OFF] & FLAG_TRIM:
        return None
    keep = HDR_LEN + MSG.size
    if frame[FLAGS_OFF] & FLAG_INT:
        keep += int_len(frame[HDR_LEN + 1])
    head = bytearray(frame[:keep])
    head[FLAGS_OFF] |= FLAG_TRIM
    head[PRIO_OFF] = TRIM_PRIO
    head[LEN_OFF:LEN_OFF + 2] = _U16.pack(keep - HDR_LEN)
    return bytes(head)
