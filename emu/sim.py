"""Drive engines directly, without sockets: one global event heap and the same port model.

``EngineNet(topology).run(apps)`` is a plain discrete-event simulation of the same engines with the
same ordering rule as the elements (per node: time, engine timer before frames, then input port,
then sequence). The socket fabric must give exactly the same virtual times, which the integration
tests check.
"""

from __future__ import annotations

import heapq
import random

from emu.build import host_tables, make_engine
from emu.port import OutPort
from emu.wire import FCS_LEN, fcs_ok

INF = 1 << 62


class EngineNet:
    def __init__(self, topology, *, seed: int = 0, drop: float = 0.0, corrupt: float = 0.0):
        self.t = topology
        self.names = list(topology.nodes)
        self.index = {n: i for i, n in enumerate(self.names)}
        shared = host_tables(topology)
        self.engines = {n: make_engine(topology, n, shared) for n in self.names}
        self.ports: dict[tuple[str, int], tuple[OutPort, str, int]] = {}
        for i, link in enumerate(topology.links):
            for a, ap, b, bp in ((link.a, link.a_port, link.b, link.b_port), (link.b, link.b_port, link.a, link.a_port)):
                op = OutPort(ap, topology.port_name(a, ap), 0, 2 * i, b, topology.port_name(b, bp),
                             link.spec.latency_ns, link.spec.bandwidth_bps)
                self.ports[(a, ap)] = (op, b, bp)
        self.heap: list = []
        self.seq = 0
        self.rng = random.Random(seed)
        self.drop, self.corrupt = drop, corrupt
        self.delivered: list[tuple[int, str, int, bytes]] = []
        self.fcs_errors = 0
        self.now = 0

    def _push_timer(self, name: str) -> None:
        tt = self.engines[name].timer
        if tt is not None:
            heapq.heappush(self.heap, (tt, self.index[name], 0, 0, 0, None))

    def _emit(self, name: str, outs) -> None:
        for port, frame, at in outs:
            op, peer, pport = self.ports[(name, port)]
            op.enqueue(frame, at)
            start, arrival, frame = op.pending.popleft()
            op.tx_frames += 1
            if self.drop and self.rng.random() < self.drop:
                continue
            if self.corrupt and self.rng.random() < self.corrupt:
                b = bytearray(frame)
                b[self.rng.randrange(len(b))] ^= 0xFF
                frame = bytes(b)
            if not fcs_ok(frame):  # the receiving port checks the frame check sequence
                self.fcs_errors += 1
                continue
            self.seq += 1
            heapq.heappush(self.heap, (arrival, self.index[peer], 1, pport, self.seq, frame[:-FCS_LEN]))

    def start(self, apps: dict, at: int | None = None) -> None:
        t0 = self.now if at is None else at
        for host, spec in apps.items():
            fn, args = (spec[0], tuple(spec[1:])) if isinstance(spec, tuple) else (spec, ())
            self.engines[host].start_app(host, fn, args, t0)
            self._push_timer(host)

    def step_until(self, predicate, limit: int = 100_000) -> int:
        """Process events one at a time until ``predicate()`` holds; return the virtual time then."""
        for _ in range(limit):
            if predicate():
                return self.now
            if not self.heap:
                raise AssertionError("no events left and the condition never held")
            self.step_all(until=self.heap[0][0] + 1, one=True)
        raise AssertionError("condition not reached")

    def step_all(self, until: int = INF, one: bool = False) -> None:
        while self.heap and self.heap[0][0] < until:
            t, ni, kind, port, _, frame = heapq.heappop(self.heap)
            name = self.names[ni]
            eng = self.engines[name]
            if kind == 0:
                if eng.timer != t:
                    continue  # stale timer entry
                outs = eng.on_timer(t)
            else:
                self.delivered.append((t, name, port, frame))
                outs = eng.receive(frame, port, t)
            self.now = max(self.now, t)
            self._emit(name, outs)
            self._push_timer(name)
            if one:
                return

    def run(self, apps: dict) -> dict:
        self.start(apps)
        self.step_all()
        out = {}
        for host in apps:
            for st in self.engines[host].app_states():
                assert st.error is None, st.error
                assert st.done, f"{host} still waiting: {st.waiting}"
                out[st.host] = st.result
        return out
