"""``emu mpirun``: one-sided communication (``MPI.Win``), emulator side.

Memory model: MPI's *separate* one (``WIN_MODEL`` is ``WIN_SEPARATE``). Each window of a rank has
two copies: the private one is the rank's own buffer, in its process; the public one is here, on
its host, and it is the one other ranks' ``Put``, ``Get``, ``Accumulate``, ... read and write. At
every synchronisation call of the rank on the window (``Fence``, ``Lock``/``Unlock``,
``Lock_all``/``Unlock_all``, ``Flush*``, ``Sync``, ``Post``/``Start``/``Complete``/``Wait``/``Test``,
``Free``) the rank sends the bytes it changed since the last one (public := private there), and
gets back the bytes other ranks wrote since (private := public there) -- what MPI's separate model
promises at those calls, no more: a rank's store and another rank's put to the same byte in one
epoch is erroneous in MPI, and here the store wins.

On the wire: a one-sided operation is one message to the target's host (envelope kind ``rma``, the
window's id as its context, ``emu.wire.mpi.MpiRma``, the target's byte positions if its datatype
is not contiguous, the data), served by the target's library when it next takes messages in (in
any MPI call that waits: as MPICH without an asynchronous progress thread), and answered with an
``rma_reply`` (the bytes read, or an empty acknowledgement). The origin waits for that answer inside
the call, so every operation is complete (remotely too) when the call returns: ``Flush`` and the
request of ``Rput``/``Rget``/... have nothing left to wait for; ``Fence`` is a barrier of the
window's group; locks are granted by the target (exclusive or shared, queued in order); ``Post``
and ``Complete`` are notices to the group's ranks, which ``Start`` and ``Wait`` wait for.

The NIC's put/get (spec 03's QsNet adapter, ``emu.nodes.nic.qsnet``: puts, gets and a 64-bit
fetch-and-add into the target node's adapter memory, no target CPU) could carry ``Put``, ``Get``
and a 64-bit ``Fetch_and_op(SUM)`` with the public copy in the adapter's memory; accumulate with
other operators and types, locks and the PSCW notices would still need the target's library.
Not done: every operation goes the host message path, on every topology.
"""

from __future__ import annotations

import struct

import numpy as np

from emu.wire.mpi import RMA as RMA_CODEC

from .mpicomm import MpiComm
from .mpiserve import COLL_CTX, HDR, P2P_TAG, RMA, RMA_REPLY, MpiError, RankState

RMA_HDR = RMA_CODEC.struct
RMA_CTX = 0x10000000
"""Context bit of a window's fence barriers."""
PUT, GET, ACC, GET_ACC, FOP, CAS, LOCK, UNLOCK, POST, COMPLETE = range(10)
EXCLUSIVE, SHARED = 1, 2
ROPS = ("replace", "no_op", "sum", "prod", "max", "min", "land", "band", "lor", "bor", "lxor", "bxor")
"""Accumulate's operators, by their index (``MpiRma.rop``)."""
ERR_RMA_RANGE = 55  # MPICH's MPI_ERR_RMA_RANGE
_U64 = struct.Struct("!Q")


class Window:
    """One rank's side of a window: its public copy and synchronisation state."""

    def __init__(self, wid: int, info, size: int, disp_unit: int, mem: bytearray, comm: MpiComm):
        self.id, self.info, self.size, self.disp_unit, self.mem, self.comm = wid, info, size, disp_unit, mem, comm
        self.dirty: list[tuple[int, int]] = []
        """Byte ranges [start, end) other ranks wrote since this rank's last synchronisation."""
        self.excl: int | None = None
        """World rank holding the exclusive lock."""
        self.shared: dict[int, int] = {}
        self.queue: list[tuple[int, int, int]] = []
        """Lock requests waiting: (world rank, request, kind)."""
        self.posts: dict[int, int] = {}
        """Post notices received from each target (world rank), not yet taken by a Start."""
        self.completes: dict[int, int] = {}
        """Complete notices received from each origin, not yet taken by a Wait."""
        self.post_group: list[int] = []
        self.start_group: list[int] = []


class Rma:
    """A rank's windows, and the answers to its requests."""

    def __init__(self):
        self.wins: dict[int, Window] = {}
        self.made: dict[int, int] = {}
        """Windows made so far on each communicator (the next one's id: the same on every member)."""
        self.replies: dict[int, tuple[int, bytes]] = {}


def _rma(st: RankState) -> Rma:
    if st.rma is None:
        st.rma = Rma()
        st.rma_incoming = incoming
    return st.rma


def _win(st: RankState, wid: int) -> Window:
    win = st.rma.wins.get(wid) if st.rma is not None else None
    if win is None:
        raise MpiError(f"invalid window {wid} (freed, or not one of this rank's)", 45)
    return win


