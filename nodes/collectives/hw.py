"""Collectives offloaded to the network hardware of spec 03 (``offload="hw"``): the hardware
broadcast of the QsNet adapter and switches (``host.bcast_put`` to a multicast group)."""

from __future__ import annotations

import numpy as np

HW_GROUP = 0xC0DE
"""The multicast group id of a communicator's ranks for hardware collectives; ``emu run --offload
hw`` defines it over the run's ranks (``Topology.add_group(HW_GROUP, hosts)``) before the cluster
starts, and an API user does the same."""
BUF = 0x7F00_0000_0000
"""Library buffer the broadcast data lands in on every member (the same virtual address on all,
as the source's hardware broadcast needs), copied out into the caller's array."""


async def bcast_hw(comm, x: np.ndarray, root: int) -> np.ndarray:
    host = comm.host
    flat = np.ascontiguousarray(x).ravel()
    if comm.rank == root:
        host.mem_write(BUF, flat.tobytes())
        r = await host.bcast_put(HW_GROUP, comm.size - 1, BUF, BUF, flat.nbytes)
        if not r.ok:
            raise RuntimeError(f"hardware broadcast failed: {r.error} (is group {HW_GROUP:#x} defined over "
                               "the communicator's hosts? Topology.add_group)")
        return flat.copy()
    got = await host.wait_arrivals(1)
    if not got:
        raise RuntimeError(f"rank {comm.rank}: the hardware broadcast never arrived")
    return np.frombuffer(host.mem_read(BUF, flat.nbytes), dtype=flat.dtype).copy()
