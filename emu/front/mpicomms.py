"""``emu mpirun``: intercommunicators, ``Create_group`` and the neighbor collectives of process
topologies, emulator side.

An intercommunicator (MPI 3.1 §6.6) is kept as an ``InterInfo``: its ``ranks`` are the world ranks
of the *remote* group and its ``rank`` the rank's place in the local one, so the point-to-point
layer (``RankState.send``/``post_recv``: a destination or source is a remote rank, a message carries
the sender's local rank) serves it unchanged. Each side also has a hidden intracommunicator over
its local group (``low``, a context of its own) for the local half of the collectives.

Creation follows MPICH: the two leaders swap what they know over the peer communicator (on its
collective context, with the program's tag), and each leader hands the remote side's answer on to
its group (a broadcast of the local group). Every member then names the new communicator by the
same key, and ``Job.context`` gives the same context to every member. The collectives on an
intercommunicator go point to point on its collective context (``ctx | COLL_CTX``), with MPICH's
shape: the rooted ones flat between the root and the remote group (``Bcast`` to the remote leader
and a broadcast in its group, ``Reduce`` reduced in the sending group, then to the root); the
all-to-all ones by a reduction or gather in each group, a swap between the leaders and a broadcast
in each group; ``Alltoall(v,w)`` pairwise.

Neighbor collectives (``Neighbor_allgather(v)``, ``Neighbor_alltoall(v,w)``, their nonblocking
forms): the rank posts a receive from each in-neighbor, in order, then sends to each out-neighbor,
in order, on the communicator's collective context -- the order MPICH's own algorithm follows, so
that two edges between the same pair of ranks match first to first.
"""

from __future__ import annotations

import json
import struct
import weakref
from dataclasses import dataclass

import numpy as np

from .mpicoll import KINDS, bcast_bytes, comm_of, gather, scatter
from .mpiserve import COLL_CTX, PROC_NULL, CommInfo, Env, MpiError, RankState, Req

ROOT, UNDEFINED = -3, -32766
NGH_TAG = 1
"""First tag of the neighbor collectives' messages on the collective context (the flat collectives use 0)."""
_LEN = struct.Struct("<q")


@dataclass
class InterInfo(CommInfo):
    local: list = None
    """World ranks of the local group (``ranks``: the remote group's)."""
    low: CommInfo = None
    """The hidden intracommunicator over the local group."""


_counts: "weakref.WeakKeyDictionary[RankState, dict]" = weakref.WeakKeyDictionary()


def _nth(st: RankState, key: tuple) -> int:
    """How many times this rank made a communicator of ``key`` before (Create_group's members do
    not include the whole parent: its counter of communicators made cannot name them)."""
    seen = _counts.setdefault(st, {})
    n = seen.get(key, 0)
    seen[key] = n + 1
    return n


# -- point to point on a collective context -----------------------------------------------------------
async def exchange(st: RankState, info: CommInfo, sends, srcs, tag: int = 0, ctx: int | None = None) -> list[Env]:
    """Receives from ``srcs`` (posted first, in order), then ``sends`` ((dest, bytes) in order), on
    the collective context of ``info`` (or of ``ctx``): the envelopes received, in order."""
    c = (info.ctx if ctx is None else ctx) | COLL_CTX
    rreqs = [await st.post_recv(info, s, tag, ctx=c) for s in srcs]
    sreqs = [await st.send(info, d, tag, data, ctx=c) for d, data in sends]
    for r in sreqs + rreqs:
        await st.wait(r)
        st.reqs.pop(r.id, None)
    return [r.env for r in rreqs]


async def _swap(st: RankState, info: InterInfo, data: bytes) -> bytes:
    """The leaders (local rank 0) swap ``data``; every member gets the remote leader's."""
    got = None
    if info.rank == 0:
        got = (await exchange(st, info, [(0, data)], [0]))[0].data
    if len(info.local) > 1:
        got = await bcast_bytes(st, info.low, 0, got)
    return got


def _pack(parts: list[bytes]) -> bytes:
    return b"".join([struct.pack("<q", len(parts)), *(_LEN.pack(len(p)) for p in parts), *parts])