# -- ranges of bytes (a diff of a window's copy) ----------------------------------------------------
def encode_ranges(mem, ranges: list[tuple[int, int]]) -> bytes:
    """``ranges`` of ``mem`` as count, starts, lengths (8 bytes each) and the bytes."""
    if not ranges:
        return _U64.pack(0)
    starts = np.array([a for a, _ in ranges], ">i8")
    lens = np.array([b - a for a, b in ranges], ">i8")
    return b"".join([_U64.pack(len(ranges)), starts.tobytes(), lens.tobytes(), *(bytes(mem[a:b]) for a, b in ranges)])


def apply_ranges(mem, data) -> list[tuple[int, int]]:
    (k,) = _U64.unpack_from(data)
    starts = np.frombuffer(data, ">i8", k, 8)
    lens = np.frombuffer(data, ">i8", k, 8 + 8 * k)
    at, out = 8 + 16 * k, []
    for a, n in zip(starts.tolist(), lens.tolist()):
        if a < 0 or a + n > len(mem):
            raise MpiError(f"a window update at bytes [{a}, {a + n}) outside its {len(mem)}", ERR_RMA_RANGE)
        mem[a:a + n] = data[at:at + n]
        out.append((a, a + n))
        at += n
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


# -- the target's side ----------------------------------------------------------------------------------
def _combine(old: bytes, data: bytes, rop: int, etype: str) -> bytes:
    name = ROPS[rop] if rop < len(ROPS) else "?"
    if name == "replace":
        return data
    if name == "no_op":
        return old
    dt = np.dtype(etype)
    a, b = np.frombuffer(old, dt), np.frombuffer(data, dt)
    fn = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "band": np.bitwise_and,
          "bor": np.bitwise_or, "bxor": np.bitwise_xor}.get(name)
    with np.errstate(all="ignore"):
        if fn is not None:
            return fn(a, b).astype(dt).tobytes()
        logical = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}.get(name)
        if logical is None:
            raise MpiError(f"accumulate: no operator {name!r}", 9)
        return logical(a != 0, b != 0).astype(dt).tobytes()


def _data_op(win: Window, op: int, rop: int, disp: int, nbytes: int, pos, etype: str, data: bytes) -> bytes:
    """A put, get, accumulate, ... on the public copy; the bytes read (empty for put and accumulate)."""
    base = disp * win.disp_unit
    mem = np.frombuffer(win.mem, np.uint8)
    idx = None if pos is None else pos + base
    hi = base + nbytes if idx is None else (int(idx.max()) + 1 if idx.size else base)
    lo = base if idx is None or not idx.size else int(idx.min())
    if lo < 0 or hi > win.size:
        raise MpiError(f"one-sided access to bytes [{lo}, {hi}) of a window of {win.size}", ERR_RMA_RANGE)
    old = (mem[base:base + nbytes] if idx is None else mem[idx]).tobytes()
    if op == GET:
        return old
    if op == PUT:
        new = data
    elif op == CAS:
        value, compare = data[:nbytes], data[nbytes:]
        new = value if old == compare else old
    else:
        new = _combine(old, data, rop, etype)
    if len(new) != len(old):
        raise MpiError(f"one-sided operation of {len(new)} bytes on a target of {len(old)}", 15)
    if idx is None:
        mem[base:base + nbytes] = np.frombuffer(new, np.uint8)
        win.dirty.append((base, base + nbytes))
    else:
        mem[idx] = np.frombuffer(new, np.uint8)
        win.dirty.append((lo, hi))
    return b"" if op in (PUT, ACC) else old


async def _reply(st: RankState, wsrc: int, seq: int, status: int, data: bytes = b"") -> None:
    if wsrc == st.rank:
        st.rma.replies[seq] = (status, data)
        return
    await st.host.send(st.job.hosts[wsrc], b"".join((HDR.pack(RMA_REPLY, 0, 0, status, seq), data)), P2P_TAG)


def _grantable(win: Window, kind: int) -> bool:
    return win.excl is None and (kind == SHARED or not win.shared)


async def _grant(st: RankState, win: Window, wsrc: int, seq: int, kind: int) -> None:
    if kind == EXCLUSIVE:
        win.excl = wsrc
    else:
        win.shared[wsrc] = win.shared.get(wsrc, 0) + 1
    await _reply(st, wsrc, seq, 0)


