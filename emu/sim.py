"""The engine test harness: drive engines directly, without sockets, and hurt their frames on purpose.

``EngineNet(topology).run(apps)`` is a plain discrete-event simulation of the same engines with the
same port model (FIFO, line rate, latency, the FCS appended by the sending port and checked by the
receiving one) and the same ordering rule as the elements (per node: time, engine timer before
frames, then input port, then sequence). The socket fabric must give exactly the same virtual
times, which the integration tests check. Use it to test an engine of your own in milliseconds
(the engine kinds a topology names must be registered first: ``import emu.front.engines`` registers
those that come with the emulator, as ``emu.Cluster`` does)::

    net = EngineNet(topology, seed=1, drop=0.01, duplicate=0.01, reorder=0.05, corrupt=0.01)
    results = net.run({"h0": (app, "h3")})   # {host: what the app returned}
    net.faults                               # {"dropped": .., "duplicated": .., ...}: what was done
    net.delivered                            # (time, node, port, frame) of every frame handed over

Faults are seeded (the same seed hurts the same frames) and apply to every link direction:
``drop`` loses a frame, ``duplicate`` delivers it twice, ``reorder`` delays it by 1..``reorder_ns``
so that later frames overtake it, ``corrupt`` flips one bit. A corrupted frame fails its FCS at the
receiving port and is dropped there, as on the real fabric (unless the receiving engine's
``passes_damaged(frame)`` says it checks such frames itself, as QsNet packets are), with
``check_fcs=False`` it is handed to the engine instead (to test what an engine does with damaged
bytes). ``net.tamper`` can change chosen frames by hand.
"""

from __future__ import annotations

import heapq
import random

from emu.build import make_engine
from emu.config import ConfigError
from emu.port import OutPort
from emu.wire.framing import framing
from emu.wire import FCS_LEN, fcs_ok
from emu.wire.lazy import made

INF = 1 << 62


class EngineNet:
    def __init__(self, topology, *, seed: int = 0, drop: float = 0.0, duplicate: float = 0.0, reorder: float = 0.0,
                 reorder_ns: int = 1000, corrupt: float = 0.0, check_fcs: bool = True):
        for name, v in (("drop", drop), ("duplicate", duplicate), ("reorder", reorder), ("corrupt", corrupt)):
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"EngineNet: {name} must be a probability within 0..1, got {v}")
        if reorder and reorder_ns < 1:
            raise ConfigError(f"EngineNet: reorder_ns must be >= 1, got {reorder_ns}")
        iq = [n.name for n in topology.nodes.values() if getattr(n.spec, "model", None) == "input_queued"]
        if iq:
            raise ConfigError(f"EngineNet models output ports with unbounded FIFOs; {iq[0]} is an input-queued "
                              "router (credits, VC buffers): run it in an emu.Cluster, or build the topology "
                              "with switch.model=output_queued")
        self.t = topology
        self.names = list(topology.nodes)
        self.index = {n: i for i, n in enumerate(self.names)}
        cache: dict = {"seed": seed}  # as a cluster's run seed: engines seed their own generators by it
        self.engines = {n: make_engine(topology, n, cache) for n in self.names}
        self.ports: dict[tuple[str, int], tuple[OutPort, str, int]] = {}
        for i, link in enumerate(topology.links):
            for a, ap, b, bp in ((link.a, link.a_port, link.b, link.b_port), (link.b, link.b_port, link.a, link.a_port)):
                op = OutPort(ap, topology.port_name(a, ap), 0, 2 * i, b, topology.port_name(b, bp),
                             link.spec.latency_ns, link.spec.bandwidth_bps, framing=framing(link.spec.framing))
                self.ports[(a, ap)] = (op, b, bp)
        self.heap: list = []
        self.seq = 0
        self.rng = random.Random(seed)
        self.drop, self.duplicate, self.reorder, self.corrupt = drop, duplicate, reorder, corrupt
        self.reorder_ns, self.check_fcs = reorder_ns, check_fcs
        self.faults = {"dropped": 0, "duplicated": 0, "reordered": 0, "corrupted": 0, "fcs_errors": 0}
        """What the harness did to frames, and what the receiving ports caught."""
        self.delivered: list[tuple[int, str, int, bytes]] = []
        self.now = 0
        self.down: set[tuple[str, int]] = set()
        """(node, port) whose link is down: frames handed to it are dropped (``link_down``)."""
        self.tamper = None
        """``tamper(node, port, frame) -> frame``: a hook that may change any frame (FCS included) as
        it leaves a port, to hurt one frame on purpose in a step-by-step test."""

    def _push_timer(self, name: str) -> None:
        tt = self.engines[name].timer
        if tt is not None:
            heapq.heappush(self.heap, (tt, self.index[name], 0, 0, 0, None))

    def _emit(self, name: str, outs) -> None:
        for port, frame, at in outs:
            op, peer, pport = self.ports[(name, port)]
            if (name, port) in self.down:
                made(frame)
                self.faults["dropped"] += 1
                continue
            op.enqueue(frame, at)
            start, arrival, frame, _ = op.pending.popleft()
            frame = made(frame)  # a lazy frame (emu.wire.lazy) is made as it leaves
            op.tx_frames += 1
            rng, faults = self.rng, self.faults
            if self.drop and rng.random() < self.drop:
                faults["dropped"] += 1
                continue
            copies = 1
            if self.duplicate and rng.random() < self.duplicate:
                faults["duplicated"] += 1
                copies = 2
            if self.reorder and rng.random() < self.reorder:
                faults["reordered"] += 1
                arrival += rng.randint(1, self.reorder_ns)
            if self.corrupt and rng.random() < self.corrupt:
                faults["corrupted"] += 1
                bit = rng.randrange(8 * len(frame))
                b = bytearray(frame)
                b[bit // 8] ^= 0x80 >> (bit % 8)
                frame = bytes(b)
            if self.tamper is not None:
                frame = self.tamper(name, port, frame)
            if self.check_fcs and not fcs_ok(frame):  # the receiving port checks the frame check sequence
                faults["fcs_errors"] += 1
                passes = getattr(self.engines[peer], "passes_damaged", None)
                if passes is None or not passes(frame):
                    continue
            for _ in range(copies):
                self.seq += 1
                heapq.heappush(self.heap, (arrival, self.index[peer], 1, pport, self.seq, frame[:-FCS_LEN]))

    def link_down(self, a: str, b: str, up: bool = False) -> None:
        """Take the link(s) between ``a`` and ``b`` down now (``up=True``: back up), both
        directions; engines with ``on_link_change(port, up, now)`` are told, as a cluster's are."""
        ends = [(x, xp) for lk in self.t.links if {lk.a, lk.b} == {a, b}
                for x, xp in ((lk.a, lk.a_port), (lk.b, lk.b_port))]
        if not ends:
            raise ConfigError(f"EngineNet: no link between {a!r} and {b!r}")
        for end in ends:
            (self.down.discard if up else self.down.add)(end)
        for x, xp in ends:
            tell = getattr(self.engines[x], "on_link_change", None)
            if tell is not None:
                self._emit(x, tell(xp, up, self.now))

    def send(self, name: str, port: int, frame: bytes, at: int | None = None) -> None:
        """Hand ``frame`` to port ``port`` of node ``name`` at ``at`` (default: now), as if its engine
        had sent it -- to inject a frame no application makes; ``step_all()`` then carries it."""
        self._emit(name, [(port, frame, self.now if at is None else at)])

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
