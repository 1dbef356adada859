"""The envelope of ``emu mpirun``'s point-to-point messages (``emu.front.mpiserve``).

A point-to-point message of the emulated MPI library is one host message (``MsgSegment`` frames)
of tag ``P2P_TAG`` whose data starts with this envelope, then the message's bytes. In a capture:
``hpcemu.msg.tag == 0xff000000``, the envelope at the start of the segment of offset 0.
"""

from __future__ import annotations

from scapy.fields import ByteEnumField, IntField, SignedIntField
from scapy.packet import Packet

from .codec import StructCodec

P2P_TAG = 0xFF000000
"""Host tag of every point-to-point message of the library (collective algorithms tag theirs with
their communicator's id, 1..250, in the top byte: the two never meet)."""
KINDS = {0: "data", 1: "sync", 2: "ack"}
"""data: a message; sync: a synchronous send's message (the receiver answers with an ack when it
matched it); ack: that answer (``seq``: the sync message's)."""


class MpiEnvelope(Packet):
    """Who sent a message to whom, in which communicator, with which tag; ``seq`` numbers the
    messages of a pair of ranks (MPI's non-overtaking rule, whatever the routing)."""

    name = "MpiEnvelope"
    fields_desc = [
        ByteEnumField("kind", 0, KINDS),
        IntField("context", 0),
        SignedIntField("source", 0),
        SignedIntField("tag", 0),
        IntField("seq", 0),
    ]


ENVELOPE = StructCodec(MpiEnvelope)
