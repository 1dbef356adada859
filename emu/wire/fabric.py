"""The inner frame: Ethernet, then the fabric routing header, then the mechanism's header(s).

Layout (network byte order)::

    Ethernet  dst MAC(6) src MAC(6) type(2)=0x88B5 (IEEE local experimental EtherType 1)
    Fabric    src(4) dst(4) vc(1) prio(1) ptype(1) flags(1) hops(1) rsvd(1) length(2)
    ...       mechanism header selected by ptype (see emu.wire.host and later specs)
    FCS       CRC-32 of everything before it (4 bytes, least significant byte first, as Ethernet)

The frame check sequence is link-layer: an output port appends it to every frame it sends and the
receiving port checks it and strips it (a frame that fails is counted in ``fcs_errors``, marked in
the capture and dropped), so engines build and parse MAC client frames (``Ether``/``Fabric``/...)
while the wire and the captures carry ``EthernetFCS`` frames. A switch recomputes it per hop, as an
Ethernet switch that rewrites a header does (it increments ``hops``).

MAC addresses are locally administered and derived from node ids (``02:00:`` + 32-bit id); a
broadcast-group frame (``flags.BCAST``) carries ``ff:ff:ff:ff:ff:ff``. Switches do not rewrite the
Ethernet header; they increment ``hops`` once per switch crossed.
"""

from __future__ import annotations

import enum
import struct
import zlib

from .codec import DecodeError, StructCodec, declarations, declare
from .l2 import ether, when_ether

ETHERTYPE_FABRIC = 0x88B5
ETH_LEN = 14
BROADCAST_MAC = b"\xff" * 6


class PacketType(enum.IntEnum):
    """Values of the fabric header's ``ptype``; later mechanisms add theirs here."""

    MSG = 1    # a segment of a host-to-host message (emu.wire.host.MsgSegment)
    PING = 2   # echo request (emu.wire.host.Ping)
    PONG = 3   # echo reply
    COLL = 4   # a collective descriptor message of spec 01 (emu.wire.coll.CollDesc)
    QPKT = 5   # a QsNet packet of spec 03: segments, transaction header, trailer (emu.wire.qsnet)
    QACK = 6   # a QsNet ACK/NACK token (emu.wire.qsnet.QsAck)
    TRAP = 7   # a router's trap to the network manager (emu.wire.qsnet.QsTrap)
    MGMT = 8   # a network manager's command to a router, or its answer (emu.wire.qsnet.QsMgmt)
    INC = 9    # in-network allreduce data of spec 04 (emu.wire.inc.IncData)
    INCCTL = 10  # its control plane: requests, grants, installs (emu.wire.inc.IncCtl)
    NC = 11    # a network-coded broadcast packet of spec 02 (emu.wire.coding.NcHeader)
    MACK = 12  # a host message's acknowledgement (host.transport=reliable; emu.wire.host.MsgAck)
    CNP = 13   # a congestion notification from a receiver to a sender (host.cc; emu.wire.cc.Cnp)
    PULL = 14  # a receiver-driven transport's pull (host.cc=ndp; emu.wire.cc.Pull)
    NACK = 15  # a receiver's request to resend a trimmed segment (host.cc=ndp; emu.wire.cc.Nack)


FLAG_NAMES = ["BCAST", "SRCRT", "POOL", "DETOUR", "AGAIN", "ECN", "INT", "TRIM"]
FLAG_BCAST = 0x01
FLAG_SRCRT = 0x02
"""Source-chosen route: ``rsvd`` carries a route id; a switch whose policy honours it (dispersive)
takes, at the h-th switch crossed (``hops`` = h), digit h of the route id in the base of its number
of minimal next hops."""
FLAG_POOL = 0x04
"""Link-local: the frame's sender placed it wholly in the receiving router's shared buffer pool
(an input-queued router with ``SwitchSpec.pool_bytes``; ``emu.switch.iqpool``), so its credit goes
back to the pool. Set or cleared by each sender for its own link."""
RSVD_OFF = ETH_LEN + 13
FLAGS_OFF = ETH_LEN + 11