def _unpack(data: bytes) -> list[bytes]:
    (n,) = _LEN.unpack_from(data)
    lens = [_LEN.unpack_from(data, 8 + 8 * i)[0] for i in range(n)]
    at, out = 8 + 8 * n, []
    for k in lens:
        out.append(bytes(data[at:at + k]))
        at += k
    return out


def _inter(st: RankState, ctx: int) -> InterInfo:
    info = st.comm(ctx)
    if not isinstance(info, InterInfo):
        raise MpiError(f"communicator #{ctx} is not an intercommunicator", 5)
    return info


def _make(st: RankState, key: tuple, local: list[int], remote: list[int], rank: int) -> InterInfo:
    ctx, cid = st.job.context(key, len(local) + len(remote))
    lctx, lcid = st.job.context(("low",) + key + (min(local),), len(local))
    info = InterInfo(ctx, list(remote), rank, cid, local=list(local), low=CommInfo(lctx, list(local), rank, lcid))
    st.comms[ctx] = info
    return info


def _answer(info: InterInfo | None) -> dict:
    if info is None:
        return {"ctx": None}
    return {"ctx": info.ctx, "local": info.local, "remote": info.ranks, "rank": info.rank}


# -- making intercommunicators -----------------------------------------------------------------------
async def h_intercomm(st: RankState, head: dict, payload):
    """``Intracomm.Create_intercomm(local_leader, peer_comm, remote_leader, tag)``."""
    local = st.comm(head["ctx"])
    if isinstance(local, InterInfo):
        raise MpiError("Create_intercomm: the local communicator must be an intracommunicator", 5)
    leader, tag = int(head["leader"]), int(head.get("tag", 0))
    if not 0 <= leader < len(local.ranks):
        raise MpiError(f"Create_intercomm: invalid local leader {leader} (the communicator has {len(local.ranks)})", 6)
    made = local.made
    local.made += 1
    mine = [local.ctx, made, min(local.ranks), local.ranks]
    got = None
    if local.rank == leader:
        peer = st.comm(head["peer"])
        rl = int(head["rleader"])
        if not 0 <= rl < len(peer.ranks) or rl == peer.rank:
            raise MpiError(f"Create_intercomm: invalid remote leader {rl} in the peer communicator", 6)
        got = (await exchange(st, peer, [(rl, json.dumps(mine).encode())], [rl], tag=tag))[0].data
    if len(local.ranks) > 1:
        got = await bcast_bytes(st, local, leader, got)
    theirs = json.loads(got)
    if set(theirs[3]) & set(local.ranks):
        raise MpiError("Create_intercomm: the local and remote groups overlap", 8)
    key = ("inter",) + tuple(sorted([tuple(mine[:3]), tuple(theirs[:3])]))
    return _answer(_make(st, key, local.ranks, theirs[3], local.rank)), b""


async def h_merge(st: RankState, head: dict, payload):
    """``Intercomm.Merge(high)``: the group that says low first (the one of the lower world rank of
    a leader when both say the same)."""
    info = _inter(st, head["ctx"])
    made = info.made
    info.made += 1
    high = bool(head.get("high"))
    theirs = json.loads(await _swap(st, info, json.dumps([high, info.local[0]]).encode()))
    first = (high, info.local[0]) < (theirs[0], theirs[1])
    ranks = info.local + info.ranks if first else info.ranks + info.local
    ctx, cid = st.job.context(("merge", info.ctx, made), len(ranks))
    st.comms[ctx] = CommInfo(ctx, ranks, ranks.index(st.rank), cid)
    return {"ctx": ctx, "ranks": ranks, "rank": ranks.index(st.rank)}, b""


async def _idup(st: RankState, head: dict, payload):
    info = _inter(st, head["ctx"])
    made = info.made
    info.made += 1
    await _swap(st, info, b"")  # creation is collective: both groups meet
    return _answer(_make(st, ("idup", info.ctx, made), info.local, info.ranks, info.rank)), b""


