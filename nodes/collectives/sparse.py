"""Sparse allreduce in host software (SparCML style): the baseline spec 04's sparse in-network
allreduce is measured against.

Recursive doubling over a power-of-two number of ranks: at step k a rank exchanges its current
partial sum, as (index, value) pairs, with rank ^ 2^k, and merges (indices united, values of a common
index summed). Once the merged vector is denser than ``dense_above`` of the length, sending it
dense is cheaper (4 bytes of index per value saved), so from then on the exchange is dense. Every
rank ends with the whole sum. The host pays the modelled reduction cost on the values it merges.
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
