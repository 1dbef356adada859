"""``emu mpirun``: the collectives, emulator side.

Buffer-based calls on data every rank holds in the same amount (``Barrier``, ``Bcast``, ``Reduce``
and ``Allreduce`` with a built-in operator on a type the emulator reduces, ``Allgather``,
``Alltoall``, ``Reduce_scatter_block``) run the emulator's collective algorithms
(``emu.nodes.collectives.Comm``: chosen by size as MPI libraries do), or an offload where ``--offload``
names one that supports the call (spec 01 ``nic``: allreduce, reduce; spec 03 ``hw``: bcast, barrier,
allreduce; spec 04 ``switch``: allreduce, reduce, bcast, barrier), on COMM_WORLD (``nic``, ``hw``)
or any communicator (``switch``). The rest -- Python objects (mpi4py's lowercase calls), the
v-variants, scans, operators of the program's own (``Op.Create``), MINLOC/MAXLOC pairs -- go
point to point on the communicator's collective context with flat algorithms (to and from the
root; pairwise for alltoallv; a chain for scans), and the combining is done by the rank's own
process (a callback: the emulator never unpickles), charged at the host's modelled reduction cost.
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import DTYPES, get_op

from .mpicomm import ALGO_CTX, NBC_CTX, MpiComm
from .mpinbc import start
from .mpiserve import COLL_CTX, CommInfo, MpiError, RankState

def comm_of(st: RankState, info: CommInfo) -> MpiComm:
    """The emulator's communicator over the same hosts (made on first use; ``emu.front.mpicomm``);
    while the rank runs a nonblocking collective, the one whose messages all go point to point."""
    if st.nbc_running:
        comm = st.nbc_comms.get(info.ctx)
        if comm is None or comm.info is not info:
            comm = st.nbc_comms[info.ctx] = MpiComm(st, info, info.ctx | COLL_CTX | NBC_CTX, always=True)
        return comm
    if info.comm is None:
        info.comm = MpiComm(st, info, info.ctx | COLL_CTX | ALGO_CTX)
    return info.comm


_NATIVE: dict[tuple, bool] = {}


def _native(op: str | None, dtype: str | None) -> bool:
    """Does the emulator reduce this built-in operator on this type (else: the rank combines)?
    (Known once per pair: the answer depends on nothing else.)"""
    if not (op.__class__ is str and dtype.__class__ is str):  # (None, or what a rank's JSON head holds)
        return _native_now(op, dtype)
    key = (op, dtype)
    known = _NATIVE.get(key)
    if known is None:
        known = _native_now(op, dtype)
        if len(_NATIVE) < 256:  # (the predefined operators and types; a stray string is not kept)
            _NATIVE[key] = known
    return known


def _native_now(op: str | None, dtype: str | None) -> bool:
    if not op or op.startswith("user") or dtype is None:
        return False
    try:
        dt = np.dtype(dtype)
        if dt.name not in DTYPES or dt.byteorder == ">":
            return False
        o = get_op(op)
        o.check(dt)
        return not o.paired
    except (ConfigError, TypeError, ValueError):
        return False


def _offload(st: RankState, info: CommInfo, kind: str, dtype=None, op: str | None = None, count: int = 0):
    """The offload that carries this call out (its name), or None: the emulator's host algorithms."""
    from emu.nodes.collectives.offloads import offload_named

    off = offload_named(st.job.offload)
    world = info.ctx == 0 and st.rank < st.job.first  # (a spawned COMM_WORLD is not the one the offload set up)
    if st.nbc_running or not off.accepts(kind, len(info.ranks), world, np.dtype(dtype or np.uint8), op, count,
                                         st.host.spec):
        return None
    return off.name


def _algo(st: RankState, head: dict, comm: Comm | None, generic: str | None = None) -> None:
    st.figures(head.get("call") or "coll").algos.add(generic or (comm.last_algo if comm else "local"))


# -- point to point on the collective context -------------------------------------------------------
async def _send(st: RankState, info: CommInfo, dest: int, data) -> None:
    """Send to ``dest`` and wait until the send is done (at once for an eager message; a rendezvous
    one when its receiver is there and its data went)."""
    req = await st.send(info, dest, 0, data, ctx=info.ctx | COLL_CTX)
    await st.wait(req)
    st.reqs.pop(req.id, None)


async def _recv(st: RankState, info: CommInfo, src: int) -> bytes:
    req = await st.wait(await st.post_recv(info, src, 0, ctx=info.ctx | COLL_CTX))
    st.reqs.pop(req.id, None)
    return req.env.data


async def gather(st, info, root: int, mine: bytes) -> list[bytes] | None:
    if info.rank != root:
        await _send(st, info, root, mine)
        return None
    return [mine if r == root else await _recv(st, info, r) for r in range(len(info.ranks))]


