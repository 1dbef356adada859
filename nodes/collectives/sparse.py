"""Sparse allreduce in host software (SparCML style): the baseline spec 04's sparse in-network
allreduce is measured against.

:func:`allreduce_sparse_split` (the default, SparCML's split allgather, any number of ranks): the
index space is split into one contiguous partition per rank. Split phase: each rank sends every
other rank the non-zeros of its vector that fall in that rank's partition, and sums what it gets
for its own partition. Allgather phase: each rank sends its reduced partition to every other rank.
Every message is (index, value) pairs, or the dense slice when that is smaller (fill-in: a
partition's sum is denser than any one contribution) -- the switch to dense is made per message,
on its size. Messages go to the ranks in turn from the next one on (rank r + 1, r + 2, ...), so
that no rank is everyone's first destination. The host pays the send and receive overheads of
2 (n - 1) messages and the modelled reduction cost on the values it sums.

:func:`allreduce_sparse_host` (``algo="recursive_doubling"``, a power-of-two number of ranks):
at step k a rank exchanges its current partial sum with rank ^ 2^k and merges; once the merged
vector is denser than ``dense_above`` of the length it goes dense.
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError

DENSE_ABOVE = 0.5
"""Switch to dense exchange above this density (pairs cost 4 + itemsize bytes, dense itemsize)."""


def _encode(idx: np.ndarray, vals: np.ndarray, dense: np.ndarray | None) -> bytes:
    """A partial sum on the wire: b"D" + the dense vector, or b"S" + count + indices + values."""
    if dense is not None:
        return b"D" + dense.tobytes()
    return b"S" + len(idx).to_bytes(4, "big") + idx.astype(">u4").tobytes() + vals.tobytes()


def _encode_slice(idx: np.ndarray, vals: np.ndarray, lo: int, hi: int) -> bytes:
    """The non-zeros ``idx``/``vals`` of the slice lo..hi (idx sorted, within it): pairs, or the
    dense slice when that is fewer bytes."""
    if len(idx) * (4 + vals.itemsize) >= (hi - lo) * vals.itemsize:
        dense = np.zeros(hi - lo, vals.dtype)
        dense[idx - lo] = vals
        return _encode(idx, vals, dense)
    return _encode(idx, vals, None)


def bounds(length: int, n: int) -> list[int]:
    """Where the n partitions of 0..length start (and the last ends): as even as whole elements allow."""
    return [length * j // n for j in range(n + 1)]


async def allreduce_sparse_split(comm, index: np.ndarray, values: np.ndarray, length: int) -> np.ndarray:
    """SparCML's split allgather (see the module's docstring); the dense sum on every rank."""
    n, r = comm.size, comm.rank
    values = np.asarray(values)
    dt = values.dtype
    idx = np.asarray(index, np.int64)
    order = np.argsort(idx, kind="stable")
    idx, vals = idx[order], values[order]
    b = bounds(length, n)
    cut = np.searchsorted(idx, b)
    peers = [(r + d) % n for d in range(1, n)]
    for j in peers:  # split: each rank its partition's pairs of mine
        await comm.send(j, _encode_slice(idx[cut[j]:cut[j + 1]], vals[cut[j]:cut[j + 1]], b[j], b[j + 1]), 0)
    lo, hi = b[r], b[r + 1]
    mine = np.zeros(hi - lo, dt)
    np.add.at(mine, idx[cut[r]:cut[r + 1]] - lo, vals[cut[r]:cut[r + 1]])
    for j in [(r - d) % n for d in range(1, n)]:  # in the order the others send to me
        msg = await comm.host.recv(comm.members[j], comm._tag(0))
        od, oi, ov = _decode(msg.data, dt, hi - lo)
        with np.errstate(all="ignore"):
            if od is None:
                await comm.host.reduce_cost(ov.nbytes)
                np.add.at(mine, oi - lo, ov)
            else:
                await comm.host.reduce_cost(od.nbytes)
                mine += od
    nz = np.flatnonzero(mine)
    part = _encode_slice(nz + lo, mine[nz], lo, hi)
    for j in peers:  # allgather: my reduced partition to everyone
        await comm.send(j, part, 1)
    out = np.zeros(length, dt)
    out[lo:hi] = mine
    for j in [(r - d) % n for d in range(1, n)]:
        msg = await comm.host.recv(comm.members[j], comm._tag(1))
        od, oi, ov = _decode(msg.data, dt, b[j + 1] - b[j])
        if od is None:
            out[oi] = ov
        else:
            out[b[j]:b[j + 1]] = od
    return out


def _decode(data: bytes, dtype: np.dtype, length: int) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    if data[:1] == b"D":
        return np.frombuffer(data, dtype, length, 1), None, None  # type: ignore[return-value]
    n = int.from_bytes(data[1:5], "big")
    return None, np.frombuffer(data, ">u4", n, 5).astype(np.int64), np.frombuffer(data, dtype, n, 5 + 4 * n)


async def allreduce_sparse_host(comm, index: np.ndarray, values: np.ndarray, length: int,
                                dense_above: float = DENSE_ABOVE) -> np.ndarray:
    n, r = comm.size, comm.rank
    if n & (n - 1):
        raise ConfigError(f"the sparse host allreduce needs a power-of-two number of ranks, not {n}")
    values = np.asarray(values)
    dt = values.dtype
    idx = np.asarray(index, np.int64)
    order = np.argsort(idx, kind="stable")
    idx, vals = idx[order], values[order]
    dense: np.ndarray | None = None
    step, dist = 0, 1
    while dist < n:
        peer = r ^ dist
        if dense is None and len(idx) > dense_above * length:
            dense = np.zeros(length, dt)
            dense[idx] = vals
        await comm.send(peer, _encode(idx, vals, dense), step)
        msg = await comm.host.recv(comm.members[peer], comm._tag(step))
        od, oi, ov = _decode(msg.data, dt, length)
        with np.errstate(all="ignore"):
            if dense is None and od is None:  # both sparse: unite the indices, add the common ones
                union = np.union1d(idx, oi)
                merged = np.zeros(len(union), dt)
                merged[np.searchsorted(union, idx)] += vals
                np.add.at(merged, np.searchsorted(union, oi), ov)
                await comm.host.reduce_cost((len(vals) + len(ov)) * dt.itemsize)
                idx, vals = union, merged
            else:
                if dense is None:
                    dense = np.zeros(length, dt)
                    dense[idx] = vals
                if od is None:
                    od = np.zeros(length, dt)
                    od[oi] = ov
                await comm.host.reduce_cost(dense.nbytes)
                dense = dense + od
        dist <<= 1
        step += 1
    if dense is None:
        dense = np.zeros(length, dt)
        dense[idx] = vals
    return dense
