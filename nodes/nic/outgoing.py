"""A host message on its way out: its frames made from the sender's buffer as the port takes them.

The NIC hands every frame of a message to its port at the same virtual time (``nic_delay_ns``
after it took the message); the port's timing, queue figures and overtaking read only the frames'
lengths and header bytes. So a long message (``NicEngine.lazy_bytes`` and over) goes to the port as
:class:`emu.wire.lazy.LazyFrame` placeholders, and each frame's bytes -- Ethernet, fabric and
segment headers, then its slice of the message -- are made when the element puts it on the line:
the same bytes, made later, and at any moment only the frames of about one synchronisation window
exist as bytes instead of the whole message a second time.

Send completion (as MPI_Isend's request): the NIC reads the sender's buffer until the last frame is
made. :attr:`Outgoing.done` says whether it still does; :meth:`Outgoing.release` hands the buffer
back at once -- what is not yet made is copied into the NIC's own memory first (a bounce buffer), so
a sender that wants its buffer back early never sees a wrong frame. In virtual time nothing
changes: the NIC takes the message when it always did (the host API's ``send``/``isend`` cost the
same), and neither ``release`` nor ``HostAPI.wait`` takes any.
"""

from __future__ import annotations

from emu.wire import FABRIC, FCS_LEN, HDR_LEN, MSG, PacketType, add_fcs
from emu.wire.lazy import LazyFrame

_MSG_LEN = MSG.size
_FAB = FABRIC.struct.pack
_HEAD_LEN = HDR_LEN + _MSG_LEN


class Outgoing:
    """One message cut into lazy frames (keys: the frames' offsets into the message)."""

    __slots__ = ("eth", "me", "dst", "vc", "msg_id", "tag", "total", "mtu", "data", "base", "left", "low",
                 "_heads", "copied", "flags", "rsvd", "prio")

    def __init__(self, eth: bytes, me: int, dst: int, vc: int, msg_id: int, tag: int, data, mtu: int,
                 flags: int = 0, rsvd: int = 0, prio: int = 0):
        self.eth, self.me, self.dst, self.vc, self.msg_id, self.tag = eth, me, dst, vc, msg_id, tag
        self.flags, self.rsvd, self.prio = flags, rsvd, prio
        """The fabric header's flags and rsvd byte (a resend's source route: SRCRT and its route id)."""
        self.total = len(data)
        self.mtu = mtu
        self.data = data
        """The sender's buffer (bytes, or a memoryview of the application's array), None once done."""
        self.base = 0
        """Offset into the message of ``data[0]`` (a bounce buffer holds the tail only)."""
        self.left = -(-self.total // mtu)
        """Frames not made yet."""
        self.low = 0
        """Every frame below this offset is made (frames are made in order, as the port sends them)."""
        self._heads: dict[int, bytes] = {}
        self.copied = 0
        """Bytes copied into a bounce buffer by :meth:`release` (0: the frames came from the sender's buffer)."""

    def frames(self) -> list[LazyFrame]:
        return [LazyFrame(self, off) for off in range(0, self.total, self.mtu)]

    # -- the lazy-frame source (emu.wire.lazy) ----------------------------------------------------
    def frame_length(self, off: int) -> int:
        return _HEAD_LEN + min(self.mtu, self.total - off)

    def head(self, off: int) -> bytes:
        """Ethernet and fabric headers of the frame at ``off`` (the same for every full frame)."""
        n = min(self.mtu, self.total - off)
        h = self._heads.get(n)
        if h is None:
            h = self._heads[n] = self.eth + _FAB(self.me, self.dst, self.vc, self.prio, PacketType.MSG, self.flags, 0, self.rsvd,
                                           _MSG_LEN + n)
        return h

    def build_wire(self, off: int, fcs: bool) -> bytes:
        if self.data is None:
            raise RuntimeError(f"frame at {off} of message {self.msg_id} made twice")
        n = min(self.mtu, self.total - off)
        i = off - self.base
        frame = b"".join((self.head(off), MSG.pack(self.msg_id, self.tag, self.total, off), self.data[i:i + n]))
        return add_fcs(frame) if fcs else frame

    def taken(self, off: int) -> None:
        self.left -= 1
        if off <= self.low:  # (out of order, ``low`` stays: a bounce buffer then copies a little more)
            self.low = max(self.low, off + self.mtu)
        if self.left <= 0:
            self.data = None  # every frame is made: the sender's buffer is free

    # -- send completion --------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Every frame is made: the NIC no longer reads the sender's buffer."""
        return self.data is None

    def release(self) -> None:
        """Give the sender its buffer back now: the part not yet made goes into a bounce buffer."""
        data = self.data
        if data is None or data.__class__ is bytes:  # done, or immutable: nothing can change under us
            return
        i = self.low - self.base
        self.data = bytes(data[i:])
        self.copied += len(self.data)
        self.base = self.low

    def __repr__(self) -> str:
        return f"Outgoing(msg {self.msg_id} to {self.dst}, {self.total} bytes, {self.left} frames to make)"
