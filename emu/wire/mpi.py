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

from .codec import StructCodec, declarations

P2P_TAG = 0xFF000000
"""Host tag of every point-to-point message of the library (collective algorithms tag theirs with
their communicator's id, 1..250, in the top byte: the two never meet)."""
KINDS = {0: "data", 1: "sync", 2: "ack", 3: "rts", 4: "cts", 5: "rdata", 6: "rma", 7: "rma_reply"}
"""data: a message; sync: a synchronous send's message (the receiver answers with an ack when it
matched it); ack: that answer (``seq``: the sync message's); rts: a rendezvous message's
request-to-send (its envelope, then :class:`MpiRendezvous`); cts: the receiver's clear-to-send
(``seq``: the rts's); rdata: the message's bytes after the cts (``seq``: the rts's); rma: a
one-sided request to the target's host (the envelope's ``context`` names the window, ``seq`` the
request; :class:`MpiRma` follows, then its byte positions and data); rma_reply: the target's answer
(``seq``: the request's; the bytes read, or nothing)."""
RTS_KIND, RMA_KIND = 3, 6
RMA_OPS = {0: "put", 1: "get", 2: "acc", 3: "get_acc", 4: "fop", 5: "cas", 6: "lock", 7: "unlock", 8: "post",
           9: "complete"}
"""One-sided operations (``MpiRma.op``): the data ones, then the synchronisation notices (lock:
``rop`` 1 exclusive, 2 shared; post and complete need no reply)."""


def _declare() -> dict:
    """scapy's declarations (the specification; the codecs below are their layouts)."""
    from scapy.fields import ByteEnumField, ByteField, IntField, LongField, SignedIntField
    from scapy.packet import Packet, bind_layers

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

    class MpiRma(Packet):
        """After the envelope of a one-sided request: what to do where in the target's window. The
        target's bytes are at ``disp`` times its displacement unit, then ``nbytes`` in a row, or
        ``npos`` 8-byte positions (a derived target datatype: each byte's place) follow; then the
        origin's data (put, accumulate: in the element type ``etype``, numpy's type string as 4 ASCII
        bytes; compare-and-swap: the value, then the one compared with)."""

        name = "MpiRma"
        fields_desc = [
            ByteEnumField("op", 0, RMA_OPS),
            ByteField("rop", 0),
            LongField("disp", 0),
            IntField("nbytes", 0),
            IntField("npos", 0),
            IntField("etype", 0),
        ]

    bind_layers(MpiEnvelope, MpiRendezvous, kind=RTS_KIND)
    bind_layers(MpiEnvelope, MpiRma, kind=RMA_KIND)
    return {"MpiEnvelope": MpiEnvelope, "MpiRendezvous": MpiRendezvous, "MpiRma": MpiRma}


__getattr__ = declarations(globals(), _declare, ("MpiEnvelope", "MpiRendezvous", "MpiRma"))

ENVELOPE = StructCodec.of("MpiEnvelope", "kind:B context:I source:i tag:i seq:I")
RENDEZVOUS = StructCodec.of("MpiRendezvous", "size:Q")
RMA = StructCodec.of("MpiRma", "op:B rop:B disp:Q nbytes:I npos:I etype:I")
