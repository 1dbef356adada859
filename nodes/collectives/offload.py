"""Allreduce and reduce offloaded to the NIC with triggered descriptors (spec 01), host side.

Communicator setup computes a reduction tree of any branch degree (rank ``v``'s children are
``k*v + 1 .. k*v + k``, ranks taken relative to the root) and opens a virtual port. Each call then
posts, per 48-byte part of the message, a **reduce descriptor** (to the parent; leaves execute at
once, inner nodes wait for their children's messages; the root's targets itself) and, for an
allreduce, a **broadcast descriptor** triggered by one CP arrival (the root's own reduce message or
the parent's broadcast) that swaps in the result and forwards it to the node's children. The host
pays only for posting; the NICs do the rest and write the result to host memory.

In an allreduce the parts are executed one after the other (each part's broadcast must fire before
the next part's reduce can leave the queue head), so every 48 bytes more cost one more trip up and
down the tree. An offloaded reduce has no broadcast to hold the parts back: they are all in flight
at once, so a parent's receive queue must hold branch x parts messages (checked before it runs).

Without a branch degree, :func:`default_branch` takes the shallowest tree the receive queue allows
(a level costs a fabric crossing each way, a child only tens of ns at its parent).
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.wire.coll import ErrBit, Head

from ..nic import alu
from ..nic.coll import Posted
from emu.reduce import get_op

DEFAULT_VP = 1
TIMEOUT_NS_PER_PART = 10_000_000
"""How long a host waits for the NIC, per 48-byte part, before it declares the operation failed.
Generous on purpose: virtual time costs nothing while idle, and a healthy run must never hit it."""


def validate(operation: str, dtype: np.dtype, op: str, branch: int, where: str = "nic", count: int | None = None,
             queue_capacity: int | None = None, algo: str | None = None, elan=None) -> None:
    """Refuse an offload request the NIC (``nic``) or the network hardware (``hw``) cannot carry
    out, before anything runs."""
    if where == "hw":
        from .hw import hw_algo, max_reduce_bytes

        hw_algo(operation, algo)
        if not 1 <= branch <= 255:
            raise ConfigError(f"branch degree must be within 1..255, got {branch}")
        if operation == "allreduce":
            if get_op(op).paired:
                raise ConfigError(f"{op} cannot be reduced by the adapters (paired operands); use host software")
            if elan is not None and max_reduce_bytes(elan) < np.dtype(dtype).itemsize:
                raise ConfigError(f"elan.packet_bytes {elan.packet_bytes} leaves no room for one {np.dtype(dtype).name} "
                                  "in a reduction block; raise it")
        return
    if where == "switch":
        if operation not in ("allreduce", "barrier", "reduce", "bcast"):
            raise ConfigError(f"{operation} cannot be offloaded to the switches; allreduce, reduce, bcast and "
                              "barrier can")
        if operation in ("allreduce", "reduce") and get_op(op).paired:
            raise ConfigError(f"{op} cannot be aggregated in the switches (paired operands); use host software")
        return
    if where != "nic":
        raise ConfigError(f"offload {where!r} is not available; known: nic, hw, switch")
    if operation not in ("allreduce", "reduce"):
        raise ConfigError(f"{operation} cannot be offloaded to the NIC; allreduce and reduce can")
    alu.type_code(np.dtype(dtype))
    alu.op_code(op, np.dtype(dtype))
    if not 1 <= branch <= 255:
        raise ConfigError(f"branch degree must be within 1..255, got {branch}")
    if count is None:
        return
    nseg = parts(count, np.dtype(dtype))
    if nseg > 255:
        raise ConfigError(f"{count} {np.dtype(dtype).name} operands need {nseg} descriptors; at most 255 per "
                          f"call (Seg is 8 bits): at most {255 * alu.per_descriptor(np.dtype(dtype))} operands")
    if queue_capacity is None:
        return
    if branch > queue_capacity:
        raise ConfigError(f"branch degree {branch} exceeds the NIC's request receive queue of {queue_capacity} "
                          "entries; the queue must hold a branch degree of messages (raise NicSpec.queue_capacity)")
    if operation == "reduce" and branch * nseg > queue_capacity:
        raise ConfigError(f"an offloaded reduce keeps all its {nseg} parts in flight: a parent may hold "
                          f"{branch} x {nseg} messages, over its queue of {queue_capacity}; use allreduce (parts one "
                          "after another), a smaller branch degree or size, or a larger NicSpec.queue_capacity")


def parts(count: int, dtype: np.dtype) -> int:
    """Descriptors (48-byte parts) an operation on ``count`` operands needs."""
    return max(1, -(-count // alu.per_descriptor(np.dtype(dtype))))


def depth(n: int, k: int) -> int:
    """Levels below the root of the k-ary tree on ``n`` ranks (the shape :func:`kary_tree` builds)."""
    levels, reached, width = 0, 1, 1
    while reached < n:
        width *= k
        reached += width
        levels += 1
    return levels


def default_branch(operation: str, ranks: int, nseg: int, queue_capacity: int) -> int:
    """The branch degree an offload uses when none is given: the shallowest tree the NIC allows
    and, of the degrees that reach that depth, the smallest (the most even tree).

    Why shallow: every level costs a crossing of the fabric up and another down (NIC pipelines,
    links, switches: about a microsecond per level on the default specs), while a child costs its
    parent only a queue access and an ALU pass on the way up and one descriptor on the way down (tens
    of ns). What bounds the degree: a parent's receive queue must hold a branch degree of messages
    (branch x parts for a reduce, which keeps all its parts in flight; :func:`validate`), and the
    Branch field has 8 bits. Allreduce of 48 bytes of doubles on binary fat trees, default specs,
    completion in ns (software / this default / the best of the degrees tried / degree 2; tried: 2, 4,
    8, 16, 32, 63, 64 up to 64 ranks, 8, 11, 12, 16, 32, 64 on 128 and 8, 16, 32, 64 on 256):
    8 ranks 4,182 / 3,106 (7) / same / 5,592; 64 ranks 11,208 / 8,472 (63) / 7,598 (16) / 16,716;
    128 ranks 14,182 / 9,572 (11) / 9,130 (16) / -; 256 ranks 17,472 / 10,890 (16) / same / -.
    Beyond one 48-byte part an allreduce makes one more trip per part whatever the degree, and
    loses to software on these trees (56 bytes on 64 ranks: 11,262 against 14,494 at best)."""
    cap = queue_capacity // max(1, nseg) if operation == "reduce" else queue_capacity
    widest = max(1, min(255, cap, ranks - 1))  # 1 when nothing fits: validate then says why
    shallowest = depth(ranks, widest)
    return next(k for k in range(1, widest + 1) if depth(ranks, k) == shallowest)


def kary_tree(n: int, k: int) -> tuple[list[int], list[list[int]]]:
    """Parents (-1 for the root) and children of relative ranks 0..n-1 in a k-ary tree."""
    if k < 1:
        raise ConfigError(f"branch degree must be >= 1, got {k}")
    from ..nic.qsbarrier import tree_links  # the adapters' barrier tree is this tree too

    links = [tree_links(n, k, v) for v in range(n)]
    return [-1 if p is None else p for p, _c in links], [list(c) for _p, c in links]


def errors_text(err_vec: int) -> str:
    return "|".join(b.name.lower() for b in ErrBit if err_vec & b) or "ok"


async def setup(comm, vp: int = DEFAULT_VP) -> None:
    """Communicator setup on this rank: open the virtual port the offloaded collectives use."""
    await comm.host.nic_open(vp)


def _region(comm) -> int:
    return (comm.id * 37 + comm._seq) & 0x3FF


def descriptors(comm, kind: str, x: np.ndarray, op: str, root: int, branch: int, vp: int
                ) -> tuple[int, int, list[Posted]]:
    """This rank's descriptors for one offloaded ``allreduce`` or ``reduce``: (region, parts, posted)."""
    validate(kind, x.dtype, op, branch, "nic", x.size, comm.host.spec.nic.queue_capacity)
    o = get_op(op)
    dtype = x.dtype
    rdtype, rbit = alu.type_code(dtype)
    rop = alu.op_code(op, dtype)
    vals = np.ascontiguousarray(x).ravel()
    if o.name in ("land", "lor", "lxor"):
        vals = (vals != 0).astype(dtype)
    n, per = comm.size, alu.per_descriptor(dtype)
    nseg = parts(len(vals), dtype)
    comm._seq += 1
    region = _region(comm)
    v = (comm.rank - root) % n
    parents, children = kary_tree(n, branch)
    addr = [comm.host.address(comm.members[(r + root) % n]) for r in range(n)]
    me, par = addr[v], (addr[parents[v]] if parents[v] >= 0 else None)
    kids = [(addr[c], vp) for c in children[v]]
    pbranch = len(children[parents[v]]) if parents[v] >= 0 else 0
    is_root = par is None
    posted = []
    for s in range(nseg):
        part = vals[s * per:(s + 1) * per]
        data, loc = alu.pack(part, np.full(len(part), comm.rank))
        common = dict(coll_region=region, rop=rop, rdtype=rdtype, rbit=rbit, seg=s, nseg=nseg, src_vp=vp,
                      dest_vp=vp, data_num=len(part), err_vec=0, err=0, fen=0, rint=0, nocnct=0, rsvd=0,
                      **{f"data{i}": data[i] for i in range(7)}, **{f"loc{i}": loc[i] for i in range(7)})
        reduce_desc = dict(common, head=Head.REDUCE, type=1, sm=0, inst=1 if not children[v] else 0,
                           swpmp=0 if is_root else 1, swpflag=1 if is_root else 0, cpcnt=0,
                           lint=1 if kind == "reduce" else 0, node_id=(me if is_root else par) & 0xFFFFF,
                           branch=len(children[v]), pbranch=pbranch, rflag=1, bflag=0)
        dests = [(me, vp)] if is_root and kind == "allreduce" else ([] if is_root else [(par, vp)])
        posted.append(Posted(reduce_desc, dests, completion=s))
        if kind == "allreduce":
            bcast_desc = dict(common, head=Head.BCAST, type=1, sm=1 if len(kids) > 1 else 0, inst=0, swpmp=0,
                              swpflag=1, cpcnt=1, lint=1, node_id=(kids[0][0] if kids else me) & 0xFFFFF,
                              branch=0, pbranch=0, rflag=0, bflag=1, data_num=0,
                              **{f"data{i}": 0 for i in range(7)}, **{f"loc{i}": 0 for i in range(7)})
            posted.append(Posted(bcast_desc, kids, completion=s))
    return region, nseg, posted