async def serve(st: RankState, win: Window | None, wsrc: int, seq: int, op: int, rop: int, disp: int,
                nbytes: int, pos, etype: str, data: bytes) -> None:
    """Carry out a one-sided request from world rank ``wsrc`` on this rank's window ``win``."""
    if win is None:
        await _reply(st, wsrc, seq, 45, b"the target has no such window (freed?)")
        return
    if op <= CAS:
        try:
            out = _data_op(win, op, rop, disp, nbytes, pos, etype, data)
        except MpiError as e:
            await _reply(st, wsrc, seq, e.code, str(e).encode())
            return
        await _reply(st, wsrc, seq, 0, out)
    elif op == LOCK:
        if _grantable(win, rop) and not win.queue:
            await _grant(st, win, wsrc, seq, rop)
        else:
            win.queue.append((wsrc, seq, rop))
    elif op == UNLOCK:
        if win.excl == wsrc:
            win.excl = None
        elif win.shared.get(wsrc):
            win.shared[wsrc] -= 1
            if not win.shared[wsrc]:
                del win.shared[wsrc]
        else:
            await _reply(st, wsrc, seq, 45, b"Unlock of a window not locked by this rank")
            return
        await _reply(st, wsrc, seq, 0)
        while win.queue and _grantable(win, win.queue[0][2]):
            await _grant(st, win, *win.queue.pop(0))
    elif op == POST:
        win.posts[wsrc] = win.posts.get(wsrc, 0) + 1
    elif op == COMPLETE:
        win.completes[wsrc] = win.completes.get(wsrc, 0) + 1


async def incoming(st: RankState, kind: int, ctx: int, wsrc: int, seq: int, data) -> None:
    """A one-sided request or reply arrived (``RankState.incoming``)."""
    if kind == RMA_REPLY:
        status = HDR.unpack_from(data)[3]
        st.rma.replies[seq] = (status, bytes(memoryview(data)[HDR.size:]))
        return
    op, rop, disp, nbytes, npos, etype = RMA_HDR.unpack_from(data, HDR.size)
    at = HDR.size + RMA_HDR.size
    pos = np.frombuffer(data, ">i8", npos, at).astype(np.int64) if npos else None
    at += 8 * npos
    rma = st.rma
    await serve(st, rma.wins.get(ctx) if rma is not None else None, wsrc, seq, op, rop, disp, nbytes, pos,
                _etype(etype), bytes(memoryview(data)[at:]))


def _etype(code: int) -> str:
    return code.to_bytes(4, "big").rstrip(b"\0").decode("ascii", "replace") if code else "|u1"


def etype_code(s: str | None) -> int:
    return int.from_bytes((s or "|u1").encode()[:4].ljust(4, b"\0"), "big")


# -- the origin's side ----------------------------------------------------------------------------------
async def request(st: RankState, win: Window, target: int, op: int, rop: int = 0, disp: int = 0, nbytes: int = 0,
                  pos=None, etype: str | None = None, data: bytes = b"", reply: bool = True) -> bytes:
    """Send a one-sided request to rank ``target`` of the window's group; its answer (waited for)."""
    wdst = win.info.ranks[target]
    r = st.new_req("rma")
    st.reqs.pop(r.id, None)
    seq = r.id
    if wdst == st.rank:
        await serve(st, win, st.rank, seq, op, rop, disp, nbytes, pos, etype or "|u1", data)
    else:
        npos = 0 if pos is None else len(pos)
        parts = [HDR.pack(RMA, win.id, win.info.rank, 0, seq),
                 RMA_HDR.pack(op, rop, disp, nbytes, npos, etype_code(etype))]
        if npos:
            parts.append(np.asarray(pos, ">i8").tobytes())
        parts.append(data)
        await st.host.send(st.job.hosts[wdst], b"".join(parts), P2P_TAG)
    if not reply:
        return b""
    while seq not in st.rma.replies:
        await st.progress()
    status, out = st.rma.replies.pop(seq)
    if status:
        raise MpiError(out.decode(errors="replace"), status)
    return out


# -- the calls ---------------------------------------------------------------------------------------
OPCODES = {"put": PUT, "get": GET, "acc": ACC, "get_acc": GET_ACC, "fop": FOP, "cas": CAS}


