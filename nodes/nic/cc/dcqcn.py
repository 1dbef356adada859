"""DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015): ``host.cc=dcqcn``.

Receiver (the paper's NP): a segment with ECN's CE mark from a sender that had no CNP from us in the
last ``dcqcn_cnp_interval_ns`` gets one :class:`emu.wire.cc.Cnp` back (its ``marked`` field: the marked
segments since the last CNP).

Sender (RP), per peer, rate-based with go-back-N: on a CNP, target ``Rt = Rc``, ``Rc = max(min_rate,
Rc (1 - alpha/2))``, ``alpha = (1 - g) alpha + g``, and the increase state restarts; alpha decays by
``(1 - g)`` every ``dcqcn_alpha_timer_ns`` without a CNP (counted from the last CNP; applied when next
needed, as many times as the timer would have fired). Increase events: the timer (every
``dcqcn_rate_timer_ns`` after a decrease) and the byte counter (every ``dcqcn_byte_counter_bytes``
sent); with T timer events and BC byte events since the decrease, an event is fast recovery (``Rc =
(Rt + Rc)/2``) while ``max(T, BC) < F``, hyper increase (``Rt += R_HAI``) when ``min(T, BC) >= F``,
else additive increase (``Rt += R_AI``), each then ``Rc = (Rt + Rc)/2`` -- ``Rt`` held at the line
rate. The timer stops when the rate is back at the line rate, and while the peer has nothing to send
(it would only keep a finished run's clock going): the events it would have had meanwhile are applied
when the next message to that peer comes, exactly as if it had run. A new rate re-spaces the next segment
from the last one's hand-over (ns-3's ``ChangeRate``). Rates are floats in bit/s; the pacing
gap of a segment is its wire time at ``Rc``, rounded up to the ns.

The decrease (with alpha's update and the restart of the increase) is not made on the CNP itself but at
the next rate-decrease check, every ``dcqcn_rate_decrease_interval_ns`` (4 us) on a grid from the first
CNP + 1 ns, once however many CNPs came since the last check: the HPCC repository's ns-3
``RdmaHw::CheckRateDecreaseMlx`` (``RateDecreaseInterval``). 0 decreases on each CNP (the paper's
reading). Alpha follows the paper: updated at the decrease, decayed per ``dcqcn_alpha_timer_ns``
without one (ns-3 updates it on its own 55 us grid).
"""

from __future__ import annotations

from emu.wire import HDR_LEN, PacketType
from emu.wire.cc import CNP

from . import register_cc
from .base import CTRL_PRIO, CcTransport, Flow


class _Rp:
    __slots__ = ("target", "alpha", "last_cnp", "t_stage", "bc_stage", "bytes", "timer", "due", "grid", "check")

    def __init__(self, line: float):
        self.target, self.alpha, self.last_cnp = line, 1.0, None
        self.t_stage = self.bc_stage = self.bytes = 0
        self.timer = None
        self.grid = self.check = None
        """The rate-decrease checks: their grid's origin (the first CNP + 1 ns), the pending one's timer."""
        self.due = None
        """When the rate timer fires next (or would, while it rests: nothing to send)."""