async def scatter(st, info, root: int, parts: list[bytes] | None) -> bytes:
    if info.rank != root:
        return await _recv(st, info, root)
    for r, p in enumerate(parts):
        if r != root:
            await _send(st, info, r, p)
    return parts[root]


async def bcast_bytes(st, info, root: int, data: bytes | None, offload=None) -> bytes:
    """``root``'s bytes on every rank, sizes unknown to the others: the length, then the data."""
    comm = comm_of(st, info)
    n = await comm.bcast(np.array([len(data) if info.rank == root else 0], np.int64), root)
    buf = np.frombuffer(data, np.uint8).copy() if info.rank == root else np.empty(int(n[0]), np.uint8)
    if n[0]:
        buf = await comm.bcast(buf, root, offload=offload)
    return buf.tobytes()


async def combine(st: RankState, head: dict, parts: list[bytes]) -> bytes:
    """The rank's process reduces ``parts`` in rank order; the host pays the modelled cost."""
    await st.host.reduce_cost(sum(map(len, parts[1:])))
    cb = {"kind": "reduce", "op": head.get("rop"), "tname": head.get("tname"), "dtype": head.get("dtype"),
          "pickled": head.get("pickled", False), "lens": [len(p) for p in parts]}
    return bytes(await st.callback(cb, b"".join(parts)))


# -- the calls ---------------------------------------------------------------------------------------
def _split(payload, lens: list[int]) -> list[bytes]:
    out, at = [], 0
    for n in lens:
        out.append(bytes(payload[at:at + n]))
        at += n
    return out


async def c_barrier(st, info, head, payload):
    if len(info.ranks) > 1:
        comm = comm_of(st, info)
        await comm.barrier(offload=_offload(st, info, "barrier"))
        _algo(st, head, comm)
    return {}, b""


async def c_bcast(st, info, head, payload):
    root, n = head["root"], head.get("n", -1)
    if len(info.ranks) == 1:
        return {}, payload
    if n < 0:  # a Python object: its size is known only at the root
        out = await bcast_bytes(st, info, root, payload)
        _algo(st, head, comm_of(st, info))
        return {}, out
    comm = comm_of(st, info)
    x = np.frombuffer(payload, np.uint8).copy() if info.rank == root else np.empty(n, np.uint8)
    if n:
        x = await comm.bcast(x, root, offload=_offload(st, info, "bcast", np.uint8, None, n))
        _algo(st, head, comm)
    return {}, x.tobytes()


async def c_reduce(st, info, head, payload):
    """Reduce (``all``: Allreduce) of every rank's operand with ``op``; None where a rank gets nothing."""
    root, every, op, dtype = head.get("root", 0), head.get("all", False), head.get("rop"), head.get("dtype")
    if len(info.ranks) == 1:
        return {}, payload
    if not head.get("pickled") and not payload:
        return ({}, b"") if every or info.rank == root else ({"none": True}, b"")
    if not head.get("pickled") and _native(op, dtype):
        comm = comm_of(st, info)
        x = np.frombuffer(payload, dtype).copy()
        kind = "allreduce" if every else "reduce"
        off = _offload(st, info, kind, x.dtype, op, x.size)
        if every:
            y = await comm.allreduce(x, op, offload=off)
        else:
            y = await comm.reduce(x, op, root, offload=off)
        _algo(st, head, comm)
        if off is not None and y is None and (every or info.rank == root):
            raise MpiError(f"the offloaded {kind} failed on the NICs (ErrVec {comm.last_status:#x})", 15)
        if y is None:
            return {"none": True}, b""
        return {}, np.ascontiguousarray(y).astype(x.dtype, copy=False).tobytes()
    at = 0 if every else root
    parts = await gather(st, info, at, bytes(payload))
    out = await combine(st, head, parts) if parts is not None else None
    _algo(st, head, None, "flat (gather, combine at the root" + (", bcast)" if every else ")"))
    if every:
        return {}, await bcast_bytes(st, info, at, out)
    return ({"none": True}, b"") if out is None else ({}, out)


async def c_gather(st, info, head, payload):
    """Gather(v) (``all``: Allgather(v)): every rank's bytes, lengths in ``lens``."""
    every, root, size = head.get("all", False), head.get("root", 0), len(info.ranks)
    if size == 1:
        return {"lens": [len(payload)]}, payload
    if every and head.get("uniform"):
        if not payload:  # nothing to move (MPICH returns at once too)
            return {"lens": [0] * size}, b""
        comm = comm_of(st, info)
        y = await comm.allgather(np.frombuffer(payload, np.uint8).copy())
        _algo(st, head, comm)
        return {"lens": [len(payload)] * size}, y.tobytes()
    at = 0 if every else root
    parts = await gather(st, info, at, bytes(payload))
    _algo(st, head, None, "flat (to the root" + (", bcast)" if every else ")"))
    if every:
        lens = np.array([len(p) for p in parts] if parts else [0] * size, np.int64)
        lens = await comm_of(st, info).bcast(lens, at)
        data = await bcast_bytes(st, info, at, b"".join(parts) if parts else None)
        return {"lens": lens.tolist()}, data
    if parts is None:
        return {"none": True}, b""
    return {"lens": [len(p) for p in parts]}, b"".join(parts)


