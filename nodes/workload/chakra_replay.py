"""One rank of a Chakra execution trace, replayed by its host (an application of the host API).

The rank's nodes come from its ``.et`` file as the run consumes them (``chakra.Feed``: at most
``window`` nodes read and not completed). Sends, receives and calcs are those of a GOAL replay
(``goal_replay``: every message a host message of ``emu mpirun``'s point-to-point protocol, MPI
matching, calcs on the host's CPU with OS noise); a collective runs on its process group's ranks by
the emulator's own collectives (``Comm``: ``--algo``, and ``--offload`` where it takes the call),
holding the rank's CPU until it ends as a blocking MPI collective does. What is kept per node once it
completed: its kind's count, bytes and time; with ``keep`` (the critical path) also its start, end,
readiness and cause in flat arrays (8 bytes each), not the node.
"""

from __future__ import annotations

from array import array
from collections import deque

import numpy as np

from .chakra import COLL, WINDOW, Feed, iter_ops, read_metadata
from .goal import CALC, KIND_NAMES
from .goal_replay import _Rank


class _Window:
    """The operations in flight, by index (what ``_Rank`` reads as its schedule)."""

    def __init__(self, goal: bool):
        self.kind, self.size, self.peer, self.tag, self.cpu, self.nic = {}, {}, {}, {}, {}, {}
        self.ids: dict[int, int] = {}
        self.label: dict[int, str | None] = {}
        self.after_done: dict = {}
        self.after_start: dict = {}
        self.goal = goal

    def name(self, i: int) -> str:
        lab = self.label[i]
        return lab if lab is not None else (f"#{i}" if self.goal else f"node {self.ids[i]}")