def source_route(frame: bytes, ports) -> int | None:
    """The port a source-chosen route names among ``ports`` (a switch's minimal next hops for the
    frame's destination), or None when the frame's source chose none (no SRCRT flag): digit
    ``hops`` of the route id in base ``len(ports)``."""
    if not frame[FLAGS_OFF] & FLAG_SRCRT:
        return None
    k = len(ports)
    return ports[(frame[RSVD_OFF] // k ** frame[ETH_LEN + 12]) % k]


def _declare() -> dict:
    """scapy's declaration of the fabric header: the specification (``FABRIC`` is its layout)."""
    from scapy.fields import ByteEnumField, ByteField, FlagsField, IntField, ShortField
    from scapy.packet import Packet

    class Fabric(Packet):
        name = "Fabric"
        fields_desc = [
            IntField("src", 0),
            IntField("dst", 0),
            ByteField("vc", 0),
            ByteField("prio", 0),
            ByteEnumField("ptype", PacketType.MSG, {p.value: p.name for p in PacketType}),
            FlagsField("flags", 0, 8, FLAG_NAMES),
            ByteField("hops", 0),
            ByteField("rsvd", 0),
            ShortField("length", None),
        ]

        def post_build(self, pkt: bytes, pay: bytes) -> bytes:
            if self.length is None:
                pkt = pkt[:14] + len(pay).to_bytes(2, "big") + pkt[16:]
            return pkt + pay

        def extract_padding(self, s: bytes):
            return s[: self.length], s[self.length:]

    return {"Fabric": Fabric}


_layer = declarations(globals(), _declare, ("Fabric",))


def _ethernet_fcs(Ether) -> type:
    from scapy.fields import FCSField

    class EthernetFCS(Ether):
        """An Ethernet frame as it is on the wire and in captures: the MAC client frame, then the frame
        check sequence (IEEE 802.3 CRC-32 over the whole frame before it, least significant byte first;
        ``fcs=None`` computes it)."""

        name = "Ethernet+FCS"
        fields_desc = Ether.fields_desc + [FCSField("fcs", None, fmt="<I")]

        def post_build(self, pkt: bytes, pay: bytes) -> bytes:
            pkt += pay  # the FCS field's placeholder is the last 4 bytes of `pay`
            if self.fcs is None:
                pkt = pkt[:-FCS_LEN] + _FCS.pack(zlib.crc32(pkt[:-FCS_LEN]))
            return pkt

    EthernetFCS.__qualname__ = EthernetFCS.__name__
    EthernetFCS.__module__ = __name__
    return EthernetFCS


def _bind(Ether) -> None:
    """``EthernetFCS`` and the fabric header under both Ethernet layers, once scapy's exists
    (``emu.wire.l2``: the emulator itself never needs it); every declaration made first."""
    from scapy.packet import bind_layers

    global EthernetFCS
    declare()
    EthernetFCS = _ethernet_fcs(Ether)
    bind_layers(Ether, Fabric, type=ETHERTYPE_FABRIC)
    bind_layers(EthernetFCS, Fabric, type=ETHERTYPE_FABRIC)


when_ether(_bind)


def __getattr__(name: str):
    if name == "EthernetFCS":  # (made when scapy's Ether is imported: import it)
        ether()
        return globals()["EthernetFCS"]
    return _layer(name)


FCS_LEN = 4
FCS_RESIDUE = 0x2144DF1C
"""CRC-32 of a frame followed by its own (little-endian) CRC-32: one call checks a received frame."""
_FCS = struct.Struct("<I")


def add_fcs(frame: bytes) -> bytes:
    """The frame as it goes on the wire: ``frame`` + its CRC-32 (fast path of ``EthernetFCS``)."""
    return frame + _FCS.pack(zlib.crc32(frame))


def fcs_ok(wire: bytes) -> bool:
    """Does a received frame (FCS included) pass its frame check sequence?"""
    return zlib.crc32(wire) == FCS_RESIDUE

FABRIC = StructCodec.of("Fabric", "src:I dst:I vc:B prio:B ptype:B flags/8 hops:B rsvd:B length:H")
FABRIC_LEN = FABRIC.size        # 16
HDR_LEN = ETH_LEN + FABRIC_LEN  # 30: where the mechanism header starts
# offsets into the whole inner frame, for the hot path of switches
DST_OFF = ETH_LEN + 4
HOPS_OFF = ETH_LEN + 12
_ETH = struct.Struct("!6s6sH")


def node_mac(node_id: int) -> bytes:
    """Locally administered unicast MAC of a node: 02:00 followed by the 32-bit node id."""
    return b"\x02\x00" + node_id.to_bytes(4, "big")


def build_frame(src: int, dst: int, ptype: int, body: bytes, *, vc: int = 0, prio: int = 0,
                flags: int = 0, hops: int = 0) -> bytes:
    """Ethernet + fabric header + ``body`` (the mechanism header and its data), fast path."""
    dmac = BROADCAST_MAC if flags & FLAG_BCAST else node_mac(dst)
    return (_ETH.pack(dmac, node_mac(src), ETHERTYPE_FABRIC)
            + FABRIC.pack(src, dst, vc, prio, ptype, flags, hops, 0, len(body)) + body)


def parse_frame(frame: bytes) -> tuple[int, int, int, int, int, int, int, int, int]:
    """Check the Ethernet type and decode the fabric header; raise DecodeError if malformed.

    Returns the fabric header fields (src, dst, vc, prio, ptype, flags, hops, rsvd, length); the
    body starts at ``HDR_LEN`` and is exactly ``length`` bytes long.
    """
    if len(frame) < HDR_LEN:
        raise DecodeError(f"frame of {len(frame)} bytes is shorter than the {HDR_LEN}-byte headers")
    if frame[12] != ETHERTYPE_FABRIC >> 8 or frame[13] != ETHERTYPE_FABRIC & 0xFF:
        raise DecodeError(f"EtherType 0x{frame[12]:02x}{frame[13]:02x} is not the fabric's 0x{ETHERTYPE_FABRIC:04x}")
    f = FABRIC.unpack(frame, ETH_LEN)
    if f[8] != len(frame) - HDR_LEN:
        raise DecodeError(f"fabric length {f[8]} but {len(frame) - HDR_LEN} bytes follow the header")
    return f
