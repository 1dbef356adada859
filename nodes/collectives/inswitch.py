"""Allreduce offloaded to the switches (spec 04, ``offload="switch"``), host side.

The communicator asks the network manager once per (type, operator, reproducibility, algorithm:
``comm.inc_algo`` = single, multi2, multi4 or tree asks for one, else the manager picks by size) for an
in-network allreduce over its members (``host.inc_request``); the manager installs a reduction tree
of switches and grants an allreduce id, or rejects -- then this falls back to the host software
allreduce and says so in ``comm.last_algo``; so does a call whose tree broke under it (no result
after the retransmissions: a link or switch of the tree died), and the communicator's later calls. Each call then streams the vector through the tree
(``host.inc_allreduce``: blocks of one packet, a window of blocks in flight, staggered, retransmitted
on timeout) and every rank gets the reduction.
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import get_op
from emu.wire.inc import Algo


def _schedule(comm) -> str | None:
    """``comm.inc_schedule``: the order hosts send their blocks in (``emu.wire.inc.SCHEDULES``; unset:
    the source's staggered sending)."""
    from emu.wire.inc import SCHEDULES

    s = getattr(comm, "inc_schedule", None)
    if s is not None and s not in SCHEDULES:
        raise ConfigError(f"comm.inc_schedule = {s!r}: one of {', '.join(SCHEDULES)}")
    return s


async def allreduce_switch(comm, x: np.ndarray, op: str, reproducible: bool = False, timeout_ns: int | None = None):
    o = get_op(op)
    if o.paired:
        raise ConfigError(f"{op} cannot be aggregated in the switches (paired operands); use host software")
    flat = np.ascontiguousarray(x).ravel()
    grants = comm.__dict__.setdefault("inc_grants", {})
    want = int(Algo[comm.inc_algo.upper()]) if getattr(comm, "inc_algo", None) else 0
    key = (flat.dtype.str, op, reproducible, want)
    g = grants.get(key)
    if g is None:
        kind, val = await comm.host.inc_request(comm.id, comm.members, flat.dtype, op, flat.nbytes, reproducible, want)
        if kind != "grant":
            grants[key] = ("reject", val)
            g = grants[key]
        else:
            g = grants[key] = val
    if isinstance(g, tuple):  # rejected: host software, and say why
        y = await comm.allreduce(x, op)
        comm.last_algo = f"{comm.last_algo} (switch offload rejected: {g[1]})"
        return y
    out, err, resent = await comm.host.inc_allreduce(g, flat, comm.rank, timeout_ns, _schedule(comm))
    if err is not None:  # the tree broke (a link or switch died): the hosts take over, as when rejected
        grants[key] = ("reject", f"in-network allreduce failed: {err}")
        y = await comm.allreduce(x, op)
        comm.last_algo = f"{comm.last_algo} (switch offload failed, the hosts took over: {err})"
        return y
    comm.last_algo = f"switch({Algo(g.algo).name.lower()}, {g.elems}/packet, window {g.window})"
    comm.inc_resent = getattr(comm, "inc_resent", 0) + resent
    return out.astype(flat.dtype).reshape(x.shape)


PACKET_BYTES = 1024
"""A sparse shard's payload: (index, value) pairs of 4 + itemsize bytes each."""


def sparse_span(density: float, length: int, dtype) -> int:
    """The block span whose average non-zeros (at ``density``) fill one packet of pairs."""
    pairs = max(1, PACKET_BYTES // (4 + np.dtype(dtype).itemsize))
    return int(min(max(pairs, round(pairs / max(density, 1e-9))), max(length, pairs), 1 << 31))


async def allreduce_sparse_switch(comm, index: np.ndarray, values: np.ndarray, length: int, op: str = "sum",
                                  span: int | None = None, timeout_ns: int | None = None) -> np.ndarray:
    """The sum of every rank's sparse vector (its non-zeros ``values`` at ``index``, of ``length``)
    aggregated in the switches, as a dense array on every rank. Blocks span ``span`` elements; by
    default the span that fills one packet with the average block's non-zeros, from the ranks'
    average density (a small host allreduce of the non-zero counts, so that every rank agrees).
    Falls back to a host allreduce of the densified vector when the manager rejects. The switches
    keep partial sums in hash tables with spill buffers at the leaves and arrays above, or arrays
    everywhere with ``comm.inc_store = "array"``."""
    if op != "sum":
        raise ConfigError(f"sparse allreduce sums (absent elements are zeros); {op!r} is not supported")
    values = np.asarray(values)
    index = np.asarray(index, np.int64)
    if len(index) != len(values) or (len(index) and (index.min() < 0 or index.max() >= length)):
        raise ConfigError(f"sparse allreduce: {len(index)} indices for {len(values)} values, within 0..{length - 1}")
    if span is None:
        nnz = await comm.allreduce(np.array([len(index)], np.int64), "sum")
        span = sparse_span(float(nnz[0]) / (comm.size * max(1, length)), length, values.dtype)
    grants = comm.__dict__.setdefault("inc_grants", {})
    arrays = getattr(comm, "inc_store", "auto") == "array"  # else hash tables at the leaves, arrays above
    key = (values.dtype.str, op, "sparse", span, arrays)
    g = grants.get(key)
    if g is None:
        kind, val = await comm.host.inc_request(comm.id, comm.members, values.dtype, op, len(values) * (4 + values.itemsize),
                                                0x80 if arrays else False, 0, span)
        g = grants[key] = val if kind == "grant" else ("reject", val)
    if isinstance(g, tuple):
        dense = np.zeros(length, values.dtype)
        dense[index] = values
        y = await comm.allreduce(dense, op)
        comm.last_algo = f"{comm.last_algo} (switch offload rejected: {g[1]})"
        return y
    out, err, resent = await comm.host.inc_allreduce_sparse(g, index, values, length, span, comm.rank, timeout_ns,
                                                            _schedule(comm))
    if err is not None:
        raise RuntimeError(f"rank {comm.rank}: sparse in-network allreduce failed: {err}")
    comm.last_algo = f"switch(sparse, span {span}, {g.elems} pairs/packet, window {g.window})"
    comm.inc_resent = getattr(comm, "inc_resent", 0) + resent
    return out