def operand(name: str, size: int, n: int) -> np.ndarray | None:
    """Each rank's input buffer of ``size`` bytes: float32 elements (bytes when ``size`` is not a
    multiple of 4), at least one; reduce_scatter's a multiple of the ranks, alltoall's ``n`` parts."""
    if name == "barrier":
        return None
    dt = np.float32 if size % 4 == 0 else np.uint8
    count = max(1, size // np.dtype(dt).itemsize)
    if name == "reduce_scatter":
        count = -(-count // n) * n
    if name == "alltoall":
        return np.zeros((n, max(1, -(-count // n))), dt)
    return np.zeros(count, dt)


class StreamRank(_Rank):
    """A rank whose operations come from ``feed`` as it goes (``chakra.Feed``, ``goal_stream.GoalFeed``):
    ``feed.more(now)`` gives the operations that may now be considered, ``feed.started(i, now)`` and
    ``feed.finished(i, now)`` the ones an operation's start or end released."""

    def __init__(self, host, rank: int, feed, hosts: list[str], trace: bool, plan: dict, keep: bool, f=None,
                 goal: bool = False):
        self.host, self.rank, self.hosts = host, rank, hosts
        self.host_rank = {h: r for r, h in enumerate(hosts)}
        self.f, self.feed = f, feed
        self.rs = _Window(goal)
        self.needs: dict = {}
        self.ready: deque[int] = deque()
        self.fresh: list[int] = []
        self.remaining = 0
        self.start, self.end, self.ready_ns, self.cause = {}, {}, {}, {}
        self.matched, self.sent = {}, {}
        self.send_seq, self.recv_seq, self.early = {}, {}, {}
        self.posted, self.unexpected = [], []
        self.rndv_send, self.rndv_recv = {}, {}
        self.streams, self.timers = {}, []
        self.trace, self.ran_at, self.races = trace, -1, 0
        self.eager = host.spec.eager_limit_bytes
        self.colls: dict[int, tuple] = {}
        self.comms: dict[tuple, object] = {}
        self.plan = plan
        self.keep = keep
        self.hist = {k: array("q") for k in ("start", "end", "ready", "cause", "line")} if keep else None
        self.hist_kind, self.hist_id = array("b"), array("Q")
        self.hist_label: list | None = [] if keep and goal else None
        self.by_kind: dict[int, list[int]] = {}
        self.algos: dict[str, int] = {}
        self.last_end = 0
        self.refill = self._refill

    def _refill(self) -> None:
        rs = self.rs
        for i, op, n, ready_ns, cause in self.feed.more(self.host.now):
            rs.kind[i], rs.size[i], rs.tag[i], rs.cpu[i], rs.nic[i], rs.ids[i] = op.kind, op.size, op.tag, op.cpu, 0, op.id
            rs.label[i] = op.label
            rs.peer[i] = op.peer if op.kind != COLL else 0
            if op.kind == COLL:
                self.colls[i] = (op.coll, op.peer, op.size, op.root)
            self.start[i] = self.end[i] = -1
            self.remaining += 1
            if self.keep:
                for a in self.hist.values():
                    a.append(-1)
                self.hist["line"][-1] = op.line
                self.hist_kind.append(op.kind)
                self.hist_id.append(op.id)
                if self.hist_label is not None:
                    self.hist_label.append(op.label)
            if n == 0:
                self.ready_ns[i], self.cause[i] = ready_ns, cause
                self.fresh.append(i)

    def started(self, i: int) -> None:
        now = self.host.now
        self.start[i] = now
        for j in self.feed.started(i, now):
            self.ready_ns[j], self.cause[j] = now, i
            self.fresh.append(j)

    def done(self, i: int) -> None:
        now = self.host.now
        self.end[i] = now
        self.remaining -= 1
        for j in self.feed.finished(i, now):
            self.ready_ns[j], self.cause[j] = now, i
            self.fresh.append(j)
        rs = self.rs
        k = rs.kind[i]
        if self.trace:
            args = {"label": rs.name(i)} if k == CALC else {"label": rs.name(i), "bytes": rs.size[i]}
            if k < CALC:
                args["peer"], args["tag"] = rs.peer[i], rs.tag[i]
            self.host.span_done(KIND_NAMES[k], self.start[i], **args)
        row = self.by_kind.setdefault(k, [0, 0, 0])
        row[0] += 1
        row[1] += rs.size[i] if k != CALC else 0
        row[2] += now - self.start[i]
        self.last_end = max(self.last_end, now)
        if self.keep:
            h = self.hist
            h["start"][i], h["end"][i], h["ready"][i], h["cause"][i] = self.start[i], now, self.ready_ns[i], self.cause[i]
        else:
            self.matched.pop(i, None)
            self.sent.pop(i, None)
        for d in (rs.kind, rs.size, rs.peer, rs.tag, rs.cpu, rs.nic, rs.ids, rs.label, self.start, self.end,
                  self.ready_ns, self.cause):
            del d[i]
        self.colls.pop(i, None)

    async def execute(self, i: int):
        if self.rs.kind[i] != COLL:
            return await super().execute(i)
        self.started(i)
        await self._collective(*self.colls[i])
        self.done(i)

    async def _collective(self, name: str, members: tuple, size: int, root: int) -> None:
        from ..collectives.comm import Comm
        from ..collectives.run import call

        comm = self.comms.get(members)
        if comm is None:
            comm = self.comms[members] = Comm(self.host, [self.hosts[r] for r in members])
            comm.in_place = True
        algo, offload, branch = self.plan.get((name, members, size), self.plan.get(name, (None, None, None)))
        await call(comm, name, operand(name, size, len(members)), algo, "sum", root, offload, branch)
        key = f"{name}/{comm.last_algo}"
        self.algos[key] = self.algos.get(key, 0) + 1

    def result(self) -> dict:
        if self.f is not None:
            self.f.close()
        out = {"rank": self.rank, "end_ns": self.last_end, "ops": self.feed.count,
               "kinds": {KIND_NAMES[k]: {"count": c, "bytes": b, "busy_ns": ns}
                         for k, (c, b, ns) in sorted(self.by_kind.items(), key=lambda x: KIND_NAMES[x[0]])},
               "unmatched": len(self.unexpected), "races": self.races, "algos": self.algos,
               "left": self.feed.count - sum(c for c, _, _ in self.by_kind.values())}
        delays = getattr(self.feed, "delays", None)
        if delays is not None:
            out["window_delays"], out["first_delay"] = delays, self.feed.first_delay
        if self.keep:
            out.update(start=self.hist["start"], end=self.hist["end"], ready=self.hist["ready"],
                       cause=self.hist["cause"], matched=self.matched, sent=self.sent, kind=self.hist_kind,
                       ids=self.hist_id, lines=self.hist["line"], labels=self.hist_label)
        return out

    async def run(self):
        try:
            return await super().run()
        finally:
            if self.f is not None:
                self.f.close()


async def chakra_rank(host, rank: int, path: str, hosts: list[str], trace: bool = False, nranks: int | None = None,
                      groups: dict | None = None, window: int = WINDOW, plan: dict | None = None, keep: bool = True):
    """Replay rank ``rank``'s trace file ``path`` (``hosts``: the host of every rank); its figures:
    end time, per node kind count, bytes and time, the collectives' algorithms and (``keep``) per
    node its start, end, readiness and cause for the critical path."""
    f = open(path, "rb")
    try:
        read_metadata(f, path)
        feed = Feed(iter_ops(f, path, rank, nranks or len(hosts), groups), path, window)
    except BaseException:
        f.close()
        raise
    return await StreamRank(host, rank, feed, hosts, trace, plan or {}, keep, f).run()
