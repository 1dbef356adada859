"""Barrier, allgather, reduce-scatter and all-to-all (host software)."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError

from emu.reduce import Op

_EMPTY = np.empty(0, np.uint8)


async def barrier_dissemination(comm) -> None:
    """ceil(log2 n) rounds: send to rank + 2^k, receive from rank - 2^k."""
    n, r = comm.size, comm.rank
    k, dist = 0, 1
    while dist < n:
        await comm.send((r + dist) % n, _EMPTY, k)
        await comm.recv((r - dist) % n, np.uint8, k)
        dist <<= 1
        k += 1


async def barrier_tree(comm) -> None:
    """Binomial gather of empty messages to rank 0, then binomial broadcast from it."""
    from .rooted import bcast_binomial

    n, v = comm.size, comm.rank
    mask = 1
    while mask < n:
        if v & mask:
            await comm.send(v - mask, _EMPTY, mask.bit_length())
            break
        if v | mask < n:
            await comm.recv(v | mask, np.uint8, mask.bit_length())
        mask <<= 1
    await bcast_binomial(comm, _EMPTY, 0, base_step=64)


async def allgather_ring(comm, x: np.ndarray) -> np.ndarray:
    n, r = comm.size, comm.rank
    out = np.empty((n, len(x)), x.dtype)
    out[r] = x
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        out[(r - s - 1) % n] = await comm.sendrecv(out[(r - s) % n], right, left, x.dtype, s)
    return out


def _need_pof2(comm, what: str) -> None:
    n = comm.size
    if n & (n - 1):
        raise ConfigError(f"{what} needs a power-of-two number of ranks, not {n}; use the ring algorithm")


async def allgather_recursive_doubling(comm, x: np.ndarray) -> np.ndarray:
    """log2(n) exchanges of everything gathered so far (power-of-two rank counts)."""
    _need_pof2(comm, "recursive-doubling allgather")
    n, r = comm.size, comm.rank
    out = np.empty((n, len(x)), x.dtype)
    out[r] = x
    mask = 1
    while mask < n:
        base = r & ~(mask - 1)
        pbase = (r ^ mask) & ~(mask - 1)
        got = await comm.sendrecv(out[base:base + mask], r ^ mask, r ^ mask, x.dtype, mask.bit_length())
        out[pbase:pbase + mask] = got.reshape(mask, len(x))
        mask <<= 1
    return out


async def reduce_scatter_ring(comm, x: np.ndarray, op: Op) -> np.ndarray:
    """n-1 steps around the ring; rank r ends with block r reduced."""
    n, r = comm.size, comm.rank
    c = len(x) // n
    acc = x.copy()
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        sb, rb = (r - s - 1) % n, (r - s - 2) % n
        got = await comm.sendrecv(acc[sb * c:(sb + 1) * c], right, left, x.dtype, s)
        acc[rb * c:(rb + 1) * c] = await comm.combine(op, acc[rb * c:(rb + 1) * c], got)
    return acc[r * c:(r + 1) * c].copy()


async def reduce_scatter_recursive_halving(comm, x: np.ndarray, op: Op) -> np.ndarray:
    """log2(n) exchanges of half of what is left (power-of-two rank counts)."""
    _need_pof2(comm, "recursive-halving reduce-scatter")
    n, r = comm.size, comm.rank
    c = len(x) // n
    acc = x.copy()
    lo, hi, mask = 0, n, n // 2
    while mask >= 1:
        mid = (lo + hi) // 2
        (klo, khi), (slo, shi) = ((lo, mid), (mid, hi)) if not r & mask else ((mid, hi), (lo, mid))
        got = await comm.sendrecv(acc[slo * c:shi * c], r ^ mask, r ^ mask, x.dtype, mask.bit_length())
        acc[klo * c:khi * c] = await comm.combine(op, acc[klo * c:khi * c], got)
        lo, hi = klo, khi
        mask //= 2
    return acc[r * c:(r + 1) * c].copy()


async def alltoall_pairwise(comm, x: np.ndarray) -> np.ndarray:
    """n-1 steps: send to rank + s, receive from rank - s."""
    n, r = comm.size, comm.rank
    out = np.empty_like(x)
    out[r] = x[r]
    for s in range(1, n):
        dst, src = (r + s) % n, (r - s) % n
        out[src] = await comm.sendrecv(x[dst], dst, src, x.dtype, s)
    return out


async def alltoall_flat(comm, x: np.ndarray) -> np.ndarray:
    """Post every send, then receive everything (all at once)."""
    n, r = comm.size, comm.rank
    out = np.empty_like(x)
    out[r] = x[r]
    for s in range(1, n):
        await comm.send((r + s) % n, x[(r + s) % n], 1)
    for s in range(1, n):
        src = (r - s) % n
        out[src] = await comm.recv(src, x.dtype, 1)
    return out
