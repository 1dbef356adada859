"""The aggregation engine of one switch (spec 04 data plane): what an installed allreduce does here.

The network manager installs an allreduce (``Install``: its children's ports, the port toward the
parent, the algorithm, the operator and type, the aggregation buffers this switch gives it). Then:

* an INC packet from a child (hop by hop: hosts send to their switch, switches to their parent) is
  checked against the block's **bitmap** of ports: a port whose bit is set sent this block already --
  a retransmission, never aggregated twice: if the block's result is known it goes back to that port
  at once, if the block was sent up and its result is still to come the aggregate is sent up again
  (the parent's bitmap drops it if it had it);
* otherwise the packet goes to the processing unit (``pu.py``) with its leaf slot (reproducible: the
  child's position, else the arrival order); a packet the packet memory cannot hold is dropped and its
  bit cleared (its retransmission is taken);
* a completed block goes to the parent, or, at the root, down to every child as a RESULT packet; a
  RESULT from the parent goes down to every child. Results are kept until the allreduce is released,
  to answer retransmissions.

Sparse blocks: a child may send a block in several shards (index/value pairs); the switch counts the
child done when it has all ``shards`` of it (per-port shard sets); shards are merged into a dense
array of the block's span before aggregation (the *array* store). The block span is ``elems``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from emu.wire import DST_OFF, HDR_LEN, PacketType, build_frame
from emu.wire.inc import (DATA, F_LAST, F_RESULT, F_SPARSE, DecodeError, decode, encode_dense, encode_sparse,
                          op_by_code, wire_dtype)

from . import hashstore
from .pu import ProcessingUnit

log = logging.getLogger(__name__)
LINK_LOCAL = 0xFFFFFFFF
"""Destination of hop-by-hop INC packets (the next switch of the tree takes them)."""
ALGO_NAMES = {1: ("single", 1), 2: ("multi", 2), 4: ("multi", 4), 8: ("tree", 1)}


@dataclass(eq=False)
class Install:
    aid: int
    children: tuple[int, ...]
    """Ports of the children, in the tree's order (a reproducible leaf is the child's position)."""
    parent: int | None
    algo: str
    B: int
    reproducible: bool
    op: object
    dtype: np.dtype
    elems: int
    """Elements (dense) or (index, value) pairs (sparse) per packet."""
    buffers: int
    span: int = 0
    """Sparse: elements a block spans."""
    store: str = "array"
    """Sparse: ``array`` (shards merged into a dense array of the span: no extra traffic) or
    ``hash`` (a hash table with a spill buffer that overflows upward: the leaves of the tree)."""
    blocks: dict = field(default_factory=dict)
    """block -> its ``BlockState`` while it is being aggregated or its result awaited."""
    results: dict = field(default_factory=dict)


@dataclass(eq=False)
class BlockState:
    done: int = 0
    """Bitmap of the children counted done (by position)."""
    arrivals: int = 0
    """Children's packets handed to the processing unit (the next non-reproducible leaf slot)."""
    shards: dict = field(default_factory=dict)
    """Sparse: child position -> its shards so far."""
    up: list | None = None
    """Our aggregate's frames, once sent to the parent (sent again when a child retransmits)."""
    asked: int | None = None
    """When we last sent them again."""
    store: object = None
    """Sparse: the block's dense array, or its hash table (``_hash_merge``)."""


ASK_NS = 20_000
"""A switch asks its parent again for a block (on a child's retransmission) at most this often."""
KEEP_RESULTS = 4096
"""Results of completed blocks an installed allreduce keeps for retransmissions (the oldest go first;
a host's blocks without their result are among its last window's)."""


def _keep(results: dict, block: int, frames: list[bytes]) -> tuple[bool, list[bytes]]:
    """Keep a block's result frames (a sparse result may take several shards: added as they come);
    (every shard of it is here, the frames that were new)."""
    got = results.setdefault(block, {})
    new = []
    for f in frames:
        _aid, flags, _c, _b, shard, shards, _n, _r = DATA.unpack(f, HDR_LEN)
        if shard not in got:
            new.append(f)
        got[shard] = f
        if flags & F_LAST:
            got["n"] = shards
    while len(results) > KEEP_RESULTS:
        results.pop(next(iter(results)))
    return _complete(got), new


def _complete(got: dict) -> bool:
    return "n" in got and len(got) - 1 >= got["n"]


def _frames_of(got: dict) -> list[bytes]:
    return [f for k, f in sorted((k, f) for k, f in got.items() if k != "n")]