async def c_scatter(st, info, head, payload):
    root = head.get("root", 0)
    if len(info.ranks) == 1:
        return {}, payload
    parts = _split(payload, head["lens"]) if info.rank == root else None
    if parts is not None and len(parts) != len(info.ranks):
        raise MpiError(f"scatter: {len(parts)} parts for {len(info.ranks)} ranks", 2)
    out = await scatter(st, info, root, parts)
    _algo(st, head, None, "flat (from the root)")
    return {}, out


async def c_alltoall(st, info, head, payload):
    size, me = len(info.ranks), info.rank
    parts = _split(payload, head["lens"])
    if len(parts) != size:
        raise MpiError(f"alltoall: {len(parts)} parts for {size} ranks", 2)
    if size == 1:
        return {"lens": [len(parts[0])]}, parts[0]
    if head.get("uniform"):
        if not payload:
            return {"lens": [0] * size}, b""
        comm = comm_of(st, info)
        y = await comm.alltoall(np.frombuffer(payload, np.uint8).reshape(size, -1).copy())
        _algo(st, head, comm)
        return {"lens": head["lens"]}, y.tobytes()
    ctx = info.ctx | COLL_CTX  # every receive posted before any send: rendezvous sends cannot wait on each other
    recvs = {(me - i) % size: await st.post_recv(info, (me - i) % size, 0, ctx=ctx) for i in range(1, size)}
    sends = [await st.send(info, (me + i) % size, 0, parts[(me + i) % size], ctx=ctx) for i in range(1, size)]
    got = [b""] * size
    got[me] = parts[me]
    for src, req in recvs.items():
        got[src] = (await st.wait(req)).env.data
    for req in [*recvs.values(), *sends]:
        await st.wait(req)
        st.reqs.pop(req.id, None)
    _algo(st, head, None, "pairwise")
    return {"lens": [len(p) for p in got]}, b"".join(got)


async def c_scan(st, info, head, payload):
    """Scan (``ex``: Exscan) down a chain of the ranks."""
    me, size = info.rank, len(info.ranks)
    prefix = await _recv(st, info, me - 1) if me > 0 else None
    acc = bytes(payload) if prefix is None else await combine(st, head, [prefix, bytes(payload)])
    if me < size - 1:
        await _send(st, info, me + 1, acc)
    _algo(st, head, None, "chain")
    if head.get("ex"):
        return ({"none": True}, b"") if prefix is None else ({}, prefix)
    return {}, acc


async def c_reduce_scatter(st, info, head, payload):
    """Reduce_scatter(_block): the reduction, rank r gets ``lens[r]`` bytes of it. Without ``lens``
    (``Reduce_scatter(s, r, None)``) each rank gave only its own (``mine``): the ranks' are gathered
    first (an allgather on the fabric, as mpi4py's MPI_Allgather of the counts) and answered."""
    lens, size = head.get("lens"), len(info.ranks)
    if lens is None:
        mine = np.array([int(head["mine"])], np.int64)
        lens = (await comm_of(st, info).allgather(mine)).reshape(-1).tolist() if size > 1 else mine.tolist()
    if size == 1:
        return {"lens": lens}, payload
    if head.get("uniform") and _native(head.get("rop"), head.get("dtype")) and len(payload) % size == 0:
        comm = comm_of(st, info)
        y = await comm.reduce_scatter(np.frombuffer(payload, head["dtype"]).copy(), head["rop"])
        _algo(st, head, comm)
        return {}, y.tobytes()
    parts = await gather(st, info, 0, bytes(payload))
    whole = await combine(st, head, parts) if parts is not None else None
    if sum(lens) != len(payload):  # the counts do not add up to the operand: every rank is told
        return {"lens": lens}, b""
    out = await scatter(st, info, 0, _split(whole, lens) if whole is not None else None)
    _algo(st, head, None, "flat (reduce at rank 0, scatter)")
    return {"lens": lens}, out


KINDS = {"barrier": c_barrier, "bcast": c_bcast, "reduce": c_reduce, "gather": c_gather, "scatter": c_scatter,
         "alltoall": c_alltoall, "scan": c_scan, "reduce_scatter": c_reduce_scatter}


async def h_coll(st: RankState, head: dict, payload):
    fn = KINDS.get(head.get("kind"))
    if fn is None:
        raise MpiError(f"no collective {head.get('kind')!r}", 15)
    if head.get("nb"):  # Ibcast, ..., a persistent collective's Start: queued (emu.front.mpinbc)
        return start(st, fn, head, payload), b""
    info = st.comm(head["ctx"])
    await st.run_nbc()  # the nonblocking ones called before it run first (MPI's order)
    return await fn(st, info, head, payload)
