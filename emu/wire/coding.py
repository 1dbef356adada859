"""Network-coded broadcast of spec 02 on the wire: the coding header.

A 16-byte :class:`NcHeader` (ptype NC), then the payload: one packet's data (PLAIN), the XOR of two
sources' data (XOR), or ``parts`` packets concatenated (CONCAT, message combining). Field widths are
ours:

    step(8) level(4) kind(4) group(16) a(16) b(16) root(16) parts(16) stamp(32)

``step`` is spec 02's letter (B intra-group broadcast, D inter-IN multicast, E intra-group delivery,
F inter-group unicast; 0 a baseline's unicast); ``level`` the recursion level of the scheme that
made it; ``group`` the group of its sources; ``a`` and ``b`` the sources whose XOR the payload
carries (``a == b``: plain data of ``a``; a chain's i-th packet is ``(s_i, s_i+1)``); ``root`` the node
whose multicast the frame belongs to (a relay of the tree keeps it); ``parts`` the packets of a
CONCAT message. ``stamp`` is emulator telemetry, not a field a router needs: the virtual time (ns,
modulo 2**32) the multicast left its root, from which receivers measure a packet's phase latency.
"""

from __future__ import annotations

import enum

from .codec import StructCodec, declarations


class NcKind(enum.IntEnum):
    PLAIN = 0
    XOR = 1
    CONCAT = 2


NC_STEPS = {0: "BASE", 1: "B", 2: "D", 3: "E", 4: "F"}


def _declare() -> dict:
    """scapy's declaration (the specification; ``NC`` is its layout)."""
    from scapy.fields import BitEnumField, BitField, ByteEnumField, IntField, ShortField
    from scapy.packet import Packet

    class NcHeader(Packet):
        name = "NcCoded"
        fields_desc = [
            ByteEnumField("step", 1, NC_STEPS),
            BitField("level", 0, 4),
            BitEnumField("kind", 0, 4, {k.value: k.name for k in NcKind}),
            ShortField("group", 0),
            ShortField("a", 0),
            ShortField("b", 0),
            ShortField("root", 0),
            ShortField("parts", 1),
            IntField("stamp", 0),
        ]

    return {"NcHeader": NcHeader}


__getattr__ = declarations(globals(), _declare, ("NcHeader",))

NC = StructCodec.of("NcHeader", "step:B level/4 kind/4 group:H a:H b:H root:H parts:H stamp:I")
NC_LEN = NC.size
assert NC_LEN == 16
