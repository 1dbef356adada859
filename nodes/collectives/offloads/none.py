"""``--offload none``: host software. The hosts run the collective algorithms of
``emu.nodes.collectives.select`` (chosen by size, or named with ``--algo``) over point-to-point
messages; every other offload is measured against it."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import get_op

from ..operations import OPERATIONS
from .base import Offload, register_offload


class _Completed:
    """The request of a non-blocking call that ran to completion inside the call (host software)."""

    def __init__(self, result):
        self.result, self.done = result, True

    async def wait(self):
        return self.result


@register_offload
class HostSoftware(Offload):
    name = "none"
    summary = "host software (default)"
    title = "host software"
    operations = tuple(OPERATIONS)
    nonblocking = ("allreduce", "reduce")
    sparse = True
    hosted = True

    def accepts(self, operation, ranks, world, dtype, op, count, spec) -> bool:
        return False  # emu mpirun: no offload, the emulator's host algorithms

    async def allreduce(self, comm, x, op, root, algo, branch):
        o = get_op(op)
        return await comm._run("allreduce", algo, x.nbytes, o.prepare(np.ascontiguousarray(x).ravel(), comm.rank), o)

    async def reduce(self, comm, x, op, root, algo, branch):
        o = get_op(op)
        return await comm._run("reduce", algo, x.nbytes, o.prepare(np.ascontiguousarray(x).ravel(), comm.rank),
                               o, root)

    async def bcast(self, comm, x, op, root, algo, branch):
        return await comm._run("bcast", algo, x.nbytes, np.ascontiguousarray(x).ravel(), root)

    async def barrier(self, comm, x, op, root, algo, branch):
        await comm._run("barrier", algo, 0)

    async def iallreduce(self, comm, x, op, root, algo, branch):
        """No progress engine beside the application: the reduction runs to completion inside the
        call and ``wait`` returns at once -- the overlap an offload buys is exactly what this lacks."""
        return _Completed(await comm.allreduce(x, op, algo))

    async def ireduce(self, comm, x, op, root, algo, branch):
        return _Completed(await comm.reduce(x, op, root, algo))

    async def run_sparse(self, comm, index, values, length, op, span, algo):
        """SparCML's split allgather (pairs, or a dense slice where fill-in makes that smaller;
        ``emu.nodes.collectives.sparse``), or ``algo="recursive_doubling"`` on pairs (a power-of-two
        number of ranks); another operator than a sum: the dense vector, reduced."""
        if op != "sum":  # only a sum can leave the absent elements out: the dense vector, reduced
            dense = np.zeros(length, np.asarray(values).dtype)
            dense[np.asarray(index, np.int64)] = values
            return await comm.allreduce(dense, op)
        from ..sparse import allreduce_sparse_host, allreduce_sparse_split

        if algo not in (None, "split_allgather", "recursive_doubling"):
            raise ConfigError(f"sparse host allreduce: algo {algo!r}; known: split_allgather, recursive_doubling")
        comm._seq += 1
        if algo == "recursive_doubling":
            comm.last_algo = "sparse recursive doubling"
            return await allreduce_sparse_host(comm, index, values, length)
        comm.last_algo = "sparse split allgather"
        return await allreduce_sparse_split(comm, index, values, length)
