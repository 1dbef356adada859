"""Hardware barriers of the QsNet adapter (spec 03), progressing in the adapters alone.

A barrier context belongs to a communicator: its members' ranks, a multicast group over their
nodes (``Topology.add_group``) and three words at the same virtual address on every member
(``base``): *ready* (``base``), *done* (``base + 8``) and, for reductions, result slots (``slot``). A process enters barrier ``seq`` with :meth:`Barriers.enter` and goes on at once
(the non-blocking barrier); waiting is waiting for *done* >= ``seq`` (the host's ``wait_word``),
so "wait until every process reached sequence n" is the same call with an older ``n``. No process
has to run for a barrier to advance.

**Polled** (``algo="polled"``): entering writes ``seq`` to the *ready* word. The root's adapter
sends a *network conditional* to the group -- "ready >= target" (the TXN flag GE; equality, the
source's test, would never hold again once a fast process entered the next barrier without
waiting) -- whose combined ACK is true only if every member's compare was. False: the adapter
polls again after ``ElanSpec.poll_ns``. True: it writes *done* and broadcasts it to the group.
States: ``POLLED``.

**Tree** (``algo="tree"``): the adapters form a ``branch``-ary tree over the ranks (rank 0 the
root). Each adapter keeps a *counted event* per barrier: the local process's entry counts one,
each child's EVENT packet (a reliable single-packet transfer, counted exactly once whatever is
replayed) counts one; at 1 + children the adapter sends EVENT to its parent, or, at the root,
broadcasts *done*. EVENT packets may carry data: the same tree then **reduces** it (the root
broadcasts the result with *done*). Parts are combined in rank order, not arrival order, so a
float reduction gives the same bits however packets raced. States: ``TREE``.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from emu.reduce import get_op
from emu.wire.qsnet import TXN, TXN_BCAST, TXN_GE, TXN_LAST, QsOp

from .interface import NicCore
from .memory import Memory
from .qsreliable import QsResult, Xfer


class Adapter(Protocol):
    """What the barrier engine uses of its adapter (``emu.nodes.nic.qsnet.QsNIC``, which owns it)."""

    nic: NicCore
    spec: Any
    mem: Memory

    def node_of(self, rank: int) -> int: ...

    def bcast(self, gid: int, members: int, local: int, remote: int, size: int, t: int, on_done) -> Xfer: ...

    def bcast_cond(self, gid: int, members: int, addr: int, word: int, t: int, on_done) -> Xfer: ...

    def send_event(self, dst: int, addr: int, body: bytes, t: int, on_done) -> Xfer: ...

    def write_local(self, addr: int, data: bytes) -> None: ...

    def wake_watchers(self, addr: int, why: str) -> None: ...

log = logging.getLogger(__name__)

READY, DONE = 0, 8
"""Offsets of a context's ready and done words from its base address."""
SLOTS, SLOT0, SLOT_BYTES = 16, 0x1000, 0x1000
"""A reduction's result lands in slot ``seq % SLOTS`` (at ``base + SLOT0 + slot * SLOT_BYTES``):
its sequence number, then the data. Up to ``SLOTS`` reductions may be in flight at once."""


def slot(base: int, seq: int) -> int:
    """Address of the result slot of reduction ``seq`` (its first word reaches ``seq`` when done)."""
    return base + SLOT0 + (seq % SLOTS) * SLOT_BYTES


class Polled(enum.Enum):
    IDLE = "idle"
    POLLING = "polling"      # a conditional is out to the group
    BACKOFF = "backoff"      # it came back false: poll again after poll_ns
    RELEASING = "releasing"  # true everywhere: the done word is being broadcast
    FAILED = "failed"


class PolledEvent(enum.Enum):
    POLL = "poll"
    FALSE = "false"
    RETRY = "retry"
    TRUE = "true"
    RELEASED = "released"
    FAIL = "fail"


