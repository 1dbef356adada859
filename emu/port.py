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

from .buffers import VC_OFF, BufferState, CreditState
from .segcut import cut_in, cut_point
from .wire.fabric import DST_OFF, FLAG_POOL, FLAGS_OFF, PacketType, add_fcs
from .wire.framing import ETHERNET, Framing
from .wire.lazy import LazyFrame, made, with_fcs

PRIO_OFF, PTYPE_OFF = DST_OFF + 5, DST_OFF + 6
"""The fabric header's prio and ptype bytes."""
_QPKT = int(PacketType.QPKT)
SEG_BYTES, FIRST_SEG_END = 256, 14 + 16 + 256
"""QsNet packets (spec 03) go out in 256-byte segments: the first ends 286 bytes into the frame on the
socket (Ethernet and fabric envelope, then an 8-byte header and 248 bytes), the next every 256 bytes;
on the modelled wire, where the link's framing says (``Framing.qs_first_end``)."""


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


FCS_BYTES = 4
"""Length of the frame check sequence every frame carries on the line."""


def frame_error_probability(ber: float, nbytes: int) -> float:
    """Probability that a frame of ``nbytes`` has at least one bit flipped at bit-error rate ``ber``."""
    return -math.expm1(8 * nbytes * math.log1p(-ber)) if ber < 1 else 1.0