async def _isplit(st: RankState, head: dict, payload):
    """``Intercomm.Split``: each side's members of one color; COMM_NULL if either side has none."""
    info = _inter(st, head["ctx"])
    color, key = int(head["color"]), int(head["key"])
    made = info.made
    info.made += 1
    if len(info.local) > 1:
        pairs = await comm_of(st, info.low).allgather(np.array([color, key], np.int64))
        pairs = pairs.reshape(len(info.local), 2).tolist()
    else:
        pairs = [[color, key]]
    theirs = json.loads(await _swap(st, info, json.dumps(pairs).encode()))
    if color == UNDEFINED:
        return {"ctx": None}, b""
    local = [info.local[r] for _, r in sorted((k, r) for r, (c, k) in enumerate(pairs) if c == color)]
    remote = [info.ranks[r] for _, r in sorted((k, r) for r, (c, k) in enumerate(theirs) if c == color)]
    if not remote:
        return {"ctx": None}, b""
    return _answer(_make(st, ("isplit", info.ctx, made, color), local, remote, local.index(st.rank))), b""


async def _ifree(st: RankState, head: dict, payload):
    info = _inter(st, head["ctx"])
    del st.comms[info.ctx]
    st.job.release(info.ctx)
    st.job.release(info.low.ctx)
    return {}, b""


def _either(inter, intra):
    async def handler(st: RankState, head: dict, payload):
        fn = inter if isinstance(st.comms.get(head.get("ctx")), InterInfo) else intra
        return await fn(st, head, payload)

    return handler


async def _iinfo(st: RankState, head: dict, payload):
    info = _inter(st, head["ctx"])
    return {"ranks": info.local, "rank": info.rank, "remote": info.ranks}, b""


async def h_create_group(st: RankState, head: dict, payload):
    """``Intracomm.Create_group(group, tag)``: collective over the group's members only."""
    info = st.comm(head["ctx"])
    ranks, tag = [int(r) for r in head["ranks"]], head.get("tag", 0)  # an int, or Create_from_group's string
    if any(r not in info.ranks for r in ranks) or len(set(ranks)) != len(ranks):
        raise MpiError("Create_group: the group is not a subset of the communicator's group", 8)
    if st.rank not in ranks:
        return {"ctx": None}, b""
    key = ("cgroup", info.ctx, min(info.ranks), tag, tuple(ranks))
    ctx, cid = st.job.context(key + (_nth(st, key),), len(ranks))
    new = st.comms[ctx] = CommInfo(ctx, ranks, ranks.index(st.rank), cid)
    if len(ranks) > 1:
        await comm_of(st, new).barrier()  # the members meet
    return {"ctx": ctx}, b""


async def h_from_groups(st: RankState, head: dict, payload):
    """``Intercomm.Create_from_groups(local_group, local_leader, remote_group, remote_leader,
    stringtag)`` (MPI 4): every member names it by the two groups and the tag."""
    local, remote = [int(r) for r in head["local"]], [int(r) for r in head["remote"]]
    if st.rank not in local:
        raise MpiError("Create_from_groups: the calling process is not in the local group", 8)
    if set(local) & set(remote) or len(set(local)) != len(local) or len(set(remote)) != len(remote):
        raise MpiError("Create_from_groups: the local and remote groups overlap", 8)
    key = ("groups", str(head.get("tag", "")), tuple(sorted([tuple(local), tuple(remote)])))
    info = _make(st, key + (_nth(st, key),), local, remote, local.index(st.rank))
    await _swap(st, info, b"")  # the members meet
    return _answer(info), b""


# -- collectives on an intercommunicator -------------------------------------------------------------
def _root(info: InterInfo, root: int) -> None:
    if root not in (ROOT, PROC_NULL) and not 0 <= root < len(info.ranks):
        raise MpiError(f"MPI_ERR_ROOT: invalid root {root} (the remote group has {len(info.ranks)}; "
                       "MPI.ROOT or MPI.PROC_NULL in the root's group)", 7)


async def _local_reduce(st: RankState, info: InterInfo, head: dict, payload) -> bytes | None:
    """The local group's reduction at local rank 0 (None elsewhere)."""
    if len(info.local) == 1:
        return bytes(payload)
    out, data = await KINDS["reduce"](st, info.low, {**head, "root": 0, "all": False}, payload)
    return None if out.get("none") else data


async def i_barrier(st, info, head, payload):
    if len(info.local) > 1:
        await comm_of(st, info.low).barrier()
    await _swap(st, info, b"")
    return {}, b""


