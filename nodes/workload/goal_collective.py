"""The emulator's host-software collectives written as GOAL schedules (``emu schedule``).

Every rank runs the real algorithm -- the same ``Comm`` methods and default choice by size as ``emu
run`` -- on in-process mailboxes (``emu.nodes.collectives.dryrun``), and what it does is recorded in
the order it does it: each message sent (``send``), each message received (``recv``, from its
sender, with the algorithm's step as its tag), each reduction of two operands (``calc`` of the host's
modelled reduction time, ``HostSpec.reduce_ns``). A rank's operations follow one another as the
collective's one coroutine per host runs them: each ``requires`` the one before, or ``irequires`` it
after a send (the host's send does not wait for the receiver, and a rendezvous send of ``emu replay``
or LogGOPSim completes only once its receive is posted). So the same workload runs in LogGOPSim and
in ``emu replay``.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import trio

from emu.config import ConfigError

from ..collectives.dryrun import MEMORY_BYTES, DryComm, _Host, _Post
from ..collectives.operations import OPERATIONS
from ..collectives.select import choose
from .goal import MAX_TAG


class _Recorder(DryComm):
    def __init__(self, post, members, rank, log, reduce_ns):
        super().__init__(post, members, rank)
        self.log, self.reduce_ns = log, reduce_ns

    async def send(self, rank: int, data, step: int) -> None:
        nbytes = data.nbytes if isinstance(data, np.ndarray) else len(data)
        self.log.append(("send", rank, round(nbytes * self.post.scale), step & MAX_TAG))
        await super().send(rank, data, step)

    async def recv(self, rank: int, dtype: np.dtype, step: int) -> np.ndarray:
        slot = len(self.log)
        self.log.append(None)
        out = await super().recv(rank, dtype, step)
        self.log[slot] = ("recv", rank, round(out.nbytes * self.post.scale), step & MAX_TAG)
        return out

    async def combine(self, op, a, b, out=None):
        self.log.append(("calc", self.reduce_ns(round(a.nbytes * self.post.scale))))
        return await super().combine(op, a, b, out)


def record(operation: str, ranks: int, count: int, dtype: str = "float32", op: str = "sum", algo: str | None = None,
           root: int = 0, reduce_ns=lambda n: -((-n * 250) // 1000)) -> tuple[str, list[list[tuple]]]:
    """(algorithm, each rank's operations in order) of ``operation`` on ``ranks`` ranks of ``count``
    elements of ``dtype``."""
    from ..collectives.run import call

    if operation not in OPERATIONS:
        raise ConfigError(f"unknown collective {operation!r}; known: {', '.join(OPERATIONS)}")
    dt = np.dtype(dtype)
    wide = OPERATIONS[operation].per_rank_operand
    nbytes = count * dt.itemsize * (ranks if wide else 1)
    algo = algo or choose(operation, nbytes, ranks)
    per_rank = count * dt.itemsize * (ranks if operation == "alltoall" else 1)
    small = count
    if ranks * per_rank > MEMORY_BYTES:  # the same algorithm on fewer elements, sizes scaled back up
        small = max(1, count // math.ceil(ranks * per_rank / MEMORY_BYTES))
        if operation == "reduce_scatter":
            small = max(ranks, small // ranks * ranks)
    post = _Post(1 << 62, count / small if small else 1)
    members = [f"r{i}" for i in range(ranks)]
    logs: list[list] = [[] for _ in range(ranks)]
    first = _Recorder(post, members, 0, logs[0], reduce_ns)

    def comm(r: int) -> _Recorder:
        c = copy.copy(first)
        c.host, c.rank, c.log = _Host(members[r], members), r, logs[r]
        return c

    async def rank(r: int) -> None:
        x = np.zeros((ranks, small) if operation == "alltoall" else small, dt)
        await call(comm(r), operation, x, algo, op, root)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for r in range(ranks):
                nursery.start_soon(rank, r)

    trio.run(main)
    return algo, logs


def goal_lines(logs: list[list[tuple]], header: str = ""):
    """The GOAL text of the recorded operations, a line at a time."""
    if header:
        for line in header.splitlines():
            yield f"// {line}\n"
    yield f"num_ranks {len(logs)}\n"
    for r, ops in enumerate(logs):
        yield f"rank {r} {{\n"
        for k, o in enumerate(ops):
            if o[0] == "calc":
                yield f"l{k}: calc {o[1]}\n"
            else:
                kind, peer, size, tag = o
                yield f"l{k}: {kind} {size}b {'to' if kind == 'send' else 'from'} {peer} tag {tag}\n"
            if k:  # after a send, as after the host's isend: once it started (a rendezvous send ends later)
                yield f"l{k} {'irequires' if ops[k - 1][0] == 'send' else 'requires'} l{k - 1}\n"
        yield "}\n"
