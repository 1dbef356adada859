"""The MPI library of ``emu mpirun``, emulator side: each rank's calls carried out by its host.

Each rank is an OS process (``emu.rank``); its host on the emulated cluster runs ``rank_app``, an
application like any other, that reads the rank's next call from the rank's channel
(``emu.rank.wire``), carries it out with the host API in virtual time and answers. The emulator is
one process and steps one application at a time, so while a rank computes, the emulator waits for
its next call: the ranks run one after another, in virtual-time order, as SimGrid's SMPI runs them.

Point to point: every message is one host message with the tag ``P2P_TAG`` and an envelope
(``emu.wire.mpi.MpiEnvelope``: kind, context, source rank in the communicator, MPI tag, sequence
number per pair of ranks) before its data. The receiving rank matches them as an MPI library does: against its posted receives in the
order they were posted, else into its unexpected queue; a sequence number out of order waits for
the ones before it (MPI's non-overtaking rule, whatever the routing). ``Ssend`` completes when the
receiver matched it (an ACK message back). Messages to oneself are handed over without the fabric.
Collectives: ``emu.front.mpicoll``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emu.rank import wire
from emu.wire.mpi import ENVELOPE, P2P_TAG, RENDEZVOUS

from .mpijob import Job, MpiError, RankFailed  # noqa: F401 -- the library's modules take them from here
from .mpiwatch import Outside, wait_outside

HDR = ENVELOPE.struct
"""The envelope of every point-to-point message (``emu.wire.mpi.MpiEnvelope``: kind, context,
source, tag, seq); no bit fields, so its struct packs it as the declaration does."""
RNDV = RENDEZVOUS.struct
"""After a request-to-send's envelope: the size of the message (``emu.wire.mpi.MpiRendezvous``)."""
DATA, SYNC, ACK, RTS, CTS, RDATA, RMA, RMA_REPLY = 0, 1, 2, 3, 4, 5, 6, 7
ANY_SOURCE, ANY_TAG, PROC_NULL = -2, -1, -1
COLL_CTX = 0x80000000
"""Context of a communicator's collective traffic that goes point to point (its context | this)."""


@dataclass(eq=False)
class Env:
    """A message that arrived (or was sent to oneself): its envelope and data."""

    ctx: int
    src: int
    tag: int
    data: bytes | None
    """None while a rendezvous message's bytes have not come (its request-to-send matched or waits)."""
    wsrc: int
    sync: int | None = None
    size: int = 0
    """The message's length in bytes (a rendezvous message's before its bytes are here)."""
    rndv: int | None = None
    """A rendezvous message: the ``seq`` of its request-to-send (its clear-to-send and data name it)."""

    def __post_init__(self) -> None:
        if not self.size and self.data is not None:  # made with its bytes: their length
            self.size = len(self.data)


@dataclass(eq=False)
class Req:
    id: int
    kind: str
    ctx: int = 0
    source: int = 0
    tag: int = 0
    done: bool = False
    env: Env | None = None
    cancelled: bool = False


@dataclass
class CommInfo:
    ctx: int
    ranks: list[int]
    """World rank of each rank of the communicator."""
    rank: int
    coll_id: int = 0
    comm: object = None
    """The emulator's ``Comm`` over the same hosts (its collective algorithms), made on first use."""
    made: int = 0
    """Communicators made from this one so far (Dup, Split, Create: the key of the next one)."""


@dataclass
class CallFigures:
    count: int = 0
    bytes: int = 0
    """Bytes the rank handed over and got back (its buffers, its pickles)."""
    ns: int = 0
    """Virtual time from the call's start to its return, summed."""
    algos: set = field(default_factory=set)
    """The collective algorithms (or offloads) that carried the calls out."""


