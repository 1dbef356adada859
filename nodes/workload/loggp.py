"""LogGOPSim's LogGP simulation of a GOAL schedule: the analytic figure beside the measured one.

A port of the event loop of LogGOPSim (spcl/LogGOPSim ``src/LogGOPSim/LogGOPSim.cpp``, built with
its defaults ``STRICT_ORDER`` and ``LIST_MATCH``, network type ``LogGP``: no congestion, no noise):

* a calc of ``s`` ns occupies its CPU from when the CPU is free: ``nexto = t + s``;
* a send starts when its CPU and NIC are free: the CPU is busy ``o + (s-1) O``, the NIC ``g + (s-1) G``,
  and the message's first byte reaches the receiver at ``t + o + L``; a message of at most ``S`` bytes
  (eager) completes the send at once, a longer one (rendezvous) when the receiver matched it;
* a message taken in at the receiver (its CPU and receive NIC free) costs ``o + max((s-1) O, (s-1) G)``
  of CPU and ``g + (s-1) G`` of NIC, and matches the posted receives in order (wildcards), else waits
  in the unexpected queue; a receive posted costs nothing and matches that queue in order;
* events run in time order, ties in the order they were first queued (an event put back to wait for
  a busy CPU or NIC keeps its place: LogGOPSim does not renumber it); operations that became executable
  together are queued sends first, then receives, then calcs.

A rank's end time is the latest time one of its CPUs is free (LogGOPSim's ``Host i: ...`` lines).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from fractions import Fraction

from .goal import ANY, CALC, RECV, SEND, Schedule

_OP_SEND, _OP_RECV, _OP_LOCOP, _OP_MSG = 1, 2, 3, 4
_TYPE_OF = {SEND: _OP_SEND, RECV: _OP_RECV, CALC: _OP_LOCOP}


@dataclass(frozen=True)
class LogGP:
    """LogGOPSim's parameters (its command line's ``-L -o -g -G -O -S``), integers in ns as there."""

    L: int = 2500
    o: int = 1500
    g: int = 1000
    G: int | Fraction = 6
    """ns per byte; a fraction too (a 100 Gbit/s link: 2/25), a message's (s-1) G then rounded down."""
    O: int = 0  # noqa: E741 -- LogGOPS's name
    S: int = 65535

    def line(self) -> str:
        G = self.G if isinstance(self.G, int) or self.G.denominator == 1 else f"{float(self.G):g}"
        return f"L={self.L}, o={self.o}, g={self.g}, G={G}, O={self.O}, S={self.S}"


class Stuck(ValueError):
    """The schedule cannot finish under LogGP: ``waiting`` the (rank, operation) pairs never completed."""

    def __init__(self, text: str, waiting: list[tuple[int, int]]):
        super().__init__(text)
        self.waiting = waiting


class _Rank:
    __slots__ = ("rs", "needs", "fresh", "started", "done")

    def __init__(self, rs):
        self.rs = rs
        self.needs = list(rs.needs)
        self.fresh = [i for i, k in enumerate(rs.needs) if k == 0]
        """Operations whose dependencies are met, not yet queued (GetExecutableNodes)."""
        self.started = [False] * len(rs)
        self.done = [False] * len(rs)


