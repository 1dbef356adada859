"""Collectives offloaded to the network hardware of spec 03 (``offload="hw"``): the QsNet
adapters' and switches' hardware broadcast (``host.bcast_put`` to a multicast group), and the
hardware barriers and tree reduction of ``emu.nodes.nic.qsbarrier`` (the adapters progress them; the
processes only enter and wait)."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.reduce import get_op

HW_GROUP = 0xC0DE
"""The multicast group id of a communicator's ranks for hardware collectives; ``emu run --offload
hw`` defines it over the run's ranks (``Topology.add_group(HW_GROUP, hosts)``) before the cluster
starts, and an API user does the same."""
BUF = 0x7F00_0000_0000
"""Library buffer the broadcast data lands in on every member (the same virtual address on all,
as the source's hardware broadcast needs), copied out into the caller's array."""
BARRIER_BASE = 0x7E00_0000_0000
"""A communicator's barrier words (ready, done, result: ``emu.nodes.nic.qsbarrier``) sit at
``BARRIER_BASE + comm.id * BARRIER_STRIDE``, the same address on every member."""
BARRIER_STRIDE = 0x2_0000
HW_ALGOS = {"bcast": (), "barrier": ("tree", "polled"), "allreduce": ("tree",)}
"""What each operation can run as in the network hardware (``--algo`` with ``--offload hw``; the
first is the default)."""
DEFAULT_BRANCH = 4
"""Degree of the adapters' tree (tree barrier and reduction) when none is given."""
SEQ_AHEAD = 1 << 20
"""How far a process may run ahead of the last barrier it waited for (non-blocking barriers)."""


def hw_algo(operation: str, algo: str | None) -> str | None:
    """The hardware algorithm ``algo`` names for ``operation`` (its default if None); ConfigError
    if the hardware cannot run it."""
    algos = HW_ALGOS.get(operation)
    if algos is None:
        have = ", ".join(o for o in HW_ALGOS)
        raise ConfigError(f"{operation} cannot be offloaded to the network hardware; {have} can")
    if algo is None:
        return algos[0] if algos else None
    if algo not in algos:
        raise ConfigError(f"{operation} in the network hardware runs as {', '.join(algos) or 'one algorithm'}, "
                          f"not {algo!r}" + ("; leave --algo out" if not algos else ""))
    return algo


def max_reduce_bytes(spec) -> int:
    """Largest block the adapters' tree reduces in one pass: what one EVENT packet carries (the
    ``ElanSpec`` packet size less the 12 bytes of sequence and position, whole 8-byte words)."""
    return (spec.packet_bytes - 12) // 8 * 8


async def bcast_hw(comm, x: np.ndarray, root: int) -> np.ndarray:
    host = comm.host
    flat = np.ascontiguousarray(x).ravel()
    if comm.rank == root:
        host.mem_write(BUF, flat.tobytes())
        r = await host.bcast_put(comm.hw_group, comm.size - 1, BUF, BUF, flat.nbytes)
        if not r.ok:
            raise RuntimeError(f"hardware broadcast failed: {r.error} (is group {comm.hw_group:#x} defined over "
                               "the communicator's hosts? Topology.add_group)")
        return flat.copy()
    while True:  # the broadcast's own arrival: a hardware allreduce before it leaves arrivals of its results
        got = await host.wait_arrivals(1)
        if not got:
            raise RuntimeError(f"rank {comm.rank}: the hardware broadcast never arrived")
        if got[0].addr == BUF:
            break
    return np.frombuffer(host.mem_read(BUF, flat.nbytes), dtype=flat.dtype).copy()


def barrier_base(comm) -> int:
    """Where a communicator's barrier words are (the same on every member)."""
    return BARRIER_BASE + comm.id * BARRIER_STRIDE


def barrier_spec(comm, algo: str, branch: int | None, op: str = "sum", dtype: str = "int64"):
    from emu.nodes.nic.qsbarrier import BarrierSpec

    b = DEFAULT_BRANCH if branch is None else branch
    if not 1 <= b <= 255:
        raise ConfigError(f"branch degree must be within 1..255, got {b}")
    ranks = tuple(comm.host.hosts.index(m) for m in comm.members)
    return BarrierSpec(barrier_base(comm), algo, ranks, comm.hw_group, b, op, dtype)


async def ibarrier_hw(comm, algo: str = "tree", branch: int | None = None, data: bytes = b"",
                      op: str = "sum", dtype: str = "int64") -> int:
    """Enter the next hardware barrier and return its sequence number at once."""
    spec = barrier_spec(comm, hw_algo("barrier", algo), branch, op, dtype)
    # the adapter's context outlives a Comm object: go on from what this node last entered there
    comm.hw_seq = max(comm.hw_seq, comm.host.barrier_seq(spec.base)) + 1
    await comm.host.barrier_enter(spec, comm.hw_seq, data)
    return comm.hw_seq


async def wait_hw(comm, seq: int, timeout_ns: int = 100_000_000, addr: int | None = None) -> None:
    """Wait until hardware barrier ``seq`` of this communicator (and every one before) completed
    (``addr``: the word to watch, a reduction's slot; default the done word)."""
    from emu.nodes.nic.qsbarrier import DONE

    base = barrier_base(comm)
    why = await comm.host.wait_word(base + DONE if addr is None else addr, seq, timeout_ns)
    if why is not None:
        raise RuntimeError(f"rank {comm.rank}: hardware barrier {seq} did not complete: {why}")


async def barrier_hw(comm, algo: str | None, branch: int | None) -> None:
    seq = await ibarrier_hw(comm, hw_algo("barrier", algo), branch)
    await wait_hw(comm, seq)


async def allreduce_hw(comm, x: np.ndarray, op: str, branch: int | None) -> np.ndarray:
    """Allreduce on the adapters' tree, in blocks of one packet (``max_reduce_bytes``): each block
    is a tree barrier whose EVENTs carry the subtree's partial result, and whose release
    broadcasts the reduction into a result slot. Up to ``SLOTS`` blocks are in flight at once
    (entered without waiting: the adapters pipeline them)."""
    from emu.nodes.nic.qsbarrier import SLOTS, slot

    o = get_op(op)
    if o.paired:
        raise ConfigError(f"{op} cannot be reduced by the adapters (paired operands); use host software")
    flat = np.ascontiguousarray(x).ravel()
    raw = flat.view(np.uint8)
    step = max_reduce_bytes(comm.host.spec.elan) // flat.itemsize * flat.itemsize
    blocks = [(off, min(step, raw.size - off)) for off in range(0, raw.size, step)] or [(0, 0)]
    out = np.empty(raw.size, np.uint8)
    base = barrier_base(comm)
    inflight: list[tuple[int, int, int]] = []

    async def retire() -> None:
        seq, off, n = inflight.pop(0)
        await wait_hw(comm, seq, addr=slot(base, seq))
        out[off:off + n] = np.frombuffer(comm.host.mem_read(slot(base, seq) + 8, n), np.uint8)

    for off, n in blocks:
        if len(inflight) == SLOTS:
            await retire()
        seq = await ibarrier_hw(comm, "tree", branch, raw[off:off + n].tobytes() or b"\0" * 8, op,
                                flat.dtype.name)
        inflight.append((seq, off, n))
    while inflight:
        await retire()
    return out.view(flat.dtype).reshape(flat.shape)
