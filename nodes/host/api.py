"""What an application running on an emulated host sees.

Applications are ``async def app(host, *args)`` coroutines. They run in *virtual* time: every
``await`` on the host API is a request to the host's engine, which resumes the coroutine at the
virtual time the request completes. They must not await trio (or anything else): a trio sleep would
run on the wall clock and break determinism. Use ``await host.sleep(ns)`` instead.

Example::

    async def echo(host, peer):
        await host.send(peer, b"hello")
        msg = await host.recv(src=peer)
        return msg.data, host.now
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generator, NamedTuple

if TYPE_CHECKING:
    from .engine import Host


class Message(NamedTuple):
    src: str
    """Name of the sending host."""
    tag: int
    data: bytes
    """The message (a ``bytearray`` for one over 1 MiB: the reassembly buffer, not copied)."""
    t_ns: int
    """Virtual time the whole message was available to the receiver."""
    hops: int
    """Switches crossed by the message's last frame."""


class Op:
    """A request from an application to its host; awaiting it yields it to the engine."""

    __slots__ = ()

    def __await__(self) -> Generator["Op", Any, Any]:
        return (yield self)


class Send(Op):
    __slots__ = ("dst", "data", "tag")

    def __init__(self, dst: int, data: bytes, tag: int):
        self.dst, self.data, self.tag = dst, data, tag

    def describe(self, names) -> str:
        return f"send(dst={names[self.dst]}, {len(self.data)} bytes, tag={self.tag})"


class Recv(Op):
    __slots__ = ("src", "tag")

    def __init__(self, src: int | None, tag: int | None):
        self.src, self.tag = src, tag

    def matches(self, src: int, tag: int) -> bool:
        return (self.src is None or self.src == src) and (self.tag is None or self.tag == tag)

    def describe(self, names) -> str:
        src = "any" if self.src is None else names[self.src]
        tag = "any" if self.tag is None else self.tag
        return f"recv(src={src}, tag={tag})"


class PingOp(Op):
    __slots__ = ("dst",)

    def __init__(self, dst: int):
        self.dst = dst

    def describe(self, names) -> str:
        return f"ping({names[self.dst]})"


class Sleep(Op):
    __slots__ = ("ns",)

    def __init__(self, ns: int):
        self.ns = ns

    def describe(self, names) -> str:
        return f"sleep({self.ns} ns)"


class Compute(Op):
    __slots__ = ("ns",)

    def __init__(self, ns: int):
        self.ns = ns

    def describe(self, names) -> str:
        return f"compute({self.ns} ns)"


class NicOpen(Op):
    __slots__ = ("vp",)

    def __init__(self, vp: int):
        self.vp = vp

    def describe(self, names) -> str:
        return f"nic_open(vp={self.vp})"


class NicPost(Op):
    __slots__ = ("vp", "posted")

    def __init__(self, vp: int, posted: list):
        self.vp, self.posted = vp, posted

    def describe(self, names) -> str:
        return f"nic_post(vp={self.vp}, {len(self.posted)} descriptors)"


class NicWait(Op):
    __slots__ = ("region", "count", "timeout_ns", "vp")

    def __init__(self, region: int, count: int, timeout_ns: int, vp: int):
        self.region, self.count, self.timeout_ns, self.vp = region, count, timeout_ns, vp

    def describe(self, names) -> str:
        return f"nic_wait(region={self.region}, {self.count} completions)"


class QsOpReq(Op):
    """A QsNet adapter command (spec 03): put, get, fadd, cond."""

    __slots__ = ("kind", "rank", "a", "b", "n", "m")

    def __init__(self, kind: str, rank: int, a: int, b: int, n: int, m: int = 0):
        self.kind, self.rank, self.a, self.b, self.n, self.m = kind, rank, a, b, n, m

    def describe(self, names) -> str:
        return f"{self.kind}(rank={self.rank}, {self.a:#x}, {self.b:#x}, {self.n})"


class WaitArrivals(Op):
    __slots__ = ("count", "timeout_ns")

    def __init__(self, count: int, timeout_ns: int):
        self.count, self.timeout_ns = count, timeout_ns

    def describe(self, names) -> str:
        return f"wait_arrivals({self.count})"


class BarrierEnter(Op):
    """Enter a hardware barrier (spec 03): the adapter takes it from here."""

    __slots__ = ("spec", "seq", "data")

    def __init__(self, spec, seq: int, data: bytes):
        self.spec, self.seq, self.data = spec, seq, data

    def describe(self, names) -> str:
        return f"barrier_enter({self.spec.algo}, seq={self.seq})"


