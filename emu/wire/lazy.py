"""Frames whose bytes are made when the port puts them on the line (issue 27: memory).

A sender that hands a long message to its port at once (the NIC: every frame of a message at the
same virtual time) would otherwise hold the whole message twice: in its buffer and cut into frames
in the port's queue. A :class:`LazyFrame` is a placeholder in that queue: its length and header
bytes are known at once (the port's timing and overtaking read nothing else), its bytes are made
from the sender's buffer -- the very bytes an eager sender would have built -- when the element
takes the frame off the queue to send it (``Element._transmit``), or earlier where something needs
the whole frame (a capture of a dropped frame, credit flow control, the engine test harness).

The *source* of a lazy frame (here :class:`emu.nodes.nic.outgoing.Outgoing`) answers
``frame_length(key)`` (no FCS), ``head(key)`` (the frame's leading header bytes), ``build_wire(key,
fcs)`` (its bytes, with its FCS if ``fcs``) and ``taken(key)`` (the frame is made: the source may
let go of that part of its buffer).
"""

from __future__ import annotations

from .fabric import FCS_LEN, add_fcs


class LazyFrame:
    """A MAC client frame made on demand: ``len()`` and the header bytes at once, the bytes by
    :meth:`make`. ``fcs``: the port asked for its frame check sequence (made with the bytes)."""

    __slots__ = ("source", "key", "fcs")

    def __init__(self, source, key: int):
        self.source = source
        self.key = key
        self.fcs = False

    def __len__(self) -> int:
        return self.source.frame_length(self.key) + (FCS_LEN if self.fcs else 0)

    def __getitem__(self, i):
        if i.__class__ is int:
            head = self.source.head(self.key)
            if 0 <= i < len(head):
                return head[i]
        return self.source.build_wire(self.key, self.fcs)[i]  # a slice, or past the headers: not taken

    def with_fcs(self) -> LazyFrame:
        """This frame as it goes on the line (a new placeholder: this one keeps its length): its
        FCS is added when its bytes are made."""
        wire = LazyFrame(self.source, self.key)
        wire.fcs = True
        return wire

    def make(self) -> bytes:
        """The frame's bytes (with its FCS if asked for); the source learns it is taken."""
        wire = self.source.build_wire(self.key, self.fcs)
        self.source.taken(self.key)
        return wire

    __bytes__ = make

    def __repr__(self) -> str:
        return f"LazyFrame({self.source!r}, {self.key}, fcs={self.fcs})"


def made(frame):
    """``frame`` as bytes: a :class:`LazyFrame` made now, anything else as it is."""
    return frame.make() if frame.__class__ is LazyFrame else frame


def with_fcs(frame):
    """``add_fcs`` for a frame that may be lazy (its FCS then comes with its bytes)."""
    return frame.with_fcs() if frame.__class__ is LazyFrame else add_fcs(frame)