@dataclass(eq=False, slots=True)
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
    """(start, arrival, frame with its FCS, pool) waiting for the window that contains ``start``
    (without its FCS while ``defer_fcs``)."""
    ser_ns: dict = field(default_factory=dict)
    """Time on the line (ns) by frame length (FCS included), as computed so far."""
    defer_fcs: bool = False
    """The frames' FCS is left off until something could see it: set for a link to an element of
    this process when nothing is captured (the receiver takes the frame unchecked, see
    ``CLEAN``); a fault or an overtaking frame on the port puts every FCS back and ends it. Lengths,
    times and figures count the FCS all the same."""
    queued: deque = field(default_factory=deque)
    """(done, nbytes) of frames handed to the port whose last bit has not left yet (occupancy)."""
    queued_bytes: int = 0
    link: Any = None
    local: Any = None
    """The peer's (element, input port) when it lives in this process and frames go to it directly
    (``RunConfig.direct=True``, ``--direct``), else None: real UDP datagrams (the default)."""
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
    flow: CreditState | None = None
    """Credit flow control, when the receiving end has finite buffers (else None: unbounded)."""
    ctl: deque = field(default_factory=deque)
    """(start, arrival, frame, False) of link-control frames (credits) to send: no serialisation."""
    priority: bool = True
    """High-priority frames overtake (``LinkSpec.priority``)."""
    sent_done: int = 0
    """When the last frame already handed to the socket is off the line (set by the element)."""
    overtakes: int = 0
    """High-priority frames that went ahead of priority-0 ones here."""
    tx_frames: int = 0
    tx_bytes: int = 0
    peak_queue_frames: int = 0
    peak_queue_bytes: int = 0
    busy_ns: int = 0
    """Virtual time the port spent sending (the sum of its frames' times on the line)."""
    tracer: Any = None
    """This port's counter tracks (``emu.trace.PortTrace``) when the run is traced, else None."""
    wake_at: int = -1
    """With credit flow control: the latest time a port event to start frames was asked for (one
    due later than ``now`` and no later than a new need covers it: no second event)."""
    head_bytes: int = 0
    """Into an input-queued router: the receiver takes a frame when its first ``head_bytes`` (its
    head flit) are in, so a frame's arrival is its start + their time on the line + the latency;
    0: when its last bit is in."""
    framing: Framing = ETHERNET
    """The link's framing: a frame's time on the line is that of its modelled length
    (:meth:`modelled_length`), not of the bytes on the socket."""
    line: list | None = None
    """With ``head_bytes``: the frame on the line, [start, done, modelled bytes, cuttable]
    (``emu.segcut``)."""
    stretch_out: Any = None
    """``stretch_out(port, at, d)``: the element tells the receiver that the packet on the line is
    ``d`` ns late from ``at`` on (set by ``emu.element.Element`` on ports with ``head_bytes``)."""

    def modelled_length(self, frame) -> int:
        """The modelled length of MAC client frame ``frame`` (no FCS) on this link."""
        return self.framing.length(frame)

    def queue_at(self, now: int) -> tuple[int, int]:
        """(frames, bytes) handed to this port whose last bit has not left by ``now``."""
        frames = nbytes = 0
        for done, n in self.queued:
            if done > now:
                frames += 1
                nbytes += n
        return frames, nbytes

    def enqueue(self, frame: bytes, at: int) -> int:
        """Hand ``frame`` (a MAC client frame) to the port at virtual time ``at``; the port appends
        its frame check sequence, which takes its time on the wire like every other byte. Returns
        when the frame starts to leave.

        A frame of priority > 0 (fabric header ``prio``) overtakes the priority-0 frames waiting
        at the port, and a priority-0 QsNet packet on the line at a segment boundary (the packet's
        remaining segments follow it): :meth:`_overtake`. Frames already on the socket are never
        moved."""
        if self.tracer is not None:  # the one test the untraced hot path pays for tracing
            return self._enqueue_traced(frame, at)
        fr = self.framing
        n = len(frame) + FCS_BYTES if fr.plain else fr.length(frame)
        if not self.defer_fcs:  # (a lazy frame gets its FCS when its bytes are made: emu.wire.lazy)
            frame = add_fcs(frame) if frame.__class__ is not LazyFrame else frame.with_fcs()
        free = self.free_at
        if free > at and self.priority and len(frame) > PRIO_OFF and frame[PRIO_OFF]:
            if self.head_bytes:  # into an input-queued router: into the packet on the line (emu.segcut)
                start = cut_in(self, frame, at, n)
                if start is not None:
                    return start
            elif self.pending:
                if self.defer_fcs:  # overtaking reads the waiting frames' lengths: they carry FCS again
                    self.restore_fcs()
                    frame = with_fcs(frame)
                start = self._overtake(frame, at)
                if start is not None:
                    return start
        start = at if at > free else free
        ser = self.ser_ns.get(n)
        if ser is None:
            ser = self.ser_ns[n] = -((-n * 8_000_000_000) // self.bandwidth_bps)
        done = self.free_at = start + ser
        self.busy_ns += ser
        q = self.queued
        qb = self.queued_bytes
        while q and q[0][0] <= at:
            qb -= q.popleft()[1]
        q.append((done, n))
        qb += n
        self.queued_bytes = qb
        if len(q) > self.peak_queue_frames:
            self.peak_queue_frames = len(q)
        if qb > self.peak_queue_bytes:
            self.peak_queue_bytes = qb
        hb = self.head_bytes
        if hb:
            self.line = [start, done, n, len(frame) > PTYPE_OFF and frame[PTYPE_OFF] == _QPKT and not frame[PRIO_OFF], []]
            self.pending.append((start, start + self._ser(min(hb, n)) + self.latency_ns, frame, False))
        else:
            self.pending.append((start, done + self.latency_ns, frame, False))
        return start

    def _enqueue_traced(self, frame: bytes, at: int) -> int:
        """:meth:`enqueue` on a traced port: the queue counter as frames leave and as this one
        comes, and its time on the line in the load bins."""
        tr = self.tracer
        tr.drain(at)
        self.tracer = None
        try:
            start = self.enqueue(frame, at)
        finally:
            self.tracer = tr
        tr.queue(at, len(self.queued), self.queued_bytes)
        tr.sending(start, start + self._ser(self.framing.length(frame)))
        return start

    def restore_fcs(self) -> None:
        """Give every waiting frame its FCS and stop deferring it on this port."""
        if self.defer_fcs:
            self.defer_fcs = False
            waiting = [(s, a, with_fcs(f), pl) for s, a, f, pl in self.pending]
            self.pending.clear()
            self.pending.extend(waiting)

    def _ser(self, nbytes: int) -> int:
        return -((-nbytes * 8_000_000_000) // self.bandwidth_bps)

    def _overtake(self, wire: bytes, at: int) -> int | None:
        """Put high-priority ``wire`` (FCS included) ahead of the priority-0 frames still waiting
        in ``pending`` (not yet on the socket); a QsNet packet already leaving is cut at its next
        segment boundary. Everything behind moves back by the new frame's time on the line.
        Returns its start, or None when nothing can be overtaken (then it queues as usual)."""
        pend = self.pending
        lat = self.latency_ns
        i = next((k for k, e in enumerate(pend) if e[1] - lat > at and not e[2][PRIO_OFF]), None)
        if i is None:
            return None
        start_i, arrival_i, frame_i, _pool = pend[i]
        done_i = arrival_i - lat
        # when the line is free of every frame ahead of entry i (those already sent included)
        ahead = max(pend[i - 1][1] - lat if i else 0, self.sent_done)
        begin = None
        if start_i < at:  # entry i is on the line: a QsNet packet is cut at its next segment boundary
            if frame_i[PTYPE_OFF] == _QPKT:
                n_i = self.framing.length_wire(frame_i)
                inserted = done_i - start_i - self._ser(n_i)  # frames that went in at earlier boundaries
                off = self.framing.qs_first_end
                while off < n_i:
                    t = start_i + self._ser(off) + inserted
                    if t >= at:
                        begin = max(t, ahead)
                        break
                    off += SEG_BYTES
            if begin is None:  # no boundary left (or no segments): after it, ahead of what waits behind
                i += 1
                if i == len(pend) or pend[i][2][PRIO_OFF]:
                    return None
                begin = max(at, done_i)
        else:
            begin = max(at, ahead)
        shift_from = i
        q = self.queued
        mlen = self.framing.length_wire
        d = self._ser(mlen(wire))
        new = (begin, begin + d + lat, wire, False)
        moved = [(s if (j == shift_from and s < at) else s + d, a + d, f, pl)
                 for j, (s, a, f, pl) in enumerate(list(pend)[shift_from:], shift_from)]
        kept = list(pend)[:shift_from]
        pend.clear()
        pend.extend(kept + [new] + moved)
        # occupancy: the frames not yet done, in their new order
        sent = [(dn, nb) for dn, nb in q if at < dn <= self.sent_done]
        q.clear()
        q.extend(sent + [(e[1] - lat, mlen(e[2])) for e in kept + [new] + moved if e[1] - lat > at])
        self.queued_bytes = sum(nb for _d, nb in q)
        self.free_at = max(self.free_at + d, begin + d)
        self.busy_ns += d
        if len(q) > self.peak_queue_frames:
            self.peak_queue_frames = len(q)
        if self.queued_bytes > self.peak_queue_bytes:
            self.peak_queue_bytes = self.queued_bytes
        self.overtakes += 1
        return begin

    def hand_over(self, frame: bytes, at: int, token) -> None:
        """With credit flow control: queue ``frame`` on its VC from ``at``; :meth:`start_ready`
        starts it when the port is free and a credit covers it."""
        fl = self.flow
        frame = made(frame)  # waiting for credit, it may be rewritten (its VC): made now (emu.wire.lazy)
        if fl.by_prio:  # a queue per traffic class (emu.pause)
            vc = frame[PRIO_OFF] & 7 if len(frame) > PRIO_OFF else 0
        elif fl.late and len(frame) > VC_OFF:  # one queue per group: its VC is picked as it starts
            vc = frame[VC_OFF] % fl.groups
        elif fl.groups and len(frame) > VC_OFF:  # the receiver lets the sender pick a VC of the frame's group
            vc = fl.pick(frame[VC_OFF] % fl.groups)
            if vc != frame[VC_OFF]:
                frame = b"".join((frame[:VC_OFF], bytes((vc,)), frame[VC_OFF + 1:]))
        else:
            vc = frame[VC_OFF] % fl.vcs if len(frame) > VC_OFF else 0
        wire = add_fcs(frame)
        fl.queues[vc].append((at, wire, token))
        if fl.by_prio:
            n = self.framing.length_wire(wire)
            fl.held_bytes += n
            fl.held[vc] += n
        q = self.queued
        if self.tracer is None:
            while q and q[0][0] <= at:
                self.queued_bytes -= q.popleft()[1]
        else:
            self.tracer.drain(at)
            self._trace_waiting(at)
        waiting = fl.waiting()
        if len(q) + waiting > self.peak_queue_frames:
            self.peak_queue_frames = len(q) + waiting

    def start_ready(self, now: int) -> tuple[list, int | None]:
        """Start, at ``now``, every queued frame the port and the credits allow (the ready head of
        the VC handed over first, a high-priority frame before every priority-0 one with
        ``priority``, ties to the lower VC). Returns the release tokens of the frames
        started, and when to look again (None: not before a credit or a new frame arrives)."""
        fl = self.flow
        started = []
        prio = self.priority
        if prio and self.head_bytes and self.free_at > now and self.line is not None and self.line[3]:
            self._cut_ready(now, started)
        while self.free_at <= now:
            best, blocked, key, bw = -1, False, None, -1
            drr = {} if fl.by_prio and fl.quanta is not None else None
            for v, qv in enumerate(fl.queues):
                if qv and qv[0][0] <= now:
                    n = -(-self.framing.length_wire(qv[0][1]) // fl.unit) * fl.unit
                    w = fl.free(v, n) if fl.late else v
                    if w >= 0 and fl.place(w, n) is not None:
                        if drr is not None:  # class queues, deficit round robin (queues.arbiter=drr)
                            drr[v] = n
                            continue
                        if fl.by_prio:  # class queues: the higher class first (strict priority, 802.1Q)
                            k = (-v if prio else 0, qv[0][0])
                        else:
                            k = (not (prio and qv[0][1][PRIO_OFF]), qv[0][0])  # high priority first (link.priority)
                        if best < 0 or k < key:
                            best, key, bw = v, k, w
                    else:
                        blocked = True
            if drr:
                best = bw = fl.drr_pick(drr)
            if best < 0:
                if blocked and fl.stalled_since is None:
                    fl.stalled_since = now
                    fl.stalls += 1
                break
            wire, token, n, pool = self._take_credit(best, bw)
            if fl.by_prio:
                fl.held_bytes -= n
                fl.held[best] -= n
                fl.line_bytes, fl.line_class = n, best
                if fl.stamp is not None:
                    wire = fl.stamp(self, wire, now, n)
                fl.tx_frames[best] += 1
                fl.tx_bytes[best] += len(wire)
            if fl.stalled_since is not None:
                fl.stall_ns += now - fl.stalled_since
                fl.stalled_since = None
            done = now + -((-n * 8_000_000_000) // self.bandwidth_bps)
            self.free_at = done
            self.busy_ns += done - now
            self.queued.append((done, n))
            self.queued_bytes += n
            if self.queued_bytes > self.peak_queue_bytes:
                self.peak_queue_bytes = self.queued_bytes
            if self.head_bytes:
                arrival = now + self._ser(min(self.head_bytes, n)) + self.latency_ns
                self.line = [now, done, n, wire[PTYPE_OFF] == _QPKT and not wire[PRIO_OFF], []]
            else:
                arrival = done + self.latency_ns
            self.pending.append((now, arrival, wire, pool))
            if token is not None:
                started.append(token)
            if self.tracer is not None:
                self._trace_waiting(now)
                self.tracer.sending(now, done)
        wake = None
        for qv in fl.queues:
            if qv:
                t = qv[0][0] if qv[0][0] > now else (self.free_at if self.free_at > now else None)
                if t is not None and (wake is None or t < wake):
                    wake = t
        return started, wake

    def _cut_ready(self, now: int, started: list) -> None:
        """With credit flow control into an input-queued router: a ready high-priority frame (the one
        handed over first, ties to the lower VC) goes into the packet on the line at its next segment
        boundary (``emu.segcut``)."""
        fl = self.flow
        best, key, bw = -1, None, -1
        for v, qv in enumerate(fl.queues):
            if qv and qv[0][0] <= now and qv[0][1][PRIO_OFF]:
                c = -(-self.framing.length_wire(qv[0][1]) // fl.unit) * fl.unit
                w = fl.free(v, c) if fl.late else v
                if w >= 0 and fl.place(w, c) is not None and (best < 0 or qv[0][0] < key):
                    best, key, bw = v, qv[0][0], w
        if best < 0 or cut_point(self, now) is None:  # (checked before anything is taken or charged)
            return
        wire, token, n, _pool = self._take_credit(best, bw)
        cut_in(self, wire, now, n)
        if token is not None:
            started.append(token)

    def _take_credit(self, q: int, vc: int = -1) -> tuple[bytes, Any, int, bool]:
        """Take the frame at the head of queue ``q`` and charge its credit on ``vc`` (default: ``q``; its
        VC buffer, the receiver's pool, or both); the frame's POOL flag set as it was placed, since the
        receiver files it by that flag, and its VC byte to ``vc``. Returns (frame, release token,
        modelled bytes, in the pool?)."""
        fl = self.flow
        _at, wire, token = fl.queues[q].popleft()
        if vc < 0:
            vc = q
        if fl.late:
            fl.last[q] = vc
            if wire[VC_OFF] != vc:
                wire = add_fcs(b"".join((wire[:VC_OFF], bytes((vc,)), wire[VC_OFF + 1:-4])))
        n = self.framing.length_wire(wire)
        c = -(-n // fl.unit) * fl.unit
        pool = fl.place(vc, c)
        a, b = fl.parts(c, pool)
        fl.credits[vc] -= a
        fl.pool -= b
        if fl.vc_bytes and bool(wire[FLAGS_OFF] & FLAG_POOL) != pool:
            flags = wire[FLAGS_OFF] | FLAG_POOL if pool else wire[FLAGS_OFF] & ~FLAG_POOL
            wire = add_fcs(b"".join((wire[:FLAGS_OFF], bytes((flags,)), wire[FLAGS_OFF + 1:-4])))
        return wire, token, n, pool

    def _trace_waiting(self, t: int) -> None:
        """(Traced runs, credit flow control) the queue counter: frames and bytes on the line or
        waiting for credit."""
        waiting = [self.framing.length_wire(e[1]) for qv in self.flow.queues for e in qv]
        self.tracer.queue(t, len(self.queued) + len(waiting), self.queued_bytes + sum(waiting))

    def credit(self, vc: int, pool: bool, n: int) -> None:
        """A credit arrived from the receiver."""
        if pool:
            self.flow.pool += n
        else:
            self.flow.credits[vc] += n


@dataclass(eq=False, slots=True)
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
    buf: BufferState | None = None
    """The input buffers, with credit flow control (else None: unbounded)."""
    rx_frames: int = 0
    rx_bytes: int = 0
    fcs_errors: int = 0
    """Frames received with a bad frame check sequence (corrupted on the wire), dropped here."""
    head_bytes: int = 0
    """An input-queued router's port: frames arrive when their head flit is in (``OutPort.head_bytes``)."""
    framing: Framing = ETHERNET
    """The link's framing (``OutPort.framing``): what a frame's time on the line and its room in a
    buffer count."""