class RankState:
    """One rank's library state on its host."""

    def __init__(self, job: Job, rank: int, host):
        self.job, self.rank, self.host = job, rank, host
        self.nic = host._engine.nic
        """The host's NIC, whose ``now`` is the host's clock (read without ``host.now``'s two properties)."""
        self.conn = job.conns[rank]
        self.reqs: dict[int, Req] = {}
        self.next_req = 1
        self.posted: list[Req] = []
        self.unexpected: list[Env] = []
        self.send_seq: dict[int, int] = {}
        self.recv_seq: dict[int, int] = {}
        self.early: dict[tuple[int, int], tuple] = {}
        self.sync_wait: dict[tuple[int, int], Req] = {}
        self.eager = host.spec.eager_limit_bytes
        self.p2p_recv = host.recv(tag=P2P_TAG)
        """What ``progress`` awaits: the host's next message of the point-to-point layer (one request serves all)."""
        self.rndv_send: dict[tuple[int, int], tuple[Req, bytes]] = {}
        """Rendezvous sends waiting for their clear-to-send: (world rank, seq) -> (request, data)."""
        self.rndv_recv: dict[tuple[int, int], Req] = {}
        """Receives matched to a request-to-send, waiting for its data: (world rank, seq) -> request."""
        self.nbc: list[tuple] = []
        """Nonblocking collectives called and not yet run, oldest first (``emu.front.mpinbc``)."""
        self.nbc_running = False
        self.nbc_comms: dict[int, object] = {}
        """Per context: the ``MpiComm`` the nonblocking collectives run on."""
        self.nbc_runner = None
        """``emu.front.mpinbc.run_pending``, set when the first one is queued."""
        self.rma = None
        """Its one-sided windows and requests (``emu.front.mpirma.Rma``), once it made a window."""
        self.rma_incoming = None
        """``emu.front.mpirma.incoming``, set when the first window is made: one-sided requests and replies."""
        world, place, cid = job.world_of(rank)
        self.comms: dict[int, CommInfo] = {0: CommInfo(0, world, place, cid), 1: CommInfo(1, [rank], 0, 0)}
        self.calls: dict[str, CallFigures] = {}
        self.waiting: str | None = None
        self.since_ns = 0
        self.exit_code: int | None = None
        self.outside = False
        """The rank waits outside MPI and its last call needed no answer (``emu.front.mpiwatch``)."""

    # -- the channel ------------------------------------------------------------------------------
    def read(self) -> tuple[dict, bytearray]:
        try:
            return self.job.readers[self.rank].recv()
        except (wire.ChannelClosed, OSError) as e:
            raise self.job.rank_ended(self.rank, e) from None

    def answer(self, head: dict, payload=b"") -> None:
        head["now"] = self.nic.now
        try:
            wire.send(self.conn, head, payload)
        except OSError as e:
            raise self.job.rank_ended(self.rank, e) from None
        self.job.watches[self.rank].start()

    async def callback(self, head: dict, payload=b"") -> bytearray:
        """Ask the rank to compute something for the library (a reduction with its own operator, or
        one of Python objects): the answer's payload."""
        self.answer({"cb": head}, payload)
        reply, data = self.read()
        if "err" in reply:
            raise MpiError(reply["err"], reply.get("code", 15))
        return data  # its cost: the host's modelled reduction cost (emu.front.mpicoll.combine)

    async def charge(self, cpu_s: float) -> None:
        if cpu_s > 0 and self.job.cpu_scale > 0:
            await self.host.compute(int(cpu_s * self.job.cpu_scale * 1e9))

    def new_req(self, kind: str, **kw) -> Req:
        r = Req(self.next_req, kind, **kw)
        self.next_req += 1
        self.reqs[r.id] = r
        return r

    def comm(self, ctx: int) -> CommInfo:
        info = self.comms.get(ctx)
        if info is None:
            raise MpiError(f"invalid communicator (context {ctx}): freed, or not one of this rank's", 5)
        return info

    # -- point to point ---------------------------------------------------------------------------
    async def send(self, info: CommInfo, dest: int, tag: int, data, sync: bool = False,
                   ctx: int | None = None) -> Req:
        """Send ``data`` to rank ``dest`` of ``info``. Eager (at most ``host.eager_limit_bytes``):
        the request completes now, or for a synchronous send when the receiver matched it (its
        ack). Rendezvous (longer): a request-to-send goes now; the request completes when the
        receiver's clear-to-send came and the data went (``incoming``)."""
        req = self.new_req("send")
        if dest == PROC_NULL:
            req.done = True
            return req
        if not 0 <= dest < len(info.ranks):
            raise MpiError(f"invalid rank {dest} (the communicator has {len(info.ranks)})", 6)
        ctx = info.ctx if ctx is None else ctx
        wdst = info.ranks[dest]
        seq = self.send_seq.get(wdst, 0)
        self.send_seq[wdst] = seq + 1
        if wdst == self.rank:  # to oneself: no fabric (MPICH copies too)
            if sync:
                self.sync_wait[(wdst, seq)] = req
            else:
                req.done = True
            await self._arrived(SYNC if sync else DATA, ctx, info.rank, tag, self.rank, seq, bytes(data))
            return req
        if len(data) > self.eager:
            self.rndv_send[(wdst, seq)] = (req, data)
            await self.host.send(self.job.hosts[wdst], HDR.pack(RTS, ctx, info.rank, tag, seq) + RNDV.pack(len(data)),
                                 P2P_TAG)
            return req
        if sync:
            self.sync_wait[(wdst, seq)] = req
        else:
            req.done = True
        head = HDR.pack(SYNC if sync else DATA, ctx, info.rank, tag, seq)
        await self.host.send(self.job.hosts[wdst], b"".join((head, data)), P2P_TAG)
        return req

    async def post_recv(self, info: CommInfo, source: int, tag: int, ctx: int | None = None) -> Req:
        """A receive: matched at once from the unexpected queue, else posted."""
        req = self.new_req("recv", ctx=info.ctx if ctx is None else ctx, source=source, tag=tag)
        if source == PROC_NULL:
            req.done, req.env = True, Env(req.ctx, PROC_NULL, ANY_TAG, b"", -1)
            return req
        for i, env in enumerate(self.unexpected):
            if self._matches(req, env):
                del self.unexpected[i]
                await self._complete(req, env)
                return req
        self.posted.append(req)
        return req

    @staticmethod
    def _matches(req: Req, env: Env) -> bool:
        return (req.ctx == env.ctx and (req.source == ANY_SOURCE or req.source == env.src)
                and (req.tag == env.tag or (req.tag == ANY_TAG and env.tag >= 0)))  # (< 0: the library's own)

    async def _complete(self, req: Req, env: Env) -> None:
        """``req`` matched ``env``: done, or (a rendezvous message) clear-to-send, done when its bytes come."""
        req.env = env
        if env.rndv is not None:
            self.rndv_recv[(env.wsrc, env.rndv)] = req
            await self.host.send(self.job.hosts[env.wsrc], HDR.pack(CTS, 0, 0, 0, env.rndv), P2P_TAG)
            return
        req.done = True
        if env.sync is not None:  # the sender of a synchronous send waits for this
            if env.wsrc == self.rank:
                self._acked(self.rank, env.sync)
            else:
                await self.host.send(self.job.hosts[env.wsrc], HDR.pack(ACK, 0, 0, 0, env.sync), P2P_TAG)

    def _acked(self, wdst: int, seq: int) -> None:
        req = self.sync_wait.pop((wdst, seq), None)
        if req is not None:
            req.done = True

    async def incoming(self, msg) -> None:
        """A host message of the point-to-point layer arrived: decode, order, match."""
        data = msg.data
        if len(data) < HDR.size:
            raise MpiError(f"rank {self.rank}: a point-to-point message of {len(data)} bytes (no header)", 15)
        kind, ctx, src, tag, seq = HDR.unpack_from(data)
        wsrc = self.job.host_rank[msg.src]
        if kind == ACK:
            self._acked(wsrc, seq)
        elif kind == CTS:  # the receiver matched our request-to-send: the data goes, the send is done
            req, payload = self.rndv_send.pop((wsrc, seq))
            await self.host.send(msg.src, b"".join((HDR.pack(RDATA, 0, 0, 0, seq), payload)), P2P_TAG)
            req.done = True
        elif kind == RDATA:
            req = self.rndv_recv.pop((wsrc, seq))
            req.env.data = bytes(memoryview(data)[HDR.size:])
            req.done = True
        elif kind == RMA or kind == RMA_REPLY:
            await self.rma_incoming(self, kind, ctx, wsrc, seq, data)
        elif kind == RTS:
            (size,) = RNDV.unpack_from(data, HDR.size)
            await self._arrived(kind, ctx, src, tag, wsrc, seq, None, size)
        elif kind == DATA and seq == self.recv_seq.get(wsrc, 0) and not self.early:
            # (``_arrived``'s common case, flat: in order, nothing early; the first posted receive it
            # matches is done, as ``_complete`` does for a message that needs no answer)
            self.recv_seq[wsrc] = seq + 1
            payload = bytes(memoryview(data)[HDR.size:])
            env = Env(ctx, src, tag, payload, wsrc, None, len(payload))
            posted = self.posted
            for i in range(len(posted)):
                req = posted[i]
                if req.ctx == ctx and (req.source == ANY_SOURCE or req.source == src) and \
                        (req.tag == tag or (req.tag == ANY_TAG and tag >= 0)):  # (``_matches``)
                    del posted[i]
                    req.env = env
                    req.done = True
                    return
            self.unexpected.append(env)
        else:
            await self._arrived(kind, ctx, src, tag, wsrc, seq, bytes(memoryview(data)[HDR.size:]))

    async def _arrived(self, kind, ctx, src, tag, wsrc, seq, payload, size: int = 0) -> None:
        expect = self.recv_seq.get(wsrc, 0)
        if seq != expect:  # overtook an earlier message of the same sender: wait for that one
            self.early[(wsrc, seq)] = (kind, ctx, src, tag, payload, size)
            return
        while True:
            self.recv_seq[wsrc] = seq + 1
            if kind == RTS:
                env = Env(ctx, src, tag, None, wsrc, None, size, seq)
            else:
                env = Env(ctx, src, tag, payload, wsrc, seq if kind == SYNC else None, len(payload))
            for i, req in enumerate(self.posted):
                if self._matches(req, env):
                    del self.posted[i]
                    await self._complete(req, env)
                    break
            else:
                self.unexpected.append(env)
            seq += 1
            nxt = self.early.pop((wsrc, seq), None)
            if nxt is None:
                return
            kind, ctx, src, tag, payload, size = nxt

    async def progress(self) -> None:
        """Wait for the next point-to-point message and take it in; or, where nonblocking
        collectives are queued, run them first (``emu.front.mpinbc``: the caller then looks again)."""
        if self.nbc and not self.nbc_running:
            await self.nbc_runner(self)
            return
        await self.incoming(await self.p2p_recv)

    async def run_nbc(self) -> None:
        """Run the queued nonblocking collectives now (a ``Test`` of one of them, a blocking collective)."""
        if self.nbc and not self.nbc_running:
            await self.nbc_runner(self)

    async def poll(self) -> None:
        """Take in every point-to-point message already there, without waiting."""
        while True:
            msg = await self.host.try_recv(tag=P2P_TAG)
            if msg is None:
                return
            await self.incoming(msg)

    async def wait(self, req: Req) -> Req:
        while not req.done:
            await self.progress()
        return req

    def find_unexpected(self, ctx: int, source: int, tag: int) -> Env | None:
        probe = Req(0, "probe", ctx=ctx, source=source, tag=tag)
        return next((e for e in self.unexpected if self._matches(probe, e)), None)

    def cancel(self, req: Req) -> None:
        if req.kind == "recv" and not req.done and req in self.posted:
            self.posted.remove(req)
            req.done, req.cancelled = True, True
            req.env = Env(req.ctx, req.source, req.tag, b"", -1)

    def figures(self, kind: str) -> CallFigures:
        f = self.calls.get(kind)
        if f is None:
            f = self.calls[kind] = CallFigures()
        return f


