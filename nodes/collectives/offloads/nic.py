"""``--offload nic``: allreduce and reduce on the NICs with triggered descriptors (spec 01;
``emu.nodes.collectives.offload`` is the host side, ``emu.nodes.nic.coll`` the NIC's)."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError

from .base import Offload, register_offload


def branch_of(algo: str) -> int:
    """The branch degree in an offloaded run's algorithm name (``nic(branch=K)`` or ``nic(branch=K, ...)``)."""
    return int(algo[len("nic(branch="):].split(",")[0].rstrip(")"))


async def nic_setup(comm) -> None:
    """Communicator setup on the NICs (every rank, before the measured call)."""
    await comm.nic_setup()


@register_offload
class Nic(Offload):
    name = "nic"
    summary = ("on the NICs (NIC-offloaded reduction, triggered descriptors, docs/nic-offload.md: allreduce, "
               "reduce)")
    title = "nic (triggered descriptors)"
    operations = ("allreduce", "reduce")
    nonblocking = ("allreduce", "reduce")
    any_comm = False

    def refusal(self, operation: str) -> str:
        return f"{operation} cannot be offloaded to the NIC; allreduce and reduce can"

    def validate(self, operation, dtype, op, branch=None, count=None, queue_capacity=None, algo=None, elan=None,
                 counter_bits=8):
        """``counter_bits``: the NIC's (``nic.counter_bits``) where the spec is known; before it is (the
        command line's checks), the widest, and the run's own check refuses what its NIC cannot count."""
        from ..offload import validate

        validate(operation, dtype, op, 1 if branch is None else branch, count, queue_capacity, counter_bits)

    def options(self, operation, dtype, op, count, ranks, algo, branch, queue_capacity, elan=None):
        from emu.config import NicSpec

        from ..offload import default_branch, parts

        if algo:
            raise ConfigError("--algo names a host software algorithm; leave it out with --offload nic")
        queue = NicSpec().queue_capacity if queue_capacity is None else queue_capacity
        # without --branch the run picks it (on its topology: offload.default_branch); this one only validates
        self.validate(operation, dtype, op, branch or default_branch(operation, ranks, parts(count, dtype), queue),
                      count, queue_capacity)
        return algo, branch

    async def prepare(self, net, operation, members, dtype, op, count, root, branch, algo):
        from ...nic.alu import per_descriptor
        from .. import nicmodel
        from ..offload import default_branch, parts

        spec = net.topology.nodes[members[0]].spec
        if branch is None:  # on this topology's routes, as the pipeline model predicts (several parts)
            link = next(e[3].spec for e in net.topology.neighbours()[members[0]])
            branch = default_branch(operation, len(members), parts(count, np.dtype(dtype)), spec.nic.queue_capacity,
                                    spec, link, nicmodel.on_topology(net.topology, members, root),
                                    per_descriptor(np.dtype(dtype)))
        self.validate(operation, np.dtype(dtype), op, branch, count, spec.nic.queue_capacity,
                      counter_bits=spec.nic.counter_bits)
        return branch, (nic_setup, ())

    async def rank_setup(self, host) -> None:
        for vp in range(1, host.spec.nic.virtual_ports):  # every VP from 1 on (a pipelined allreduce's lanes)
            await host.nic_open(vp)

    def accepts(self, operation, ranks, world, dtype, op, count, spec) -> bool:
        from ..offload import default_branch, parts

        if ranks < 2 or not self.supports(operation) or not world:
            return False
        try:
            branch = default_branch(operation, ranks, parts(count, dtype), spec.nic.queue_capacity,
                                    counter_bits=spec.nic.counter_bits)
            self.validate(operation, dtype, op, branch, count, spec.nic.queue_capacity, counter_bits=spec.nic.counter_bits)
        except ConfigError:
            return False
        return True

    def estimate(self, operation, o, ranks, spec):
        """One message per tree edge up and one down (up only: a reduce), per 48-byte part, one frame each."""
        from ..offload import parts

        nseg = parts(o.count, np.dtype(o.dtype))
        per_edge, ways = (2, "up and down") if operation == "allreduce" else (1, "up")
        return (per_edge * (ranks - 1) * nseg,
                f"{self.name} offload: {nseg} part{'s' if nseg > 1 else ''} x {ranks - 1} tree edges, {ways}", False)

    def figures(self, topology, res, o):
        """An allreduce on the NICs: the pipeline model's completion beside the measurement."""
        if res.operation != "allreduce" or not res.algo.startswith("nic(branch="):
            return {}
        from ..offload import predict

        p = predict(topology, res.ranks, branch_of(res.algo), o.count, o.dtype)
        return {"model_ns": p.total_ns, "lanes": p.lanes}

    async def _go(self, comm, kind, x, op, root, branch, nonblocking=False):
        from ..offload import DEFAULT_VP, TIMEOUT_NS_PER_PART, default_branch, offloaded, parts, reading, start

        if branch is None:
            from ...nic.alu import per_descriptor

            branch = default_branch(kind, comm.size, parts(x.size, x.dtype), comm.host.spec.nic.queue_capacity,
                                    comm.host.spec, operands=per_descriptor(x.dtype))
        bits = comm.host.spec.nic.counter_bits
        comm.last_algo = f"nic(branch={branch})" if bits <= 6 else f"nic(branch={branch}, {reading(bits)})"
        timeout = TIMEOUT_NS_PER_PART * parts(x.size, x.dtype)
        if nonblocking:
            return await start(comm, kind, x, op, root, branch, getattr(comm, "vp", DEFAULT_VP), timeout)
        return await offloaded(comm, kind, x, op, root, branch, getattr(comm, "vp", DEFAULT_VP), timeout)

    async def allreduce(self, comm, x, op, root, algo, branch):
        return await self._go(comm, "allreduce", x, op, 0, branch)

    async def reduce(self, comm, x, op, root, algo, branch):
        return await self._go(comm, "reduce", x, op, root, branch)

    async def iallreduce(self, comm, x, op, root, algo, branch):
        return await self._go(comm, "allreduce", x, op, 0, branch, nonblocking=True)

    async def ireduce(self, comm, x, op, root, algo, branch):
        return await self._go(comm, "reduce", x, op, root, branch, nonblocking=True)
