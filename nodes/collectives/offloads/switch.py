"""``--offload switch``: in-network allreduce (spec 04; ``emu.nodes.collectives.inswitch``): the
switches aggregate, over a tree the network manager installs; reduce, bcast and barrier are
allreduces of their own (kept at the root; a bitwise or where every rank but the root adds zeros;
zero bytes), and a sparse allreduce goes in shards of (index, value) pairs."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import get_op

from .base import Offload, register_offload


async def switch_setup(comm, dtype: str, op: str, count: int):
    """Communicator setup: the manager installs the tree before the measured call."""
    return await comm.host.inc_request(comm.id, comm.members, np.dtype(dtype), op, count * np.dtype(dtype).itemsize)


async def sparse_setup(comm, dtype: str, span: int):
    return await comm.host.inc_request(comm.id, comm.members, np.dtype(dtype), "sum", 0, False, 0, span)


@register_offload
class Switch(Offload):
    name = "switch"
    summary = ("aggregated in the switches (in-network allreduce, docs/in-network-allreduce.md: allreduce; a network "
               "manager is attached)")
    title = "switch (in-network)"
    operations = ("allreduce", "reduce", "bcast", "barrier")
    sparse = True
    needs_manager = True

    def refusal(self, operation: str) -> str:
        return f"{operation} cannot be offloaded to the switches; allreduce, reduce, bcast and barrier can"

    def validate(self, operation, dtype, op, branch=None, count=None, queue_capacity=None, algo=None, elan=None):
        self.check_supports(operation)
        if operation in ("allreduce", "reduce") and get_op(op).paired:
            raise ConfigError(f"{op} cannot be aggregated in the switches (paired operands); use host software")

    def options(self, operation, dtype, op, count, ranks, algo, branch, queue_capacity, elan=None):
        if algo or branch is not None:
            raise ConfigError("--algo and --branch do not apply to --offload switch (the manager picks the tree "
                              "and the aggregation algorithm)")
        self.validate(operation, dtype, op)
        return None, None

    async def prepare(self, net, operation, members, dtype, op, count, root, branch, algo):
        self.validate(operation, np.dtype(dtype), op)
        sdt, sop, scount = dtype, op, count
        if operation == "barrier":  # the zero-byte allreduce it is
            sdt, sop, scount = "int32", "sum", 0
        elif operation == "bcast":  # a bitwise-or allreduce of the bytes
            sdt, sop, scount = "uint8", "bor", count * np.dtype(dtype).itemsize
        return branch, (switch_setup, (sdt, sop, scount))

    def sparse_setup(self, dtype, span):
        return sparse_setup, (dtype, span)

    def estimate(self, operation, o, ranks, spec):
        """Every rank injects its blocks of one packet; the switches do the rest."""
        item = np.dtype(o.dtype).itemsize
        blocks = 1 if operation == "barrier" else max(1, -(-o.count // max(1, 1024 // item)))  # a barrier: 0 bytes
        return ranks * blocks, f"switch offload: {blocks:,} blocks x {ranks} ranks", False

    async def allreduce(self, comm, x, op, root, algo, branch):
        from ..inswitch import allreduce_switch

        return await allreduce_switch(comm, x, op, getattr(comm, "reproducible", False))

    async def reduce(self, comm, x, op, root, algo, branch):
        """An allreduce kept at the root."""
        from ..inswitch import allreduce_switch

        y = await allreduce_switch(comm, x, op, getattr(comm, "reproducible", False))
        return y if comm.rank == root else None

    async def bcast(self, comm, x, op, root, algo, branch):
        """An allreduce (bitwise or) where every rank but the root adds zeros."""
        from ..inswitch import allreduce_switch

        flat = np.ascontiguousarray(x).ravel()
        raw = flat.view(np.uint8) if comm.rank == root else np.zeros(flat.nbytes, np.uint8)
        y = await allreduce_switch(comm, raw, "bor")
        comm.last_algo = comm.last_algo.replace("switch(", "switch(bcast, ", 1)
        return y.view(flat.dtype).reshape(np.shape(x))

    async def barrier(self, comm, x, op, root, algo, branch):
        """An allreduce of zero bytes through the switches."""
        from ..inswitch import allreduce_switch

        await allreduce_switch(comm, np.empty(0, np.int32), "sum")
        comm.last_algo = comm.last_algo.replace("switch(", "switch(barrier, ", 1)

    async def run_sparse(self, comm, index, values, length, op, span, algo):
        from ..inswitch import allreduce_sparse_switch

        return await allreduce_sparse_switch(comm, index, values, length, op, span)