def status_of(req: Req) -> list:
    """What the rank's ``Status`` says of a finished request: [id, source, tag, bytes, cancelled]."""
    env = req.env
    if env is None:
        return [req.id, ANY_SOURCE, ANY_TAG, 0, req.cancelled]
    return [req.id, env.src, env.tag, env.size, req.cancelled]


def describe(head: dict) -> str:
    """The call a rank waits in, as a person reads it: ``MPI_Recv(source=1, tag=7, comm=0)``."""
    op = head.get("call") or head.get("op", "?")
    names = {0: "WORLD", 1: "SELF"}
    args = ", ".join(f"comm={names.get(v, f'#{v}')}" if k == "ctx" else f"{k}={v}" for k, v in head.items()
                     if k in ("source", "dest", "tag", "root", "ctx", "ids"))
    return f"{op}({args})"


_OWN = frozenset(("now", "exit", "abort"))
"""The calls ``rank_app`` answers itself (no handler, no figures)."""


async def rank_app(host, job: Job, r: int, handlers: dict):
    """Rank ``r``'s host: answer its calls until it ends."""
    st = job.ranks[r] = RankState(job, r, host)
    from emu.nodes.collectives.offloads import offload_named

    if r < job.first:  # communicator setup of COMM_WORLD (on the NICs: their virtual ports), before the program starts
        await offload_named(job.offload).rank_setup(host)
    head, _ = st.read()
    if head.get("op") != "hello" or head.get("rank") != r or head.get("pid") != job.pids[r]:
        raise RankFailed(f"rank {r}: the first message is not the rank's hello ({str(head)[:80]})")
    hello = {"rank": r, "size": len(st.comms[0].ranks), "name": host.name,
             **({"eager": host.spec.eager_limit_bytes} if hasattr(host.spec, "eager_limit_bytes") else {})}
    if job.spawner is not None:  # a spawned process's MPI_Init meets its parents' Spawn (emu.front.mpispawn)
        hello |= await job.spawner.hello(st)
    st.answer(hello)
    figures = st.calls
    while True:
        if st.outside:  # (it sent calls that need no answer while it waits outside MPI)
            head, payload = await wait_outside(st)
        else:
            try:
                head, payload = st.read()
            except Outside:  # the rank waits for something outside MPI: the others go on meanwhile
                head, payload = await wait_outside(st)
        op = head.get("op")
        if job.failed:  # another rank failed: this one stops here
            raise RankFailed(f"rank {r} stopped: rank {job.failed[0][0]} failed")
        cpu = head.get("cpu")
        if cpu:
            await st.charge(cpu)
        if op in _OWN:
            if op == "now":  # the rank asks its host's clock (after sends that went without an answer)
                st.answer({})
                continue
            if op == "exit":
                st.exit_code = job.exit_codes[r] = int(head.get("code", 0))
                st.answer({})
                return st.exit_code
            job.failed.append((r, head.get("why", "MPI_Abort")))  # abort
            st.answer({})
            raise RankFailed(f"rank {r}: {head.get('why', 'MPI_Abort')}")
        handler = handlers.get(op)
        nic = st.nic
        t0 = nic.now
        st.waiting, st.since_ns = head, t0  # (describe(head) says it, when asked)
        try:
            if handler is None:
                raise MpiError(f"the emulated MPI has no call {op!r}", 15)
            out, data = await handler(st, head, payload)
        except MpiError as e:
            out, data = {"err": str(e), "code": e.code}, b""
            if head.get("quiet"):  # the rank did not wait for this one: it hears at its next call
                out["late"] = head.get("call") or op
        st.waiting = None
        name = head.get("call") or op
        f = figures.get(name)
        if f is None:
            f = st.figures(name)
        f.count += 1
        f.bytes += len(payload) + len(data)
        f.ns += nic.now - t0
        if not head.get("quiet") or "err" in out:
            st.answer(out, data)
