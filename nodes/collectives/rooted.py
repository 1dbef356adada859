"""Rooted collectives and multicasts: reduce, broadcast, one-to-all and all-to-all multicast.

Binomial trees are MPICH's: with ``v`` the rank relative to the root, ``v`` receives from
``v - lowbit(v)`` and sends to ``v + m`` for the powers of two ``m < lowbit(v)``, largest first.
"""

from __future__ import annotations

import numpy as np

from emu.reduce import Op

from .chunks import chunk_bounds


def _rel(comm, root: int) -> int:
    return (comm.rank - root) % comm.size


def _abs(comm, v: int, root: int) -> int:
    return (v + root) % comm.size


async def reduce_binomial(comm, x: np.ndarray, op: Op, root: int) -> np.ndarray | None:
    n, v = comm.size, _rel(comm, root)
    acc = x.copy()
    mask, step = 1, 1
    while mask < n:
        if v & mask:
            await comm.send(_abs(comm, v - mask, root), acc, step)
            return None
        child = v | mask
        if child < n:
            got = await comm.recv(_abs(comm, child, root), acc.dtype, step)
            acc = await comm.combine(op, acc, got)
        mask <<= 1
        step += 1
    return acc


async def reduce_flat(comm, x: np.ndarray, op: Op, root: int) -> np.ndarray | None:
    """Every rank sends to the root, which combines in rank order."""
    if comm.rank != root:
        await comm.send(root, x, 1)
        return None
    acc = x.copy()
    for r in range(comm.size):
        if r != root:
            acc = await comm.combine(op, acc, await comm.recv(r, x.dtype, 1))
    return acc


async def bcast_binomial(comm, x: np.ndarray, root: int, base_step: int = 0) -> np.ndarray:
    n, v = comm.size, _rel(comm, root)
    buf = x.copy()
    mask = 1
    while mask < n:
        if v & mask:
            buf = await comm.recv(_abs(comm, v - mask, root), x.dtype, base_step + mask.bit_length())
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < n:
            await comm.send(_abs(comm, v + mask, root), buf, base_step + mask.bit_length())
        mask >>= 1
    return buf


async def bcast_flat(comm, x: np.ndarray, root: int) -> np.ndarray:
    """The root sends to every other rank in turn (all at once: the sends queue at its port)."""
    if comm.rank == root:
        for r in range(comm.size):
            if r != root:
                await comm.send(r, x, 1)
        return x.copy()
    return await comm.recv(root, x.dtype, 1)


async def bcast_scatter_allgather(comm, x: np.ndarray, root: int) -> np.ndarray:
    """Van de Geijn: binomial scatter of n chunks, then a ring allgather of the chunks."""
    n, v = comm.size, _rel(comm, root)
    buf = x.copy()
    b = chunk_bounds(len(buf), n)  # chunk i belongs to relative rank i
    mask = 1
    while mask < n:  # receive my subtree's chunks [v, v + mask) from the parent
        if v & mask:
            hi = min(v + mask, n)
            buf[b[v]:b[hi]] = await comm.recv(_abs(comm, v - mask, root), x.dtype, mask.bit_length())
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < n:
            hi = min(v + 2 * mask, n)
            await comm.send(_abs(comm, v + mask, root), buf[b[v + mask]:b[hi]], mask.bit_length())
        mask >>= 1
    right, left = _abs(comm, (v + 1) % n, root), _abs(comm, (v - 1) % n, root)
    for s in range(n - 1):
        sc, rc = (v - s) % n, (v - s - 1) % n
        buf[b[rc]:b[rc + 1]] = await comm.sendrecv(buf[b[sc]:b[sc + 1]], right, left, x.dtype, 64 + s)
    return buf


async def mcast_all_at_once(comm, x: np.ndarray, root: int) -> np.ndarray:
    """One-to-all multicast as one unicast from the root to each destination."""
    return await bcast_flat(comm, x, root)


async def mcast_tree(comm, x: np.ndarray, root: int) -> np.ndarray:
    """One-to-all multicast along a binomial tree of unicasts (log2(n) rounds)."""
    return await bcast_binomial(comm, x, root)


async def mcast_all_all_at_once(comm, x: np.ndarray) -> np.ndarray:
    """All-to-all multicast: every rank unicasts its data to every other, then receives theirs."""
    n, r = comm.size, comm.rank
    out = np.empty((n, len(x)), x.dtype)
    out[r] = x
    for s in range(1, n):
        await comm.send((r + s) % n, x, 1)
    for s in range(1, n):
        src = (r - s) % n
        out[src] = await comm.recv(src, x.dtype, 1)
    return out


async def mcast_all_tree(comm, x: np.ndarray) -> np.ndarray:
    """All-to-all multicast: one binomial tree (over rank order) per source, the trees taken in source
    order (``binomial``; ``tree`` is the coordinate-aware one on meshes and tori)."""
    n = comm.size
    out = np.empty((n, len(x)), x.dtype)
    for src in range(n):
        comm._seq += 1  # every tree gets tags of its own (all ranks take the trees in the same order)
        out[src] = await bcast_binomial(comm, x if src == comm.rank else np.empty_like(x), src)
    return out