POLLED: dict[Polled, dict[PolledEvent, Polled]] = {
    Polled.IDLE: {PolledEvent.POLL: Polled.POLLING},
    Polled.POLLING: {PolledEvent.FALSE: Polled.BACKOFF, PolledEvent.TRUE: Polled.RELEASING,
                     PolledEvent.FAIL: Polled.FAILED},
    Polled.BACKOFF: {PolledEvent.RETRY: Polled.POLLING},
    Polled.RELEASING: {PolledEvent.RELEASED: Polled.IDLE, PolledEvent.FAIL: Polled.FAILED},
    Polled.FAILED: {},
}
"""The polled barrier's root adapter (the other members' adapters only answer conditionals)."""


class Tree(enum.Enum):
    COUNTING = "counting"    # the counted event is below 1 + children
    SENT_UP = "sent_up"      # full: EVENT to the parent is on its way
    RELEASING = "releasing"  # the root, full: done (and the result) broadcast to the group
    DONE = "done"            # this adapter's part is over (the parent or every member has it)
    FAILED = "failed"


class TreeEvent(enum.Enum):
    ARRIVE = "arrive"      # the local process entered, or a child's EVENT came
    SEND_UP = "send_up"
    RELEASE = "release"
    ACKED = "acked"
    FAIL = "fail"


TREE: dict[Tree, dict[TreeEvent, Tree]] = {
    Tree.COUNTING: {TreeEvent.ARRIVE: Tree.COUNTING, TreeEvent.SEND_UP: Tree.SENT_UP,
                    TreeEvent.RELEASE: Tree.RELEASING},
    Tree.SENT_UP: {TreeEvent.ACKED: Tree.DONE, TreeEvent.FAIL: Tree.FAILED},
    Tree.RELEASING: {TreeEvent.ACKED: Tree.DONE, TreeEvent.FAIL: Tree.FAILED},
    Tree.DONE: {},
    Tree.FAILED: {},
}
"""One tree barrier (one sequence number) at one adapter."""


def _move(table: dict, state, event, what: str):
    nxt = table[state].get(event)
    if nxt is None:
        raise AssertionError(f"{what}: event {event.value} in state {state.value}")
    return nxt


@dataclass(frozen=True)
class BarrierSpec:
    """What an adapter needs to know of a communicator's barrier (the host passes it on entry)."""

    base: int
    algo: str            # "polled" or "tree"
    ranks: tuple[int, ...]
    """The members' ranks, in communicator order (position 0 is the root)."""
    group: int
    branch: int = 4
    op: str = "sum"
    dtype: str = "int64"


@dataclass(eq=False)
class Count:
    """The counted event of one tree barrier at one adapter."""

    arrived: int = 0
    parts: dict = field(default_factory=dict)
    """Reduction data by position in the communicator (this node's own and each child's subtree)."""
    state: Tree = Tree.COUNTING


@dataclass(eq=False)
class Ctx:
    spec: BarrierSpec
    pos: int
    """This adapter's position in the communicator."""
    parent: int | None
    children: tuple[int, ...]
    """Positions of this adapter's children in the tree."""
    entered: int = 0
    """Highest sequence number the local process entered."""
    released: int = 0
    polled: Polled = Polled.IDLE
    target: int = 0
    polls: int = 0
    error: str | None = None


def tree_links(n: int, k: int, pos: int) -> tuple[int | None, tuple[int, ...]]:
    """Parent and children positions of ``pos`` in the ``k``-ary tree over ``n`` positions."""
    parent = None if pos == 0 else (pos - 1) // k
    return parent, tuple(c for c in range(k * pos + 1, k * pos + k + 1) if c < n)


