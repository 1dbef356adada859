"""The envelope of ``emu mpirun``'s point-to-point messages (``emu.front.mpiserve``).

A point-to-point message of the emulated MPI library is one host message (``MsgSegment`` frames)
of tag ``P2P_TAG`` whose data starts with this envelope, then the message's bytes. In a capture:
``hpcemu.msg.tag == 0xff000000``, the envelope at the start of the segment of offset 0.

Eager and rendezvous (``HostSpec.eager_limit_bytes``): a message of at most that many bytes goes
at once (``data``, or ``sync`` for a synchronous send); a longer one is announced by a
request-to-send (``rts``: the envelope and a :class:`MpiRendezvous` with its size, nothing else),
the receiver answers clear-to-send (``cts``) once a receive matched it, and only then do its bytes
go (``rdata``). ``ack``, ``cts`` and ``rdata`` name the message they answer by its ``seq``; they
take no sequence number of their own.
"""

from __future__ import annotations

from scapy.fields import ByteEnumField, IntField, LongField, SignedIntField
from scapy.packet import Packet, bind_layers

from .codec import StructCodec

P2P_TAG = 0xFF000000
"""Host tag of every point-to-point message of the library (collective algorithms tag theirs with
their communicator's id, 1..250, in the top byte: the two never meet)."""
KINDS = {0: "data", 1: "sync", 2: "ack", 3: "rts", 4: "cts", 5: "rdata"}
"""data: a message; sync: a synchronous send's message (the receiver answers with an ack when it
matched it); ack: that answer (``seq``: the sync message's); rts: a rendezvous message's
request-to-send (its envelope, then :class:`MpiRendezvous`); cts: the receiver's clear-to-send
(``seq``: the rts's); rdata: the message's bytes after the cts (``seq``: the rts's)."""
RTS_KIND = 3


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


class MpiRendezvous(Packet):
    """After the envelope of a request-to-send: the size of the message it announces (bytes), what
    a probe of it reports before any of its bytes moved."""

    name = "MpiRendezvous"
    fields_desc = [LongField("size", 0)]


bind_layers(MpiEnvelope, MpiRendezvous, kind=RTS_KIND)

ENVELOPE = StructCodec(MpiEnvelope)
RENDEZVOUS = StructCodec(MpiRendezvous)
