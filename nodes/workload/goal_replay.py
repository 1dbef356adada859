"""One rank of a GOAL schedule, replayed by its host (an application of the host API).

Every send and receive is a host message on the wire in the point-to-point protocol of ``emu
mpirun`` (``emu.wire.mpi``: tag ``P2P_TAG``, an envelope of kind, context 0, source rank, MPI tag and
a sequence number per pair of ranks): a message of at most ``host.eager_limit_bytes`` goes at once
(``data``), a longer one by rendezvous (``rts``; the receiver's ``cts`` once a receive matched it;
then ``rdata``), so a replayed schedule puts the same frames on the wire as an MPI program making
the same sends. The receiver matches as MPI does: messages of one sender in their sequence order
(whatever the routing), against the receives posted in the order they were posted (source -1: any
source, tag -1: any tag), else into the unexpected queue, which a receive posted later searches first.

Timing is the host's: a send costs ``send_overhead_ns`` of CPU (an eager send completes then; a
rendezvous send when its data went), a message taken in costs ``recv_overhead_ns`` (a receive
completes when its message, or a rendezvous message's data, was taken in), a calc of ``s`` ns on
CPU 0 is ``host.compute(s)`` (OS noise applies). A calc on another CPU stream (``cpu c``) runs
beside CPU 0: it ends ``s`` after that stream is free; a message that comes meanwhile is taken in
when the rank next looks (at the latest when that calc ends). Operations whose dependencies are met
run in that order, those met together sends first, then receives, then calcs (as LogGOPSim queues
them); when the CPU is free it takes what waits longest: a message that came before the next
operation was ready (or when it was) first. A message that arrives at the very instant the CPU
frees up is not there yet for the rank (an element runs its own events of an instant before the
frames that arrive then): the operation goes first. Such choices are counted (``races``): where
there were none, a contention-free replay gives LogGOPSim's figures exactly (docs/replay.md).
"""

from __future__ import annotations

import heapq
from collections import deque

from emu.wire.mpi import ENVELOPE, P2P_TAG, RENDEZVOUS

from .goal import ANY, CALC, KIND_NAMES, RECV, SEND, RankSchedule

HDR = ENVELOPE.struct
RNDV = RENDEZVOUS.struct
DATA, RTS, CTS, RDATA = 0, 3, 4, 5
_ORDER = {SEND: 0, RECV: 1, CALC: 2, 3: 3}  # (3: a Chakra trace's collective)


