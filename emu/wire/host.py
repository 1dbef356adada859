"""Headers of the minimal host API: message segments, their acknowledgements, and echo (ping)."""

from __future__ import annotations

from .codec import StructCodec, declarations
from .fabric import PacketType


def _declare() -> dict:
    """scapy's declarations (the specification; the codecs below are their layouts)."""
    from scapy.fields import IntField, LongField
    from scapy.packet import Packet, bind_layers

    from .fabric import Fabric

    class MsgSegment(Packet):
        """One frame of a host-to-host message: ``total`` bytes in all, this frame's data at ``offset``."""

        name = "MsgSegment"
        fields_desc = [
            IntField("msg_id", 0),
            IntField("tag", 0),
            IntField("total", 0),
            IntField("offset", 0),
        ]

    class MsgAck(Packet):
        """A whole message received (``host.transport=reliable``): the receiver acknowledges message
        ``msg_id`` of ``total`` bytes to its sender, which stops resending it. Under a congestion control
        (``host.cc``, ``emu.nodes.nic.cc``) one answers each segment and ``total`` is the end offset it
        acknowledges: cumulative under go-back-N (the message's total once whole), that segment's end
        under selective repeat; an INT stack (fabric flag INT) may precede it, echoed from the segment."""

        name = "MsgAck"
        fields_desc = [
            IntField("msg_id", 0),
            IntField("total", 0),
        ]

    class Ping(Packet):
        """Echo request/reply: the reply copies ``ident``, ``seq`` and the sender's ``t_sent_ns``."""

        name = "Ping"
        fields_desc = [
            IntField("ident", 0),
            IntField("seq", 0),
            LongField("t_sent_ns", 0),
        ]

    bind_layers(Fabric, MsgSegment, ptype=PacketType.MSG)
    bind_layers(Fabric, MsgAck, ptype=PacketType.MACK)
    bind_layers(Fabric, Ping, ptype=PacketType.PING)
    bind_layers(Fabric, Ping, ptype=PacketType.PONG)
    return {"MsgSegment": MsgSegment, "MsgAck": MsgAck, "Ping": Ping}


__getattr__ = declarations(globals(), _declare, ("MsgSegment", "MsgAck", "Ping"))

MSG = StructCodec.of("MsgSegment", "msg_id:I tag:I total:I offset:I")
MACK = StructCodec.of("MsgAck", "msg_id:I total:I")
PING = StructCodec.of("Ping", "ident:I seq:I t_sent_ns:Q")
