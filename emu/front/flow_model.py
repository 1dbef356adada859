"""The ideal flow completion time: the same flow alone on the idle network (issue 47, item 4).

A flow of ``size`` bytes is one host message: the sender's NIC takes it ``send_overhead_ns +
nic_delay_ns`` after the flow starts and puts out its frames back to back -- ``mtu_bytes`` of data
each, the last one shorter -- each ``frame_bytes`` long on a link (Ethernet, fabric and message
headers and FCS, or the link's framing), taking ``serialization_ns`` of it (rounded up per frame, as
the ports do). Along the route (the topology's tables) each switch is store-and-forward: a frame
arrives a link's latency after its last bit left, waits the switch's ``processing_delay_ns`` (an
input-queued router: the sum of its pipeline ``stages_ns``), then goes out as soon as the port has
sent the frame before it. The flow is complete when its last frame reaches the receiver, plus the
receiver's ``nic_delay_ns``: the time ``Message.t_ns`` records.

For frames of one size on a chain of store-and-forward ports the k-th frame leaves port j at
``R + sum(s_1..s_j) + sum(d_1..d_j-1) + (k-1) max(s_1..s_j)`` (``s`` serialisation, ``d`` latency and
processing between ports, ``R`` the NIC's start): the bottleneck spaces the frames. The last, shorter
frame follows by the recurrence ``leave(j) = max(leave_prev(j), leave(j-1) + d(j-1)) + s_last(j)``.
The model is exact for the output-queued switches and credit buffers large enough not to stall a lone
flow (the defaults; ``tests/test_flows.py`` checks it against isolated runs); with cut-through
input-queued routers the real flow is faster than it (a slowdown below 1 says so).
"""

from __future__ import annotations


class IdealFct:
    """``ideal(src, dst, size)``: the flow alone on the idle network (ns), cached per path and size."""

    def __init__(self, topo):
        self.topo = topo
        self.links = {}
        for lk in topo.links:
            self.links[(lk.a, lk.b)] = self.links[(lk.b, lk.a)] = lk.spec
        self.hops: dict[tuple[str, str], list] = {}
        self.cache: dict[tuple[str, str, int], int] = {}

    def _hops(self, a: str, b: str) -> list:
        """[(link spec, delay after the link: its latency and the next switch's processing)]."""
        key = (a, b)
        h = self.hops.get(key)
        if h is None:
            nodes = self.topo.nodes
            path = self.topo.route(a, b)
            h = []
            for u, w in zip(path, path[1:]):
                spec = self.links[(u, w)]
                rs = nodes[w].spec
                proc = 0 if w == b else (sum(rs.stages_ns) if getattr(rs, "input_queued", False)
                                         else rs.processing_delay_ns)
                h.append((spec, spec.latency_ns + proc))
            self.hops[key] = h
        return h

    def __call__(self, a: str, b: str, size: int) -> int:
        key = (a, b, size)
        v = self.cache.get(key)
        if v is None:
            v = self.cache[key] = self._compute(a, b, size)
        return v

    def _compute(self, a: str, b: str, size: int) -> int:
        nodes = self.topo.nodes
        ha, hb = nodes[a].spec, nodes[b].spec
        mtu = ha.mtu_bytes
        full, last = divmod(size, mtu)
        if last == 0:
            full, last = full - 1, mtu
        hops = self._hops(a, b)
        r = ha.send_overhead_ns + ha.nic_delay_ns
        leave = []  # when the last full frame leaves each port
        s_sum = d_sum = s_max = 0
        for j, (spec, d) in enumerate(hops):
            s = spec.serialization_ns(spec.frame_bytes(1, 16 + mtu))
            s_sum += s
            s_max = max(s_max, s)
            leave.append(r + s_sum + d_sum + (full - 1) * s_max if full else None)
            d_sum += d
        t = r  # the last frame: ready at r, then port by port
        for j, (spec, d) in enumerate(hops):
            start = t if leave[j] is None else max(t, leave[j])
            t = start + spec.serialization_ns(spec.frame_bytes(1, 16 + last)) + d
        return t + hb.nic_delay_ns


__all__ = ["IdealFct"]
