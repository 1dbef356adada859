"""Communicators: a set of hosts with ranks, and the point-to-point layer collectives use.

Inside an application::

    comm = Comm(host, ["h0", "h2", "h5"])            # rank i is the i-th host
    y = await comm.allreduce(x, op="sum")             # algorithm chosen by size, or algo="ring"

Every rank must call the same collectives in the same order (as in MPI). Each message a collective
sends carries a tag made of the communicator id, the collective's sequence number and the step, so
messages of different steps or calls can never be confused.
"""

from __future__ import annotations

import functools
import zlib
from typing import Any

import numpy as np

from emu.config import ConfigError
from emu.trace import NO_SPAN

from emu.reduce import Op, get_op
from .hw import HW_GROUP
from .offloads import offload_named
from .select import ALGORITHMS, canonical, check, choose


_UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum, "band": np.bitwise_and,
           "bor": np.bitwise_or, "bxor": np.bitwise_xor}
"""Operators that numpy can apply into a given array (``Comm.combine``'s ``out``)."""


def _span(host, name: str, **args):
    """A span on the host's rank track of the run's trace (``HostAPI.span``); nothing untraced."""
    span = getattr(host, "span", None)
    return NO_SPAN if span is None else span(name, **args)


def _traced(fn):
    """A collective call as a span on the rank's track of the trace: rank, ranks and the bytes of its
    array; the algorithm used at its end."""
    name = fn.__name__

    @functools.wraps(fn)
    async def call(self, *args, **kw):
        x = args[0] if args and isinstance(args[0], np.ndarray) else kw.get("x")
        span = _span(self.host, name, rank=self.rank, ranks=self.size,
                     **({"bytes": int(x.nbytes)} if isinstance(x, np.ndarray) else {}))
        with span:
            result = await fn(self, *args, **kw)
            if span is not NO_SPAN:
                span.end_args = {"algo": self.last_algo}
            return result
    return call


