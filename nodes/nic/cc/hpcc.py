"""HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019): ``host.cc=hpcc``.

The sender puts an empty INT stack (``hpcc_int_hops`` records, :func:`emu.wire.cc.empty_int`) in every
data segment; each switch that adds telemetry writes its hop record (queue bytes, bytes transmitted,
timestamp, line rate); the receiver echoes the stack in its acknowledgement. Per peer, window-based
with go-back-N, the sender runs the paper's Algorithm 1 on each acknowledgement:

* MeasureInflight: for each hop ``i`` (against the previous acknowledgement's record of that hop),
  ``u_i = min(qlen_i, qlen_i') / (B_i T) + txRate_i / B_i`` with ``txRate_i = (tx_i - tx_i') / (ts_i -
  ts_i')``; ``u`` the largest, ``tau`` its time delta (at most ``T``); ``U = (1 - tau/T) U + (tau/T) u``;
* ComputeWind: if ``U >= eta`` or ``incStage >= maxStage``: ``W = Wc / (U/eta) + W_AI`` (and, once per
  round trip, ``incStage = 0``, ``Wc = W``), else ``W = Wc + W_AI`` (once per round trip ``incStage +=
  1``, ``Wc = W``); "once per round trip": an acknowledgement past ``lastUpdateSeq``, which then becomes
  the next sequence number to send;
* the window is ``W`` bytes and the pacing rate ``W / T``.

``T`` is ``hpcc_base_rtt_ns``, or (0) the smallest round trip the flow measured; until the first
acknowledgement the flow sends at the line rate without a window, then ``Wc = W = B T`` (the line's
bandwidth-delay product, the paper's ``W_init``). ``W_AI = R_AI x T`` with ``R_AI`` = ``hpcc_rai_mbps``
(0: 10 Mb/s per 25 Gb/s of line rate, the HPCC repository's run.py). Telemetry that did not advance
(a hop whose timestamp did not move) is skipped; an acknowledgement without INT (no switch wrote any)
leaves the window as it is. The window never exceeds ``B T``.
"""

from __future__ import annotations

from emu.wire.cc import INT_HOP, INT_SHIM, empty_int

from . import register_cc
from .base import CcTransport, Flow

_M32 = 0xFFFFFFFF


class _Hp:
    __slots__ = ("T", "U", "Wc", "inc_stage", "last_update", "hops")

    def __init__(self):
        self.T, self.U, self.Wc, self.inc_stage, self.last_update, self.hops = 0, 0.0, 0.0, 0, None, None


def parse_stack(stack: bytes) -> list[tuple[int, int, int, int]]:
    """The hop records written in an INT stack (as :func:`emu.wire.cc.int_hops`, from the stack's bytes)."""
    nhops, _ = INT_SHIM.unpack(stack, 0)
    return [INT_HOP.unpack(stack, INT_SHIM.size + i * INT_HOP.size) for i in range(nhops)]


@register_cc("hpcc")
class Hpcc(CcTransport):
    recovery = "gbn"

    def __init__(self, nic):
        super().__init__(nic)
        self.int_stack = empty_int(self.spec.hpcc_int_hops)
        self.eta = self.spec.hpcc_u_target
        self.rai = (self.spec.hpcc_rai_mbps or 10 * self.line_bps / 25e9) * 1e6

    def flow_init(self, flow: Flow) -> None:
        flow.cc = _Hp()
        flow.cc.T = self.spec.hpcc_base_rtt_ns

    def window(self, hp: _Hp) -> tuple[float, float]:
        """(W_init = B T bytes, W_AI bytes) for the flow's T."""
        return self.line_bps * hp.T / 8e9, self.rai * hp.T / 8e9

    def on_ack_cc(self, f: Flow, newly: int, rtt, hops: int, stack: bytes) -> None:
        hp: _Hp = f.cc
        if rtt is not None and not self.spec.hpcc_base_rtt_ns and (hp.T == 0 or rtt < hp.T):
            first = hp.T == 0
            hp.T = rtt
            if first:
                hp.Wc = self.window(hp)[0]
                self.set_rate(f, hp.Wc * 8e9 / hp.T, hp.Wc)
        if hp.T and not hp.Wc:
            hp.Wc = self.window(hp)[0]
            self.set_rate(f, hp.Wc * 8e9 / hp.T, hp.Wc)
        if not stack or not hp.T:
            return
        recs = parse_stack(stack)
        if not recs:
            return
        prev, hp.hops = hp.hops, recs
        if hp.last_update is None or prev is None or len(prev) != len(recs):
            hp.last_update = f.nxt  # the first round trip: remember the telemetry
            return
        self.update(f, recs, prev, f.una > hp.last_update)

    def measure(self, hp: _Hp, recs, prev) -> float:
        """MeasureInflight: the new ``U`` from this acknowledgement's hop records and the previous ones."""
        T = hp.T
        u, tau = None, 0
        for (q, tx, ts, mbps), (q0, tx0, ts0, _) in zip(recs, prev):
            dt = (ts - ts0) & _M32
            if dt == 0 or mbps == 0:
                continue
            b = mbps * 1e6 / 8e9  # the hop's line rate in bytes per ns
            ui = min(q, q0) / (b * T) + ((tx - tx0) & _M32) / dt / b
            if u is None or ui > u:
                u, tau = ui, dt
        if u is None:
            return hp.U
        tau = min(tau, T)
        return (1 - tau / T) * hp.U + tau / T * u

    def update(self, f: Flow, recs, prev, update_wc: bool) -> None:
        hp: _Hp = f.cc
        hp.U = U = self.measure(hp, recs, prev)
        w_init, w_ai = self.window(hp)
        if U >= self.eta or hp.inc_stage >= self.spec.hpcc_max_stage:
            W = (hp.Wc / (U / self.eta) if U > 0 else w_init) + w_ai  # U = 0 (max_stage 0): ns-3's inf, capped
            stage = 0
        else:
            W = hp.Wc + w_ai
            stage = hp.inc_stage + 1
        W = min(W, w_init)
        if update_wc:
            hp.inc_stage, hp.Wc = stage, W
            hp.last_update = f.nxt
        self.set_rate(f, min(float(self.line_bps), W * 8e9 / hp.T), W)
