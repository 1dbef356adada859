"""What applications ask of the QsNet adapter (spec 03): its request types and host-API verbs.

``QsRequests`` is mixed into :class:`emu.nodes.nic.qsnet.QsNIC`, the mechanism that owns these types:
each ``host.put``, ``host.wait_word``, ... builds a request here, and the adapter carries it out in
its handler (``_req_*``), at the virtual time the host hands it over.
"""

from __future__ import annotations

from typing import Any, Callable

from emu.wire.qsnet import QsOp

from .interface import PENDING, NicRequest


class QsOpReq(NicRequest):
    """A QsNet adapter command (spec 03): put, get, fadd, cond."""

    __slots__ = ("kind", "rank", "a", "b", "n", "m", "prio")

    def __init__(self, kind: str, rank: int, a: int, b: int, n: int, m: int = 0, prio: int = 0):
        self.kind, self.rank, self.a, self.b, self.n, self.m, self.prio = kind, rank, a, b, n, m, prio

    def describe(self, names) -> str:
        return f"{self.kind}(rank={self.rank}, {self.a:#x}, {self.b:#x}, {self.n})"


class WaitArrivals(NicRequest):
    __slots__ = ("count", "timeout_ns")

    def __init__(self, count: int, timeout_ns: int):
        self.count, self.timeout_ns = count, timeout_ns

    def describe(self, names) -> str:
        return f"wait_arrivals({self.count})"


class BarrierEnter(NicRequest):
    """Enter a hardware barrier (spec 03): the adapter takes it from here."""

    __slots__ = ("spec", "seq", "data")

    def __init__(self, spec, seq: int, data: bytes):
        self.spec, self.seq, self.data = spec, seq, data

    def describe(self, names) -> str:
        return f"barrier_enter({self.spec.algo}, seq={self.seq})"


class WaitWord(NicRequest):
    __slots__ = ("addr", "at_least", "timeout_ns")

    def __init__(self, addr: int, at_least: int, timeout_ns: int):
        self.addr, self.at_least, self.timeout_ns = addr, at_least, timeout_ns

    def describe(self, names) -> str:
        return f"wait_word({self.addr:#x} >= {self.at_least})"


def _check_range(what: str, addr: int, size: int) -> None:
    if not isinstance(addr, int) or not isinstance(size, int) or addr < 0 or size < 0 or addr + size > 1 << 64:
        raise ValueError(f"{what}: address {addr!r} and size {size!r} must be a range of the 64-bit address space")


def _check_prio(what: str, priority) -> int:
    if priority not in (0, 1):
        raise ValueError(f"{what}: priority must be 0 (bulk) or 1 (high: the segment header's one priority bit), "
                         f"got {priority!r}")
    return int(priority)


REQUESTS = {QsOpReq: "_req_op", WaitArrivals: "_req_wait_arrivals", BarrierEnter: "_req_barrier_enter",
            WaitWord: "_req_wait_word"}
VERBS = ("rank", "mem_write", "mem_read", "put", "get", "bcast_put", "fadd", "cond", "wait_arrivals",
         "barrier_enter", "barrier_seq", "wait_word")