class Barriers:
    """The barrier engine of one adapter (``qs.barriers``)."""

    def __init__(self, qs: Adapter):
        self.qs = qs
        self.ctx: dict[int, Ctx] = {}
        self.counts: dict[tuple[int, int], Count] = {}
        """(base, seq) -> counted event: created by whichever comes first, a child's EVENT or the
        local process entering."""
        self.stats = qs.stats
        for k in ("barrier_polls", "barrier_events", "barrier_releases"):
            self.stats.setdefault(k, 0)

    # -- the local process -----------------------------------------------------------------------
    def enter(self, spec: BarrierSpec, seq: int, data: bytes, t: int) -> None:
        ctx = self._ctx(spec)
        if seq <= ctx.entered:
            raise ValueError(f"barrier at {spec.base:#x}: sequence {seq} entered after {ctx.entered}; "
                             "sequence numbers must grow")
        ctx.entered = seq
        mem = self.qs.mem
        mem.write_u64(spec.base + READY, seq)
        if spec.algo == "polled":
            if ctx.pos == 0:
                ctx.target = seq
                if ctx.polled is Polled.IDLE:
                    self._poll(ctx, t)
            return
        self._arrive(ctx, seq, ctx.pos, data, t)

    def _ctx(self, spec: BarrierSpec) -> Ctx:
        ctx = self.ctx.get(spec.base)
        if ctx is not None and ctx.spec == spec:
            return ctx
        me = self.qs.nic.node_id
        nodes = [self.qs.node_of(r) for r in spec.ranks]
        if me not in nodes:
            raise ValueError(f"barrier at {spec.base:#x}: this node ({me}) is not one of its ranks")
        pos = nodes.index(me)
        parent, children = tree_links(len(nodes), spec.branch, pos)
        old = ctx
        ctx = self.ctx[spec.base] = Ctx(spec, pos, parent, children)
        if old is not None:  # the same words under a new communicator shape: the sequence goes on
            ctx.entered, ctx.released = old.entered, old.released
        return ctx

    # -- polled ----------------------------------------------------------------------------------
    def _step(self, ctx: Ctx, event: PolledEvent) -> None:
        ctx.polled = _move(POLLED, ctx.polled, event, f"polled barrier {ctx.spec.base:#x}")

    def _poll(self, ctx: Ctx, t: int, event: PolledEvent = PolledEvent.POLL) -> None:
        self._step(ctx, event)
        ctx.polls += 1
        self.stats["barrier_polls"] += 1
        target = ctx.target
        spec = ctx.spec
        self.qs.bcast_cond(spec.group, len(spec.ranks) - 1, spec.base + READY, target, t,
                           lambda res: self._polled(ctx, target, res))

    def _polled(self, ctx: Ctx, target: int, res: "QsResult") -> None:
        now = self.qs.nic.now
        if not res.ok:
            self._step(ctx, PolledEvent.FAIL)
            self._fail(ctx, f"conditional for sequence {target}: {res.error}")
            return
        if not res.cond:
            self._step(ctx, PolledEvent.FALSE)
            self.qs.nic.at(now + self.qs.spec.poll_ns, self._retry, ctx)
            return
        self._step(ctx, PolledEvent.TRUE)
        self._release(ctx, target, b"", now, lambda r: self._polled_released(ctx, r))

    def _retry(self, ctx: Ctx) -> None:
        self._poll(ctx, self.qs.nic.now, PolledEvent.RETRY)

    def _polled_released(self, ctx: Ctx, res: "QsResult") -> None:
        if not res.ok:
            self._step(ctx, PolledEvent.FAIL)
            self._fail(ctx, f"done broadcast: {res.error}")
            return
        self._step(ctx, PolledEvent.RELEASED)
        if ctx.entered > ctx.released:  # the root entered the next barrier meanwhile
            ctx.target = ctx.entered
            self._poll(ctx, self.qs.nic.now)

    # -- tree ------------------------------------------------------------------------------------
    def on_event(self, src: int, base: int, seq: int, pos: int, data: bytes, now: int) -> None:
        """A child's EVENT (counted once: the caller drops replays)."""
        self.stats["barrier_events"] += 1
        ctx = self.ctx.get(base)
        count = self.counts.setdefault((base, seq), Count())
        count.state = _move(TREE, count.state, TreeEvent.ARRIVE, f"tree barrier {seq}: EVENT from {src}")
        count.arrived += 1
        count.parts[pos] = data
        if ctx is not None:
            self._check(ctx, seq, count, now)

    def _arrive(self, ctx: Ctx, seq: int, pos: int, data: bytes, t: int) -> None:
        count = self.counts.setdefault((ctx.spec.base, seq), Count())
        count.state = _move(TREE, count.state, TreeEvent.ARRIVE, f"tree barrier {seq}")
        count.arrived += 1
        count.parts[pos] = data
        self._check(ctx, seq, count, t)

    def _check(self, ctx: Ctx, seq: int, count: Count, t: int) -> None:
        if count.state is not Tree.COUNTING or count.arrived < 1 + len(ctx.children) or seq > ctx.entered:
            return
        data = self._reduce(ctx, count)
        what = f"tree barrier {seq} at position {ctx.pos}"
        if ctx.parent is None:
            count.state = _move(TREE, count.state, TreeEvent.RELEASE, what)
            self._release(ctx, seq, data, t, lambda r: self._tree_done(ctx, seq, count, r))
            return
        count.state = _move(TREE, count.state, TreeEvent.SEND_UP, what)
        spec = ctx.spec
        body = seq.to_bytes(8, "big") + ctx.pos.to_bytes(4, "big") + data
        self.qs.send_event(self.qs.node_of(spec.ranks[ctx.parent]), spec.base, body, t,
                           lambda r: self._tree_done(ctx, seq, count, r))

    def _reduce(self, ctx: Ctx, count: Count) -> bytes:
        parts = [count.parts[p] for p in sorted(count.parts)]
        if not parts[0]:
            return b""
        dt = np.dtype(ctx.spec.dtype)
        op = get_op(ctx.spec.op)
        acc = np.frombuffer(parts[0], dt)
        with np.errstate(all="ignore"):
            for p in parts[1:]:
                acc = op.combine(acc, np.frombuffer(p, dt))
        return acc.tobytes()

    def _tree_done(self, ctx: Ctx, seq: int, count: Count, res: "QsResult") -> None:
        what = f"tree barrier {seq} at position {ctx.pos}"
        if not res.ok:
            count.state = _move(TREE, count.state, TreeEvent.FAIL, what)
            self._fail(ctx, f"{what}: {res.error}")
            return
        count.state = _move(TREE, count.state, TreeEvent.ACKED, what)
        self.counts.pop((ctx.spec.base, seq), None)

    # -- both ------------------------------------------------------------------------------------
    def _release(self, ctx: Ctx, seq: int, data: bytes, t: int, on_done: Callable) -> None:
        """Write done here (a reduction: its slot, the sequence number then the result), then
        broadcast it to the group."""
        self.stats["barrier_releases"] += 1
        ctx.released = max(ctx.released, seq)
        addr = slot(ctx.spec.base, seq) if data else ctx.spec.base + DONE
        words = seq.to_bytes(8, "little") + data
        self.qs.write_local(addr, words)
        self.qs.bcast(ctx.spec.group, len(ctx.spec.ranks) - 1, addr, addr, len(words), t, on_done)

    def _fail(self, ctx: Ctx, why: str) -> None:
        ctx.error = why
        log.warning("%s: barrier at %#x failed: %s", self.qs.nic.name, ctx.spec.base, why)
        for addr in [ctx.spec.base + DONE] + [slot(ctx.spec.base, s) for s in range(SLOTS)]:
            self.qs.wake_watchers(addr, why)

    def state(self, base: int) -> str:
        """Where a context stands, for a message when a wait times out."""
        ctx = self.ctx.get(base)
        if ctx is None:
            return "never entered"
        counts = {s: (c.arrived, c.state.value) for (b, s), c in self.counts.items() if b == base}
        return (f"{ctx.spec.algo}, position {ctx.pos}, entered {ctx.entered}, released {ctx.released}, "
                f"polled {ctx.polled.value}, counts {counts}, error {ctx.error}")
