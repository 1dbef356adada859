"""The segment transport under a congestion control (``host.cc`` other than none).

Per peer the sender keeps a queue pair (:class:`Flow`): its messages in order, numbered per peer
(``msg_id``) and laid end to end in one byte sequence, cut into segments of ``host.mtu_bytes``. A
segment goes to the port when the algorithm lets it (:meth:`CcTransport.allowed`: window or pull
credit) and not before the pacing time of the flow's rate (``Flow.rate``: the line rate unless the
algorithm set one) -- frames handed over at ``now + nic_delay_ns``, as every NIC frame. The
receiver answers each segment with a ``MsgAck`` whose second field is the end offset it
acknowledges -- with go-back-N (RoCE NICs; the HPCC repository's ns-3 ``ReceiverCheckSeq``) the
cumulative one, the message's total once it is whole; with selective repeat (NDP, Swift) the end of
that one segment -- carrying back, when the segment had one, its INT stack (fabric flag INT). Go-back-N
drops a segment past the expected one (counted ``out_of_order``) and sends a :class:`Nack` for the
expected position (at most one per ``NACK_INTERVAL_NS`` for the same position); the sender goes back
to it. Selective repeat takes every segment (those that came before an earlier one counted
``out_of_order``) and resends only the one a NACK names -- a trimmed segment's header is answered by
a NACK. A flow without progress for its timeout (the host's measured one, :class:`RttEstimator`,
doubling) goes back (go-back-N) or resends all it has out (selective), up to ``host.max_tries``.

The algorithms subclass :class:`CcTransport` and override its hooks: ``flow_init``, ``on_ack_cc``,
``on_timeout_cc``, ``on_marked`` (receiver: a segment with ECN's CE mark), ``on_arrival`` (receiver:
any segment or trimmed header), ``allowed``, ``on_sent`` and ``frames`` (their control frames'
handlers by packet type).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from emu.wire import FCS_LEN, HDR_LEN, HOPS_OFF, MACK, MSG, PacketType
from emu.wire.cc import FLAG_INT, FLAG_TRIM, NACK, strip_int
from emu.wire.fabric import FLAGS_OFF

from ..qpsched import QpScheduler
from ..transport import RttEstimator
from .flow import Flow, _Msg, _Rx  # noqa: F401  (Flow: the algorithms import it from here)

log = logging.getLogger(__name__)

NACK_INTERVAL_NS = 500_000
"""A go-back-N receiver repeats a NACK for the same expected position at most this often (the HPCC
repository's ns-3 RdmaHw ``NACK Generation Interval``, 500 us)."""
CTRL_PRIO = 1
"""Priority of acknowledgements and control frames (as ``host.transport=reliable``'s)."""
_DATA_OFF = HDR_LEN + MSG.size
_MSG_T = int(PacketType.MSG)


class CcTransport:
    recovery = "gbn"
    """This algorithm's loss recovery unless ``host.cc_recovery`` says: gbn or sr."""
    cc_name = "?"

    def __init__(self, nic: Any):
        self.nic = nic
        self.spec = spec = nic.spec
        self.mtu = spec.mtu_bytes
        self.delay = spec.nic_delay_ns
        self.sr = (spec.cc_recovery if spec.cc_recovery != "auto" else self.recovery) == "sr"
        self.flows: dict[int, Flow] = {}
        self.rx: dict[int, _Rx] = {}
        self.next_seq: dict[int, int] = {}
        self.delivered: dict[int, list] = {}
        self.failures: list[str] = []
        self.rtt = RttEstimator(spec.rto_ns, spec.rto_min_ns, spec.rto_ns)
        mode = spec.nic.qp_sched
        self.sched = QpScheduler(self) if mode in ("auto", "rr") else None
        """The port's round robin among queue pairs (``nic.qp_sched``), or None: each QP hands its
        segments to the port at its own pacing times (fifo)."""
        self.int_stack = b""
        """The INT stack data segments carry (HPCC: an empty one), else empty."""
        self.stats = {"cc": 0, "segments_sent": 0, "segments_resent": 0, "acks_sent": 0, "acks_received": 0,
                      "acks_stray": 0, "nacks_sent": 0, "nacks_received": 0, "cnps_sent": 0, "cnps_received": 0,
                      "pulls_sent": 0, "pulls_received": 0, "trimmed_received": 0, "ecn_marked_received": 0,
                      "out_of_order": 0, "duplicates_dropped": 0, "timeouts": 0, "rate_changes": 0,
                      "messages_acked": 0, "messages_failed": 0}
        self.stats.pop("cc")

    @property
    def line_bps(self) -> int:
        """The host's line rate: its port 0's link (100 Gb/s, the default link, without a port view)."""
        lb = getattr(self, "_line", None)
        if lb is None:
            ports = getattr(self.nic, "ports", None)
            rate = getattr(ports, "rate_bps", None)
            lb = self._line = (rate(0) if rate is not None and ports.linked(0) else 0) or 100_000_000_000
        return lb

    @line_bps.setter
    def line_bps(self, v: int) -> None:
        self._line = v

    # -- hooks (the algorithms') -------------------------------------------------------------------
    def frames(self) -> dict[int, Any]:
        """Handlers ``(frame, src, port, now)`` of the control frames this transport receives."""
        return {int(PacketType.NACK): self._on_nack}

    def flow_init(self, flow: Flow) -> None:
        """A new queue pair: set its rate, window and ``flow.cc``."""

    def on_ack_cc(self, flow: Flow, newly: int, rtt: int | None, hops: int, stack: bytes) -> None:
        """An acknowledgement of ``newly`` new sequence numbers (``rtt``: the round trip of the segment it
        answers, None for a resend; ``hops``: switches the acknowledgement crossed; ``stack``: the INT stack
        it echoes, else empty)."""

    def on_timeout_cc(self, flow: Flow) -> None:
        """The flow's timeout expired without progress."""

    def on_marked(self, src: int, msg_id: int, rx: _Rx) -> None:
        """Receiver: a segment from ``src`` carried ECN's congestion-experienced mark."""

    def on_arrival(self, src: int, msg_id: int, rx: _Rx, trimmed: bool) -> None:
        """Receiver: a segment (or, ``trimmed``, its header only) arrived from ``src``."""

    def allowed(self, flow: Flow, n: int) -> bool:
        """May the flow send a segment of ``n`` sequence numbers now (window, credit)?"""
        return flow.cwnd is None or flow.inflight == 0 or flow.inflight + n <= flow.cwnd

    def on_sent(self, flow: Flow, n: int) -> None:
        """A segment of ``n`` bytes went to the port."""

    def set_rate(self, flow: Flow, rate: float | None, cwnd: float | None = None) -> None:
        """Set the flow's pacing rate (bit/s) and window (bytes), counting a change. A new rate re-spaces
        the next segment from the last one's hand-over (as the HPCC repository's ns-3 ``ChangeRate``)."""
        if rate == flow.rate and cwnd == flow.cwnd:
            return
        self.stats["rate_changes"] += 1
        paced = rate != flow.rate
        flow.rate, flow.cwnd = rate, cwnd
        if self.sched is not None:
            if paced and flow.last_wire:
                flow.next_ns = flow.last_t + self.gap(flow.last_wire, rate)
            self.sched.kick(flow)
        elif paced and flow.last_wire and not self._pumping:
            flow.next_ns = flow.last_t + self.gap(flow.last_wire, rate)
            if flow.pump_timer is not None:
                self.nic.timers.cancel(flow.pump_timer)
                flow.pump_timer = flow.pump_at = None
                self._pump(flow)

    def gap(self, wire: int, rate: float | None) -> int:
        """Pacing: ns from one segment of ``wire`` bytes (FCS aside) to the next at ``rate`` (None: the line's)."""
        return -(-(wire + FCS_LEN) * 8_000_000_000 // int(rate or self.line_bps))

    # -- the sender --------------------------------------------------------------------------------
    def flow(self, dst: int) -> Flow:
        f = self.flows.get(dst)
        if f is None:
            f = self.flows[dst] = Flow(dst, self.nic._route(dst, None)[0])
            self.flow_init(f)
        return f

    def send(self, dst: int, tag: int, data: Any, at: int, vc: int = 0, prio: int | None = None) -> None:
        seq = self.next_seq.get(dst, 0)
        self.next_seq[dst] = (seq + 1) & 0xFFFFFFFF
        f = self.flow(dst)
        m = _Msg(seq, tag, bytes(data), vc, at, f.end, self.spec.traffic_class if prio is None else prio)
        f.end += m.span
        f.msgs.append(m)
        f.by_id[seq] = m
        self.kick(f)

    def kick(self, f: Flow) -> None:
        if self.sched is not None:  # (nic.qp_sched=rr: the port's round robin sends it)
            self.sched.kick(f)
        elif f.pump_at is None:
            self._pump(f)

    def _pump_timer(self, f: Flow) -> None:
        f.pump_at = f.pump_timer = None
        self._pump(f)

    def _next(self, f: Flow) -> tuple[int, _Msg, int, int] | None:
        """(sequence number, message, offset, data bytes) of the segment to send next, or None."""
        while f.retx:
            seq = f.retx[0]
            rec = f.out.get(seq)
            if rec is None:  # acknowledged meanwhile
                f.retx.popleft()
                continue
            m, off = rec[0], rec[1]
            return seq, m, off, min(self.mtu, len(m.data) - off)
        nxt = f.nxt
        if nxt >= f.end:
            return None
        m = f.cur
        if m is not None and not m.start <= nxt < m.start + m.span:
            m = f.by_id.get((m.msg_id + 1) & 0xFFFFFFFF)  # (the usual case: on to the next message)
        if m is None or not m.start <= nxt < m.start + m.span:
            m = next((x for x in f.msgs if x.start <= nxt < x.start + x.span), None)  # (after going back)
            if m is None:
                return None
        f.cur = m
        off = nxt - m.start
        return nxt, m, off, min(self.mtu, len(m.data) - off)

    _pumping = False

    def _pump(self, f: Flow) -> None:
        self._pumping = True
        try:
            self._pump_on(f)
        finally:
            self._pumping = False

    def _pump_on(self, f: Flow) -> None:
        nic = self.nic
        now = nic.now
        earliest = now + self.delay
        while True:
            nxt = self._next(f)
            if nxt is None:
                return
            m, n = nxt[1], nxt[3]
            if not self.allowed(f, n if m.data else 1):
                return
            t = max(earliest, f.next_ns, m.ready_ns)
            if t > earliest:
                if f.pump_at is None:
                    f.pump_at = t - self.delay
                    f.pump_timer = nic.at(t - self.delay, self._pump_timer, f)
                return
            self.send_segment(f, nxt, t)

    def send_segment(self, f: Flow, nxt: tuple, t: int) -> int:
        """Hand segment ``nxt`` (from :meth:`_next`) of ``f`` to the port at ``t``; returns its wire bytes."""
        seq, m, off, n = nxt
        span = n if m.data else 1
        resend = seq < f.high
        if f.retx and f.retx[0] == seq:
            f.retx.popleft()
        else:
            f.nxt = seq + span
        wire = self._emit(f, m, off, n, t)
        old = f.out.get(seq)
        if old is not None and old[5]:
            f.inflight -= span
        f.out[seq] = [m, off, span, t, resend, True]
        f.inflight += span
        f.high = max(f.high, seq + span)
        self.stats["segments_sent"] += 1
        if resend:
            self.stats["segments_resent"] += 1
        self.on_sent(f, n)
        f.last_t, f.last_wire = t, wire
        f.next_ns = t + self.gap(wire, f.rate)
        if f.timer is None:
            self._arm(f, t)
        return wire

    def _emit(self, f: Flow, m: _Msg, off: int, n: int, t: int) -> int:
        stack = self.int_stack
        body = b"".join((stack, MSG.pack(m.msg_id, m.tag, len(m.data), off), m.data[off:off + n]))
        e = self.spec.cc_entropy  # the ECMP entropy byte (host.cc_entropy)
        rsvd = 0 if e == "flow" else m.msg_id & 0xFF if e == "message" else ((m.start + off) // self.mtu) & 0xFF
        self.nic.emit(f.dst, _MSG_T, body, t, vc=m.vc, prio=m.prio, flags=FLAG_INT if stack else 0,
                      rsvd=rsvd)
        return HDR_LEN + len(body)

    def _arm(self, f: Flow, t: int) -> None:
        if f.timer is not None:
            self.nic.timers.cancel(f.timer)
        f.timer = self.nic.at(t + (self.rtt.rto << min(f.tries, 16)), self._timeout, f)

    def on_ack(self, src: int, frame: bytes) -> None:
        hops = frame[HOPS_OFF]
        frame, stack = strip_int(frame)
        msg_id, end = MACK.unpack(frame, HDR_LEN)
        f = self.flows.get(src)
        m = f.by_id.get(msg_id) if f is not None else None
        if m is None:
            self.stats["acks_stray"] += 1
            return
        self.stats["acks_received"] += 1
        total = len(m.data)
        if self.sr:
            key = m.start + (((end - 1) // self.mtu) * self.mtu if end > 0 else 0)
            rec = f.out.pop(key, None)
            if rec is None:
                self.stats["acks_stray"] += 1
                return
            newly = rec[2]
            f.inflight -= newly if rec[5] else 0
            f.una = min(f.out) if f.out else f.nxt
        else:
            upto = m.start + (end if end < total else m.span)
            if upto <= f.una:
                self.stats["acks_stray"] += 1
                return
            rec, newly = None, upto - f.una
            while f.out:
                seq = next(iter(f.out))
                if seq >= upto:
                    break
                rec = f.out.pop(seq)
                f.inflight -= rec[2] if rec[5] else 0
            f.una = upto
        rtt = None
        if rec is not None and not rec[4]:  # Karn: a resent segment times no round trip
            rtt = self.nic.now - rec[3]
            self.rtt.sample(rtt)
        while f.msgs and f.msgs[0].start + f.msgs[0].span <= f.una:
            done = f.msgs.popleft()
            del f.by_id[done.msg_id]
            self.stats["messages_acked"] += 1
        f.tries = 0
        if f.out:
            self._arm(f, self.nic.now)
        elif f.timer is not None:
            self.nic.timers.cancel(f.timer)
            f.timer = None
        self.on_ack_cc(f, newly, rtt, hops, stack)
        self.kick(f)

    def go_back(self, f: Flow, seq: int) -> None:
        """Go-back-N: send everything from ``seq`` again."""
        if not f.una <= seq < f.end:
            return
        for s in [s for s in f.out if s >= seq]:
            del f.out[s]
        f.inflight = sum(r[2] for r in f.out.values() if r[5])
        f.nxt = seq

    def _on_nack(self, frame: bytes, src: int, port: int, now: int) -> None:
        msg_id, offset = NACK.unpack(frame, HDR_LEN)
        self.stats["nacks_received"] += 1
        f = self.flows.get(src)
        m = f.by_id.get(msg_id) if f is not None else None
        if m is None:
            return
        seq = m.start + offset
        if self.sr:
            if seq in f.out and seq not in f.retx:
                f.retx.append(seq)
        else:
            self.go_back(f, seq)
        self.kick(f)

    def _timeout(self, f: Flow) -> None:
        f.timer = None
        if not f.out:
            return
        nic = self.nic
        now = nic.now
        ports = getattr(nic, "ports", None)
        if ports is not None and ports.linked(f.port) and ports.queue(f.port, now)[0]:
            self._arm(f, max(now, ports.free_at(f.port)))  # our own frames still wait at the port
            return
        self.stats["timeouts"] += 1
        f.tries += 1
        if nic.tracer is not None:
            to = nic.names[f.dst] if f.dst < len(nic.names) else f.dst
            nic.tracer.instant(nic.name, "retransmit", now, {"what": "timeout", "cc": self.cc_name, "to": to,
                                                              "from_seq": f.una, "try": f.tries}, "retransmit")
        if f.tries >= self.spec.max_tries:
            self._give_up(f, now)
            return
        self.on_timeout_cc(f)
        if self.sr:
            f.retx = deque(sorted(f.out))
            for rec in f.out.values():
                rec[5] = False
            f.inflight = 0
        else:
            self.go_back(f, f.una)
        self._arm(f, now)
        self.kick(f)

    def _give_up(self, f: Flow, now: int) -> None:
        names = self.nic.names
        dst = names[f.dst] if 0 <= f.dst < len(names) else str(f.dst)
        for m in f.msgs:
            self.stats["messages_failed"] += 1
            why = (f"{self.nic.name}: a message of {len(m.data)} bytes to {dst} (tag {m.tag}) given up after "
                   f"{f.tries} timeouts without progress ({self.cc_name}): no acknowledgement from {dst}")
            self.failures.append(why)
            log.warning("%s", why)
        del self.flows[f.dst]
        if self.sched is not None:
            self.sched.forget(f)

    # -- the receiver ------------------------------------------------------------------------------
    def on_segment(self, src: int, hops: int, frame: bytes) -> None:
        """A message segment from ``src`` (the engine's MSG frames): ECN, INT and trimming, ordering,
        the acknowledgement; what is taken goes on to the engine's reassembly."""
        flags = frame[FLAGS_OFF]
        stack = b""
        if flags & FLAG_INT:
            frame, stack = strip_int(frame)
        msg_id, _tag, total, off = MSG.unpack(frame, HDR_LEN)
        rx = self.rx.get(src)
        if rx is None:
            rx = self.rx[src] = _Rx()
        if flags & 0x20:  # FLAG_ECN: congestion experienced on the way
            self.stats["ecn_marked_received"] += 1
            self.on_marked(src, msg_id, rx)
        if flags & FLAG_TRIM:
            self.stats["trimmed_received"] += 1
            self.on_arrival(src, msg_id, rx, True)
            self.nack(src, msg_id, off)
            return
        self.on_arrival(src, msg_id, rx, False)
        n = len(frame) - _DATA_OFF
        end = off + n
        key, exp = (msg_id, off), (rx.exp_id, rx.exp_off)
        if self.sr:
            if key != exp and not self.seen(src, msg_id) and not self._partial_has(src, msg_id, off):
                self.stats["out_of_order"] += 1  # past a gap, or filling one (not a copy of one taken)
            if key >= exp:
                rx.exp_id, rx.exp_off = (msg_id + 1, 0) if end >= total else (msg_id, end)
            self.nic._on_segment(src, hops, frame)
            self.ack(src, msg_id, end, stack)
            return
        if key == exp:
            rx.exp_id, rx.exp_off = (msg_id + 1, 0) if end >= total else (msg_id, end)
            self.nic._on_segment(src, hops, frame)
            self.ack(src, msg_id, end, stack)
        elif key > exp:  # a gap: go-back-N drops it and asks for the expected one
            self.stats["out_of_order"] += 1
            now = self.nic.now
            if rx.nack_key != exp or now >= rx.nack_until:
                rx.nack_key, rx.nack_until = exp, now + NACK_INTERVAL_NS
                self.nack(src, *exp)
        else:  # sent again after our acknowledgement was lost or late: acknowledge where we are
            self.stats["duplicates_dropped"] += 1
            if rx.exp_off:
                self.ack(src, rx.exp_id, rx.exp_off, stack)
            elif rx.exp_id:
                last = self.delivered_total.get((src, rx.exp_id - 1))
                if last is not None:
                    self.ack(src, rx.exp_id - 1, last, stack)

    def _partial_has(self, src: int, msg_id: int, off: int) -> bool:
        part = self.nic._partial.get((src, msg_id))
        return part is not None and off in part.offsets

    def ack(self, src: int, msg_id: int, end: int, stack: bytes = b"") -> None:
        self.stats["acks_sent"] += 1
        self.nic.emit(src, PacketType.MACK, stack + MACK.pack(msg_id, end), self.nic.now + self.delay, prio=CTRL_PRIO,
                      flags=FLAG_INT if stack else 0)

    def nack(self, src: int, msg_id: int, off: int) -> None:
        self.stats["nacks_sent"] += 1
        self.nic.emit(src, PacketType.NACK, NACK.pack(msg_id, off), self.nic.now + self.delay, prio=CTRL_PRIO)

    # what the engine's reassembly asks (as host.transport=reliable's)
    @property
    def delivered_total(self) -> dict:
        d = getattr(self, "_totals", None)
        if d is None:
            d = self._totals = {}
        return d

    def seen(self, src: int, msg_id: int) -> bool:
        low, above = self.delivered.get(src) or (0, ())
        return msg_id < low or msg_id in above

    def duplicate(self, src: int, msg_id: int, total: int, last: bool, route: int | None = None) -> None:
        self.stats["duplicates_dropped"] += 1

    def done(self, src: int, msg_id: int, total: int, route: int | None = None) -> None:
        d = self.delivered.setdefault(src, [0, set()])
        d[1].add(msg_id)
        while d[0] in d[1]:
            d[1].discard(d[0])
            d[0] += 1
        totals = self.delivered_total
        totals[(src, msg_id)] = total
        totals.pop((src, msg_id - 64), None)  # (only the last few are ever asked for again)