class QsRequests:
    """The host-facing half of the adapter (needs ``nic``, ``mem``, ``arrivals``, ``barriers``, the
    operations and watchers of :class:`emu.nodes.nic.qsnet.QsNIC`)."""

    # -- verbs: memory-based communication -------------------------------------------------------
    @property
    def rank(self) -> int:
        """This host's rank in the job (its address unless the adapter's rank table says else)."""
        return self.rank_to_node.index(self.nic.node_id)

    def mem_write(self, addr: int, data: bytes) -> None:
        """Write ``data`` to this node's memory at virtual address ``addr`` (at once, no time)."""
        _check_range("mem_write", addr, len(data))
        self.mem.write(addr, bytes(data))

    def mem_read(self, addr: int, size: int) -> bytes:
        """Read ``size`` bytes of this node's memory at ``addr`` (at once, no time)."""
        _check_range("mem_read", addr, size)
        return self.mem.read(addr, size)

    def put(self, rank: int, local: int, remote: int, size: int, priority: int = 0) -> QsOpReq:
        """Write ``size`` bytes at ``local`` to ``remote`` on ``rank``; returns a ``QsResult`` once
        every packet is acknowledged and the data is in the target's memory. ``priority=1``: a
        user-level high-priority put (spec 03): its packets overtake priority-0 traffic (bulk
        transfers) waiting at ports and in routers, and at segment boundaries where a port cuts a
        packet (``link.priority``)."""
        _check_range("put", local, size)
        _check_range("put", remote, size)
        return QsOpReq("put", rank, local, remote, size, prio=_check_prio("put", priority))

    def get(self, rank: int, remote: int, local: int, size: int, priority: int = 0) -> QsOpReq:
        """Read ``size`` bytes at ``remote`` on ``rank`` into ``local``; returns a ``QsResult`` once
        they are in this node's memory. ``priority=1``: the request and its reply go at high
        priority (see ``put``)."""
        _check_range("get", local, size)
        _check_range("get", remote, size)
        return QsOpReq("get", rank, remote, local, size, prio=_check_prio("get", priority))

    def bcast_put(self, group: int, members: int, local: int, remote: int, size: int) -> QsOpReq:
        """Hardware broadcast (spec 03): ``size`` bytes at ``local`` to ``remote`` on every member
        of multicast group ``group`` (``Topology.add_group``), ``members`` of them besides this
        node; returns a ``QsResult`` once the combined ACKs say every member has the data."""
        _check_range("bcast_put", local, size)
        _check_range("bcast_put", remote, size)
        if members < 1:
            raise ValueError(f"bcast_put: members must be >= 1, got {members}")
        return QsOpReq("bcast", group, local, remote, size, members)

    def fadd(self, rank: int, addr: int, value: int) -> QsOpReq:
        """Add ``value`` to the 64-bit word at ``addr`` on ``rank`` (exactly once); the result's
        ``value`` is the word before."""
        _check_range("fadd", addr, 8)
        return QsOpReq("fadd", rank, addr, value, 8)

    def cond(self, rank: int, addr: int, expected: int) -> QsOpReq:
        """Network conditional: does the 64-bit word at ``addr`` on ``rank`` equal ``expected``?
        (the result's ``cond``; ``value`` is the word read)."""
        _check_range("cond", addr, 8)
        return QsOpReq("cond", rank, addr, expected, 8)

    def wait_arrivals(self, count: int, timeout_ns: int = 10_000_000) -> WaitArrivals:
        """Wait until ``count`` transfers (puts) into this node's memory have completed; returns
        their ``Arrival`` records (fewer if ``timeout_ns`` passes first)."""
        return WaitArrivals(count, timeout_ns)

    def barrier_enter(self, spec, seq: int, data: bytes = b"") -> BarrierEnter:
        """Enter hardware barrier ``seq`` of the context ``spec`` (``emu.nodes.nic.qsbarrier.BarrierSpec``)
        with an optional reduction part ``data``; returns at once (a non-blocking barrier): the
        adapters complete it, and ``wait_word(spec.base + 8, seq)`` waits for it.
        Costs ``ElanSpec.issue_ns`` of CPU."""
        if not isinstance(seq, int) or not 0 < seq < 1 << 63:
            raise ValueError(f"barrier_enter: seq must be a positive 63-bit integer, got {seq!r}")
        _check_range("barrier_enter", spec.base, 16 + len(data))
        return BarrierEnter(spec, seq, bytes(data))

    def barrier_seq(self, base: int) -> int:
        """The last sequence number this node entered for the barrier context at ``base`` (0: none)."""
        ctx = self.barriers.ctx.get(base)
        return 0 if ctx is None else ctx.entered

    def wait_word(self, addr: int, at_least: int, timeout_ns: int = 100_000_000) -> WaitWord:
        """Wait until the 64-bit word at ``addr`` in this node's memory is >= ``at_least`` (written by
        the adapter); returns None, or why not (the adapter's failure, or the timeout)."""
        _check_range("wait_word", addr, 8)
        if timeout_ns < 0:
            raise ValueError(f"wait_word: timeout_ns must be >= 0, got {timeout_ns}")
        return WaitWord(addr, at_least, timeout_ns)

    # -- handlers: ``(request, now, done) -> (cpu_ns, value or PENDING)`` -------------------------
    def _req_op(self, op: QsOpReq, now: int, done: Callable) -> tuple[int, Any]:
        t = now + self.spec.issue_ns
        if op.kind == "put":
            self.start_put(op.rank, op.a, op.b, op.n, t, done, prio=op.prio)
        elif op.kind == "get":
            self.start_get(op.rank, op.a, op.b, op.n, t, done, prio=op.prio)
        elif op.kind == "bcast":
            self.bcast(op.rank, op.m, op.a, op.b, op.n, t, done)
        else:
            self.atomic(QsOp.FADD if op.kind == "fadd" else QsOp.COND, op.rank, op.a, op.b, t, done)
        return self.spec.issue_ns, PENDING

    def _req_wait_arrivals(self, op: WaitArrivals, now: int, done: Callable) -> tuple[int, Any]:
        if len(self.arrivals) >= op.count:
            got, self.arrivals[:] = self.arrivals[:op.count], self.arrivals[op.count:]
            return 0, got
        state = {"done": False, "timer": None}

        def check(_a=None) -> None:
            if not state["done"] and len(self.arrivals) >= op.count:
                state["done"] = True
                self.on_arrival = None
                self.nic.timers.cancel(state["timer"])
                got, self.arrivals[:] = self.arrivals[:op.count], self.arrivals[op.count:]
                done(got)

        def timeout(_a) -> None:
            if not state["done"]:
                state["done"] = True
                self.on_arrival = None
                got, self.arrivals[:] = list(self.arrivals), []
                done(got)

        self.on_arrival = check
        state["timer"] = self.nic.at(now + op.timeout_ns, timeout, None)
        return 0, PENDING

    def _req_barrier_enter(self, op: BarrierEnter, now: int, done: Callable) -> tuple[int, Any]:
        cost = self.spec.issue_ns
        self.barriers.enter(op.spec, op.seq, op.data, now + cost)
        return cost, None

    def _req_wait_word(self, op: WaitWord, now: int, done: Callable) -> tuple[int, Any]:
        state: dict[str, Any] = {"timer": None, "w": None}

        def woken(why: str | None) -> None:
            if state["timer"] is not None:
                self.nic.timers.cancel(state["timer"])
            self.nic.at(self.nic.now, done, why)

        def timeout(_a) -> None:
            self.unwatch(state["w"])
            done(f"word {op.addr:#x} still {self.mem.read_u64(op.addr)} < {op.at_least} after {op.timeout_ns} ns")

        state["w"] = self.watch(op.addr, op.at_least, woken)
        if state["w"] in self.watchers:
            state["timer"] = self.nic.at(now + op.timeout_ns, timeout, None)
        return 0, PENDING