async def i_bcast(st, info, head, payload):
    root = head["root"]
    if root == ROOT:
        await exchange(st, info, [(0, bytes(payload))], [])
        return {"none": True}, b""
    if root == PROC_NULL:
        return {"none": True}, b""
    got = (await exchange(st, info, [], [root]))[0].data if info.rank == 0 else None
    if len(info.local) > 1:
        got = await bcast_bytes(st, info.low, 0, got)
    return {}, got


async def i_gather(st, info, head, payload):
    root = head.get("root", 0)
    if head.get("all"):  # Allgather(v): gathered in each group, swapped by the leaders, broadcast
        parts = await gather(st, info.low, 0, bytes(payload)) if len(info.local) > 1 else [bytes(payload)]
        theirs = _unpack(await _swap(st, info, _pack(parts) if parts is not None else b""))
        return {"lens": [len(p) for p in theirs]}, b"".join(theirs)
    if root == ROOT:
        got = [e.data for e in await exchange(st, info, [], range(len(info.ranks)))]
        return {"lens": [len(p) for p in got]}, b"".join(got)
    if root != PROC_NULL:
        await exchange(st, info, [(root, bytes(payload))], [])
    return {"none": True}, b""


async def i_scatter(st, info, head, payload):
    root = head.get("root", 0)
    if root == ROOT:
        lens = head["lens"]
        if len(lens) != len(info.ranks):
            raise MpiError(f"scatter: {len(lens)} parts for a remote group of {len(info.ranks)}", 2)
        parts, at = [], 0
        for n in lens:
            parts.append(bytes(payload[at:at + n]))
            at += n
        await exchange(st, info, list(enumerate(parts)), [])
        return {"none": True}, b""
    if root == PROC_NULL:
        return {"none": True}, b""
    return {}, (await exchange(st, info, [], [root]))[0].data


async def i_alltoall(st, info, head, payload):
    lens, size = head["lens"], len(info.ranks)
    if len(lens) != size:
        raise MpiError(f"alltoall: {len(lens)} parts for a remote group of {size}", 2)
    parts, at = [], 0
    for n in lens:
        parts.append(bytes(payload[at:at + n]))
        at += n
    got = [e.data for e in await exchange(st, info, list(enumerate(parts)), range(size))]
    return {"lens": [len(p) for p in got]}, b"".join(got)


async def i_reduce(st, info, head, payload):
    """Reduce to a root of the other group; Allreduce (``all``): each group's reduction swapped by
    the leaders and broadcast in the other group."""
    root = head.get("root", 0)
    if head.get("all"):
        mine = await _local_reduce(st, info, head, payload)
        return {}, await _swap(st, info, mine if mine is not None else b"")
    if root == ROOT:
        return {}, (await exchange(st, info, [], [0]))[0].data
    if root == PROC_NULL:
        return {"none": True}, b""
    mine = await _local_reduce(st, info, head, payload)
    if mine is not None:
        await exchange(st, info, [(root, mine)], [])
    return {"none": True}, b""


async def i_reduce_scatter(st, info, head, payload):
    """Reduce_scatter(_block): the remote group's reduction scattered over the local group by its
    ``lens``."""
    mine = await _local_reduce(st, info, head, payload)
    whole = await _swap(st, info, mine if mine is not None else b"")
    lens = head["lens"]
    if sum(lens) != len(whole):
        raise MpiError(f"Reduce_scatter: the local group takes {sum(lens)} bytes of a {len(whole)}-byte "
                       "reduction of the remote group", 2)
    if len(info.local) == 1:
        return {}, whole
    parts, at = None, 0
    if info.rank == 0:
        parts = []
        for n in lens:
            parts.append(whole[at:at + n])
            at += n
    return {}, await scatter(st, info.low, 0, parts)


IKINDS = {"barrier": i_barrier, "bcast": i_bcast, "gather": i_gather, "scatter": i_scatter,
          "alltoall": i_alltoall, "reduce": i_reduce, "reduce_scatter": i_reduce_scatter}


async def h_icoll(st: RankState, head: dict, payload):
    info = _inter(st, head["ctx"])
    fn = IKINDS.get(head.get("kind"))
    if fn is None:
        raise MpiError(f"no collective {head.get('kind')!r} on an intercommunicator", 5)
    if "root" in head:
        _root(info, head["root"])
    out = await fn(st, info, head, payload)
    st.figures(head.get("call") or "icoll").algos.add("intercomm (point to point)")
    return out