async def _create(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    info = st.comm(head["ctx"])
    rma = _rma(st)
    k = rma.made.get(info.ctx, 0)
    if info.ctx >= 1 << 15 or k >= 1 << 16:
        raise MpiError("too many windows (the emulated library numbers a communicator's windows in 16 bits)", 16)
    rma.made[info.ctx] = k + 1
    size, unit = int(head["size"]), int(head.get("disp_unit", 1))
    if size < 0 or unit < 1:
        raise MpiError(f"Win: size {size} and displacement unit {unit} (size >= 0, unit >= 1)", 12)
    comm = next((w.comm for w in rma.wins.values() if w.info is info), None) \
        or MpiComm(st, info, info.ctx | COLL_CTX | RMA_CTX, always=True)
    wid = (info.ctx << 16) | k
    win = rma.wins[wid] = Window(wid, info, size, unit, bytearray(payload) if len(payload) == size else bytearray(size),
                                 comm)
    if len(info.ranks) > 1:
        await comm.barrier()
    return {"win": wid, "ranks": info.ranks, "rank": info.rank}, b""


async def _sync(st: RankState, win: Window, how: str, head: dict) -> dict:
    """The synchronisation ``how`` (after the rank's own changes went to the public copy)."""
    info, out = win.info, {}
    if how == "fence":
        if len(info.ranks) > 1:
            await win.comm.barrier()
    elif how == "lock":
        await request(st, win, head["target"], LOCK, EXCLUSIVE if head.get("exclusive") else SHARED)
    elif how == "unlock":
        await request(st, win, head["target"], UNLOCK)
    elif how == "lock_all":
        for t in range(len(info.ranks)):
            await request(st, win, t, LOCK, SHARED)
    elif how == "unlock_all":
        for t in range(len(info.ranks)):
            await request(st, win, t, UNLOCK)
    elif how == "post":
        win.post_group = [int(w) for w in head["group"]]
        for w in win.post_group:
            await request(st, win, _member(win, w), POST, reply=False)
    elif how == "start":
        win.start_group = [int(w) for w in head["group"]]
        for w in win.start_group:
            _member(win, w)
        while not all(win.posts.get(w) for w in win.start_group):
            await st.progress()
        for w in win.start_group:
            win.posts[w] -= 1
    elif how == "complete":
        for w in win.start_group:
            await request(st, win, _member(win, w), COMPLETE, reply=False)
        win.start_group = []
    elif how in ("wait", "test"):
        if how == "test":
            await st.poll()
        else:
            while not all(win.completes.get(w) for w in win.post_group):
                await st.progress()
        out["flag"] = all(win.completes.get(w) for w in win.post_group)
        if out["flag"]:
            for w in win.post_group:
                win.completes[w] -= 1
            win.post_group = []
    elif how in ("flush", "sync"):
        # as MPICH's: these make progress -- requests of other ranks already here are served (a rank
        # spinning on its window memory with Sync/Flush, as mpi4py.util.sync's locks do, lets the others
        # in); a Sync that found nothing costs a pass of the progress engine (host.mpi_poll_ns), so that
        # such a spin lets virtual time go on
        if not await _take_in(st) and how == "sync" and st.host.spec.mpi_poll_ns > 0:
            await st.host.compute(st.host.spec.mpi_poll_ns)
    else:
        raise MpiError(f"no window synchronisation {how!r}", 15)
    return out


async def _take_in(st: RankState) -> bool:
    """Every point-to-point message already at the host taken in (``RankState.poll``); whether any was."""
    took = False
    while (msg := await st.host.try_recv(tag=P2P_TAG)) is not None:
        await st.incoming(msg)
        took = True
    return took


def _member(win: Window, w: int) -> int:
    if w not in win.info.ranks:
        raise MpiError(f"rank {w} of the group is not in the window's group", 8)
    return win.info.ranks.index(w)


async def h_win(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    """``MPI.Win``'s calls: ``what`` create, free, op (a put, get, accumulate, ...) or sync (with
    ``how``; its payload: the bytes the rank changed; its answer: the bytes others wrote)."""
    what = head.get("what")
    if what == "create":
        return await _create(st, head, payload)
    win = _win(st, head.get("win"))
    if what == "op":
        op = OPCODES.get(head.get("rma"))
        if op is None:
            raise MpiError(f"no one-sided operation {head.get('rma')!r}", 15)
        target = int(head["target"])
        if not 0 <= target < len(win.info.ranks):
            raise MpiError(f"invalid target rank {target} (the window's group has {len(win.info.ranks)})", 6)
        npos = int(head.get("npos", 0))
        pos = np.frombuffer(payload, ">i8", npos).astype(np.int64) if npos else None
        rop = ROPS.index(head["rop"]) if head.get("rop") in ROPS else 0
        if head.get("rop") and head["rop"] not in ROPS:
            raise MpiError(f"one-sided accumulate with operator {head['rop']!r}: a predefined operator only", 9)
        out = await request(st, win, target, op, rop, int(head.get("disp", 0)), int(head.get("nbytes", 0)), pos,
                            head.get("etype"), bytes(memoryview(payload)[8 * npos:]))
        return {}, out
    if what not in ("sync", "free"):
        raise MpiError(f"no window call {what!r}", 15)
    apply_ranges(win.mem, payload)  # the rank's own stores: public := private there
    if what == "free":
        if len(win.info.ranks) > 1:
            await win.comm.barrier()
        del st.rma.wins[win.id]
        return {}, b""
    out = await _sync(st, win, head["how"], head)
    dirty, win.dirty = _merge(win.dirty), []
    return out, encode_ranges(win.mem, dirty)
