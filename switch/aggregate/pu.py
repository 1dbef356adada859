"""A switch's processing unit aggregating allreduce blocks (spec 04), as a discrete-event model.

Sans-I/O and time-driven (DESIGN.md principles 1, 2): the switch engine hands it packets
(:meth:`ProcessingUnit.arrive`) and asks it to run up to ``now`` (:meth:`advance`), which returns the
blocks completed by then with their results; :meth:`next_time` is the engine's next timer.

* **Parser and packet memory.** An aggregation packet takes its bytes of the L2 packet memory from
  its arrival until its handler is done with it; a packet that does not fit is dropped (counted) --
  the hosts' retransmission recovers.
* **Scheduler.** ``fcfs``: one queue, any free core takes its head; the block's buffer lives in the
  scratchpad of cluster ``block mod clusters``, and a handler elsewhere pays ``remote_factor``.
  ``hfcfs``: a block's packets queue for one subset of ``subset`` cores of one cluster (local
  memory), blocks spread over the subsets by number.
* **Cores** run a handler per packet, never suspended: a handler waiting for a buffer busy-waits on
  its core. Its cost: ``cycles_per_byte`` per byte of data (L), times ``remote_factor`` off its
  block's cluster.
* **Algorithms** (the state of a block, :class:`Block`):
  ``single`` -- one buffer per block: each handler accumulates inside a critical section of L;
  ``multi`` (B buffers) -- a handler takes any free buffer; the one that completes the block folds
  the other buffers into its own, (B - 1) L more;
  ``tree`` -- a handler copies its packet into its own buffer (``copy_cycles``), then, while the
  sibling subtree's value is there, combines the pair (L) and climbs; a pair is combined by
  whichever handler brings its second half, so no handler ever waits. The leaf a packet takes is
  its ``slot``: its arrival order, or, reproducible, its input port -- then the summation order is
  fixed whatever the arrival order, and float results have the same bits in every run.
* **Working memory**: the aggregation buffers alive (single: 1 per block in progress, multi: B,
  tree: one per packet not yet folded into another); peak kept, overruns counted.

Values are combined with the operator's numpy function at the moment the modelled handler does so,
so a non-reproducible float result depends on the simulated order, as on the hardware.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from emu.config import PUSpec

ALGOS = ("single", "multi", "tree")


@dataclass(eq=False)
class Packet:
    key: Any
    """The block it belongs to (e.g. (aid, block))."""
    slot: int
    values: np.ndarray
    nbytes: int
    arrival: int
    core: int = -1


@dataclass(eq=False)
class Block:
    key: Any
    P: int
    algo: str
    B: int
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray]
    home: int
    """Cluster whose scratchpad holds its buffers."""
    subset: int
    done_count: int = 0
    acc: np.ndarray | None = None
    lock_free: bool = True
    waiters: deque = field(default_factory=deque)
    bufs: list = field(default_factory=list)
    """multi: [busy, value] per buffer."""
    tree: dict = field(default_factory=dict)
    """tree: (level, index) -> value waiting for its sibling."""
    first: int = 0
    buffers: int = 0
    """Working-memory buffers this block holds now."""


class ProcessingUnit:
    def __init__(self, spec: PUSpec):
        self.spec = spec
        self.K = spec.cores
        self.C = spec.cores_per_cluster
        self.S = spec.subset if spec.scheduler == "hfcfs" else self.K
        self.nsub = self.K // self.S
        self.core_busy = [False] * self.K
        self.queues = [deque() for _ in range(self.nsub)]
        self.blocks: dict[Any, Block] = {}
        self._events: list = []
        self._seq = 0
        self.now = 0
        self.completed: list[tuple[int, Any, np.ndarray]] = []
        self.mem = 0
        self.work = 0
        self.stats = {"packets": 0, "drops": 0, "blocks": 0, "peak_packet_memory": 0, "peak_working_memory": 0,
                      "working_memory_overruns": 0, "busy_wait_ns": 0, "remote_handlers": 0, "handler_ns": 0}

    # -- time ------------------------------------------------------------------------------------
    def ns(self, cycles: float) -> int:
        return math.ceil(cycles / self.spec.ghz)

    def _at(self, t: int, fn, arg) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, fn, arg))

    def next_time(self) -> int | None:
        return self._events[0][0] if self._events else None

    def advance(self, now: int) -> list[tuple[int, Any, np.ndarray]]:
        """Run every event up to ``now``; the blocks completed meanwhile: (time, key, result)."""
        while self._events and self._events[0][0] <= now:
            t, _s, fn, arg = heapq.heappop(self._events)
            self.now = t
            fn(arg)
        self.now = max(self.now, now)
        out, self.completed = self.completed, []
        return out

    # -- packets in ------------------------------------------------------------------------------
    def arrive(self, t: int, key, slot: int, values: np.ndarray, *, P: int, algo: str, combine, B: int = 1) -> bool:
        """A packet of block ``key`` (P packets in all, one per child) at ``t``; False: dropped
        (packet memory full)."""
        if algo not in ALGOS:
            raise ValueError(f"unknown aggregation algorithm {algo!r}; known: {', '.join(ALGOS)}")
        self.advance(t)
        nbytes = values.nbytes
        if self.mem + nbytes > self.spec.packet_memory_bytes:
            self.stats["drops"] += 1
            return False
        self.mem += nbytes
        self.stats["peak_packet_memory"] = max(self.stats["peak_packet_memory"], self.mem)
        self.stats["packets"] += 1
        blk = self.blocks.get(key)
        if blk is None:
            n = hash(key) if not isinstance(key, tuple) else key[-1]
            sub = n % self.nsub
            home = (sub * self.S) // self.C if self.spec.scheduler == "hfcfs" else n % self.spec.clusters
            blk = self.blocks[key] = Block(key, P, algo, max(1, B), combine, home, sub, first=t)
            if algo == "single":
                self._alloc(blk, 1, nbytes)
            elif algo == "multi":
                blk.bufs = [[False, None] for _ in range(blk.B)]
                self._alloc(blk, blk.B, nbytes)
        pkt = Packet(key, slot, values, nbytes, t)
        self.queues[blk.subset].append(pkt)
        self._dispatch(blk.subset)
        return True

    def _alloc(self, blk: Block, n: int, nbytes: int) -> None:
        blk.buffers += n
        self.work += n * nbytes
        if self.work > self.spec.working_memory_bytes:
            self.stats["working_memory_overruns"] += 1
        self.stats["peak_working_memory"] = max(self.stats["peak_working_memory"], self.work)

    def _free(self, blk: Block, n: int, nbytes: int) -> None:
        blk.buffers -= n
        self.work -= n * nbytes

    def _dispatch(self, sub: int) -> None:
        q = self.queues[sub]
        lo = sub * self.S
        for c in range(lo, lo + self.S):
            if not q:
                return
            if not self.core_busy[c]:
                self.core_busy[c] = True
                pkt = q.popleft()
                pkt.core = c
                self._start(pkt)

    # -- handlers ----------------------------------------------------------------------------------
    def _cost(self, pkt: Packet, blk: Block, nbytes: int) -> int:
        remote = pkt.core // self.C != blk.home
        if remote:
            self.stats["remote_handlers"] += 1
        return self.ns(nbytes * self.spec.cycles_per_byte * (self.spec.remote_factor if remote else 1.0))

    def _start(self, pkt: Packet) -> None:
        blk = self.blocks[pkt.key]
        pkt.start = self.now  # type: ignore[attr-defined]
        if blk.algo == "single":
            if blk.lock_free:
                blk.lock_free = False
                self._at(self.now + self._cost(pkt, blk, pkt.nbytes), self._single_done, pkt)
            else:
                blk.waiters.append((pkt, self.now))
        elif blk.algo == "multi":
            free = next((i for i, b in enumerate(blk.bufs) if not b[0]), None)
            if free is None:
                blk.waiters.append((pkt, self.now))
            else:
                self._multi_take(pkt, blk, free)
        else:
            self._at(self.now + self.ns(self.spec.copy_cycles), self._tree_copied, pkt)

    def _finish(self, pkt: Packet, blk: Block) -> None:
        """The handler of ``pkt`` is over: its core takes the next packet of its queue."""
        self.mem -= pkt.nbytes
        self.stats["handler_ns"] += self.now - pkt.start  # type: ignore[attr-defined]
        self.core_busy[pkt.core] = False
        self._dispatch(pkt.core // self.S)

    def _complete(self, blk: Block, result: np.ndarray) -> None:
        self.completed.append((self.now, blk.key, result))
        self.stats["blocks"] += 1
        self._free(blk, blk.buffers, result.nbytes)
        del self.blocks[blk.key]

    def _accumulate(self, acc, values, blk: Block):
        if acc is None:
            return np.array(values, copy=True)
        with np.errstate(all="ignore"):
            return blk.combine(acc, values)

    # single buffer: a critical section per packet
    def _single_done(self, pkt: Packet) -> None:
        blk = self.blocks[pkt.key]
        blk.acc = self._accumulate(blk.acc, pkt.values, blk)
        blk.done_count += 1
        if blk.waiters:  # the next handler spinning on this block gets the lock now
            nxt, since = blk.waiters.popleft()
            self.stats["busy_wait_ns"] += self.now - since
            self._at(self.now + self._cost(nxt, blk, nxt.nbytes), self._single_done, nxt)
        else:
            blk.lock_free = True
        self._finish(pkt, blk)
        if blk.done_count == blk.P:
            self._complete(blk, blk.acc)

    # multiple buffers
    def _multi_take(self, pkt: Packet, blk: Block, i: int) -> None:
        blk.bufs[i][0] = True
        self._at(self.now + self._cost(pkt, blk, pkt.nbytes), self._multi_done, (pkt, i))

    def _multi_done(self, arg) -> None:
        pkt, i = arg
        blk = self.blocks[pkt.key]
        buf = blk.bufs[i]
        buf[1] = self._accumulate(buf[1], pkt.values, blk)
        buf[0] = False
        blk.done_count += 1
        if blk.waiters:
            nxt, since = blk.waiters.popleft()
            self.stats["busy_wait_ns"] += self.now - since
            self._multi_take(nxt, blk, i)
        if blk.done_count == blk.P:  # this handler folds the other buffers into its own
            parts = [b[1] for b in blk.bufs if b[1] is not None]
            acc = parts[0]
            for p in parts[1:]:
                acc = self._accumulate(acc, p, blk)
            fold = self._cost(pkt, blk, pkt.nbytes) * (blk.B - 1)
            self._at(self.now + fold, self._multi_folded, (pkt, acc))
            return
        self._finish(pkt, blk)

    def _multi_folded(self, arg) -> None:
        pkt, acc = arg
        blk = self.blocks[pkt.key]
        self._finish(pkt, blk)
        self._complete(blk, acc)

    # tree: copy, then combine pairs while the sibling is there
    def _tree_copied(self, pkt: Packet) -> None:
        blk = self.blocks[pkt.key]
        self.mem -= pkt.nbytes  # the packet is in its own buffer now
        pkt.nbytes_freed = True  # type: ignore[attr-defined]
        self._alloc(blk, 1, pkt.nbytes)
        self._climb(pkt, blk, 0, pkt.slot, np.array(pkt.values, copy=True))

    def _climb(self, pkt: Packet, blk: Block, level: int, index: int, value: np.ndarray) -> None:
        width = 1 << max(0, (blk.P - 1).bit_length())  # leaves of the complete binary tree
        while (1 << level) < width:
            sib = index ^ 1
            if (sib << level) >= blk.P:  # the sibling subtree holds no leaf: climb for free
                index >>= 1
                level += 1
                continue
            other = blk.tree.pop((level, sib), None)
            if other is None:  # the sibling's half is not there: leave ours, the other handler combines
                blk.tree[(level, index)] = value
                self._tree_end(pkt, blk)
                return
            left, right = (other, value) if sib < index else (value, other)
            self._at(self.now + self._cost(pkt, blk, value.nbytes), self._tree_combined,
                     (pkt, level + 1, index >> 1, left, right))
            return
        self._tree_end(pkt, blk)
        self._complete(blk, value)

    def _tree_combined(self, arg) -> None:
        pkt, level, index, left, right = arg
        blk = self.blocks[pkt.key]
        self._free(blk, 1, left.nbytes)
        self._climb(pkt, blk, level, index, self._accumulate(left, right, blk))

    def _tree_end(self, pkt: Packet, blk: Block) -> None:
        self.stats["handler_ns"] += self.now - pkt.start  # type: ignore[attr-defined]
        self.core_busy[pkt.core] = False
        self._dispatch(pkt.core // self.S)