# -- neighbor collectives ---------------------------------------------------------------------------
class NeighborReq(Req):
    """A nonblocking neighbor collective: done when all its receives and sends are; its data the
    received parts, each after its length (-1: from PROC_NULL)."""

    def __init__(self, rid: int, parts: list[Req], recvs: list[Req]):
        super().__init__(rid, "neighbor")
        self.parts, self.recvs = parts, recvs

    @property
    def done(self) -> bool:
        return all(p.done for p in self.parts)

    @done.setter
    def done(self, value) -> None:
        pass

    @property
    def env(self):
        if not self.done:
            return None
        return Env(0, PROC_NULL, -1, _received([r.env for r in self.recvs]), -1)

    @env.setter
    def env(self, value) -> None:
        pass


def _received(envs: list[Env]) -> bytes:
    lens = [-1 if e.src == PROC_NULL else len(e.data) for e in envs]
    return b"".join([*(_LEN.pack(n) for n in lens), *(e.data for e in envs)])


async def h_neighbor(st: RankState, head: dict, payload):
    """One neighbor collective: receive from ``srcs``, send part i of the payload (``lens``) to
    ``dsts[i]``; ``nb``: answer at once with a request. ``rtags``/``stags``: a tag per edge (a
    Cartesian topology's directions), else one tag and the messages' order."""
    info = st.comm(head["ctx"])
    srcs, dsts, lens = head["srcs"], head["dsts"], head["lens"]
    n = len(info.ranks)
    for r in (*srcs, *dsts):
        if r != PROC_NULL and not 0 <= r < n:
            raise MpiError(f"neighbor collective: invalid neighbor {r} (the communicator has {n})", 6)
    rtags = head.get("rtags") or [0] * len(srcs)
    stags = head.get("stags") or [0] * len(dsts)
    c = info.ctx | COLL_CTX
    recvs = [await st.post_recv(info, s, NGH_TAG + t, ctx=c) for s, t in zip(srcs, rtags)]
    sends, at = [], 0
    for d, k, t in zip(dsts, lens, stags):
        sends.append(await st.send(info, d, NGH_TAG + t, bytes(payload[at:at + k]), ctx=c))
        at += k
    for r in recvs + sends:
        st.reqs.pop(r.id, None)
    st.figures(head.get("call") or "neighbor").algos.add("neighbors (point to point)")
    if head.get("nb"):
        req = NeighborReq(st.next_req, recvs + sends, recvs)
        st.next_req += 1
        st.reqs[req.id] = req
        return {"req": req.id}, b""
    for r in recvs + sends:
        await st.wait(r)
    return {}, _received([r.env for r in recvs])


POINT_TO_POINT = ("send", "recv", "sendrecv", "probe")
"""Calls on an intercommunicator the point-to-point layer carries as it is (its ``ranks`` the remote group)."""


def _guard(op: str, fn):
    async def handler(st: RankState, head: dict, payload):
        if isinstance(st.comms.get(head.get("ctx")), InterInfo):
            raise MpiError(f"the emulated MPI has no {head.get('call') or op} on an intercommunicator", 5)
        return await fn(st, head, payload)

    return handler


def with_comms(handlers: dict) -> dict:
    """``handlers`` with this module's: a call of theirs on an intercommunicator that none of this
    module's carries out is refused (its collective would run over the remote group as if it were the
    communicator's)."""
    out = {op: fn if op in POINT_TO_POINT else _guard(op, fn) for op, fn in handlers.items()}
    out.update({op: _either(inter, handlers[op]) for op, inter in INTER.items()})
    out.update(HANDLERS)
    return out


HANDLERS = {"intercomm": h_intercomm, "merge": h_merge, "icoll": h_icoll, "create_group": h_create_group,
            "intercomm_groups": h_from_groups, "neighbor": h_neighbor}
"""The calls of this module."""
INTER = {"dup": _idup, "split": _isplit, "free": _ifree, "info": _iinfo}
"""The intercommunicator's side of calls ``emu.front.mpicalls`` carries out on intracommunicators."""