@register_cc("dcqcn")
class Dcqcn(CcTransport):
    recovery = "gbn"

    def __init__(self, nic):
        super().__init__(nic)
        s = self.spec
        self.g = s.dcqcn_g
        scale = self.line_bps / 25e9
        self.rai = (s.dcqcn_rai_mbps or 5 * scale) * 1e6
        self.rhai = (s.dcqcn_rhai_mbps or 50 * scale) * 1e6
        self.min_rate = s.dcqcn_min_rate_mbps * 1e6

    def frames(self):
        return {**super().frames(), int(PacketType.CNP): self._on_cnp}

    def flow_init(self, flow: Flow) -> None:
        flow.rate = float(self.line_bps)
        flow.cc = _Rp(flow.rate)

    # -- receiver (NP) --------------------------------------------------------------------------
    def on_marked(self, src, msg_id, rx) -> None:
        st = rx.cc
        if st is None:
            st = rx.cc = [None, 0]  # [when the last CNP went, marked since]
        st[1] += 1
        now = self.nic.now
        if st[0] is None or now - st[0] >= self.spec.dcqcn_cnp_interval_ns:
            st[0] = now
            self.stats["cnps_sent"] += 1
            self.nic.emit(src, PacketType.CNP, CNP.pack(msg_id, min(st[1], 0xFFFF), 0), now + self.delay, prio=CTRL_PRIO)
            st[1] = 0

    # -- sender (RP) ----------------------------------------------------------------------------
    def _on_cnp(self, frame: bytes, src: int, port: int, now: int) -> None:
        CNP.unpack(frame, HDR_LEN)  # (raises on a short frame)
        self.stats["cnps_received"] += 1
        f = self.flows.get(src)
        if f is None:
            return
        interval = self.spec.dcqcn_rate_decrease_interval_ns
        if not interval:  # (0: the decrease on the CNP itself)
            self.cnp(f, now)
            return
        st: _Rp = f.cc
        if st.check is None:  # the next check of the 4 us grid after now decreases (once for all CNPs till then)
            if st.grid is None:
                st.grid = now + 1  # (ns-3: "add 1 ns to make sure rate decrease is after alpha update")
            t = st.grid + interval * max(1, (now - st.grid) // interval + 1)  # (the first: grid + interval)
            st.check = self.nic.at(t, self._check, f)

    def _check(self, f: Flow) -> None:
        f.cc.check = None
        if self.flows.get(f.dst) is f:
            self.cnp(f, self.nic.now)

    def alpha_at(self, st: _Rp, now: int) -> float:
        """alpha at ``now``: decayed once for each alpha timer period since the last CNP."""
        a = st.alpha
        if st.last_cnp is not None:
            k = (now - st.last_cnp) // self.spec.dcqcn_alpha_timer_ns
            while k > 0 and a > 1e-300:
                a *= 1 - self.g
                k -= 1
        return a

    def cnp(self, f: Flow, now: int) -> None:
        """The rate decrease (at a CNP's check, or on the CNP with ``dcqcn_rate_decrease_interval_ns`` 0)."""
        st: _Rp = f.cc
        alpha = self.alpha_at(st, now)
        st.target = f.rate
        self.set_rate(f, max(self.min_rate, f.rate * (1 - alpha / 2)))
        st.alpha = (1 - self.g) * alpha + self.g
        st.last_cnp = now
        st.t_stage = st.bc_stage = st.bytes = 0
        if st.timer is not None:
            self.nic.timers.cancel(st.timer)
        st.due = now + self.spec.dcqcn_rate_timer_ns
        st.timer = self.nic.at(st.due, self._rate_timer, f)

    def on_ack_cc(self, f: Flow, newly: int, rtt, hops: int, stack: bytes) -> None:
        st: _Rp = f.cc
        if st.timer is not None and f.idle():  # all sent and acknowledged: the rate timer rests
            self.nic.timers.cancel(st.timer)
            st.timer = None

    def _rate_timer(self, f: Flow) -> None:
        st: _Rp = f.cc
        st.timer = None
        st.t_stage += 1
        self._increase(f)
        if f.rate < self.line_bps or st.target < self.line_bps:
            st.due = self.nic.now + self.spec.dcqcn_rate_timer_ns
            if not f.idle():  # (idle: it rests until there is something to send; send() catches up)
                st.timer = self.nic.at(st.due, self._rate_timer, f)

    def send(self, dst: int, tag: int, data, at: int, vc: int = 0, prio: int | None = None) -> None:
        f = self.flows.get(dst)
        st = f.cc if f is not None else None
        if st is not None and st.timer is None and st.due is not None:  # the rate timer rested: its events since, then on
            period, due = self.spec.dcqcn_rate_timer_ns, st.due
            st.due = None
            now = self.nic.now
            while due <= now and (f.rate < self.line_bps or st.target < self.line_bps):
                st.t_stage += 1
                self._increase(f)
                due += period
            if f.rate < self.line_bps or st.target < self.line_bps:
                st.timer = self.nic.at(due, self._rate_timer, f)
        super().send(dst, tag, data, at, vc, prio)

    def on_sent(self, f: Flow, n: int) -> None:
        b = self.spec.dcqcn_byte_counter_bytes
        st: _Rp = f.cc
        if b and st.last_cnp is not None and f.rate < self.line_bps:
            st.bytes += n
            if st.bytes >= b:
                st.bytes -= b
                st.bc_stage += 1
                self._increase(f)

    def _increase(self, f: Flow) -> None:
        st: _Rp = f.cc
        F = self.spec.dcqcn_f
        line = float(self.line_bps)
        if max(st.t_stage, st.bc_stage) < F:
            pass  # fast recovery: toward the target
        elif min(st.t_stage, st.bc_stage) >= F:
            st.target = min(line, st.target + self.rhai)
        else:
            st.target = min(line, st.target + self.rai)
        self.set_rate(f, min(line, (st.target + f.rate) / 2))