class _Rank:
    """The replay state of one rank."""

    def __init__(self, host, rank: int, rs: RankSchedule, hosts: list[str], trace: bool):
        self.host, self.rank, self.rs, self.hosts = host, rank, rs, hosts
        self.host_rank = {h: r for r, h in enumerate(hosts)}
        n = len(rs)
        self.needs = list(rs.needs)
        self.ready: deque[int] = deque()
        self.fresh = [i for i in range(n) if self.needs[i] == 0]
        self.remaining = n
        self.start = [-1] * n
        self.end = [-1] * n
        self.ready_ns = [0] * n
        self.cause = [-1] * n
        """The dependency whose completion (or start) made the operation ready last (-1: none)."""
        self.matched: dict[int, tuple[int, int]] = {}
        """A receive -> (source rank, sequence number) of the message it matched."""
        self.sent: dict[int, tuple[int, int]] = {}
        """A send -> (destination rank, its sequence number)."""
        self.send_seq: dict[int, int] = {}
        self.recv_seq: dict[int, int] = {}
        self.early: dict[tuple[int, int], tuple] = {}
        self.posted: list[int] = []
        self.unexpected: list[tuple] = []  # (wsrc, tag, seq, size, rendezvous)
        self.rndv_send: dict[tuple[int, int], int] = {}
        self.rndv_recv: dict[tuple[int, int], int] = {}
        self.streams: dict[int, int] = {}
        """CPU stream c > 0 -> when it is free."""
        self.timers: list[tuple[int, int]] = []  # (end, op) of calcs on other streams
        self.trace = trace
        self.ran_at = -1
        """When the rank last started an operation."""
        self.races = 0
        """Times the rank's CPU had an operation ready and a message waiting (or arriving at that very
        instant, which the rank sees after the operation: an element runs its own events of an instant
        before the frames that arrive then). The rank takes what waited longer; LogGOPSim orders them by
        when its events were made, so its figures may differ where races happened."""
        self.eager = host.spec.eager_limit_bytes

    # -- dependencies -----------------------------------------------------------------------------
    def _release(self, succ, i: int) -> None:
        now = self.host.now
        for j in succ:
            self.needs[j] -= 1
            if self.needs[j] == 0:
                self.ready_ns[j], self.cause[j] = now, i
                self.fresh.append(j)

    def started(self, i: int) -> None:
        self.start[i] = self.host.now
        succ = self.rs.after_start.get(i)
        if succ:
            self._release(succ, i)

    def done(self, i: int) -> None:
        self.end[i] = self.host.now
        self.remaining -= 1
        succ = self.rs.after_done.get(i)
        if succ:
            self._release(succ, i)
        if self.trace:
            rs = self.rs
            args = {"label": rs.name(i), "bytes": rs.size[i]} if rs.kind[i] != CALC else {"label": rs.name(i)}
            if rs.kind[i] != CALC:
                args["peer"] = rs.peer[i]
                args["tag"] = rs.tag[i]
            self.host.span_done(KIND_NAMES[rs.kind[i]], self.start[i], **args)

    # -- operations -------------------------------------------------------------------------------
    async def execute(self, i: int):
        rs, host = self.rs, self.host
        k = rs.kind[i]
        self.started(i)
        if k == CALC:
            c = rs.cpu[i]
            if c == 0:
                await host.compute(rs.size[i])
                self.done(i)
            else:
                t = max(self.streams.get(c, 0), host.now) + rs.size[i]
                self.streams[c] = t
                heapq.heappush(self.timers, (t, i))
            return
        if k == RECV:
            src, tag = rs.peer[i], rs.tag[i]
            for j, env in enumerate(self.unexpected):
                if (src == ANY or src == env[0]) and (tag == ANY or tag == env[1]):
                    del self.unexpected[j]
                    await self.complete(i, env)
                    return
            self.posted.append(i)
            return
        dst, size, tag = rs.peer[i], rs.size[i], rs.tag[i]
        seq = self.send_seq.get(dst, 0)
        self.send_seq[dst] = seq + 1
        self.sent[i] = (dst, seq)
        if dst == self.rank:  # to oneself: no fabric (as emu mpirun's library)
            self.done(i)
            await self.arrived(self.rank, tag, seq, size, False)
            return
        if size > self.eager:
            self.rndv_send[(dst, seq)] = i
            await host.send(self.hosts[dst], HDR.pack(RTS, 0, self.rank, tag, seq) + RNDV.pack(size), P2P_TAG)
            return
        await host.send(self.hosts[dst], b"".join((HDR.pack(DATA, 0, self.rank, tag, seq), bytes(size))), P2P_TAG)
        self.done(i)

    async def complete(self, i: int, env: tuple) -> None:
        """Receive ``i`` matched ``env``: done, or (rendezvous) clear-to-send, done when the data is in."""
        wsrc, _, seq, _, rndv = env
        self.matched[i] = (wsrc, seq)
        if rndv:
            self.rndv_recv[(wsrc, seq)] = i
            await self.host.send(self.hosts[wsrc], HDR.pack(CTS, 0, 0, 0, seq), P2P_TAG)
            return
        self.done(i)

    async def arrived(self, wsrc: int, tag: int, seq: int, size: int, rndv: bool) -> None:
        expect = self.recv_seq.get(wsrc, 0)
        if seq != expect:  # overtook an earlier message of the same sender: it waits for that one
            self.early[(wsrc, seq)] = (tag, size, rndv)
            return
        rs = self.rs
        while True:
            self.recv_seq[wsrc] = seq + 1
            env = (wsrc, tag, seq, size, rndv)
            for j, i in enumerate(self.posted):
                src, t = rs.peer[i], rs.tag[i]
                if (src == ANY or src == wsrc) and (t == ANY or t == tag):
                    del self.posted[j]
                    await self.complete(i, env)
                    break
            else:
                self.unexpected.append(env)
            seq += 1
            nxt = self.early.pop((wsrc, seq), None)
            if nxt is None:
                return
            tag, size, rndv = nxt

    async def incoming(self, msg) -> None:
        data = msg.data
        kind, _, _, tag, seq = HDR.unpack_from(data)
        wsrc = self.host_rank[msg.src]
        if kind == CTS:  # our request-to-send matched: the data goes, the send is done
            i = self.rndv_send.pop((wsrc, seq))
            await self.host.send(msg.src, b"".join((HDR.pack(RDATA, 0, 0, 0, seq), bytes(self.rs.size[i]))), P2P_TAG)
            self.done(i)
        elif kind == RDATA:
            self.done(self.rndv_recv.pop((wsrc, seq)))
        elif kind == RTS:
            (size,) = RNDV.unpack_from(data, HDR.size)
            await self.arrived(wsrc, tag, seq, size, True)
        else:
            await self.arrived(wsrc, tag, seq, len(data) - HDR.size, False)

    def _timers_due(self) -> None:
        now = self.host.now
        while self.timers and self.timers[0][0] <= now:
            self.done(heapq.heappop(self.timers)[1])

    # -- the loop ---------------------------------------------------------------------------------
    refill = None
    """Called before each turn of the loop by a rank that reads its operations as it goes (a Chakra
    trace, ``emu.nodes.workload.chakra_replay``); None: every operation is there from the start."""

    async def run(self):
        host, rs = self.host, self.rs
        ready, kind = self.ready, rs.kind
        while True:
            if self.refill is not None:
                self.refill()
            if not self.remaining:
                break
            if self.timers:
                self._timers_due()
                if not self.remaining:
                    break
            if self.fresh:
                fresh, self.fresh = self.fresh, []
                if len(fresh) > 1:
                    fresh.sort(key=lambda j: (_ORDER[kind[j]], j))
                for j in fresh:
                    if kind[j] == CALC and rs.cpu[j]:  # on a stream of its own: starts now, CPU 0 is not held
                        await self.execute(j)
                    else:
                        ready.append(j)
                continue
            if ready:
                t_msg = host.arrived_ns(P2P_TAG)
                if t_msg is not None:
                    self.races += 1
                if t_msg is None or t_msg > self.ready_ns[ready[0]]:
                    self.ran_at = host.now
                    await self.execute(ready.popleft())
                    continue
                msg = await host.try_recv(tag=P2P_TAG)  # it came first (or together): it first
            elif self.timers:  # a calc on another stream ends first unless a message is there
                msg = await host.try_recv(tag=P2P_TAG)
                if msg is None:
                    await host.sleep(self.timers[0][0] - host.now)
                    continue
            else:
                msg = await host.recv(tag=P2P_TAG)
            if msg.t_ns == self.ran_at:
                self.races += 1
            await self.incoming(msg)
        return self.result()

    def result(self) -> dict:
        rs = self.rs
        by_kind: dict[str, list[int]] = {}
        for i, k in enumerate(rs.kind):
            row = by_kind.setdefault(KIND_NAMES[k], [0, 0, 0])
            row[0] += 1
            row[1] += rs.size[i] if k != CALC else 0
            row[2] += self.end[i] - self.start[i]
        return {"rank": self.rank, "end_ns": max(self.end, default=0), "ops": len(rs),
                "kinds": {k: {"count": c, "bytes": b, "busy_ns": ns} for k, (c, b, ns) in sorted(by_kind.items())},
                "unmatched": len(self.unexpected), "races": self.races,
                "start": self.start, "end": self.end, "ready": self.ready_ns, "cause": self.cause,
                "matched": self.matched, "sent": self.sent}


async def goal_rank(host, rank: int, rs: RankSchedule, hosts: list[str], trace: bool = False):
    """Replay ``rs`` as rank ``rank`` (``hosts``: the host of every rank); returns its figures: end
    time, per operation kind count, bytes and busy time, and per operation its start, end, when it
    was ready and why (for the critical path, ``emu.front.replay_path``)."""
    return await _Rank(host, rank, rs, hosts, trace).run()
