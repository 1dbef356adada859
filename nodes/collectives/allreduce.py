"""Allreduce algorithms (host software), each ``async def algo(comm, x, op) -> result``.

``x`` is this rank's operand, already flattened and in the operator's wire type. Step numbers
passed to ``comm.send``/``recv`` make every message's tag unique within the call.
"""

from __future__ import annotations

import numpy as np

from emu.reduce import Op

from .chunks import chunk_bounds
from .rooted import bcast_binomial, reduce_binomial


async def ring(comm, x: np.ndarray, op: Op) -> np.ndarray:
    """Reduce-scatter around the ring, then allgather around it: 2(n-1) steps of ~1/n of the data."""
    n, r = comm.size, comm.rank
    acc = _own(comm, x)
    if n == 1:
        return acc
    b = chunk_bounds(len(acc), n)
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        send_c, recv_c = (r - s) % n, (r - s - 1) % n
        got = await comm.sendrecv(acc[b[send_c]:b[send_c + 1]], right, left, acc.dtype, s)
        mine = acc[b[recv_c]:b[recv_c + 1]]
        await comm.combine(op, mine, got, out=mine)
        del got  # (the message's buffer goes before the next one comes)
    for s in range(n - 1):
        send_c, recv_c = (r + 1 - s) % n, (r - s) % n
        acc[b[recv_c]:b[recv_c + 1]] = await comm.sendrecv(acc[b[send_c]:b[send_c + 1]], right, left,
                                                           acc.dtype, n - 1 + s)
    return acc


async def _fold_in(comm, x: np.ndarray, op: Op) -> tuple[np.ndarray, int, int]:
    """Reduce the ranks beyond the largest power of two into their neighbours (MPICH's scheme):
    returns (operand, new rank among the pof2 survivors or -1, pof2)."""
    n, r = comm.size, comm.rank
    pof2 = 1 << (n.bit_length() - 1)
    rem = n - pof2
    if r < 2 * rem:
        if r % 2 == 0:
            await comm.send(r + 1, x, 0)
            return x, -1, pof2
        got = await comm.recv(r - 1, x.dtype, 0)
        return await comm.combine(op, x, got), r // 2, pof2
    return x, r - rem, pof2


def _real(newrank: int, rem: int) -> int:
    return newrank * 2 + 1 if newrank < rem else newrank + rem


async def _fold_out(comm, x: np.ndarray, step: int) -> np.ndarray:
    n, r = comm.size, comm.rank
    rem = n - (1 << (n.bit_length() - 1))
    if r < 2 * rem:
        if r % 2:
            await comm.send(r - 1, x, step)
        else:
            x = await comm.recv(r + 1, x.dtype, step)
    return x


async def recursive_doubling(comm, x: np.ndarray, op: Op) -> np.ndarray:
    """log2(n) exchanges of the whole vector with partners at distance 1, 2, 4, ..."""
    acc, v, pof2 = await _fold_in(comm, _own(comm, x), op)
    rem = comm.size - pof2
    step, mask = 1, 1
    if v >= 0:
        while mask < pof2:
            partner = _real(v ^ mask, rem)
            got = await comm.sendrecv(acc, partner, partner, acc.dtype, step)
            acc = await comm.combine(op, acc, got, out=got)  # into the message's buffer: ours, no new array
            del got
            mask <<= 1
            step += 1
    return await _fold_out(comm, acc, 64)


def _own(comm, x: np.ndarray) -> np.ndarray:
    """The working buffer: ``x`` itself when the caller gave it up (``comm.in_place``, as
    MPI_IN_PLACE: the result overwrites the input), else a copy."""
    return x if getattr(comm, "in_place", False) and x.flags.writeable else x.copy()


async def rabenseifner(comm, x: np.ndarray, op: Op) -> np.ndarray:
    """Reduce-scatter by recursive halving, then allgather by recursive doubling (Rabenseifner):
    about 2 * (n-1)/n of the data sent per rank in 2 log2(n) steps."""
    acc, v, pof2 = await _fold_in(comm, _own(comm, x), op)
    rem = comm.size - pof2
    if v >= 0 and pof2 > 1:
        b = chunk_bounds(len(acc), pof2)
        lo, hi, mask, step = 0, pof2, pof2 // 2, 1
        while mask >= 1:  # halving: keep the half of the chunk range on my side of the partner
            partner = _real(v ^ mask, rem)
            mid = (lo + hi) // 2
            (klo, khi), (slo, shi) = ((lo, mid), (mid, hi)) if not v & mask else ((mid, hi), (lo, mid))
            got = await comm.sendrecv(acc[b[slo]:b[shi]], partner, partner, acc.dtype, step)
            keep = acc[b[klo]:b[khi]]
            await comm.combine(op, keep, got, out=keep)
            del got, keep
            lo, hi = klo, khi
            mask //= 2
            step += 1
        mask = 1
        while mask < pof2:  # doubling: exchange what each side holds
            partner = _real(v ^ mask, rem)
            width = hi - lo
            plo, phi = (hi, hi + width) if not v & mask else (lo - width, lo)
            acc[b[plo]:b[phi]] = await comm.sendrecv(acc[b[lo]:b[hi]], partner, partner, acc.dtype, step)
            lo, hi = min(lo, plo), max(hi, phi)
            mask <<= 1
            step += 1
    return await _fold_out(comm, acc, 64)


async def binomial(comm, x: np.ndarray, op: Op) -> np.ndarray:
    """Binomial-tree reduce to rank 0, then binomial broadcast from it."""
    res = await reduce_binomial(comm, x, op, 0)
    return await bcast_binomial(comm, res if res is not None else x.copy(), 0, base_step=1024)
