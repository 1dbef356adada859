"""The NIC end of spec 02's coded broadcast: runs a plan (``emu.nodes.collectives.coding.plan``) on real
frames (sans-I/O part of the NIC engine).

The node starts with its own packet (if it is a source). Whenever it first has a packet -- its own,
from a frame, made by encoding, or recovered by decoding -- it sends it on as the plan's rules say
(multicast trees are relayed this way). Every unicast carries its injection time (``stamp``: when its
sender had the packet; an encoded packet's, when its encoding began, so that step C counts in the
C+D phase), and its receiver files its latency under the sequential step it belongs to (the plan's
``rounds``: phase and round), which gives spec 02's execution time. An intermediate node
encodes a chain packet (XOR of two sources) or a combined message (concatenation) as soon as it has
the packets it needs. Every node decodes as soon as it can: a plain packet of source a and the chain
packet a^b give b, and so on along the chain. XORs take ``HostSpec.xor_ns`` each, one at a time.

A frame is checked against the plan before anything in it is used: its sender must be one the plan
has send this packet to this node, its header must name sources of the run, and its payload must
have the run's packet size; anything else is counted (``nc_unexpected``, ``malformed``) and dropped.
The run finishes when every source's packet is here (the node keeps relaying what reaches it after).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from emu.wire import HDR_LEN, DecodeError, PacketType
from emu.wire.coding import NC, NcKind

from .interface import PENDING, Mechanism, NicCore, NicRequest, register_mechanism

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Run:
    plan: object
    me: int
    size: int
    """Bytes of one packet."""
    on_done: Callable
    have: dict = field(default_factory=dict)
    """key -> payload (bytes) once this node has it."""
    stamps: dict = field(default_factory=dict)
    """key -> the stamp it arrived with (relays keep it)."""
    pending: dict = field(default_factory=dict)
    """source -> chain keys that name it, waiting for one side to be known."""
    wanted: set = field(default_factory=set)
    """Sources whose packet this node does not have yet."""
    made: set = field(default_factory=set)
    xor_free: int = 0
    """When the XOR unit is next free."""
    finished: bool = False
    stats: dict = field(default_factory=dict)


class NcRun(NicRequest):
    """Spec 02: run a coded-broadcast plan on the NIC."""

    __slots__ = ("plan", "data")

    def __init__(self, plan, data: bytes):
        self.plan, self.data = plan, data

    def describe(self, names) -> str:
        return f"nc_run({self.plan.scheme.algo})"


@register_mechanism
class CodingNIC(Mechanism):
    """Spec 02's coding endpoint: sends, relays, encodes and decodes a plan's packets."""

    name = "coding"
    frames = {PacketType.NC: "on_frame"}
    requests = {NcRun: "_req_run"}
    verbs = ("grid", "nc_run")

    def __init__(self, nic: NicCore):
        self.nic = nic
        self.run: Run | None = None
        self._port = -1  # the last of several links into the router a packet went out on
        self.stats = {"nc_sent": 0, "nc_received": 0, "nc_duplicates": 0, "nc_unexpected": 0, "nc_xors": 0}

    # -- what applications call (``host.nc_run``, ``host.grid``) -----------------------------------
    @property
    def grid(self):
        """The direct network's ``emu.topologies.grid.Grid`` (None on other topologies)."""
        from emu.topologies.grid import Grid

        g = self.nic.grid
        return Grid(*g) if g is not None else None

    def nc_run(self, plan, data: bytes) -> NcRun:
        """Run a coded-broadcast plan (``emu.nodes.collectives.coding.plan``) with this node's packet;
        returns (packets by source, per-step figures)."""
        return NcRun(plan, bytes(data))

    def _req_run(self, op: NcRun, now: int, done: Callable) -> tuple[int, Any]:
        self.start(op.plan, op.data, now, done)
        return 0, PENDING

    # -- API ----------------------------------------------------------------------------------------
    def start(self, plan, data: bytes, t: int, on_done: Callable) -> None:
        """Run ``plan`` as node ``nic.node_id`` (its rank in the grid) with this node's ``data``;
        ``on_done((packets by source, per-step figures))`` when every source's packet is here."""
        if self.run is not None and not self.run.finished:
            raise RuntimeError(f"{self.nic.name}: a coded broadcast is already running")
        me = self.nic.host_ids[self.nic.name]
        r = self.run = Run(plan, me, len(data), on_done)
        r.wanted = set(plan.sources) - {me}
        r.stats = {"received": {}, "latency_max": {}, "latency_sum": 0, "duplicates": 0, "xors": 0,
                   "first_ns": t, "last_rx": t, "done_ns": None, "decode_ns": 0}
        for key in plan.origin.get(me, []):
            self._acquire(r, key, data, t, None)
        self._check_done(r, t)

    # -- frames -------------------------------------------------------------------------------------
    def on_frame(self, frame: bytes, src: int, port: int, now: int) -> None:
        r = self.run
        step, level, kind, group, a, b, root, parts, stamp = NC.unpack(frame, HDR_LEN)
        payload = frame[HDR_LEN + NC.size:]
        if r is None:
            self.stats["nc_unexpected"] += 1
            log.warning("%s: coded frame from %d with no coded broadcast running", self.nic.name, src)
            return
        n = r.plan.grid.size
        if kind == NcKind.PLAIN and a == b and a < n:
            key, size = ("p", a), r.size
        elif kind == NcKind.XOR and a < n and b < n and a != b:
            key, size = ("x", level, a, b), r.size
        elif kind == NcKind.CONCAT and group < len(r.plan.groups):
            key, size = ("c", level, group), r.size * parts
        else:
            raise DecodeError(f"coded frame names kind {kind}, sources {a}, {b}, group {group}: not of this run")
        if (src, key) not in r.plan.expected(r.me):
            self.stats["nc_unexpected"] += 1
            log.warning("%s: coded frame %s from %d, which the plan does not send here", self.nic.name, key, src)
            return
        if len(payload) != size:
            raise DecodeError(f"coded frame {key} carries {len(payload)} bytes, the run's packets are {size}")
        self.stats["nc_received"] += 1
        st = r.stats
        st["received"][step] = st["received"].get(step, 0) + 1
        lat = (now - stamp) & 0xFFFFFFFF
        where = r.plan.rounds[(src, r.me, key)]  # (phase, round): the sequential step of this unicast
        st["latency_max"][where] = max(st["latency_max"].get(where, 0), lat)
        st["latency_sum"] += lat
        if key in r.have:
            self.stats["nc_duplicates"] += 1
            st["duplicates"] += 1
            return
        st["last_rx"] = now
        self._acquire(r, key, payload, now, stamp)
        self._check_done(r, now)

    # -- the dataflow -------------------------------------------------------------------------------
    def _acquire(self, r: Run, key, payload: bytes, t: int, stamp: int | None, began: int | None = None) -> None:
        """This node has ``key`` at ``t`` (from a frame stamped ``stamp``, or made here from inputs it
        had at ``began``): send it on as the plan says, then see what it unlocks."""
        if key in r.have:
            return
        r.have[key] = payload
        r.stamps[key] = stamp
        nic = self.nic
        for step, level, dst, root in r.plan.rules.get(r.me, {}).get(key, ()):
            # every unicast is stamped with its injection: now, or when its encoding began (step C
            # counts in the C+D phase); the header's root still names the multicast's root
            s = (began if began is not None else t) & 0xFFFFFFFF
            kind, group, a, b, parts = self._header(r, key)
            body = NC.pack(step, level, kind, group, a, b, root, parts, s) + payload
            # a node with several links into its router (``ports=P``) injects on them in turn
            port = None if nic.rails == 1 else self._next_port(nic.rails)
            nic.emit(dst, PacketType.NC, body, t + nic.spec.nic_delay_ns, vc=_vc(step) << r.plan.grid.wrap, port=port)
            self.stats["nc_sent"] += 1
        if key[0] == "p":
            r.wanted.discard(key[1])
            for other in r.pending.pop(key[1], ()):  # chain packets this unlocks
                self._decode(r, other, t)
        elif key[0] == "x":
            self._decode(r, key, t)
        else:  # a combined message: every part is a plain packet
            srcs = r.plan.group_sources(key[2])
            for i, s in enumerate(srcs):
                self._acquire(r, ("p", s), payload[i * r.size:(i + 1) * r.size], t, stamp)
        for needs, out in r.plan.makes.get(r.me, ()):
            if out not in r.made and needs <= r.have.keys():
                r.made.add(out)
                self._make(r, needs, out, t)

    def _next_port(self, n: int) -> int:
        self._port = (self._port + 1) % n
        return self._port

    def _xor_at(self, r: Run, t: int) -> int:
        start = max(t, r.xor_free)
        r.xor_free = start + self.nic.spec.xor_ns
        self.stats["nc_xors"] += 1
        r.stats["xors"] += 1
        return r.xor_free

    def _make(self, r: Run, needs, out, t: int) -> None:
        if out[0] == "x":
            _, _lvl, a, b = out
            done = self._xor_at(r, t)
            data = _xor(r.have[("p", a)], r.have[("p", b)])
        else:
            done = t
            data = b"".join(r.have[("p", s)] for s in r.plan.group_sources(out[2]))
        self.nic.at(done, lambda _a, o=out, d=data: self._made(r, o, d, t), None)

    def _made(self, r: Run, key, data: bytes, began: int | None = None) -> None:
        self._acquire(r, key, data, self.nic.now, None, began)
        self._check_done(r, self.nic.now)

    def _decode(self, r: Run, key, t: int) -> None:
        _, _lvl, a, b = key
        ka, kb = ("p", a) in r.have, ("p", b) in r.have
        if ka and kb:
            return
        if not ka and not kb:  # wait for either side
            r.pending.setdefault(a, []).append(key)
            r.pending.setdefault(b, []).append(key)
            return
        known, unknown = (a, b) if ka else (b, a)
        data = _xor(r.have[key], r.have[("p", known)])
        done = self._xor_at(r, t)
        self.nic.at(done, lambda _a, s=unknown, d=data: self._made(r, ("p", s), d), None)

    def _check_done(self, r: Run, t: int) -> None:
        if r.finished or r.wanted:
            return
        r.finished = True
        r.stats["done_ns"] = t
        r.stats["decode_ns"] = t - r.stats["last_rx"]  # step G: from the last packet in to the last decoded
        out = {s: r.have[("p", s)] for s in r.plan.sources}
        self.nic.at(t + self.nic.spec.nic_delay_ns, r.on_done, (out, r.stats))

    def _header(self, r: Run, key) -> tuple[int, int, int, int, int]:
        """(kind, group, a, b, parts) of a packet."""
        p = r.plan
        if key[0] == "p":
            return NcKind.PLAIN, p.group_of(key[1]), key[1], key[1], 1
        if key[0] == "x":
            return NcKind.XOR, p.group_of(key[2]), key[2], key[3], 1
        srcs = p.group_sources(key[2])
        return NcKind.CONCAT, key[2], srcs[0], srcs[-1], len(srcs)


def _xor(a: bytes, b: bytes) -> bytes:
    return (np.frombuffer(a, np.uint8) ^ np.frombuffer(b, np.uint8)).tobytes()


def _vc(step: int) -> int:
    """The step's VC (its class; on a torus the source doubles it: ``class_dateline`` VC pairs)."""
    from emu.nodes.collectives.coding.plan import Step

    return Step.VC[step]
