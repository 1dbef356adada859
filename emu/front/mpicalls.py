"""``emu mpirun``: the point-to-point calls, requests, probes and communicator management, emulator
side. Each handler takes (rank state, head, payload) and returns (answer head, answer payload)."""

from __future__ import annotations

import struct

import numpy as np

from .mpirma import h_win
from .mpiserve import ANY_SOURCE, DATA, HDR, P2P_TAG, CommInfo, MpiError, RankState, status_of

UNDEFINED = -32766


def _blocking_done(st: RankState, req) -> None:
    st.reqs.pop(req.id, None)


def _numbered(st: RankState, req, head: dict) -> int:
    """The request's number as the rank knows it: the rank's own (``rid``) for a call that went
    without an answer (``emu.rank.channel``), else the emulator's."""
    rid = head.get("rid")
    if rid is not None:
        del st.reqs[req.id]
        req.id = rid
        st.reqs[rid] = req
    return req.id


async def h_send(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    info = st.comms.get(head["ctx"])
    dest = head["dest"]
    if info is not None and head.get("mode") == "std" and dest.__class__ is int and 0 <= dest < len(info.ranks) \
            and len(payload) <= st.eager and not head.get("nb") and "bsend" not in head:
        wdst = info.ranks[dest]
        if wdst != st.rank:  # a blocking eager standard send to another rank: ``RankState.send``'s case, flat
            st.next_req += 1  # (the number its request took there, done at once)
            seq = st.send_seq.get(wdst, 0)
            st.send_seq[wdst] = seq + 1
            await st.host.send(st.job.hosts[wdst], b"".join((HDR.pack(DATA, info.ctx, info.rank, head["tag"], seq),
                                                             payload)), P2P_TAG)
            return {}, b""
    info = st.comm(head["ctx"])
    req = await st.send(info, head["dest"], head["tag"], payload, sync=head.get("mode") == "sync")
    if head.get("bsend") and not req.done:  # buffered (MPI 3.4): complete at once, the data in the attached
        st.reqs.pop(req.id, None)           # buffer; its rendezvous goes on, waited for by no one
        req = st.new_req("send")
        req.done = True
    if head.get("nb"):
        return {"req": _numbered(st, req, head)}, b""
    await st.wait(req)
    _blocking_done(st, req)
    return {}, b""


async def h_recv(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    info = st.comm(head["ctx"])
    source = head["source"]
    _check_source(info, source)
    req = await st.post_recv(info, source, head["tag"])
    if head.get("nb"):
        return {"req": _numbered(st, req, head)}, b""
    if not req.done:  # (``RankState.wait`` and ``progress``, flat: a blocking receive's wait)
        incoming, p2p = st.incoming, st.p2p_recv
        while not req.done:
            if st.nbc and not st.nbc_running:
                await st.nbc_runner(st)
            else:
                await incoming(await p2p)
    st.reqs.pop(req.id, None)
    env = req.env
    return {"st": [req.id, env.src, env.tag, env.size, req.cancelled]}, env.data  # (``status_of``: a receive has its env)


class Both:
    """The request of an ``Isendrecv``: done when its send and its receive are; the receive's status."""

    def __init__(self, rid: int, sreq, rreq):
        self.id, self.kind, self.sreq, self.rreq, self.cancelled = rid, "sendrecv", sreq, rreq, False

    done = property(lambda self: self.sreq.done and self.rreq.done)
    env = property(lambda self: self.rreq.env)


async def h_sendrecv(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    info = st.comm(head["ctx"])
    _check_source(info, head["source"])
    rreq = await st.post_recv(info, head["source"], head["recvtag"])  # posted first: a ring cannot deadlock
    sreq = await st.send(info, head["dest"], head["sendtag"], payload)
    if head.get("nb"):  # Isendrecv: one request for both
        _blocking_done(st, sreq)
        _blocking_done(st, rreq)
        both = Both(st.next_req, sreq, rreq)
        st.next_req += 1
        st.reqs[both.id] = both
        return {"req": both.id}, b""
    await st.wait(sreq)
    await st.wait(rreq)
    _blocking_done(st, sreq)
    _blocking_done(st, rreq)
    return {"st": status_of(rreq)}, rreq.env.data


async def _idle(st: RankState) -> None:
    """A test or probe found nothing: the progress engine's pass costs ``host.mpi_poll_ns``."""
    ns = st.host.spec.mpi_poll_ns
    if ns > 0:
        await st.host.compute(ns)


def _check_source(info: CommInfo, source: int) -> None:
    if source not in (ANY_SOURCE, -1) and not 0 <= source < len(info.ranks):
        raise MpiError(f"invalid source rank {source} (the communicator has {len(info.ranks)})", 6)


async def h_wait(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    """Wait (or test, ``test``) for requests: ``mode`` all, any or some."""
    reqs = []
    for i in head["ids"]:
        r = st.reqs.get(i)
        if r is None:
            raise MpiError(f"request {i} is not pending (already completed and freed?)", 19)
        reqs.append(r)
    mode, test = head.get("mode", "all"), head.get("test", False)

    def ready() -> list:
        done = [r for r in reqs if r.done]
        if mode == "all":
            return done if len(done) == len(reqs) else []
        return done[:1] if mode == "any" else done

    if test:
        if any(r.kind == "coll" and not r.done for r in reqs):  # a queued collective runs when tested
            await st.run_nbc()
        await st.poll()
        done = ready()
        if not done:
            await _idle(st)
    else:
        while not (done := ready()):
            await st.progress()
    data = []
    for r in done:
        if not head.get("keep"):  # Get_status and Test-before-Wait leave the request pending
            st.reqs.pop(r.id, None)
        if r.env is not None:
            data.append(r.env.data)
    return {"st": [status_of(r) for r in done]}, b"".join(data)


async def _probed(st: RankState, head: dict):
    """The unexpected message a probe finds (waiting for one unless ``nb``); None if none; ``True``
    for PROC_NULL (found at once, empty)."""
    info = st.comm(head["ctx"])
    _check_source(info, head["source"])
    if head["source"] == -1:
        return True
    await st.poll()
    env = st.find_unexpected(info.ctx, head["source"], head["tag"])
    while env is None and not head.get("nb"):
        await st.progress()
        env = st.find_unexpected(info.ctx, head["source"], head["tag"])
    if env is None:
        await _idle(st)
    return env


async def h_probe(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    env = await _probed(st, head)
    if env is True:
        return {"found": True, "st": [0, -1, -1, 0, False]}, b""
    if env is None:
        return {"found": False}, b""
    return {"found": True, "st": [0, env.src, env.tag, env.size, False]}, b""


async def h_cancel(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    req = st.reqs.get(head["id"])
    if req is not None:
        st.cancel(req)
    return {}, b""


# -- communicators ---------------------------------------------------------------------------------
async def _sync(st: RankState, info: CommInfo) -> None:
    """Communicator creation is collective: the members meet (a barrier on the fabric)."""
    if len(info.ranks) > 1:
        from .mpicoll import comm_of

        await comm_of(st, info).barrier()


def _new(st: RankState, info: CommInfo, key: tuple, ranks: list[int]) -> int:
    ctx, cid = st.job.context(key, len(ranks))
    st.comms[ctx] = CommInfo(ctx, ranks, ranks.index(st.rank), cid)
    return ctx


async def h_dup(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    info = st.comm(head["ctx"])
    key = ("dup", info.ctx, info.made, st.rank if info.ctx == 1 else None)
    info.made += 1
    await _sync(st, info)
    return {"ctx": _new(st, info, key, list(info.ranks))}, b""


async def h_split(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    info = st.comm(head["ctx"])
    color, key = int(head["color"]), int(head["key"])
    made = info.made
    info.made += 1
    if len(info.ranks) > 1:  # every member's (color, key): an allgather on the fabric
        from .mpicoll import comm_of

        pairs = await comm_of(st, info).allgather(np.array([color, key], np.int64))
        pairs = pairs.reshape(len(info.ranks), 2)
    else:
        pairs = np.array([[color, key]], np.int64)
    if color == UNDEFINED:
        return {"ctx": None}, b""
    mine = sorted((int(k), r) for r, (c, k) in enumerate(pairs.tolist()) if c == color)
    ranks = [info.ranks[r] for _, r in mine]
    scope = st.rank if info.ctx == 1 else None
    return {"ctx": _new(st, info, ("split", info.ctx, made, color, scope), ranks)}, b""


async def h_create(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    """``Comm.Create(group)``: ``ranks`` are the world ranks of the group, in its order."""
    info = st.comm(head["ctx"])
    made = info.made
    info.made += 1
    ranks = [int(r) for r in head["ranks"]]
    if any(r not in info.ranks for r in ranks) or len(set(ranks)) != len(ranks):
        raise MpiError("Comm.Create: the group is not a subset of the communicator's group", 8)
    await _sync(st, info)
    if st.rank not in ranks:
        return {"ctx": None}, b""
    scope = st.rank if info.ctx == 1 else None
    return {"ctx": _new(st, info, ("create", info.ctx, made, tuple(ranks), scope), ranks)}, b""


async def h_free(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    ctx = head["ctx"]
    if ctx in (0, 1):
        raise MpiError("COMM_WORLD and COMM_SELF cannot be freed", 5)
    st.comm(ctx)
    del st.comms[ctx]
    st.job.release(ctx)
    return {}, b""


async def h_info(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    """A communicator's world ranks (for its group)."""
    info = st.comm(head["ctx"])
    return {"ranks": info.ranks, "rank": info.rank}, b""


async def h_now(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    return {}, b""


HANDLERS = {"send": h_send, "recv": h_recv, "sendrecv": h_sendrecv, "wait": h_wait, "probe": h_probe,
            "cancel": h_cancel, "dup": h_dup, "split": h_split, "create": h_create, "free": h_free,
            "info": h_info, "now": h_now, "win": h_win}

LENGTHS = struct.Struct("!Q")


# -- matched probes (MPI 3.0 §3.8.2): the message leaves the unexpected queue at the probe -------------
async def h_mprobe(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    env = await _probed(st, head)
    if env is True:  # PROC_NULL: MESSAGE_NO_PROC
        return {"found": True, "st": [0, -1, -1, 0, False], "mid": None}, b""
    if env is None:
        return {"found": False}, b""
    st.unexpected.remove(env)
    req = st.new_req("recv", ctx=env.ctx, source=env.src, tag=env.tag)
    await st._complete(req, env)  # matched now (a rendezvous message: its clear-to-send goes)
    return {"found": True, "st": [0, env.src, env.tag, env.size, False], "mid": req.id}, b""


async def h_mrecv(st: RankState, head: dict, payload) -> tuple[dict, bytes]:
    req = st.reqs.pop(head["mid"], None)
    if req is None:
        raise MpiError(f"message {head['mid']} was received already", 19)
    await st.wait(req)  # a rendezvous message's bytes may still be on their way
    return {"st": status_of(req)}, req.env.data


HANDLERS.update({"mprobe": h_mprobe, "mrecv": h_mrecv})