def simulate(s: Schedule, p: LogGP) -> list[int]:
    """Each rank's end time (ns) under LogGP ``p``, as LogGOPSim computes it. Raises :class:`Stuck`
    naming the operations that never complete (a receive no message matches, what waits for it, a
    rendezvous send no receive matches) or the messages no receive matched."""
    n = s.num_ranks
    ranks = [_Rank(rs) for rs in s.ranks]
    ncpu = 1 + max((max(rs.cpu, default=0) for rs in s.ranks), default=0)
    nnic = 1 + max((max(rs.nic, default=0) for rs in s.ranks), default=0)
    nexto = [[0] * ncpu for _ in range(n)]
    nextgr = [[0] * nnic for _ in range(n)]
    nextgs = [[0] * nnic for _ in range(n)]
    rq: list[list[tuple]] = [[] for _ in range(n)]  # (src, tag, offset, size)
    uq: list[list[tuple]] = [[] for _ in range(n)]  # (src, tag, offset, size)
    aq: list[tuple] = []  # (time, ts, type, host, offset, target, size, tag, proc, nic, starttime)
    ts = 0
    L, o, g, O, S = p.L, p.o, p.g, p.O, p.S
    G = Fraction(p.G)

    def bytes_ns(size: int, per: Fraction) -> int:  # (s-1) G, rounded down (exact for LogGOPSim's integer G)
        return max(size - 1, 0) * per.numerator // per.denominator

    def executable(h: int) -> list[int]:
        r = ranks[h]
        out, r.fresh = r.fresh, []
        kind = r.rs.kind
        out.sort(key=lambda i: (_TYPE_OF[kind[i]], i))  # (by type as LogGOPSim; among equals by position)
        return out

    def started(h: int, i: int) -> None:
        r = ranks[h]
        if r.started[i]:
            return
        r.started[i] = True
        for j in r.rs.after_start.get(i, ()):
            r.needs[j] -= 1
            if r.needs[j] == 0:
                r.fresh.append(j)

    def done(h: int, i: int) -> None:
        r = ranks[h]
        if r.done[i]:
            return
        r.done[i] = True
        for j in r.rs.after_done.get(i, ()):
            r.needs[j] -= 1
            if r.needs[j] == 0:
                r.fresh.append(j)

    def push_free(h: int, initial: bool) -> None:
        nonlocal ts
        rs = ranks[h].rs
        for i in executable(h):
            k, c, nc = rs.kind[i], rs.cpu[i], rs.nic[i]
            if initial:
                t = 0
            elif k == SEND:
                t = max(nexto[h][c], nextgs[h][nc])
            else:
                t = nexto[h][c]
            heapq.heappush(aq, (t, ts, _TYPE_OF[k], h, i, rs.peer[i], rs.size[i], rs.tag[i], c, nc, 0))
            ts += 1

    def match(q: list, src: int, tag: int):
        for j, e in enumerate(q):
            if (src == ANY or e[0] == ANY or e[0] == src) and (tag == ANY or e[1] == ANY or e[1] == tag):
                del q[j]
                return e
        return None

    for h in range(n):
        push_free(h, True)
    while aq:
        t, ets, typ, h, off, target, size, tag, proc, nic, t0 = heapq.heappop(aq)
        check = []
        if typ == _OP_LOCOP:
            if nexto[h][proc] <= t:
                nexto[h][proc] = t + size
                started(h, off)
                done(h, off)
                check.append(h)
            else:
                heapq.heappush(aq, (nexto[h][proc], ets, typ, h, off, target, size, tag, proc, nic, t0))
        elif typ == _OP_SEND:
            if max(nexto[h][proc], nextgs[h][nic]) <= t:
                started(h, off)
                check.append(h)
                nexto[h][proc] = t + o + max(size - 1, 0) * O
                nextgs[h][nic] = t + g + bytes_ns(size, G)
                heapq.heappush(aq, (t + o + L, ts, _OP_MSG, target, off, h, size, tag, proc, nic, t))
                ts += 1
                if size <= S:
                    done(h, off)
            else:
                heapq.heappush(aq, (max(nexto[h][proc], nextgs[h][nic]), ets, typ, h, off, target, size, tag, proc, nic, t0))
        elif typ == _OP_RECV:
            started(h, off)
            check.append(h)
            m = match(uq[h], target, tag)
            if m is not None:
                if size > S:  # rendezvous: the sender's send completes now
                    src = m[0]
                    done(src, m[2])
                    check.append(src)
                    nexto[src][proc] = max(nexto[src][proc], t)
                    nextgs[src][nic] = max(nextgs[src][nic], t)
                done(h, off)
            else:
                rq[h].append((target, tag, off, size))
        else:  # a message reaches host h from ``target``
            if max(nexto[h][proc], nextgr[h][nic]) <= t:
                nexto[h][proc] = t + o + max(max(size - 1, 0) * O, bytes_ns(size, G))
                nextgr[h][nic] = t + g + bytes_ns(size, G)
                m = match(rq[h], target, tag)
                if m is not None:
                    if size > S:
                        done(target, off)
                        check.append(target)
                        nexto[target][proc] = max(nexto[target][proc], t)
                        nextgs[target][nic] = max(nextgs[target][nic], t)
                    done(h, m[2])
                    check.append(h)
                else:
                    uq[h].append((target, tag, off, size))
            else:
                heapq.heappush(aq, (max(nexto[h][proc], nextgr[h][nic]), ets, typ, h, off, target, size, tag, proc, nic, t0))
        for hh in sorted(set(check)):
            push_free(hh, False)
    waiting = [(h, i) for h in range(n) for i in range(len(ranks[h].rs)) if not ranks[h].done[i]]
    if waiting:
        shown = "; ".join(f"rank {h} in {ranks[h].rs.describe(i)} (line {ranks[h].rs.line[i]})" for h, i in waiting[:4])
        more = f"; and {len(waiting) - 4} more" if len(waiting) > 4 else ""
        raise Stuck(f"{len(waiting)} operation{'s never complete' if len(waiting) > 1 else ' never completes'}: {shown}{more}", waiting)
    bad = [h for h in range(n) if uq[h]]
    if bad:
        h = bad[0]
        raise Stuck(f"rank {h} ends with {len(uq[h])} message(s) no receive matched"
                    + (f" (and {len(bad) - 1} more ranks)" if len(bad) > 1 else ""), [])
    return [max(row) for row in nexto]
