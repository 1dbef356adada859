"""Swift (Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in the
Datacenter", SIGCOMM 2020): ``host.cc=swift``.

Delay-based, window in segments (``cwnd``, a float), selective repeat. Each acknowledgement of a
segment sent once gives a delay sample -- from when the segment was handed to the port to when its
acknowledgement arrived -- and the target delay is ``swift_base_target_ns + hops x
swift_hop_scale_ns``, ``hops`` the switches the acknowledgement crossed (the fabric header's count;
paths are symmetric). Below the target, additive increase: ``cwnd += ai x acked / cwnd`` (``cwnd >=
1``) or ``cwnd += ai x acked`` (below one segment), ``acked`` in segments; at or above it, at most
once per smoothed round trip, multiplicative decrease ``cwnd *= max(1 - beta (delay - target) / delay,
1 - max_mdf)``. A timeout: ``cwnd *= 1 - max_mdf``, or the minimum after ``swift_retx_reset`` in a row.
``cwnd`` stays within ``[swift_min_cwnd, swift_max_cwnd]``; below one segment the sender paces one
segment per ``srtt / cwnd``. The flow-scaling part of the target (the paper's ``fs_range``) is not
modelled. Defaults: htsim's Swift (``sim/swift.cpp``).
"""

from __future__ import annotations

from . import register_cc
from .base import CcTransport, Flow


class _Sw:
    __slots__ = ("cwnd", "last_decrease", "retx")

    def __init__(self, cwnd: float):
        self.cwnd, self.last_decrease, self.retx = cwnd, None, 0


@register_cc("swift")
class Swift(CcTransport):
    recovery = "sr"

    def flow_init(self, flow: Flow) -> None:
        flow.cc = _Sw(self.spec.swift_init_cwnd)
        self._apply(flow)

    def target_ns(self, hops: int) -> int:
        return self.spec.swift_base_target_ns + hops * self.spec.swift_hop_scale_ns

    def _can_decrease(self, sw: _Sw) -> bool:
        return sw.last_decrease is None or self.nic.now - sw.last_decrease >= (self.rtt.srtt or 0)

    def on_ack_cc(self, f: Flow, newly: int, rtt, hops: int, stack: bytes) -> None:
        sw: _Sw = f.cc
        sw.retx = 0
        if rtt is None:
            return
        s = self.spec
        target = self.target_ns(hops)
        if rtt < target:
            acked = newly / self.mtu
            sw.cwnd += s.swift_ai * acked / sw.cwnd if sw.cwnd >= 1 else s.swift_ai * acked
        elif self._can_decrease(sw):
            sw.cwnd *= max(1 - s.swift_beta * (rtt - target) / rtt, 1 - s.swift_max_mdf)
            sw.last_decrease = self.nic.now
        self._apply(f)

    def on_timeout_cc(self, f: Flow) -> None:
        sw: _Sw = f.cc
        sw.retx += 1
        if sw.retx >= self.spec.swift_retx_reset:
            sw.cwnd = self.spec.swift_min_cwnd
        elif self._can_decrease(sw):
            sw.cwnd *= 1 - self.spec.swift_max_mdf
            sw.last_decrease = self.nic.now
        self._apply(f)

    def _apply(self, f: Flow) -> None:
        sw: _Sw = f.cc
        s = self.spec
        sw.cwnd = min(s.swift_max_cwnd, max(s.swift_min_cwnd, sw.cwnd))
        rate = None
        if sw.cwnd < 1 and self.rtt.srtt:  # pacing: one segment per srtt / cwnd
            rate = min(float(self.line_bps), sw.cwnd * self.mtu * 8e9 / self.rtt.srtt)
        self.set_rate(f, rate, max(sw.cwnd, 1.0) * self.mtu)
