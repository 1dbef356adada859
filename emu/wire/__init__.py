"""Wire declarations (scapy, the specification) and their fast codecs (the per-frame path).

The scapy declarations (``Fabric``, ``MsgSegment``, ...) are made when first asked for
(``emu.wire.codec.declarations``): a run of the emulator uses the codecs alone and never imports scapy."""

from .codec import DecodeError, StructCodec
from .fabric import (BROADCAST_MAC, DST_OFF, ETH_LEN, ETHERTYPE_FABRIC, FABRIC, FABRIC_LEN, FLAG_BCAST,
                     HDR_LEN, HOPS_OFF, FCS_LEN, PacketType, add_fcs, build_frame, fcs_ok,
                     node_mac, parse_frame)
from .coll import DESC, DESC_LEN, ErrBit, Head, RdType, RopCode
from .credit import CREDIT, ETHERTYPE_CREDIT, build_credit, is_credit
from .host import MACK, MSG, PING
from .outer import MAGIC, OUTER, OUTER_LEN, VERSION, LinkKind

__all__ = [
    "CREDIT", "ETHERTYPE_CREDIT", "LinkCredit", "build_credit", "is_credit",
    "BROADCAST_MAC", "CollDesc", "DESC", "DESC_LEN", "ErrBit", "Head", "RdType", "RopCode", "DST_OFF", "DecodeError", "ETH_LEN", "ETHERTYPE_FABRIC", "EmuLink", "EthernetFCS", "FABRIC",
    "FABRIC_LEN", "FCS_LEN", "FLAG_BCAST", "Fabric", "HDR_LEN", "HOPS_OFF", "LinkKind", "MACK", "MAGIC", "MSG",
    "MsgAck", "MsgSegment", "OUTER", "OUTER_LEN", "PING", "PacketType", "Ping", "StructCodec", "VERSION",
    "add_fcs", "build_frame", "fcs_ok", "node_mac", "parse_frame",
]


_LAYERS = {"EthernetFCS": "fabric", "Fabric": "fabric", "CollDesc": "coll", "LinkCredit": "credit",
           "MsgAck": "host", "MsgSegment": "host", "Ping": "host", "EmuLink": "outer"}
"""The declarations this package names, by module: made when first asked for (scapy imported then)."""


def __getattr__(name: str):
    if name in _LAYERS:  # (EthernetFCS: made when scapy's Ethernet layer is imported, emu.wire.l2)
        from . import coll, credit, fabric, host, outer

        return getattr({"coll": coll, "credit": credit, "fabric": fabric, "host": host, "outer": outer}[_LAYERS[name]],
                       name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
