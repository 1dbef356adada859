"""The queue pair (:class:`Flow`) of the segment transport (:mod:`emu.nodes.nic.cc.base`) at the sender,
its messages (:class:`_Msg`), and a receiver's state for one sender (:class:`_Rx`)."""

from __future__ import annotations

from collections import deque
from typing import Any


class _Msg:
    __slots__ = ("msg_id", "tag", "data", "vc", "ready_ns", "start", "span", "prio")

    def __init__(self, msg_id: int, tag: int, data: bytes, vc: int, ready_ns: int, start: int, prio: int = 0):
        self.msg_id, self.tag, self.data, self.vc, self.ready_ns, self.start = msg_id, tag, data, vc, ready_ns, start
        self.prio = prio
        self.span = len(data) or 1
        """Sequence numbers the message takes (an empty message: one, its one empty segment)."""


class Flow:
    """One peer's queue pair at the sender."""

    def __init__(self, dst: int, port: int):
        self.dst, self.port = dst, port
        self.msgs: deque[_Msg] = deque()
        """Messages not yet wholly acknowledged, in order."""
        self.by_id: dict[int, _Msg] = {}
        self.end = 0
        """Sequence number after the last message queued."""
        self.una = 0
        """Everything below is acknowledged."""
        self.nxt = 0
        """The next new segment's sequence number (go-back-N moves it back)."""
        self.high = 0
        """Highest sequence number sent + 1 (a segment below it is a resend)."""
        self.out: dict[int, list] = {}
        """Sequence number -> [msg, offset, seq length, handed-over ns, resend?, in flight?] of segments out,
        unacknowledged (a timeout counts them out of flight: lost)."""
        self.retx: deque[int] = deque()
        """Selective repeat: sequence numbers to send again."""
        self.inflight = 0
        self.next_ns = 0
        """Pacing: no segment before this."""
        self.pump_at: int | None = None
        """When the pending pump timer fires (None: none pending)."""
        self.pump_timer: int | None = None
        self.last_t = self.last_wire = 0
        """The last segment's hand-over time and wire bytes (a new rate re-spaces the next one from them)."""
        self.cur: _Msg | None = None
        """The message the last new segment came from."""
        self.timer: int | None = None
        self.tries = 0
        self.rate: float | None = None
        """Bits per second the flow is paced at (None: the line rate)."""
        self.cwnd: float | None = None
        """Bytes it may have unacknowledged (None: no window)."""
        self.cc: Any = None
        """The algorithm's own state."""

    def idle(self) -> bool:
        return not self.msgs


class _Rx:
    """A receiver's state for one sender."""

    __slots__ = ("exp_id", "exp_off", "nack_key", "nack_until", "cc")

    def __init__(self):
        self.exp_id = self.exp_off = 0
        self.nack_key, self.nack_until, self.cc = None, 0, None