class Comm:
    def __init__(self, host, members: list[str] | None = None, comm_id: int | None = None,
                 traffic_class: int = 0):
        self.host = host
        if not isinstance(traffic_class, int) or isinstance(traffic_class, bool) or not 0 <= traffic_class <= 255:
            raise ConfigError(f"Comm: traffic_class must be an integer within 0..255, got {traffic_class!r}")
        self.traffic_class = traffic_class
        """The class every message of this communicator's collectives carries (``HostAPI.send``'s
        ``vc``): routers map it to their VCs, so two communicators' traffic can be kept apart."""
        self.members = list(members) if members is not None else host.hosts
        if len(set(self.members)) != len(self.members):
            raise ConfigError("a communicator lists a host twice")
        if host.name not in self.members:
            raise ConfigError(f"{host.name} is not a member of this communicator {self.members[:8]}...")
        self.rank = self.members.index(host.name)
        self.size = len(self.members)
        self.id = (zlib.crc32(",".join(self.members).encode()) if comm_id is None else comm_id) & 0xFF
        self._seq = 0
        self._sends: list = []
        """Send requests whose buffers the NIC may still read (``send``), given back at a collective's end."""
        self.hw_seq = 0
        """Hardware barriers this rank has entered (``emu.nodes.collectives.hw``)."""
        self.hw_group = HW_GROUP
        """The multicast group over this communicator's hosts that hardware collectives use."""
        self.last_algo: str | None = None
        """The algorithm the last collective used (the default choice, if none was named)."""
        self.last_status = 0
        """ErrVec bits the NICs reported for the last offloaded collective (0: none)."""

    # -- point to point (used by the algorithms) ------------------------------------------------
    def _tag(self, step: int) -> int:
        if step >= 4096:
            raise ConfigError("a collective needs more than 4096 steps; communicators are limited to 2048 ranks")
        return (self.id << 24) | ((self._seq & 0xFFF) << 12) | step

    async def send(self, rank: int, data: np.ndarray | bytes, step: int) -> None:
        """Send ``data`` to ``rank`` without a copy: the NIC makes a long message's frames from the
        array as its port sends them (``HostAPI.isend``); the collective gives the buffers back when
        it ends (:meth:`_sends_done`), and overwrites a sent part of an array only once its
        receiver has it (every algorithm here does: what it writes comes back after it)."""
        if isinstance(data, np.ndarray):
            buf = memoryview(np.ascontiguousarray(data)).cast("B") if data.size else b""
        else:
            buf = data
        with _span(self.host, "send", step=step, peer=self.members[rank], bytes=len(buf)):
            isend = getattr(self.host, "isend", None)
            if isend is None or isinstance(buf, bytes):
                await self.host.send(self.members[rank], buf, self._tag(step), vc=self.traffic_class)
                return
            req = await isend(self.members[rank], buf, self._tag(step), vc=self.traffic_class)
            if not req.done:
                self._sends.append(req)

    async def _sends_done(self) -> None:
        """The buffers of this rank's sends are its own again (``HostAPI.wait``: no virtual time)."""
        if self._sends:
            reqs, self._sends = self._sends, []
            await self.host.wait(*reqs)

    async def recv(self, rank: int, dtype: np.dtype, step: int) -> np.ndarray:
        with _span(self.host, "recv", step=step, peer=self.members[rank]) as span:
            msg = await self.host.recv(self.members[rank], self._tag(step))
            if span is not NO_SPAN:
                span.end_args = {"bytes": len(msg.data)}
        a = np.frombuffer(msg.data, dtype=dtype)
        return a if a.flags.writeable else a.copy()  # a large message's buffer is ours already

    async def sendrecv(self, data: np.ndarray, dst: int, src: int, dtype: np.dtype, step: int) -> np.ndarray:
        with _span(self.host, f"step {step}", to=self.members[dst], **{"from": self.members[src]},
                   bytes=int(getattr(data, "nbytes", len(data)))):
            await self.send(dst, data, step)
            return await self.recv(src, dtype, step)

    async def combine(self, op: Op, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Reduce two operands on the host CPU, paying the modelled per-byte cost; into ``out`` (``a``
        or ``b`` itself, or a part of the caller's array) when given: no new array."""
        await self.host.reduce_cost(a.nbytes)
        with np.errstate(all="ignore"):
            if out is None:
                return op.combine(a, b)
            fn = _UFUNCS.get(op.name)
            if fn is not None and out.dtype == a.dtype == b.dtype:
                return fn(a, b, out=out)
            out[...] = op.combine(a, b)
            return out

    # -- collectives ----------------------------------------------------------------------------
    async def _run(self, kind: str, algo: str | None, nbytes: int, *args: Any) -> Any:
        name = canonical(kind, algo) if algo else choose(kind, nbytes, self.size)
        check(kind, name, self.size)
        fn = ALGORITHMS[kind][name]
        self._seq += 1
        self.last_algo = name
        result = await fn(self, *args)
        await self._sends_done()
        return result

    @_traced
    async def allreduce(self, x: np.ndarray, op: str = "sum", algo: str | None = None, *,
                        offload: str | None = None, branch: int | None = None) -> np.ndarray | None:
        """The reduction of every rank's ``x`` on every rank. ``offload="nic"`` runs it on the NICs
        with triggered descriptors over a ``branch``-ary tree (``nic_setup`` first; default: the
        shallowest tree the NIC's receive queue allows, ``offload.default_branch``); then the result
        is None when the NICs report an error, and ``last_status`` says which (ErrVec bits)."""
        get_op(op).check(x.dtype)
        return await offload_named(offload).run(self, "allreduce", x, op, 0, algo, branch)

    @_traced
    async def reduce(self, x: np.ndarray, op: str = "sum", root: int = 0, algo: str | None = None, *,
                     offload: str | None = None, branch: int | None = None):
        """The reduction at ``root``; other ranks get None. ``offload="nic"`` as for allreduce."""
        get_op(op).check(x.dtype)
        self._check_root(root)
        return await offload_named(offload).run(self, "reduce", x, op, root, algo, branch)

    @_traced
    async def allreduce_sparse(self, index: np.ndarray, values: np.ndarray, length: int, op: str = "sum", *,
                               offload: str | None = "switch", span: int | None = None,
                               algo: str | None = None) -> np.ndarray:
        """The sum of every rank's sparse vector (non-zeros ``values`` at ``index``) as a dense
        array of ``length``. ``offload="switch"`` (spec 04): aggregated in the switches, shards of
        (index, value) pairs (``emu.nodes.collectives.inswitch.allreduce_sparse_switch``); None: host
        software, SparCML's split allgather (pairs, or a dense slice where fill-in makes that
        smaller; ``emu.nodes.collectives.sparse``), or ``algo="recursive_doubling"`` on pairs (a
        power-of-two number of ranks); another operator than a sum: the dense vector, reduced."""
        return await offload_named(offload).run_sparse(self, index, values, length, op, span, algo)

    async def free(self) -> None:
        """Done with this communicator: release its in-network allreduces (spec 04) so that the
        switches' memory serves other communicators. Collective, like ``MPI_Comm_free``: every
        member calls it; the last member's release frees the switches, and a barrier makes sure it
        has before any member goes on. (A rejected request stays rejected: every member must get
        the same answer; a new communicator asks again.)"""
        grants = self.__dict__.pop("inc_grants", {})
        released = False
        for g in grants.values():
            if isinstance(g, tuple):
                continue
            kind, val = await self.host.inc_release(g.aid)
            if kind != "released":
                raise RuntimeError(f"rank {self.rank}: releasing in-network allreduce {g.aid}: {val}")
            released = True
        if released:
            await self.barrier()

    async def nic_setup(self, vp: int | None = None, lanes: int | None = None) -> None:
        """Communicator setup for NIC-offloaded collectives: open this rank's virtual ports, ``vp``
        and the ``lanes - 1`` after it (default: every VP from ``vp`` on), over which an allreduce
        of several 48-byte parts pipelines them (``emu.nodes.collectives.offload``). Communicators
        offloaded at the same time want VP ranges of their own."""
        from .offload import DEFAULT_VP, setup

        self.vp = DEFAULT_VP if vp is None else vp
        await setup(self, self.vp, lanes)

    async def iallreduce(self, x: np.ndarray, op: str = "sum", algo: str | None = None, *,
                         offload: str | None = None, branch: int | None = None):
        """Non-blocking allreduce: returns a request whose ``await req.wait()`` gives the result.
        With ``offload="nic"`` the call only posts the descriptors and the NICs reduce while the
        host goes on (computes); in host software (no offload) there is no progress engine beside
        the application, so the reduction runs to completion inside this call and ``wait``
        returns at once -- the overlap the offload buys is exactly what this lacks."""
        get_op(op).check(x.dtype)
        return await offload_named(offload).start(self, "allreduce", x, op, 0, algo, branch)

    async def ireduce(self, x: np.ndarray, op: str = "sum", root: int = 0, algo: str | None = None, *,
                      offload: str | None = None, branch: int | None = None):
        """Non-blocking reduce, as :meth:`iallreduce` (the result on ``root``, None elsewhere)."""
        get_op(op).check(x.dtype)
        self._check_root(root)
        return await offload_named(offload).start(self, "reduce", x, op, root, algo, branch)

    @_traced
    async def bcast(self, x: np.ndarray, root: int = 0, algo: str | None = None,
                    offload: str | None = None) -> np.ndarray:
        """``root``'s array on every rank; others pass a buffer of the same size and type.
        ``offload="hw"``: the QsNet hardware broadcast (spec 03; ``emu.nodes.collectives.hw``);
        ``offload="switch"``: through the switches' aggregation (spec 04), bit for bit."""
        self._check_root(root)
        return await offload_named(offload).run(self, "bcast", x, "sum", root, algo)

    @_traced
    async def barrier(self, algo: str | None = None, *, offload: str | None = None,
                      branch: int | None = None) -> None:
        """No rank leaves before every rank has entered. ``offload="hw"``: the QsNet adapters'
        barrier, ``algo="tree"`` (counted events up a ``branch``-ary tree, default) or ``"polled"``
        (the root's adapter polls a network conditional)."""
        await offload_named(offload).run(self, "barrier", None, "sum", 0, algo, branch)

    @_traced
    async def ibarrier(self, algo: str = "tree", branch: int | None = None) -> int:
        """Enter the next hardware barrier (spec 03) and go on at once: the adapters complete it.
        Returns its sequence number for :meth:`barrier_wait`."""
        from .hw import ibarrier_hw

        return await ibarrier_hw(self, algo, branch)

    @_traced
    async def barrier_wait(self, seq: int, timeout_ns: int = 100_000_000) -> None:
        """Wait until every rank has reached hardware barrier ``seq`` (an older ``seq`` than the
        last entered: "wait until every process reached sequence n")."""
        from .hw import wait_hw

        await wait_hw(self, seq, timeout_ns)

    @_traced
    async def allgather(self, x: np.ndarray, algo: str | None = None) -> np.ndarray:
        """Every rank's array, stacked in rank order: shape (size, len(x))."""
        return await self._run("allgather", algo, x.nbytes * self.size, np.ascontiguousarray(x).ravel())

    @_traced
    async def reduce_scatter(self, x: np.ndarray, op: str = "sum", algo: str | None = None) -> np.ndarray:
        """Reduce ``x`` (length size*c) over ranks; rank r gets elements [r*c, (r+1)*c)."""
        o = get_op(op)
        o.check(x.dtype)
        if x.size % self.size:
            raise ConfigError(f"reduce_scatter: length {x.size} is not a multiple of the {self.size} ranks")
        return await self._run("reduce_scatter", algo, x.nbytes,
                               o.prepare(np.ascontiguousarray(x).ravel(), self.rank), o)

    @_traced
    async def alltoall(self, x: np.ndarray, algo: str | None = None) -> np.ndarray:
        """Row d of ``x`` (shape (size, c)) goes to rank d; row s of the result came from rank s."""
        if x.ndim != 2 or x.shape[0] != self.size:
            raise ConfigError(f"alltoall: x must have shape ({self.size}, c), got {x.shape}")
        return await self._run("alltoall", algo, x.nbytes, np.ascontiguousarray(x))

    @_traced
    async def mcast(self, x: np.ndarray, root: int = 0, algo: str | None = None) -> np.ndarray:
        """One-to-all multicast by unicasts: all-at-once or along a binomial tree."""
        self._check_root(root)
        return await self._run("mcast", algo, x.nbytes, np.ascontiguousarray(x).ravel(), root)

    @_traced
    async def mcast_all(self, x: np.ndarray, algo: str | None = None) -> np.ndarray:
        """All-to-all multicast: every rank's array to every rank, shape (size, len(x))."""
        return await self._run("mcast_all", algo, x.nbytes * self.size, np.ascontiguousarray(x).ravel())

    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.size:
            raise ConfigError(f"root {root} is not a rank of this {self.size}-rank communicator")
