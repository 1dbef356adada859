"""The emulator's link layer, sans-I/O (DESIGN.md principle 1): what keeps a link lossless.

Each link direction has a :class:`LinkSender` at its output port and a :class:`LinkReceiver` at its
input port. The sender numbers every frame (a per-link sequence number in the outer ``EmuLink``
record), batches the records of one window into datagrams of at most ``MAX_DATAGRAM`` bytes, and
keeps each datagram until every receiver is known to have it (two windows later, see ``emu.sync``).
A datagram is one bytes object, each record's 28-byte outer header then the frame: the frame is
copied into it once (in the compiled core, into the buffer of a datagram let go before, so that
neither a header of its own nor a list of parts is made per record, and the frame's own buffer is
free for a frame received). The receiver accepts records
strictly in sequence: a record past the one it expects reveals a lost datagram and is answered with
one NACK ("go back to ``expected``"), which the sender answers by resending every retained datagram
from there on; a record before it is a duplicate. Neither touches a socket or a clock: the element
driver (``emu.element``) hands them what it read and sends what they return, and the tests drive
them directly.
"""

from __future__ import annotations

import struct
from collections import deque

from .wire.lazy import LazyFrame
from .wire.outer import MAGIC, OUTER, OUTER_LEN, VERSION, LinkKind

SEQ_MASK = 0xFFFFFFFF
MAX_DATAGRAM = 60_000
"""Records are batched into one datagram up to this size (UDP allows 65,507 over IPv4). Off loopback
the keyed tag (``emu.wire.outer.TAG_LEN``) follows the records, uncounted here: the room left is for it."""
_SEQ_TS_LEN = struct.Struct("!IQHH")  # the outer header after its 12-byte prefix: seq, ts, length, window

_NEVER = 1 << 63
"""A release time no arrival reaches (:meth:`LinkSender.datagrams` takes every frame it is given)."""

ACCEPT, GAP, DUPLICATE = 0, 1, 2
"""What a receiver makes of a record's sequence number."""


class LinkSender:
    """The sending end of one link direction."""

    __slots__ = ("link_id", "seq", "retained", "prefix", "prefix_pool")

    def __init__(self, cluster_id: int, link_id: int):
        self.link_id = link_id
        self.seq = 0
        """Sequence number of the next record."""
        self.retained: list[tuple[int, int, int, bytes]] = []
        """(window, first_seq, last_seq, datagram) kept for retransmission, oldest first. (A list: a
        link keeps the datagrams of two or three windows, a handful, and the core appends and cuts it
        without a method call.)"""
        self.prefix = OUTER.pack(MAGIC, VERSION, LinkKind.DATA, cluster_id, link_id, 0, 0, 0, 0)[:12]
        """The constant first 12 bytes of this link's DATA records (magic .. link id)."""
        self.prefix_pool = OUTER.pack(MAGIC, VERSION, LinkKind.DATA_POOL, cluster_id, link_id, 0, 0, 0, 0)[:12]

    def datagrams(self, frames: list[tuple[int, bytes, bool]], window: int) -> list[bytes]:
        """DATA records for ``frames`` ((virtual arrival ns, frame with its FCS, pool) in sending
        order; pool: true for a frame in the receiver's pool, a DATA_POOL record), numbered in sequence
        and batched into datagrams of at most ``MAX_DATAGRAM`` bytes (joined); each is retained."""
        return self.take(deque((0, a, f, pool) for a, f, pool in frames), _NEVER, window)[0]

    def take(self, pend, release: int, window: int) -> tuple[list[bytes], int, int, int]:
        """:meth:`datagrams` straight from an output port's queue ``pend`` ((start, arrival, frame,
        pool) in order): every frame arriving before ``release`` leaves it as a record (the socket
        path's common case: no fault, no capture, no credits on the port), each record's 28-byte
        outer header then its frame, in datagrams of at most ``MAX_DATAGRAM`` bytes; each is retained.
        Returns (datagrams, frames, their bytes as the frames' lengths, last arrival)."""
        out: list[bytes] = []
        pack = _SEQ_TS_LEN.pack
        prefix = self.prefix
        prefix_pool = self.prefix_pool
        w16 = window & 0xFFFF
        first = seq = self.seq
        parts: list[bytes] = []
        size = nbytes = 0
        popleft = pend.popleft
        arrival = 0
        while pend and pend[0][1] < release:
            _, arrival, frame, pool = popleft()
            if frame.__class__ is LazyFrame:  # made from its sender's buffer now (emu.wire.lazy)
                frame = frame.make()
            if frame.__class__ is not bytes:
                frame = bytes(frame)
            n = len(frame)
            if size + OUTER_LEN + n > MAX_DATAGRAM and parts:
                out.append(self._keep(window, first, seq, parts))
                parts = []
                size = 0
                first = seq
            parts += ((prefix_pool if pool else prefix) + pack(seq, arrival, n, w16), frame)
            size += OUTER_LEN + n
            nbytes += n
            seq = (seq + 1) & SEQ_MASK
        if parts:
            out.append(self._keep(window, first, seq, parts))
        k = (seq - self.seq) & SEQ_MASK
        self.seq = seq
        return out, k, nbytes, arrival

    def _keep(self, window: int, first: int, end_seq: int, parts: list[bytes]) -> bytes:
        dgram = b"".join(parts)
        self.retained.append((window, first, (end_seq - 1) & SEQ_MASK, dgram))
        return dgram

    def go_back(self, from_seq: int) -> list[bytes]:
        """The retained datagrams holding a record at or after ``from_seq`` (answer to a NACK)."""
        return [d for _, _, last, d in self.retained if ((last - from_seq) & SEQ_MASK) < 0x80000000]

    def forget(self, upto_window: int) -> None:
        """Drop retained datagrams of windows <= ``upto_window``: every receiver has them."""
        r = self.retained
        k = 0
        while k < len(r) and r[k][0] <= upto_window:
            k += 1
        if k:
            del r[:k]


class LinkReceiver:
    """The receiving end of one link direction."""

    __slots__ = ("link_id", "expected", "nacked", "_nack")

    def __init__(self, cluster_id: int, link_id: int):
        self.link_id = link_id
        self.expected = 0
        """Next sequence number this end accepts; anything else is a gap or a duplicate."""
        self.nacked = -1
        """``expected`` at the last NACK, so that one gap asks for retransmission once."""
        self._nack = OUTER.struct.pack(MAGIC, VERSION, LinkKind.NACK, cluster_id, link_id, 0, 0, 0, 0)

    def classify(self, seq: int) -> int:
        """ACCEPT (and expect the next one), GAP (a record before this one is missing) or DUPLICATE."""
        d = (seq - self.expected) & SEQ_MASK
        if d == 0:
            self.expected = (seq + 1) & SEQ_MASK
            return ACCEPT
        return GAP if d < 0x80000000 else DUPLICATE

    @property
    def gap_reported(self) -> bool:
        """Was a NACK already sent for the record now expected?"""
        return self.nacked == self.expected

    def nack(self) -> bytes:
        """The NACK record asking the sender to go back to ``expected``."""
        self.nacked = self.expected
        return self._nack[:12] + self.expected.to_bytes(4, "big") + self._nack[16:]
