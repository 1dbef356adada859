"""The outer encapsulation: the emulator's own link layer, carried as the UDP payload.

Think of VXLAN: the inner frame (Ethernet + fabric headers) is what the model and the captures see;
this header is plumbing between element sockets. One UDP datagram carries one or more *records*, each
an ``EmuLink`` header followed by ``length`` bytes of inner frame, so that all the frames one port sends
to its peer within a synchronisation window can travel in one datagram. Batching is invisible to the
model: every record keeps its own sequence number and virtual time stamp.

Kinds:

* ``DATA``: ``seq`` is the per-link sequence number of the frame, ``ts_ns`` its virtual arrival time
  (last bit received at the far end of the link), ``length`` the inner frame length, ``window``
  the synchronisation window that sent it (mod 2**16): a domain counts, before each window, exactly
  the frames of earlier windows, whatever frames of the current one already arrived.
* ``NACK``: sent by a link's receiver back to its sender: "retransmit everything from ``seq`` on".
  ``ts_ns`` and ``length`` are zero.
* 3 is retired (it was ``DATA_NOFCS``, a frame sent without its FCS: frames on sockets keep it) and
  stays unassigned: a receiver counts a record of kind 3 as malformed, as any unknown kind.
* ``DATA_POOL``: as DATA, for a frame the sender placed in the receiver's shared buffer pool (with
  credit flow control the sender decides where a frame goes; the receiver must know to return the
  credit to the pool).

Recovery is by gap detection (go-back-N from the sender's retention buffer), not credits: the window
synchroniser already bounds what is in flight to what one port can serialise in one window.
"""

from __future__ import annotations

import enum
import hashlib

from .codec import StructCodec, declarations

MAGIC = 0xFAB1
VERSION = 1


class LinkKind(enum.IntEnum):
    DATA = 0
    NACK = 1
    DATA_POOL = 2
    """A DATA record whose frame the sender placed in the receiver's shared pool (credit flow control)."""
    # 3: retired (DATA_NOFCS), never to be reused -- an old datagram of that kind is refused as unknown


def _declare() -> dict:
    """scapy's declaration (the specification; ``OUTER`` is its layout)."""
    from scapy.fields import ByteEnumField, ByteField, IntField, LongField, ShortField, XIntField, XShortField
    from scapy.packet import Packet

    class EmuLink(Packet):
        name = "EmuLink"
        fields_desc = [
            XShortField("magic", MAGIC),
            ByteField("version", VERSION),
            ByteEnumField("kind", LinkKind.DATA, {k.value: k.name for k in LinkKind}),
            XIntField("cluster", 0),
            IntField("link", 0),
            IntField("seq", 0),
            LongField("ts_ns", 0),
            ShortField("length", None),
            ShortField("window", 0),
        ]

        def post_build(self, pkt: bytes, pay: bytes) -> bytes:
            if self.length is None:
                n = len(pay)
                pkt = pkt[:24] + n.to_bytes(2, "big") + pkt[26:]
            return pkt + pay

        def extract_padding(self, s: bytes):
            # the payload is exactly `length` bytes; what follows is the next record of the datagram
            return s[: self.length], s[self.length:]

    return {"EmuLink": EmuLink}


__getattr__ = declarations(globals(), _declare, ("EmuLink",))

OUTER = StructCodec.of("EmuLink", "magic:H version:B kind:B cluster:I link:I seq:I ts_ns:Q length:H window:H")
OUTER_LEN = OUTER.size  # 28


# -- the datagram tag (off loopback) ---------------------------------------------------------------
# On loopback only local processes can send to an element's socket, and the kernel tells who did:
# a link's records are accepted only from the socket at its other end. On a real network a host can
# forge that source address and port with a raw socket, so when the sockets are bound off loopback
# every datagram ends with a keyed tag, BLAKE2b (keyed with a key derived from the job's secret and
# the cluster id, 128 bits) of everything before it, checked before any record of it is read
# (BLAKE2b rather than BLAKE2s: 1.7 times as fast on 64-bit machines for 1 KiB and more). The secret
# is the MPI job key (``emu.mpi``) or the cluster secret worker processes receive on their standard
# input (``emu.control``); it never travels with the plan.

TAG_LEN = 16
"""Bytes of the tag at the end of every datagram off loopback (128 bits of BLAKE2b)."""


def tag_key(secret: bytes, cluster_id: int) -> bytes:
    """The key of one cluster's datagram tags: a run's tags are worth nothing in another run or as
    a control-message signature."""
    return hashlib.blake2b(b"emu datagram tag" + cluster_id.to_bytes(4, "big"), key=secret[:64],
                           digest_size=32).digest()


def tagger(key: bytes):
    """A function giving the tag of a datagram's bytes (what is sent is ``data + tag``); the keyed
    state is made once and copied for each datagram."""
    base = hashlib.blake2b(key=key, digest_size=TAG_LEN)

    def tag(data) -> bytes:
        h = base.copy()
        h.update(data)
        return h.digest()
    return tag


def datagram_tag(key: bytes, data) -> bytes:
    """The tag of ``data`` under ``key`` (see ``tagger``)."""
    return tagger(key)(data)