class IncReq(Op):
    """Spec 04: ask the network manager for an in-network allreduce, or run one."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, *args):
        self.kind, self.args = kind, args

    def describe(self, names) -> str:
        return f"inc_{self.kind}"


class NcRun(Op):
    """Spec 02: run a coded-broadcast plan on the NIC."""

    __slots__ = ("plan", "data")

    def __init__(self, plan, data: bytes):
        self.plan, self.data = plan, data

    def describe(self, names) -> str:
        return f"nc_run({self.plan.scheme.algo})"


class WaitWord(Op):
    __slots__ = ("addr", "at_least", "timeout_ns")

    def __init__(self, addr: int, at_least: int, timeout_ns: int):
        self.addr, self.at_least, self.timeout_ns = addr, at_least, timeout_ns

    def describe(self, names) -> str:
        return f"wait_word({self.addr:#x} >= {self.at_least})"


def _check_range(what: str, addr: int, size: int) -> None:
    if not isinstance(addr, int) or not isinstance(size, int) or addr < 0 or size < 0 or addr + size > 1 << 64:
        raise ValueError(f"{what}: address {addr!r} and size {size!r} must be a range of the 64-bit address space")


class HostAPI:
    """The handle an application gets: ``host.send``, ``host.recv``, ``host.ping``, ``host.sleep``."""

    def __init__(self, engine: "Host"):
        self._engine = engine

    @property
    def name(self) -> str:
        return self._engine.name

    @property
    def now(self) -> int:
        """Current virtual time (ns)."""
        return self._engine.now

    @property
    def cpu_ns(self) -> int:
        """Host CPU time this application has spent so far (modelled: send and receive overheads,
        computation); time spent waiting is not CPU time."""
        proc = self._engine.current
        return proc.cpu_ns if proc is not None else 0

    @property
    def spec(self):
        """The host's ``HostSpec`` (overheads, reduction cost, MTU)."""
        return self._engine.spec

    @property
    def hosts(self) -> list[str]:
        """Names of every host in the cluster, in address order."""
        return list(self._engine.host_ids)

    def _addr(self, host: str | int) -> int:
        return self._engine.resolve(host)

    def send(self, dst: str | int, data: bytes, tag: int = 0) -> Send:
        """Send ``data`` (any size) to host ``dst``; returns once the NIC has the message."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"send: data must be bytes, got {type(data).__name__}")
        if not 0 <= tag <= 0xFFFFFFFF:
            raise ValueError(f"send: tag must fit in 32 bits, got {tag}")
        # no copy: the NIC cuts the message into frames as soon as the application yields this
        return Send(self._addr(dst), data if isinstance(data, bytes) else memoryview(data).cast("B"), tag)

    def recv(self, src: str | int | None = None, tag: int | None = None) -> Recv:
        """Wait for a whole message (from ``src`` / with ``tag`` if given); returns a :class:`Message`."""
        return Recv(None if src is None else self._addr(src), tag)

    def ping(self, dst: str | int) -> PingOp:
        """Echo request to ``dst``; returns the virtual round-trip time in ns."""
        return PingOp(self._addr(dst))

    def compute(self, ns: int) -> Compute:
        """Spend ``ns`` of host CPU time (counted in ``cpu_ns``)."""
        if ns < 0:
            raise ValueError(f"compute: ns must be >= 0, got {ns}")
        return Compute(int(ns))

    def reduce_cost(self, nbytes: int) -> Compute:
        """Spend the modelled CPU time to combine ``nbytes`` of reduction operands."""
        return Compute(self._engine.spec.reduce_ns(nbytes))

    # -- the collective-offload NIC (spec 01) ----------------------------------------------------
    def nic_open(self, vp: int) -> NicOpen:
        """Open virtual port ``vp`` of the NIC's collective engine (communicator setup)."""
        return NicOpen(vp)

    def nic_post(self, vp: int, posted: list) -> NicPost:
        """Post descriptors (``nodes.nic.coll.Posted``) to ``vp``; costs ``NicSpec.post_ns`` of CPU each."""
        return NicPost(vp, list(posted))

    def nic_wait(self, region: int, count: int = 1, timeout_ns: int = 1_000_000, vp: int = 1) -> NicWait:
        """Wait until the NIC has written ``count`` completions of ``region`` on virtual port ``vp``
        to host memory; returns them (``nodes.nic.coll.Completion``). After ``timeout_ns`` without them,
        the region is aborted and the completions so far are returned with a timeout one added."""
        return NicWait(region, count, timeout_ns, vp)

    # -- the QsNet adapter (spec 03): memory-based communication ---------------------------------
    @property
    def rank(self) -> int:
        """This host's rank in the job (its address unless the adapter's rank table says else)."""
        qs = self._engine.nic.qs
        return qs.rank_to_node.index(self._engine.nic.node_id)

    def mem_write(self, addr: int, data: bytes) -> None:
        """Write ``data`` to this node's memory at virtual address ``addr`` (at once, no time)."""
        _check_range("mem_write", addr, len(data))
        self._engine.nic.qs.mem.write(addr, bytes(data))

    def mem_read(self, addr: int, size: int) -> bytes:
        """Read ``size`` bytes of this node's memory at ``addr`` (at once, no time)."""
        _check_range("mem_read", addr, size)
        return self._engine.nic.qs.mem.read(addr, size)

    def put(self, rank: int, local: int, remote: int, size: int) -> QsOpReq:
        """Write ``size`` bytes at ``local`` to ``remote`` on ``rank``; returns a ``QsResult`` once
        every packet is acknowledged and the data is in the target's memory."""
        _check_range("put", local, size)
        _check_range("put", remote, size)
        return QsOpReq("put", rank, local, remote, size)

    def get(self, rank: int, remote: int, local: int, size: int) -> QsOpReq:
        """Read ``size`` bytes at ``remote`` on ``rank`` into ``local``; returns a ``QsResult`` once
        they are in this node's memory."""
        _check_range("get", local, size)
        _check_range("get", remote, size)
        return QsOpReq("get", rank, remote, local, size)

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
        """Enter hardware barrier ``seq`` of the context ``spec`` (``nodes.nic.qsbarrier.BarrierSpec``)
        with an optional reduction part ``data``; returns at once (a non-blocking barrier): the
        adapters complete it, and ``wait_word(spec.base + 8, seq)`` waits for it.
        Costs ``ElanSpec.issue_ns`` of CPU."""
        if not isinstance(seq, int) or not 0 < seq < 1 << 63:
            raise ValueError(f"barrier_enter: seq must be a positive 63-bit integer, got {seq!r}")
        _check_range("barrier_enter", spec.base, 16 + len(data))
        return BarrierEnter(spec, seq, bytes(data))

    def barrier_seq(self, base: int) -> int:
        """The last sequence number this node entered for the barrier context at ``base`` (0: none)."""
        ctx = self._engine.nic.qs.barriers.ctx.get(base)
        return 0 if ctx is None else ctx.entered

    def wait_word(self, addr: int, at_least: int, timeout_ns: int = 100_000_000) -> WaitWord:
        """Wait until the 64-bit word at ``addr`` in this node's memory is >= ``at_least`` (written by
        the adapter); returns None, or why not (the adapter's failure, or the timeout)."""
        _check_range("wait_word", addr, 8)
        if timeout_ns < 0:
            raise ValueError(f"wait_word: timeout_ns must be >= 0, got {timeout_ns}")
        return WaitWord(addr, at_least, timeout_ns)

    # -- in-network allreduce (spec 04) -------------------------------------------------------------
    def inc_request(self, comm: int, members: list[str], dtype, op: str, nbytes: int,
                    reproducible: bool = False, algo: int = 0, span: int = 0) -> IncReq:
        """Ask the network manager for an in-network allreduce over ``members`` (host names, rank
        order; ``algo``: an ``emu.wire.inc.Algo`` code to ask for, 0: the manager picks by size);
        returns ``("grant", nodes.nic.inc.Grant)`` or ``("reject", why)``."""
        return IncReq("request", comm, [self._addr(m) for m in members], dtype, op, nbytes, reproducible, algo, span)

    # -- coded broadcast (spec 02) --------------------------------------------------------------------
    @property
    def grid(self):
        """The direct network's ``topologies.grid.Grid`` (None on other topologies)."""
        from topologies.grid import Grid

        g = self._engine.nic.grid
        return Grid(*g) if g is not None else None

    def nc_run(self, plan, data: bytes) -> NcRun:
        """Run a coded-broadcast plan (``nodes.collectives.coding.plan``) with this node's packet;
        returns (packets by source, per-step figures)."""
        return NcRun(plan, bytes(data))

    def inc_release(self, aid: int) -> IncReq:
        """This host is done with granted allreduce ``aid``; returns ``("released", members still
        holding it)`` or ``("reject", why)`` when the manager did not answer."""
        return IncReq("release", aid)

    def inc_allreduce(self, grant, x, rank: int, timeout_ns: int | None = None) -> IncReq:
        """Run the granted allreduce on ``x``; returns (result or None, error or None, blocks resent).
        A block without its result ``timeout_ns`` (default ``elan.retransmit_ns``) is sent again."""
        return IncReq("allreduce", grant, x, rank, timeout_ns)

    def inc_allreduce_sparse(self, grant, index, values, length: int, span: int, rank: int,
                             timeout_ns: int | None = None) -> IncReq:
        """Run a granted sparse allreduce (``span`` elements per block, granted with that span):
        the non-zeros of this rank's vector of ``length`` at ``index``; returns (dense result or
        None, error or None, blocks resent)."""
        return IncReq("sparse", grant, index, values, length, span, rank, timeout_ns)

    def sleep(self, ns: int) -> Sleep:
        """Let ``ns`` nanoseconds of virtual time pass."""
        if ns < 0:
            raise ValueError(f"sleep: ns must be >= 0, got {ns}")
        return Sleep(int(ns))
