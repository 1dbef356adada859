"""The control plane of in-network allreduce (spec 04), in the network manager element.

A host asks for an allreduce over its communicator (INCCTL REQUEST: the members' addresses in rank
order, type, operator, size); every member asks, and they all get the same answer. For the first
request of a communicator the manager:

1. computes the reduction tree over the switches (``Topology.spanning_tree``: rooted at the lowest
   switch high enough to span the members, around dead links and switches known to be full);
2. installs the aggregation handler on each switch of the tree (a source-routed INC_INSTALL command:
   its children's ports, the port toward its parent, the algorithm, operator, type, elements per
   packet and the aggregation buffers it gives this allreduce -- its memory share);
3. when every switch answered DONE, GRANTs: allreduce id, elements per packet, blocks a host may
   have in flight (Little's law, capped by the buffers: ``little``), the staggered schedule's group,
   algorithm;
4. when a switch REFUSED (its memory is partitioned among ``pu.max_allreduces`` allreduces and they
   are all taken), releases what it installed, marks the switch full and tries another tree without
   it; when there is none, REJECTs -- the application falls back to host allreduce.
5. when every member RELEASEd the allreduce (``Comm.free``: the communicator is done with it),
   releases it on every switch of its tree (INC_RELEASE: the memory share is free for another) and
   forgets it; each RELEASE is answered at once with RELEASED (count: members still holding it).

The algorithm goes by the data size per rank: single buffer above 512 KiB, 4 buffers above 256 KiB,
2 buffers above 128 KiB, the tree below; always the tree when reproducibility is asked for.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from emu.config import ConfigError
from emu.wire import HDR_LEN, PacketType, build_frame
from emu.wire.inc import CTL, GRANT, INSTALL, MEMBER, REQUEST, Algo, CtlOp, DecodeError, wire_dtype
from emu.wire.qsnet import MgmtOp

log = logging.getLogger(__name__)


def algorithm(nbytes: int, reproducible: bool) -> Algo:
    if reproducible:
        return Algo.TREE
    if nbytes > 512 * 1024:
        return Algo.SINGLE
    if nbytes > 256 * 1024:
        return Algo.MULTI4
    if nbytes > 128 * 1024:
        return Algo.MULTI2
    return Algo.TREE


@dataclass(eq=False)
class Request:
    key: tuple
    members: list[str]
    dtype: np.dtype
    op: int
    nbytes: int
    reproducible: bool
    elems: int
    state: str = "new"
    aid: int = 0
    askers: list = field(default_factory=list)
    """(host address, seq) waiting for the answer."""
    tree: dict = field(default_factory=dict)
    waiting: set = field(default_factory=set)
    installed: set = field(default_factory=set)
    grant: bytes = b""
    why: str = ""
    want: int = 0
    """The algorithm the host asked for (0: by size)."""
    span: int = 0
    """Sparse: elements a block spans (0: dense)."""
    stores: str = "auto"
    """Sparse: ``auto`` (hash tables at the leaves, arrays above) or ``array`` everywhere."""
    round: int = 0
    """Install rounds (a refusal starts another): answers of an earlier round are ignored."""
    released: set = field(default_factory=set)
    """Member addresses that released the granted allreduce."""


class IncControl:
    def __init__(self, manager):
        self.m = manager
        self.requests: dict[tuple, Request] = {}
        self.full: set[str] = set()
        self._aid = 0
        for k in ("inc_requests", "inc_grants", "inc_rejects", "inc_installs", "inc_refused", "inc_releases"):
            manager.stats.setdefault(k, 0)

    def on_request(self, src: int, frame: bytes, now: int) -> list:
        m = self.m
        op, _st, seq, aid, count = CTL.unpack(frame, HDR_LEN)
        if op == CtlOp.RELEASE:
            return self._release(src, seq, aid, now)
        if op != CtlOp.REQUEST:
            raise DecodeError(f"control operation {op} is not a request or a release")
        off = HDR_LEN + CTL.size
        dcode, repro, want, comm, nbytes, opc, elems, span = REQUEST.unpack(frame, off)
        stores = "array" if repro & 0x80 else "auto"
        repro &= 0x7F
        if want and want not in Algo._value2member_map_:
            raise DecodeError(f"request for unknown algorithm {want}")
        off += REQUEST.size
        if len(frame) != off + count * MEMBER.size:
            raise DecodeError(f"request for {count} members is {len(frame)} bytes long")
        addrs = [MEMBER.unpack_from(frame, off + 4 * i)[0] for i in range(count)]
        names = [m.ids.get(a) for a in addrs]
        if src not in addrs or any(n is None or m.topology.nodes[n].kind != "host" for n in names):
            raise DecodeError(f"request from {src} for members {addrs[:8]}: not hosts, or the sender is not one")
        dtype = wire_dtype(dcode)
        m.stats["inc_requests"] += 1
        key = (comm, tuple(addrs), dcode, opc, bool(repro), want, span, stores)
        req = self.requests.get(key)
        if req is None:
            per = dtype.itemsize + (4 if span else 0)  # a sparse element travels with its 4-byte index
            req = self.requests[key] = Request(key, names, dtype, opc, nbytes, bool(repro),
                                               elems or max(1, 1024 // per), want=want, span=span, stores=stores)
        req.askers.append((src, seq))
        if req.state in ("granted", "rejected"):
            return self._answer(req, now)
        if req.state == "new":
            return self._install(req, now)
        return []

    # -- trees -----------------------------------------------------------------------------------
    def _install(self, req: Request, now: int) -> list:
        m = self.m
        avoid = list(self.full) + [tuple(lk) for lk in m.dead]
        try:
            root, tree = m.topology.spanning_tree(req.members, avoid, what="in-network allreduce")
        except ConfigError as e:
            return self._reject(req, now, f"no reduction tree has room: {e}")
        self._aid = self._aid % 0xFFFF + 1
        req.aid, req.tree, req.state = self._aid, tree, "installing"
        req.round += 1
        algo = Algo.TREE if req.reproducible else Algo(req.want) if req.want else algorithm(req.nbytes, False)
        share = 0xFFFF
        out = []
        req.waiting = set(tree)
        work = 0  # the model's handler time of one block at its busiest switch
        for sw, (parent, children) in tree.items():
            pu = m.topology.nodes[sw].spec.pu
            store = _store(req, m.topology, sw, children)
            buffers = max(1, pu.working_memory_bytes // pu.max_allreduces // _block_bytes(req, algo, store, len(children)))
            per_packet = req.elems * (req.dtype.itemsize + (4 if req.span else 0)) * 8  # a child may send 8 shards
            if store == 1:
                per_packet += int(req.span * req.dtype.itemsize * pu.scan_cycles_per_byte / pu.cycles_per_byte)
            work = max(work, math.ceil(len(children) * per_packet * pu.cycles_per_byte / pu.ghz)
                       + pu.copy_cycles)
            share = min(share, buffers)
            body = INSTALL.pack(sum(1 << p for p in children), len(children), 255 if parent is None else parent, algo,
                                int(req.reproducible), _dcode(req.dtype), _store(req, m.topology, sw, children),
                                req.elems, min(buffers, 0xFFFF), req.op, req.span)
            out += m._command(sw, MgmtOp.INC_INSTALL, req.aid, body, now,
                              on_answer=lambda ok, t, why, s=sw, r=req, n=req.round: self._installed(r, n, s, ok, t, why))
            m.stats["inc_installs"] += 1
        depth = _depth(m.topology, root, tree)
        win = little(req, algo, m.topology, root, tree, share)
        window = win.window
        # a window of blocks comes back after about: every level's work on a block, the blocks of the
        # window sharing the switch's subsets of cores -- hosts time out after a multiple of it
        pu0 = m.topology.nodes[root].spec.pu
        subsets = max(1, pu0.cores // (pu0.subset if pu0.scheduler == "hfcfs" else pu0.cores))
        latency = depth * work * max(1, -(-max(1, window) // subsets))
        req.grant = GRANT.pack(req.elems, max(1, window), algo, depth, len(tree), min(latency, 0xFFFFFFFF),
                               min(win.group, 0xFFFF))
        m._record(now, f"allreduce {req.aid}: tree of {len(tree)} switches rooted at {root}, {Algo(algo).name}, "
                       f"{req.elems} elements per packet, window {window} (Little's law {win.little}, memory {share}), "
                       f"staggered over groups of {win.width}")
        return out

    def _installed(self, req: Request, rnd: int, sw: str, ok: bool, now: int, why: str) -> list:
        if rnd != req.round or sw not in req.waiting:
            return []
        req.waiting.discard(sw)
        if ok:
            req.installed.add(sw)
        else:
            self.m.stats["inc_refused"] += 1
            self.full.add(sw)
            req.state = "retry"
            self.m._record(now, f"allreduce {req.aid}: {sw} {why}; another tree without it")
        if req.waiting:
            return []
        if req.state == "installing":
            req.state = "granted"
            return self._answer(req, now)
        out = [f for s in sorted(req.installed) for f in self.m._command(s, MgmtOp.INC_RELEASE, req.aid, b"", now)]
        req.installed = set()
        req.state = "new"
        return out + self._install(req, now)

    def _release(self, src: int, seq: int, aid: int, now: int) -> list:
        """A member is done with allreduce ``aid``; the last one frees it on every switch."""
        m = self.m
        req = next((r for r in self.requests.values() if r.state == "granted" and r.aid == aid), None)
        left, status = 0, 1  # status 1: not installed (any more) -- a resent RELEASE, or a stale id
        out = []
        if req is not None:
            if src not in req.key[1]:
                raise DecodeError(f"release of allreduce {aid} from {src}, not one of its members")
            status = 0
            req.released.add(src)
            left = len(req.members) - len(req.released)
            if not left:
                for sw in sorted(req.installed):
                    out += m._command(sw, MgmtOp.INC_RELEASE, req.aid, b"", now)
                self.full -= req.installed
                del self.requests[req.key]
                m.stats["inc_releases"] += 1
                m._record(now, f"allreduce {aid}: released on {len(req.installed)} switches")
        body = CTL.pack(CtlOp.RELEASED, status, seq, aid, left)
        return out + [(m.port_to(src), build_frame(m.node_id, src, PacketType.INCCTL, body, prio=1), now + m.min_delay_ns)]

    def _reject(self, req: Request, now: int, why: str) -> list:
        req.state, req.why = "rejected", why
        self.m._record(now, f"in-network allreduce for {len(req.members)} members rejected: {why}")
        return self._answer(req, now)

    def _answer(self, req: Request, now: int) -> list:
        m = self.m
        out = []
        at = now + m.min_delay_ns
        for host, seq in req.askers:
            if req.state == "granted":
                m.stats["inc_grants"] += 1
                body = CTL.pack(CtlOp.GRANT, 0, seq, req.aid, 0) + req.grant
            else:
                m.stats["inc_rejects"] += 1
                body = CTL.pack(CtlOp.REJECT, 1, seq, 0, 0) + req.why.encode()[:200]
            out.append((m.port_to(host), build_frame(m.node_id, host, PacketType.INCCTL, body, prio=1), at))
        req.askers = []
        return out


def little(req: Request, algo: Algo, topology, root: str, tree: dict, share: int):
    """The window a host gets (``model.little_window``: Little's law, R = M B L / P buffers, capped by
    the memory ``share``) and the staggered schedule's group, from what the manager knows of the tree:

    * slot: a data packet's time on the slowest member's link (``LinkSpec.frame_bytes`` of a packet of
      ``elems``): B = P / slot packets a ns into a switch of P children;
    * the spacing the staggered schedule keeps between consecutive ranks (``model.switch_spacing``,
      the most a switch of the tree asks): at a switch whose unit,
      a block's packets coming together, aggregates fewer packets than its links bring
      (``model.contention_limits``: K / tau < P / slot), the spacing at which no handler waits
      (``model.stagger_spacing``: single buffer L, B buffers L / B, the tree 0, and tau / (S B)
      where a block's packets outnumber its cores), L = ``cycles_per_byte`` x data bytes a packet; where
      no switch's unit limits, none -- a spread only delays every block (it completes when its last
      rank sent it), and the staggered schedule sends in order;
    * L: the ranks' spread, then, for the member farthest from the root, each link up and down
      (its latency and a packet's serialization), each switch twice (``processing_delay_ns``), each
      switch's block time (``model.block_time``: Q tau + its last handler -- the spec's (Q + 1) tau,
      Q by ``model.model`` at that spacing, tau by ``service_time``, with the last handler's own
      time in place of one tau, ``model.last_handler``; the spread (P - 1) delta_c of the spec's
      block latency is the ranks' spread, counted once), and the member's NIC (``nic_delay_ns``)."""
    from emu.wire import PacketType
    from emu.wire.inc import DATA_LEN

    from .model import block_time, little_window, switch_spacing

    nb = topology.neighbours()
    body = DATA_LEN + req.elems * (req.dtype.itemsize + (4 if req.span else 0))
    hosts = [topology.nodes[h] for h in req.members]
    first = {h.name: nb[h.name][0] for h in hosts}  # (port, switch, switch port, link)
    slot = max(lk.spec.serialization_ns(lk.spec.frame_bytes(PacketType.INC, body)) for _p, _s, _sp, lk in first.values())
    name, B = {Algo.SINGLE: ("single", 1), Algo.MULTI2: ("multi", 2), Algo.MULTI4: ("multi", 4)}.get(algo, ("tree", 1))
    units = {}
    for sw, (_parent, children) in tree.items():
        pu = topology.nodes[sw].spec.pu
        units[sw] = (len(children), pu.subset if pu.scheduler == "hfcfs" else pu.cores, pu.cores_per_cluster, pu.cores,
                     (body - DATA_LEN) * pu.cycles_per_byte / pu.ghz, pu.copy_cycles / pu.ghz)
    spacing = max(switch_spacing(name, L, P, S, C, K, slot, B, copy) for P, S, C, K, L, copy in units.values())
    block = {sw: block_time(name, L, P, S, C, K, slot, spacing, B, copy) for sw, (P, S, C, K, L, copy) in units.items()}
    far = {(u, p): (v, lk) for u in nb for p, v, _vp, lk in nb[u]}
    path = 0.0
    for h in hosts:
        _p, v, _sp, lk = first[h.name]
        ns = h.spec.nic_delay_ns
        while True:
            ns += 2 * (lk.spec.latency_ns + lk.spec.serialization_ns(lk.spec.frame_bytes(PacketType.INC, body)))
            ns += 2 * topology.nodes[v].spec.processing_delay_ns + block[v]
            if v == root:
                break
            v, lk = far[(v, tree[v][0])]
        path = max(path, ns)
    return little_window(-(-req.nbytes // max(1, body - DATA_LEN)), len(hosts), slot, spacing, path, share)


def _block_bytes(req: Request, algo: Algo, store: int, P: int) -> int:
    """Working memory one block in flight takes at a switch: M buffers of a packet (dense: single 1,
    B buffers B, the tree (P - 1) / log2 P on average, the spec's figure); sparse: the store, one per
    block -- an array of the span (1), or a hash table of 2 x elems pairs and a spill buffer (2)."""
    item = req.dtype.itemsize
    if store == 1:
        return req.span * item
    if store == 2:
        return 3 * req.elems * (4 + item)
    M = {Algo.SINGLE: 1, Algo.MULTI2: 2, Algo.MULTI4: 4}.get(algo)
    if M is None:
        M = max(1, -(-(P - 1) // max(1, (P - 1).bit_length())))
    return req.elems * item * M


def _store(req: Request, topology, sw: str, children: tuple[int, ...]) -> int:
    """INSTALL's sparse byte: 0 dense; sparse, data gets denser toward the root: a hash table with a
    spill buffer (2) at a switch whose children are all hosts, an array (1) elsewhere and at the root
    (``store=`` on the request overrides: REQUEST bit 7 of ``reproducible`` asks for arrays everywhere)."""
    if not req.span:
        return 0
    if req.stores == "array":
        return 1
    nb = {p: v for p, v, _vp, _l in topology.neighbours()[sw]}
    return 2 if all(topology.nodes[nb[p]].kind == "host" for p in children) else 1


def _dcode(dt: np.dtype) -> int:
    from emu.wire.inc import dtype_code

    return dtype_code(dt.newbyteorder("=") if dt.fields is None else dt)


def _depth(topology, root: str, tree: dict) -> int:
    """Levels of switches in the tree (1: the root alone)."""
    far = {(u, p): v for u in tree for p, v, _vp, _l in topology.neighbours()[u]}
    deepest = 1
    for sw in tree:
        d, v = 1, sw
        while v != root:
            v = far[(v, tree[v][0])]
            d += 1
        deepest = max(deepest, d)
    return deepest
