"""Allreduce offloaded to the switches (spec 04, ``offload="switch"``), host side.

The communicator asks the network manager once per (type, operator, reproducibility, algorithm:
``comm.inc_algo`` = single, multi2, multi4 or tree asks for one, else the manager picks by size) for an
in-network allreduce over its members (``host.inc_request``); the manager installs a reduction tree
of switches and grants an allreduce id, or rejects -- then this falls back to the host software
allreduce and says so in ``comm.last_algo``. Each call then streams the vector through the tree
(``host.inc_allreduce``: blocks of one packet, a window of blocks in flight, staggered, retransmitted
on timeout) and every rank gets the reduction.
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import get_op
from emu.wire.inc import Algo


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
    out, err, resent = await comm.host.inc_allreduce(g, flat, comm.rank, timeout_ns)
    if err is not None:
        raise RuntimeError(f"rank {comm.rank}: in-network allreduce failed: {err}")
    comm.last_algo = f"switch({Algo(g.algo).name.lower()}, {g.elems}/packet, window {g.window})"
    comm.inc_resent = getattr(comm, "inc_resent", 0) + resent
    return out.astype(flat.dtype).reshape(x.shape)
