"""The host end of in-network allreduce (spec 04), in the NIC (sans-I/O part of the NIC engine).

Control: :meth:`IncNIC.request` asks the network manager (INCCTL REQUEST, resent until answered) for
an allreduce over a communicator; the answer is a GRANT (allreduce id, elements per packet, blocks in
flight, algorithm) or a REJECT (no switch tree has room: the application falls back to host
allreduce).

Data: :meth:`IncNIC.allreduce` splits a vector into blocks of ``elems`` elements, one packet each,
sent hop by hop to the host's switch (the first of the reduction tree). At most ``window`` blocks are
in flight (the manager's: Little's law, capped by the aggregation buffers the switches gave this
allreduce), in the source's **staggered** order by default: within each group of ``group`` blocks
(the grant's, a little wider to split the vector evenly), rank r of R starts at block
floor(r * group / R), so the packets of one block reach a switch group / R packet slots apart
(``send_order``; ``rotated``, one block per rank, and ``in order`` by name, by groups of the window). A block whose result
has not come back within ``timeout_ns`` (default ``elan.retransmit_ns``) is sent again (flag RETX; the switches' bitmaps
make it idempotent), waiting twice as long after each resend, at most ``max_tries`` times
(``elan.max_tries``), then the operation fails with the reason -- never a hang.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from emu.wire import HDR_LEN, DecodeError, PacketType
from emu.wire.inc import (CTL, F_LAST, F_RESULT, F_RETX, F_SPARSE, GRANT, MEMBER, REQUEST, CtlOp, decode,
                          dtype_code, encode_dense, encode_sparse, op_code, send_order)

from .interface import PENDING, Mechanism, NicCore, NicRequest, register_mechanism

log = logging.getLogger(__name__)
LINK_LOCAL = 0xFFFFFFFF
CTL_RETRY_NS = 200_000
CTL_TRIES = 5


@dataclass
class Grant:
    aid: int
    elems: int
    window: int
    algo: int
    depth: int
    switches: int
    latency_ns: int = 0
    """The manager's estimate of a window's blocks' time in the switches: hosts time out after no
    less than 4 times it."""
    group: int = 0
    """Blocks the staggered schedule spreads the ranks' starting blocks over (``send_order``; 0: the
    window): the manager's, as narrow as keeps a block's packets from waiting at the switches."""
    hosts: int = 0
    """Members of the allreduce (the host's own request knew them; not on the wire): the ranks the
    sending schedule spreads over."""


@dataclass(eq=False)
class Job:
    aid: int
    x: np.ndarray
    elems: int
    window: int
    order: list[int]
    timeout_ns: int
    max_tries: int
    on_done: Callable
    out: np.ndarray = None  # type: ignore[assignment]
    next: int = 0
    inflight: dict = field(default_factory=dict)
    """block -> [tries, timer]"""
    left: int = 0
    resent: int = 0
    finished: bool = False
    base: int = 0
    """Block id of this call's block 0 (``IncNIC.next_block``)."""
    span: int = 0
    """Sparse: elements a block spans; ``shards[b]`` its (index within the block, value) pairs."""
    shards: dict = field(default_factory=dict)
    partial: dict = field(default_factory=dict)
    """Sparse: result shards of a block received so far."""


class IncReq(NicRequest):
    """Spec 04: ask the network manager for an in-network allreduce, or run one."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, *args):
        self.kind, self.args = kind, args

    def describe(self, names) -> str:
        return f"inc_{self.kind}"


@register_mechanism
class IncNIC(Mechanism):
    """Spec 04's client in the NIC: requests to the network manager, blocks to the switches."""

    name = "inc"
    frames = {PacketType.INCCTL: "on_ctl", PacketType.INC: "on_data"}
    any_destination = frozenset({PacketType.INC})
    requests = {IncReq: "_req"}
    verbs = ("inc_request", "inc_release", "inc_allreduce", "inc_allreduce_sparse")

    def __init__(self, nic: NicCore):
        self.nic = nic
        self.jobs: dict[int, Job] = {}
        self._seq = 0
        self.ctl: dict[int, list] = {}
        """seq -> [frame, tries, timer, callback]"""
        self.stats = {"inc_sent": 0, "inc_resent": 0, "inc_results": 0, "inc_stray": 0, "inc_ctl": 0}
        self.next_block: dict[int, int] = {}
        """Allreduce id -> the first block id of its next call: calls on one allreduce number their
        blocks on from the last (every member makes the same calls in the same order), so a switch
        never takes a block of this call for one of the last."""
        self.granted: dict[tuple, Grant] = {}
        """What the manager granted, by communicator, members, type, operator, reproducibility: asked
        once per participant set (the communicator setup), used by every call after."""

    # -- what applications call (``host.inc_request``, ...) ----------------------------------------
    def inc_request(self, comm: int, members: list[str], dtype, op: str, nbytes: int,
                    reproducible: bool = False, algo: int = 0, span: int = 0) -> IncReq:
        """Ask the network manager for an in-network allreduce over ``members`` (host names, rank
        order; ``algo``: an ``emu.wire.inc.Algo`` code to ask for, 0: the manager picks by size);
        returns ``("grant", nodes.nic.inc.Grant)`` or ``("reject", why)``."""
        return IncReq("request", comm, [self.nic.resolve(m) for m in members], dtype, op, nbytes, reproducible, algo,
                      span)

    def inc_release(self, aid: int) -> IncReq:
        """This host is done with granted allreduce ``aid``; returns ``("released", members still
        holding it)`` or ``("reject", why)`` when the manager did not answer."""
        return IncReq("release", aid)

    def inc_allreduce(self, grant, x, rank: int, timeout_ns: int | None = None, schedule: str | None = None) -> IncReq:
        """Run the granted allreduce on ``x``; returns (result or None, error or None, blocks resent).
        A block without its result ``timeout_ns`` (default ``elan.retransmit_ns``) is sent again.
        ``schedule``: the order of the blocks (``SCHEDULES``; default ``elan.inc_schedule``, the
        source's ``staggered``)."""
        return IncReq("allreduce", grant, x, rank, timeout_ns, schedule)

    def inc_allreduce_sparse(self, grant, index, values, length: int, span: int, rank: int,
                             timeout_ns: int | None = None, schedule: str | None = None) -> IncReq:
        """Run a granted sparse allreduce (``span`` elements per block, granted with that span):
        the non-zeros of this rank's vector of ``length`` at ``index``; returns (dense result or
        None, error or None, blocks resent)."""
        return IncReq("sparse", grant, index, values, length, span, rank, timeout_ns, schedule)

    def _req(self, op: IncReq, now: int, done: Callable) -> tuple[int, Any]:
        cost = self.nic.spec.elan.issue_ns
        t = now + cost
        if op.kind == "request":
            *args, algo, span = op.args
            self.request(*args, t, done, algo, span)
        elif op.kind == "release":
            self.release(op.args[0], t, done)
        elif op.kind == "sparse":
            grant, index, values, length, span, rank, timeout_ns, schedule = op.args
            self.allreduce_sparse(grant, index, values, length, span, rank, t, done, timeout_ns=timeout_ns,
                                  schedule=schedule)
        else:
            grant, x, rank, timeout_ns, schedule = op.args
            self.allreduce(grant, x, rank, t, done, timeout_ns=timeout_ns, schedule=schedule)
        return cost, PENDING

    # -- control -----------------------------------------------------------------------------------
    def request(self, comm: int, members: list[int], dtype: np.dtype, op: str, nbytes: int, reproducible: bool,
                t: int, on_reply: Callable, algo: int = 0, span: int = 0) -> None:
        key = (comm, tuple(members), np.dtype(dtype).str, op, bool(reproducible), algo, span)
        if key in self.granted:
            self.nic.at(t, on_reply, ("grant", self.granted[key]))
            return
        mgr = self.nic.manager
        if mgr is None:
            self.nic.at(t, on_reply, ("reject", "no network manager in this topology (Topology.add_manager)"))
            return
        self._seq = (self._seq + 1) & 0xFFFF
        body = REQUEST.pack(dtype_code(dtype), int(reproducible) & 0xFF, algo, comm & 0xFFFFFFFF, nbytes, op_code(op), 0,
                            span) \
            + b"".join(MEMBER.pack(m) for m in members)
        frame = CTL.pack(CtlOp.REQUEST, 0, self._seq, 0, len(members)) + body
        def reply(res, key=key):
            if res[0] == "grant":
                res[1].hosts = len(members)
                self.granted[key] = res[1]
            on_reply(res)

        entry = [frame, 0, None, reply, mgr]
        self.ctl[self._seq] = entry
        self._send_ctl(self._seq, t)

    def release(self, aid: int, t: int, on_reply: Callable) -> None:
        """Tell the network manager this host is done with allreduce ``aid`` (the last member's
        release frees the switches' memory for another); ``on_reply(("released", members still
        holding it))``, or ``("reject", why)`` when the manager does not answer."""
        for key in [k for k, g in self.granted.items() if g.aid == aid]:
            del self.granted[key]
        self.next_block.pop(aid, None)
        mgr = self.nic.manager
        if mgr is None:
            self.nic.at(t, on_reply, ("released", 0))
            return
        self._seq = (self._seq + 1) & 0xFFFF
        self.ctl[self._seq] = [CTL.pack(CtlOp.RELEASE, 0, self._seq, aid, 0), 0, None, on_reply, mgr]
        self._send_ctl(self._seq, t)

    def _send_ctl(self, seq: int, t: int) -> None:
        e = self.ctl.get(seq)
        if e is None:
            return
        if e[1] >= CTL_TRIES:
            del self.ctl[seq]
            self.nic.at(self.nic.now, e[3], ("reject", f"the network manager did not answer {CTL_TRIES} requests"))
            return
        e[1] += 1
        self.stats["inc_ctl"] += 1
        self.nic.emit(e[4], PacketType.INCCTL, e[0], t + self.nic.spec.nic_delay_ns, prio=1)
        e[2] = self.nic.at(t + CTL_RETRY_NS, lambda _a, s=seq: self._send_ctl(s, self.nic.now), None)

    def on_ctl(self, frame: bytes, src: int, port: int, now: int) -> None:
        op, status, seq, aid, count = CTL.unpack(frame, HDR_LEN)
        e = self.ctl.pop(seq, None)
        if e is None or src != e[4]:
            self.stats["inc_stray"] += 1
            if e is not None:
                self.ctl[seq] = e
            return
        if e[2] is not None:
            self.nic.timers.cancel(e[2])
        t = now + self.nic.spec.nic_delay_ns
        if op == CtlOp.GRANT:
            g = GRANT.unpack(frame, HDR_LEN + CTL.size)
            self.nic.at(t, e[3], ("grant", Grant(aid, *g)))
        elif op == CtlOp.REJECT:
            why = frame[HDR_LEN + CTL.size:].decode("utf-8", "replace") or "rejected"
            self.nic.at(t, e[3], ("reject", why))
        elif op == CtlOp.RELEASED:
            self.nic.at(t, e[3], ("released", count))
        else:
            raise DecodeError(f"control operation {op} is not for a host")

    # -- data --------------------------------------------------------------------------------------
    def allreduce(self, g: Grant, x: np.ndarray, rank: int, t: int, on_done: Callable, *, timeout_ns: int | None = None,
                  max_tries: int | None = None, schedule: str | None = None) -> None:
        """Defaults: the adapter's ``elan.retransmit_ns`` and ``elan.max_tries``."""
        elan = self.nic.spec.elan
        timeout_ns = max(elan.retransmit_ns, 4 * g.latency_ns) if timeout_ns is None else timeout_ns
        max_tries = elan.max_tries if max_tries is None else max_tries
        flat = np.ascontiguousarray(x).ravel()
        n = max(1, -(-flat.size // g.elems))
        w, order = send_order(n, g.window, rank, g.hosts, schedule or elan.inc_schedule, g.group)
        base = self.next_block.get(g.aid, 0)
        self.next_block[g.aid] = (base + n) & 0xFFFFFFFF
        job = Job(g.aid, flat, g.elems, w, order, timeout_ns, max_tries, on_done, np.empty_like(flat), left=n, base=base)
        self.jobs[g.aid] = job
        self._pump(job, t)

    def allreduce_sparse(self, g: Grant, index: np.ndarray, values: np.ndarray, length: int, span: int, rank: int,
                         t: int, on_done: Callable, *, timeout_ns: int | None = None, max_tries: int | None = None,
                         schedule: str | None = None) -> None:
        """The allreduce of a sparse vector of ``length`` (its non-zeros at ``index``): blocks of
        ``span`` elements, each sent as its non-zeros in shards of ``g.elems`` pairs (an empty block
        as one empty shard); the result comes back the same way and lands in a dense array."""
        elan = self.nic.spec.elan
        n = max(1, -(-length // span))
        w, order = send_order(n, g.window, rank, g.hosts, schedule or elan.inc_schedule, g.group)
        index = np.asarray(index, np.int64)
        srt = np.argsort(index, kind="stable")
        index, values = index[srt], np.asarray(values)[srt]
        cuts = np.searchsorted(index, np.arange(n + 1) * span)
        base = self.next_block.get(g.aid, 0)
        self.next_block[g.aid] = (base + n) & 0xFFFFFFFF
        job = Job(g.aid, values, g.elems, w, order,
                  max(elan.retransmit_ns, 4 * g.latency_ns) if timeout_ns is None else timeout_ns,
                  elan.max_tries if max_tries is None else max_tries, on_done, np.zeros(length, values.dtype), left=n,
                  base=base, span=span)
        for b in range(n):
            job.shards[b] = (index[cuts[b]:cuts[b + 1]] - b * span, values[cuts[b]:cuts[b + 1]])
        self.jobs[g.aid] = job
        self._pump(job, t)

    def _pump(self, job: Job, t: int) -> None:
        while job.next < len(job.order) and len(job.inflight) < job.window:
            b = job.order[job.next]
            job.next += 1
            job.inflight[b] = [0, None]
            self._send_block(job, b, t)

    def _send_block(self, job: Job, b: int, t: int) -> None:
        st = job.inflight.get(b)
        if st is None or job.finished:
            return
        if st[0] >= job.max_tries:
            self._end(job, None, f"block {b} of allreduce {job.aid}: no result after {st[0]} sends")
            return
        if st[0]:
            job.resent += 1
            self.stats["inc_resent"] += 1
            if self.nic.tracer is not None:
                self.nic.tracer.instant(self.nic.name, "retransmit", self.nic.now, {"what": "allreduce block",
                                                                                    "aid": job.aid, "block": b}, "retransmit")
        st[0] += 1
        retx = F_RETX if st[0] > 1 else 0
        blk = (job.base + b) & 0xFFFFFFFF
        if job.span:  # the block's non-zeros, in shards
            idx, vals = job.shards[b]
            k = max(1, -(-len(idx) // job.elems))
            bodies = [encode_sparse(job.aid, blk, idx[i * job.elems:(i + 1) * job.elems],
                                    vals[i * job.elems:(i + 1) * job.elems], shard=i, shards=k, last=i == k - 1,
                                    flags=retx) for i in range(k)]
        else:
            lo = b * job.elems
            bodies = [encode_dense(job.aid, blk, job.x[lo:lo + job.elems], flags=F_LAST | retx)]
        for body in bodies:
            self.nic.emit(LINK_LOCAL, PacketType.INC, body, t + self.nic.spec.nic_delay_ns, port=0)
            self.stats["inc_sent"] += 1
        # exponential back-off: a block resent waits twice as long each time (a slow switch is not
        # flooded with resends it must answer as duplicates)
        wait = job.timeout_ns << min(st[0] - 1, 16)
        st[1] = self.nic.at(t + wait, lambda _a, j=job, blk=b: self._send_block(j, blk, self.nic.now), None)

    def on_data(self, frame: bytes, src: int, port: int, now: int) -> None:
        head, values, index = decode(frame, HDR_LEN)
        aid, flags, _code, b, shard, shards, _c, _r = head
        job = self.jobs.get(aid)
        if job is not None:
            b = (b - job.base) & 0xFFFFFFFF
        if job is None or not flags & F_RESULT or b not in job.inflight:
            self.stats["inc_stray"] += 1  # a late duplicate of a result we have, or not ours
            return
        if flags & F_SPARSE:  # a shard of the block's result: wait for all of them
            got = job.partial.setdefault(b, {})
            got[shard] = (index, values)
            if flags & F_LAST:
                got["n"] = shards
            if "n" not in got or len(got) - 1 < got["n"]:
                return
            del job.partial[b]
            for k, part in got.items():
                if k != "n":
                    job.out[b * job.span + np.asarray(part[0], np.int64)] = part[1]
        st = job.inflight.pop(b)
        if st[1] is not None:
            self.nic.timers.cancel(st[1])
        if not job.span:
            lo = b * job.elems
            job.out[lo:lo + len(values)] = values
        self.stats["inc_results"] += 1
        job.left -= 1
        if job.left == 0:
            self._end(job, job.out, None)
            return
        self._pump(job, now)

    def _end(self, job: Job, out, error) -> None:
        if job.finished:
            return
        job.finished = True
        for st in job.inflight.values():
            if st[1] is not None:
                self.nic.timers.cancel(st[1])
        self.jobs.pop(job.aid, None)
        self.nic.at(self.nic.now + self.nic.spec.nic_delay_ns, job.on_done, (out, error, job.resent))
