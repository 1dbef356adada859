"""Output and input port state of an element (sans-I/O).

An output port is a FIFO with a line rate: a frame handed to it at virtual time ``at`` starts to leave
at ``start = max(at, free)``, occupies the port for ``ceil(8 * bytes / rate)`` ns and arrives at the
peer one latency after its last bit left: ``arrival = start + serialisation + latency``. The frame is
put on the socket in the synchronisation window that ends less than one lookahead before its arrival
(see ``Element.run_window``), so what is in flight between two elements is bounded by what the port
can serialise in one lookahead.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .wire.fabric import add_fcs


class Timeline:
    """A link direction's scheduled changes (``Cluster.schedule``): up/down and bit-error rate over
    virtual time. Both ends hold the same timeline, so the sender knows whether a port takes a
    frame at hand-off and the receiver whether a frame was on the wire while the link was down."""

    __slots__ = ("ups", "bers")

    def __init__(self) -> None:
        self.ups: list[tuple[int, bool]] = []
        """(time, up) changes, sorted by time (a later change at the same time wins)."""
        self.bers: list[tuple[int, float]] = []
        """(time, bit-error rate) changes, sorted by time."""

    def add_state(self, t: int, up: bool) -> None:
        bisect.insort(self.ups, (t, up), key=lambda c: c[0])

    def add_ber(self, t: int, ber: float) -> None:
        bisect.insort(self.bers, (t, ber), key=lambda c: c[0])

    def up_at(self, t: int, base: bool = True) -> bool:
        i = bisect.bisect_right(self.ups, t, key=lambda c: c[0])
        return self.ups[i - 1][1] if i else base

    def down_during(self, start: int, end: int) -> bool:
        """Was the link down at any instant of ``[start, end]``?"""
        if not self.up_at(start):
            return True
        i = bisect.bisect_right(self.ups, start, key=lambda c: c[0])
        return any(not up for t, up in self.ups[i:] if t <= end)

    def ber_at(self, t: int) -> float:
        i = bisect.bisect_right(self.bers, t, key=lambda c: c[0])
        return self.bers[i - 1][1] if i else 0.0


def frame_error_probability(ber: float, nbytes: int) -> float:
    """Probability that a frame of ``nbytes`` has at least one bit flipped at bit-error rate ``ber``."""
    return -math.expm1(8 * nbytes * math.log1p(-ber)) if ber < 1 else 1.0


@dataclass(eq=False)
class OutPort:
    index: int
    name: str
    """Capture interface name, e.g. ``s0-p3``."""
    iface: int
    """Capture interface number (global, deterministic)."""
    link_id: int
    """Id of this direction of the link; carried in every outer header."""
    peer: str
    peer_port_name: str
    latency_ns: int
    bandwidth_bps: int
    peer_domain: int = 0
    peer_addr: tuple[str, int] | None = None
    free_at: int = 0
    pending: deque = field(default_factory=deque)
    """(start, arrival, frame with its FCS) waiting for the window that contains ``start``."""
    queued: deque = field(default_factory=deque)
    """(done, nbytes) of frames handed to the port whose last bit has not left yet (occupancy)."""
    queued_bytes: int = 0
    link: Any = None
    """The sending end of the link layer (``emu.link.LinkSender``: sequence numbers, retention)."""
    up: bool = True
    """A link taken down (``Cluster.link_down``) drops what is handed to it, counted and captured."""
    dropped: int = 0
    fault_drop: float = 0.0
    """Probability that a frame leaving this port is lost on the wire (an emulated fault)."""
    fault_corrupt: float = 0.0
    """Probability that a frame arrives with one bit flipped (an emulated fault)."""
    fault_rng: Any = None
    """The seeded generator of this port's faults (draws in frame order: deterministic)."""
    fault_dropped: int = 0
    fault_corrupted: int = 0
    timeline: Timeline | None = None
    """Scheduled changes of this link direction (shared with the receiving end), or None."""
    tx_frames: int = 0
    tx_bytes: int = 0
    peak_queue_frames: int = 0
    peak_queue_bytes: int = 0

    def queue_at(self, now: int) -> tuple[int, int]:
        """(frames, bytes) handed to this port whose last bit has not left by ``now``."""
        frames = nbytes = 0
        for done, n in self.queued:
            if done > now:
                frames += 1
                nbytes += n
        return frames, nbytes

    def enqueue(self, frame: bytes, at: int) -> None:
        """Hand ``frame`` (a MAC client frame) to the port at virtual time ``at``; the port appends
        its frame check sequence, which takes its time on the wire like every other byte."""
        frame = add_fcs(frame)
        n = len(frame)
        start = at if at > self.free_at else self.free_at
        done = start + -((-n * 8_000_000_000) // self.bandwidth_bps)
        self.free_at = done
        q = self.queued
        while q and q[0][0] <= at:
            self.queued_bytes -= q.popleft()[1]
        q.append((done, n))
        self.queued_bytes += n
        if len(q) > self.peak_queue_frames:
            self.peak_queue_frames = len(q)
        if self.queued_bytes > self.peak_queue_bytes:
            self.peak_queue_bytes = self.queued_bytes
        self.pending.append((start, done + self.latency_ns, frame))


@dataclass(eq=False)
class InPort:
    index: int
    name: str
    iface: int
    link_id: int
    peer: str
    peer_port_name: str
    peer_domain: int = 0
    peer_addr: tuple[str, int] | None = None
    link: Any = None
    """The receiving end of the link layer (``emu.link.LinkReceiver``: expected sequence number)."""
    latency_ns: int = 0
    bandwidth_bps: int = 1
    timeline: Timeline | None = None
    """Scheduled changes of this link direction (the same as the sending end's), or None."""
    lost_in_flight: int = 0
    """Frames that were on the wire while the link was down (scheduled): lost, counted here."""
    rx_frames: int = 0
    rx_bytes: int = 0
    fcs_errors: int = 0
    """Frames received with a bad frame check sequence (corrupted on the wire), dropped here."""
