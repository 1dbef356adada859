"""``--offload hw``: the QsNet network hardware (spec 03; ``emu.nodes.collectives.hw``): the
adapters' and switches' hardware broadcast, the hardware barriers (tree or polled) and the
adapters' tree reduction, over a multicast group of the communicator's hosts."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import get_op

from .base import Offload, register_offload


@register_offload
class Hardware(Offload):
    name = "hw"
    summary = "the QsNet network hardware (docs/qsnet.md: bcast, barrier --algo tree|polled, allreduce)"
    title = "hw (QsNet)"
    operations = ("bcast", "barrier", "allreduce")  # the order of hw.HW_ALGOS
    own_algos = True
    qsnet_packets = True
    any_comm = False

    def refusal(self, operation: str) -> str:
        return f"{operation} cannot be offloaded to the network hardware; {', '.join(self.operations)} can"

    def validate(self, operation, dtype, op, branch=None, count=None, queue_capacity=None, algo=None, elan=None):
        from ..hw import hw_algo, max_reduce_bytes

        branch = 1 if branch is None else branch
        hw_algo(operation, algo)
        if not 1 <= branch <= 255:
            raise ConfigError(f"branch degree must be within 1..255, got {branch}")
        if operation == "allreduce":
            if get_op(op).paired:
                raise ConfigError(f"{op} cannot be reduced by the adapters (paired operands); use host software")
            if elan is not None and max_reduce_bytes(elan) < np.dtype(dtype).itemsize:
                raise ConfigError(f"elan.packet_bytes {elan.packet_bytes} leaves no room for one {np.dtype(dtype).name} "
                                  "in a reduction block; raise it")

    def options(self, operation, dtype, op, count, ranks, algo, branch, queue_capacity, elan=None):
        # --algo names the hardware algorithm (nodes.collectives.hw.HW_ALGOS)
        self.validate(operation, dtype, op, branch or 1, count, algo=algo, elan=elan)
        return algo, branch

    async def prepare(self, net, operation, members, dtype, op, count, root, branch, algo):
        self.validate(operation, np.dtype(dtype), op, branch or 1, count, algo=algo,
                      elan=net.topology.nodes[members[0]].spec.elan)
        return branch, None

    def add_groups(self, topo, ranks, avoid=()) -> None:
        """Hardware collectives use a multicast group over the run's ranks."""
        from ..hw import HW_GROUP

        topo.add_group(HW_GROUP, ranks, avoid=avoid)

    def estimate(self, operation, o, ranks, spec):
        """Frames the hosts' adapters inject for a collective in the QsNet network hardware."""
        from ..hw import hw_algo, max_reduce_bytes

        elan = spec.elan
        nbytes = o.count * np.dtype(o.dtype).itemsize
        acked = 1 + (ranks - 1)  # a packet to the group and an ACK from every other member (combined)
        if operation == "bcast":
            packets = max(1, -(-nbytes // elan.packet_bytes))
            return (packets * acked, f"hw offload: {packets:,} broadcast packet{'s' if packets > 1 else ''} "
                                     f"x (1 + {ranks - 1} ACKs)", False)
        if operation == "barrier" and hw_algo("barrier", o.algo) == "polled":
            return (2 * acked, f"hw offload: a network conditional and the done broadcast x (1 + {ranks - 1} "
                               "ACKs), when the first poll finds every member ready", True)
        blocks = max(1, -(-nbytes // max_reduce_bytes(elan))) if operation == "allreduce" else 1
        per = 2 * (ranks - 1) + acked
        return (blocks * per, f"hw offload: {blocks:,} block{'s' if blocks > 1 else ''} x ({ranks - 1} "
                              f"tree edges x (EVENT + ACK) + a result broadcast + {ranks - 1} ACKs)", False)

    async def allreduce(self, comm, x, op, root, algo, branch):
        from ..hw import allreduce_hw

        comm.last_algo = "hw(tree)"
        return await allreduce_hw(comm, x, op, branch)

    async def bcast(self, comm, x, op, root, algo, branch):
        from ..hw import bcast_hw

        comm.last_algo = "hw"
        return await bcast_hw(comm, x, root)

    async def barrier(self, comm, x, op, root, algo, branch):
        from ..hw import barrier_hw, hw_algo

        comm.last_algo = f"hw({hw_algo('barrier', algo)})"
        return await barrier_hw(comm, algo, branch)