class Aggregator:
    def __init__(self, switch):
        self.sw = switch
        self.pu = ProcessingUnit(switch.spec.pu)
        self.installs: dict[int, Install] = {}
        self.stats = switch.stats
        for k in ("inc_packets", "inc_duplicates", "inc_drops", "inc_unknown", "inc_blocks", "inc_results"):
            self.stats.setdefault(k, 0)

    # -- control ---------------------------------------------------------------------------------
    def install(self, aid: int, children: tuple[int, ...], parent: int | None, algo_code: int, reproducible: bool,
                op_code: int, dtype_code: int, elems: int, buffers: int, span: int = 0, store: str = "array") -> bool:
        """False: no room (``max_allreduces`` installed already)."""
        if aid not in self.installs and len(self.installs) >= self.sw.spec.pu.max_allreduces:
            return False
        algo, B = ALGO_NAMES.get(algo_code, ("tree", 1))
        if reproducible:
            algo, B = "tree", 1
        self.installs[aid] = Install(aid, tuple(children), parent, algo, B, reproducible, op_by_code(op_code),
                                     wire_dtype(dtype_code), elems, buffers, span,
                                     store if parent is not None else "array")  # the root aggregates in an array
        return True

    def release(self, aid: int) -> None:
        ins = self.installs.pop(aid, None)
        for b in (ins.blocks.values() if ins is not None else ()):
            if b.store is not None:
                self._store(-(_hash_bytes(ins) if isinstance(b.store, dict) else b.store.nbytes))

    # -- data ------------------------------------------------------------------------------------
    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        try:
            head, values, index = decode(frame, HDR_LEN)
        except DecodeError as e:
            self.stats["malformed"] += 1
            log.warning("%s: malformed INC packet on port %d: %s", self.sw.name, port, e)
            return []
        aid, flags, _code, block, shard, shards, _count, _r = head
        ins = self.installs.get(aid)
        if ins is None:
            self.stats["inc_unknown"] += 1
            log.warning("%s: INC packet for allreduce %d, not installed here (port %d)", self.sw.name, aid, port)
            return []
        at = now + self.sw.spec.processing_delay_ns
        if flags & F_RESULT:
            return self._result_from_parent(ins, port, block, frame, at)
        if port not in ins.children:
            self.stats["inc_unknown"] += 1
            log.warning("%s: INC packet of allreduce %d from port %d, not a child", self.sw.name, aid, port)
            return []
        self.stats["inc_packets"] += 1
        got = ins.results.get(block)
        if got is not None and _complete(got):  # a child that missed the result: send it again
            self.stats["inc_duplicates"] += 1
            return [(port, f, at) for f in _frames_of(got)]
        b = ins.blocks.get(block)
        if b is None:
            b = ins.blocks[block] = BlockState()
        pos = ins.children.index(port)
        if b.done & (1 << pos):
            return self._counted_already(ins, b, now, at)
        out = []
        if flags & F_SPARSE:  # shards of one child's block: merge them, count the child when all are in
            got = self._child_shards(b, pos, flags, shard, shards, index, values)
            merged = None if got is None else self._merge_sparse(ins, b, block, port, got, at)
            if merged is None:
                return []
            out, values = merged
        return out + self._arrive(ins, b, block, pos, values, now)

    def _result_from_parent(self, ins: Install, port: int, block: int, frame: bytes, at: int) -> list:
        """The result, from the parent, on its way down: kept for retransmissions, and sent to every
        child."""
        if port != ins.parent:
            self.stats["inc_unknown"] += 1
            return []
        complete, new = _keep(ins.results, block, [frame])
        if complete:
            ins.blocks.pop(block, None)
        # a shard sent again (our duplicate asked the parent for it) goes down once only
        return [(c, f, at) for f in new for c in ins.children]

    def _counted_already(self, ins: Install, b: BlockState, now: int, at: int) -> list:
        """A child's retransmission of a block it was counted done for: never aggregated twice."""
        self.stats["inc_duplicates"] += 1
        if b.up is not None and (b.asked is None or now - b.asked >= ASK_NS):
            # our aggregate (or part of the result) may have been lost: ask again, once per interval
            b.asked = now
            return [(ins.parent, f, at) for f in b.up]
        return []

    def _child_shards(self, b: BlockState, pos: int, flags: int, shard: int, shards: int, index,
                      values) -> dict | None:
        """Collect one shard of a child's sparse block: the child's shards once all are in, else None
        (a shard it had already is counted a duplicate)."""
        got = b.shards.setdefault(pos, {})
        if shard in got:
            self.stats["inc_duplicates"] += 1
            return None
        got[shard] = (index, values)
        if flags & F_LAST:
            got["n"] = shards
        if "n" not in got or len(got) - 1 < got["n"]:
            return None
        del b.shards[pos]
        return got

    def _merge_sparse(self, ins: Install, b: BlockState, block: int, port: int, got: dict,
                      at: int) -> tuple[list, np.ndarray] | None:
        """Merge a child's whole sparse block into the block's store: (frames to send now -- the hash
        store's spills --, the stand-in values whose size tells the processing unit what the merge
        costs); None if the block indexes past the span (the peer's fault, counted malformed)."""
        idx = np.concatenate([np.asarray(v[0], np.int64) for k, v in got.items() if k != "n"])
        vals = np.concatenate([np.asarray(v[1], ins.dtype.newbyteorder("=")) for k, v in got.items() if k != "n"])
        if len(idx) and idx.max() >= ins.span:  # outside the block: the peer's fault
            self.stats["malformed"] += 1
            log.warning("%s: sparse shard of block %d from port %d indexes past the span %d",
                        self.sw.name, block, port, ins.span)
            return None
        # the engine keeps a sparse block's data; the processing unit is told what it costs: the
        # pairs (random access into the store), and for an array its scan when the block leaves,
        # shared out over the block's packets
        cost = len(idx) * (4 + ins.dtype.itemsize)
        if ins.store == "hash":
            out = self._hash_merge(ins, b, block, idx, vals, at)
        else:
            out = []
            cost += self._array_merge(ins, b, idx, vals)
        return out, np.zeros(max(1, cost // ins.dtype.itemsize), ins.dtype.newbyteorder("="))

    def _array_merge(self, ins: Install, b: BlockState, idx: np.ndarray, vals: np.ndarray) -> int:
        """Add a child's pairs into the block's dense array; returns this packet's share of the
        array's scan, in the bytes-worth of handler cycles the processing unit charges."""
        if b.store is None:
            b.store = np.zeros(ins.span, ins.dtype.newbyteorder("="))
            self._store(b.store.nbytes)
        with np.errstate(all="ignore"):
            np.add.at(b.store, idx, vals)  # a child switch may send one index in several shards (its spills)
        pu = self.sw.spec.pu
        return int(ins.span * ins.dtype.itemsize * pu.scan_cycles_per_byte / pu.cycles_per_byte) // len(ins.children)

    def _arrive(self, ins: Install, b: BlockState, block: int, pos: int, values, now: int) -> list:
        """Count the child done and hand its packet to the processing unit with its leaf slot; a
        packet the packet memory cannot hold is dropped and the child's bit cleared (its
        retransmission is taken). Returns what completes by ``now``."""
        bit = 1 << pos
        b.done |= bit
        slot = pos if ins.reproducible else b.arrivals
        b.arrivals += 1
        combine = _timing_only if ins.span else ins.op.combine
        ok = self.pu.arrive(now, (ins.aid, block), slot, np.asarray(values, ins.dtype.newbyteorder("=")),
                            P=len(ins.children), algo=ins.algo, combine=combine, B=ins.B)
        if not ok:
            b.done &= ~bit
            b.arrivals -= 1
            self.stats["inc_drops"] += 1
        return self._completions(now)

    # -- the sparse hash store ---------------------------------------------------------------------
    def _hash_merge(self, ins: Install, b: BlockState, block: int, idx: np.ndarray, vals: np.ndarray, at: int) -> list:
        """Fold a child's pairs into the block's hash table (``hashstore``: ``2 x elems`` slots); a pair
        whose slot holds another index goes to the spill buffer (``elems`` pairs), which, when full,
        leaves at once, unaggregated, as one more shard of this switch's output -- extra traffic."""
        h = b.store
        if h is None:
            h = b.store = hashstore.new_store(ins.elems, ins.dtype.newbyteorder("="))
            self._store(_hash_bytes(ins))  # the table's pairs and a spill buffer of one packet
        out = []
        for si, sv in hashstore.fold(h, idx, vals, ins.op.combine, ins.elems):
            f = build_frame(self.sw.node_id, LINK_LOCAL, PacketType.INC,
                            encode_sparse(ins.aid, block, si, sv, shard=h["next"], shards=0, last=False))
            h["next"] += 1
            h["sent"].append(f)
            self.stats["inc_spills"] = self.stats.get("inc_spills", 0) + 1
            self.stats["inc_spill_bytes"] = self.stats.get("inc_spill_bytes", 0) + len(f)
            out.append((ins.parent, f, at))
        return out

    def _hash_frames(self, ins: Install, block: int, h: dict | None) -> list[bytes]:
        """The hash store's last shards: the table's pairs and what is left in the spill buffer, after
        the spills already sent (the last shard carries the total)."""
        if h is None:
            return self._frames(ins, block, np.zeros(ins.span, ins.dtype.newbyteorder("=")), root=False)
        idx, vals = hashstore.leftovers(h)
        chunks = [slice(i, i + ins.elems) for i in range(0, len(idx), ins.elems)] or [slice(0, 0)]
        total = h["next"] + len(chunks)
        last = [build_frame(self.sw.node_id, LINK_LOCAL, PacketType.INC,
                            encode_sparse(ins.aid, block, idx[c], vals[c], shard=h["next"] + k, shards=total,
                                          last=k == len(chunks) - 1))
                for k, c in enumerate(chunks)]
        return h["sent"] + last

    def _store(self, nbytes: int) -> None:
        """Sparse stores' working memory in use (``inc_store_bytes``) and its peak."""
        self.stats["inc_store_bytes"] = used = self.stats.get("inc_store_bytes", 0) + nbytes
        self.stats["inc_store_peak"] = max(self.stats.get("inc_store_peak", 0), used)

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        return self._completions(now)

    def next_time(self) -> int | None:
        return self.pu.next_time()

    def _completions(self, now: int) -> list[tuple[int, bytes, int]]:
        out = []
        for t, (aid, block), result in self.pu.advance(now):
            ins = self.installs.get(aid)
            if ins is None:
                continue
            self.stats["inc_blocks"] += 1
            at = max(t, now) + self.sw.spec.processing_delay_ns
            b = ins.blocks.get(block)
            store = b.store if b is not None else None
            if ins.store == "hash" and ins.parent is not None:
                frames = self._hash_frames(ins, block, store)
                new = frames[len(store["sent"]):] if store is not None else frames  # spills went already
            else:
                if ins.span:  # the sparse array store: the engine's array, not the timing stand-in
                    result = store if store is not None else np.zeros(ins.span, ins.dtype.newbyteorder("="))
                frames = new = self._frames(ins, block, result, root=ins.parent is None)
            if store is not None:  # the block's store is done with: its memory is free
                self._store(-(_hash_bytes(ins) if isinstance(store, dict) else store.nbytes))
                b.store = None
            if ins.parent is None:  # the root: the result goes down
                _keep(ins.results, block, frames)
                ins.blocks.pop(block, None)
                self.stats["inc_results"] += 1
                out += [(c, f, at) for f in frames for c in ins.children]
            else:
                if b is not None:
                    b.up = frames
                out += [(ins.parent, f, at) for f in new]
        return out


    def _frames(self, ins: Install, block: int, result: np.ndarray, root: bool) -> list[bytes]:
        """A block's aggregate as it leaves: one dense packet, or its non-zeros in shards of
        ``elems`` pairs (an all-zero block still sends one empty shard, so counts complete)."""
        flags = F_RESULT if root else 0
        native = result.astype(ins.dtype.newbyteorder("="))
        if not ins.span:
            return [build_frame(self.sw.node_id, LINK_LOCAL, PacketType.INC,
                                encode_dense(ins.aid, block, native, flags=F_LAST | flags))]
        nz = np.flatnonzero(native)
        chunks = [nz[i:i + ins.elems] for i in range(0, len(nz), ins.elems)] or [nz]
        return [build_frame(self.sw.node_id, LINK_LOCAL, PacketType.INC,
                            encode_sparse(ins.aid, block, c, native[c], shard=k, shards=len(chunks),
                                          last=k == len(chunks) - 1, flags=flags))
                for k, c in enumerate(chunks)]


def _hash_bytes(ins: Install) -> int:
    """A hash store's memory: 2 x elems slots and a spill buffer of elems, (index, value) pairs."""
    return hashstore.store_bytes(ins.elems, ins.dtype.itemsize)


def _timing_only(a: np.ndarray, _b: np.ndarray) -> np.ndarray:
    """The processing unit's combine for the hash store, whose data the engine merged already."""
    return a


def is_inc(frame: bytes) -> bool:
    return len(frame) > DST_OFF + 6 and frame[DST_OFF + 6] == PacketType.INC


__all__ = ["Aggregator", "Install", "LINK_LOCAL", "is_inc", "DATA"]
