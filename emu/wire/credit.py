"""Link-control frames: credits returned by a receiver's input buffer to the sender of the link.

Layout (network byte order)::

    Ethernet  dst 01:80:c2:00:00:01 (MAC control, never forwarded) src MAC of the sending node
              type(2)=0x88B6 (IEEE local experimental EtherType 2)
    Credit    vc(1) pool(1) frames(2) bytes(4): ``bytes`` of buffer space freed on ``vc`` (or in the
              port's shared pool when ``pool`` is 1); ``pool`` = 2 (STRETCH): sent the other way,
              sender to receiver, the packet on the line reaches the receiver ``bytes`` ns late from
              here on (a high-priority frame went into it at a segment boundary, ``emu.segcut``)

A credit travels on the reverse direction of the link it is for, as a frame of its own: it is
numbered, retransmitted and captured like data, but it takes no serialisation time (a side band, as
InfiniBand's flow-control packets ride between data packets) and it never enters a buffer.
"""

from __future__ import annotations

from . import fabric
from .codec import StructCodec, declarations, declare
from .fabric import ETH_LEN
from .l2 import when_ether

ETHERTYPE_CREDIT = 0x88B6
CREDIT_MAC = bytes.fromhex("0180c2000001")


def _declare() -> dict:
    """scapy's declaration (the specification; ``CREDIT`` is its layout)."""
    from scapy.fields import ByteField, IntField, ShortField
    from scapy.packet import Packet

    class LinkCredit(Packet):
        name = "LinkCredit"
        fields_desc = [
            ByteField("vc", 0),
            ByteField("pool", 0),
            ShortField("frames", 0),
            IntField("bytes", 0),
        ]

    return {"LinkCredit": LinkCredit}


__getattr__ = declarations(globals(), _declare, ("LinkCredit",))


def _bind(Ether) -> None:
    """Under both Ethernet layers, once scapy's exists (``emu.wire.l2``; after ``fabric``'s binding,
    which makes ``EthernetFCS``)."""
    from scapy.packet import bind_layers

    declare()
    bind_layers(Ether, LinkCredit, type=ETHERTYPE_CREDIT)
    bind_layers(fabric.EthernetFCS, LinkCredit, type=ETHERTYPE_CREDIT)


when_ether(_bind)

CREDIT = StructCodec.of("LinkCredit", "vc:B pool:B frames:H bytes:I")
CREDIT_FRAME_LEN = ETH_LEN + CREDIT.size


def build_credit(src_mac: bytes, vc: int, pool: bool, nbytes: int, frames: int = 0) -> bytes:
    """A credit frame (without its FCS; the port appends it). ``frames``: an input-queued router's
    count of the frames that left ``vc``'s queue with it (its sender's routers know which VCs hold
    none: where a high-priority frame waits behind nothing)."""
    return CREDIT_MAC + src_mac + ETHERTYPE_CREDIT.to_bytes(2, "big") + CREDIT.pack(vc, int(pool), frames, nbytes)


STRETCH = 2
"""The ``pool`` value of a stretch (see above)."""


def build_stretch(src_mac: bytes, ns: int) -> bytes:
    """A stretch frame (without its FCS): the packet on the line is ``ns`` late from here on."""
    return build_credit(src_mac, 0, STRETCH, ns)


def is_credit(frame: bytes) -> bool:
    return len(frame) >= CREDIT_FRAME_LEN and frame[12] == 0x88 and frame[13] == 0xB6
