"""Count the messages a host software collective sends, by running its schedule without a network.

Every rank runs the real algorithm -- the same ``Comm`` methods, the same default choice by size --
as a trio task of this process; ``send`` drops the array into the receiver's mailbox instead of
handing it to a NIC, and nothing is timed or charged. The algorithms' schedules depend on neither
timing nor values, so the messages and their sizes are those of the real run. ``emu run`` uses this
to say, before it starts, that a run will be large.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict, deque
from dataclasses import dataclass

import numpy as np
import trio

try:  # (trio.testing imports pytest where it is installed: a tenth of emu run's start-up)
    from trio._core import wait_all_tasks_blocked
except ImportError:  # pragma: no cover -- another trio: its public name
    from trio.testing import wait_all_tasks_blocked

from .comm import Comm
from emu.reduce import get_op
from .operations import OPERATIONS
from .select import choose

MEMORY_BYTES = 64 << 20
"""Operands larger than this in all (ranks x bytes per rank) are counted on a scaled-down copy: the
same algorithm on fewer elements, each message's size scaled back up (exact up to rounding)."""

MESSAGES = 50_000
"""Stop counting after this many messages (the count is then a lower bound)."""


@dataclass(frozen=True)
class Messages:
    algo: str
    sizes: list[int]
    """Bytes of every message sent, in the order the dry run sent them."""
    complete: bool = True
    """False when counting stopped at the budget: ``sizes`` then holds only the first messages."""

    def frames(self, mtu_bytes: int) -> int:
        """Frames the hosts inject for these messages: a message of m bytes is cut into frames of at
        most ``mtu_bytes`` of data (an empty message still takes one)."""
        return sum(max(1, -(-m // mtu_bytes)) for m in self.sizes)


class _OverBudget(Exception):
    pass


class _Post:
    def __init__(self, budget: int, scale: float):
        self.boxes: dict[tuple, deque] = defaultdict(deque)
        self.waiting: dict[tuple, trio.Event] = {}
        self.sizes: list[int] = []
        self.budget = budget
        self.scale = scale

    def put(self, key: tuple, data) -> None:
        nbytes = data.nbytes if isinstance(data, np.ndarray) else len(data)
        self.sizes.append(nbytes if self.scale == 1 else round(nbytes * self.scale))
        if len(self.sizes) >= self.budget:
            raise _OverBudget
        self.boxes[key].append(data)
        event = self.waiting.pop(key, None)
        if event is not None:
            event.set()

    async def get(self, key: tuple):
        while not self.boxes[key]:
            event = self.waiting.setdefault(key, trio.Event())
            await event.wait()
        return self.boxes[key].popleft()


class _Host:
    """What a ``Comm`` reads of its host."""

    def __init__(self, name: str, hosts: list[str]):
        self.name, self.hosts = name, hosts


class DryComm(Comm):
    """A communicator whose messages go to in-process mailboxes, uncopied and untimed."""

    def __init__(self, post: _Post, members: list[str], rank: int):
        super().__init__(_Host(members[rank], members), members)
        self.post = post

    async def send(self, rank: int, data, step: int) -> None:
        self.post.put((self.rank, rank, self._tag(step)), data)

    async def recv(self, rank: int, dtype: np.dtype, step: int) -> np.ndarray:
        data = await self.post.get((rank, self.rank, self._tag(step)))
        if isinstance(data, np.ndarray):
            return np.ascontiguousarray(data).reshape(-1).view(np.uint8).view(dtype)
        return np.frombuffer(data, dtype).copy()

    async def combine(self, op, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        with np.errstate(all="ignore"):
            res = op.combine(a, b)
        if out is None or out is b:  # a message here is the sender's own array: never written into
            return res
        out[...] = res
        return out


async def count_messages(operation: str, ranks: int, count: int, dtype: str = "float32", op: str = "sum",
                         algo: str | None = None, root: int = 0, *, memory_bytes: int = MEMORY_BYTES,
                         budget: int = MESSAGES) -> Messages | None:
    """The messages ``operation`` on ``ranks`` ranks of ``count`` elements sends (host software),
    or None if the dry run deadlocked (the real run would too)."""
    from .run import call

    dt = np.dtype(dtype)
    wide = OPERATIONS[operation].per_rank_operand
    nbytes = count * dt.itemsize * (ranks if wide else 1)  # what Comm passes to choose()
    algo = algo or choose(operation, nbytes, ranks)
    per_rank = count * dt.itemsize * (ranks if operation == "alltoall" else 1)
    small = count
    if ranks * per_rank > memory_bytes:
        small = max(1, count // math.ceil(ranks * per_rank / memory_bytes))
        if operation == "reduce_scatter":
            small = max(ranks, small // ranks * ranks)
    post = _Post(budget, count / small if small else 1)
    members = [f"r{i}" for i in range(ranks)]
    get_op(op).check(dt)
    done = 0
    stuck = complete = False

    first = DryComm(post, members, 0)  # Comm() costs O(ranks): copy it rather than make one per rank

    def comm(r: int) -> DryComm:
        c = copy.copy(first)
        c.host, c.rank = _Host(members[r], members), r
        return c

    async def rank(r: int) -> None:
        nonlocal done
        x = np.zeros((ranks, small) if operation == "alltoall" else small, dt)
        await call(comm(r), operation, x, algo, op, root)
        done += 1

    async def watch(nursery: trio.Nursery) -> None:
        nonlocal stuck
        await wait_all_tasks_blocked()
        if done < ranks:
            stuck = True
            nursery.cancel_scope.cancel()

    try:
        async with trio.open_nursery() as nursery:
            for r in range(ranks):
                nursery.start_soon(rank, r)
            nursery.start_soon(watch, nursery)
        complete = True
    except* _OverBudget:
        pass
    if stuck:
        return None
    return Messages(algo, post.sizes, complete)