def assemble(comm, done: list, nseg: int, count: int, op: str, dtype: np.dtype) -> np.ndarray | None:
    """The result from the completions the NIC wrote (None, with ``last_status`` set, on error)."""
    status = 0
    for c in done:
        status |= c.err_vec
    by_seg = {c.seg: c for c in done if c.seg >= 0}
    if status or len(by_seg) != nseg or any(by_seg[s].values is None for s in range(nseg)):
        comm.last_status = status or ErrBit.TIMEOUT
        return None
    comm.last_status = 0
    out_vals = np.concatenate([by_seg[s].values for s in range(nseg)])[:count]
    o = get_op(op)
    if o.paired:
        out = np.empty(count, o.wire_dtype(dtype))
        out["value"] = out_vals
        out["index"] = np.concatenate([by_seg[s].locations for s in range(nseg)])[:count]
        return out
    return out_vals


async def offloaded(comm, kind: str, x: np.ndarray, op: str, root: int, branch: int, vp: int,
                    timeout_ns: int) -> np.ndarray | None:
    """Post this rank's descriptors, wait for the NIC's completions, assemble the result."""
    region, nseg, posted = descriptors(comm, kind, x, op, root, branch, vp)
    await comm.host.nic_post(vp, posted)
    done = await comm.host.nic_wait(region, nseg, timeout_ns, vp)  # one completion per part
    result = assemble(comm, done, nseg, x.size, op, x.dtype)
    if kind == "reduce" and comm.rank != root:
        return None
    return result
