"""Memory a run's message size needs, estimated before it starts: refused past what the machine has.

A topology too large for the machine is refused from its parameters (``emu.topologies.estimate``);
so is a ``--size`` whose buffers would not fit. Each host of a collective holds its operand and its
result, the messages on their way (frames, reassembly buffers, per-rank copies of parts), and
``emu run`` checks every result against numpy's: all of it grows with the size. The estimate is the
peak resident memory measured per byte of ``--size`` and per host (:data:`BYTES_PER_BYTE`), times
the size and the ranks, plus the topology's own estimate; a run whose estimate is over half of the
memory available (``MemAvailable`` in ``/proc/meminfo``, as for a topology) is refused in one line
naming the size, the estimate and the memory available, before any cluster starts.

How the factors were measured: the peak RSS of ``emu run --topo star:n=8 --direct --test T --size S
[--algo A | --offload O]`` (``/usr/bin/time -f %M``) at S = 2 MiB and 8 MiB, for every algorithm of
the test and its offloads (``qsnet:nodes=8`` for ``--offload hw``, ``put`` and ``get``); the slope
per byte of S divided by the 8 hosts, rounded up by about 5% (:data:`BYTES_PER_BYTE` gives each
measured value beside its factor). At 16 hosts the per-host slopes of allreduce (rabenseifner 1.66,
recursive_doubling 3.39) and bcast (2.14) are those of 8 hosts; those of allgather (ring: 10.30 ->
18.55) and alltoall (pairwise: 24.39 -> 48.39) grow with the ranks (each host holds a part from
every rank): their factor is ``a + b * n``. At 32 MiB (allreduce, recursive_doubling, 8 hosts: 945
MiB) the peak lies on the line of 2 and 8 MiB. An algorithm or offload not measured (the coded
broadcasts, ``--offload nic``: a few KiB at most) takes the largest factor of its test.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..config import ConfigError

BYTES_PER_BYTE: dict[tuple[str, str | None], tuple[float, float]] = {
    ("allreduce", "ring"): (1.6, 0),  # measured 1.50
    ("allreduce", "rabenseifner"): (1.8, 0),  # 1.72 (8 hosts), 1.66 (16)
    ("allreduce", "recursive_doubling"): (3.6, 0),  # 3.39 (8 and 16 hosts)
    ("allreduce", "binomial"): (4.1, 0),  # 3.90
    ("allreduce", "hw"): (4.2, 0),  # 3.99 (qsnet:nodes=8)
    ("allreduce", "switch"): (2.1, 0),  # 1.97
    ("reduce", "binomial"): (2.7, 0),  # 2.57
    ("reduce", "flat"): (3.4, 0),  # 3.16
    ("bcast", "binomial"): (3.3, 0),  # 3.11
    ("bcast", "flat"): (2.7, 0),  # 2.54
    ("bcast", "scatter_allgather"): (2.4, 0),  # 2.28 (8 hosts), 2.14 (16)
    ("bcast", "switch"): (2.6, 0),  # 2.46
    ("reduce_scatter", "ring"): (2.5, 0),  # 2.35
    ("reduce_scatter", "recursive_halving"): (3.1, 0),  # 2.92
    ("allgather", "ring"): (2.2, 1.1),  # 10.30 (8 hosts), 18.55 (16): 2.06 + 1.03 n
    ("allgather", "recursive_doubling"): (2.2, 1.3),  # 12.31 (8 hosts)
    ("alltoall", "pairwise"): (0, 3.2),  # 24.39 (8 hosts), 48.39 (16): 3.0 n
    ("alltoall", "flat"): (0, 3.6),  # 27.66 (8 hosts): 3.46 n
    ("mcast", "tree"): (3.3, 0),  # 3.11
    ("mcast", "all_at_once"): (2.7, 0),  # 2.53
    ("mcast_all", "tree"): (0, 1.6),  # 12.24 (8 hosts): 1.53 n
    ("mcast_all", "binomial"): (0, 1.6),  # 12.04
    ("put", None): (6.1, 0),  # 5.82 (qsnet:nodes=8)
    ("get", None): (6.1, 0),  # as put (its runs of 2 MiB and more fail here: "no reply")
}
"""(test, algorithm or offload) -> (a, b): at its peak a host of a run of ``n`` ranks holds about
``(a + b * n) * size`` bytes (measured: the module docstring). A test not here (pingall, barrier,
open-loop traffic: one frame per packet) needs no memory in proportion to ``--size``."""


class Need(NamedTuple):
    bytes: int
    test: str
    how: str
    """The algorithm or offload the factor is for."""
    size: int
    """Bytes per rank (``--size``)."""
    ranks: int
    per_host: float
    """The factor: bytes per host per byte of size."""


def message_bytes(names: list[str], topo, extra: dict[str, Any]) -> Need | None:
    """The memory of the test named whose message size needs the most, or None when no test named
    takes a size."""
    tests = {t for t, _ in BYTES_PER_BYTE}
    worst = None
    for name in names:
        found = _size_ranks_how(name, topo, extra) if name in tests else None
        if found is None:
            continue
        size, n, how = found
        a, b = BYTES_PER_BYTE.get((name, how)) or max(  # not measured: the largest of its test, at these ranks
            (v for (t, _), v in BYTES_PER_BYTE.items() if t == name), key=lambda v: v[0] + v[1] * n)
        need = Need(int((a + b * n) * size * n), name, how or name, size, n, a + b * n)
        if worst is None or need.bytes > worst.bytes:
            worst = need
    return worst


def _size_ranks_how(name: str, topo, extra: dict[str, Any]) -> tuple[int, int, str | None]:
    """(bytes per rank, ranks, the algorithm or offload) of test ``name``."""
    hosts = topo.host_names()
    if name in ("put", "get"):
        from .qsnet_checks import put_size

        return put_size(extra), len(hosts), None
    from emu.nodes.collectives.select import canonical, choose

    from .checks import collective_options

    o = collective_options(name, extra, hosts, topo.hosts[0].spec.nic.queue_capacity, topo.hosts[0].spec.elan)
    n = len(o.ranks) if o.ranks else len(hosts)
    how = o.offload or (canonical(name, o.algo) if o.algo else choose(name, o.size, n))
    return o.size, n, how


def check_memory(names: list[str], topo, extra: dict[str, Any], available_bytes: int | None = None) -> None:
    """Refuse a run whose message size needs more than half of the memory available (``available_bytes``;
    None: ``MemAvailable`` of this machine, no check where it is unknown)."""
    from emu.topologies.estimate import Estimate, _available_bytes

    found = message_bytes(names, topo, extra)
    if found is None:
        return
    if available_bytes is None:
        available_bytes = _available_bytes()
        if available_bytes is None:
            return
    hosts = len(topo.hosts)
    switches = len(topo.nodes) - hosts
    built = Estimate(hosts, switches, len(topo.links), switches * hosts).bytes
    limit = available_bytes // 2
    if found.bytes + built <= limit:
        return
    given = extra.get("size")
    raise ConfigError(f"--size {given or _gib(found.size)} ({found.size:,} B per rank): {found.test} ({found.how}) on "
                      f"{found.ranks} ranks needs about {_gib(found.bytes + built)} of memory ({found.per_host:.1f} x the size "
                      f"per host, measured, and {_gib(built)} for the topology), over half of the {_gib(available_bytes)} "
                      "this machine has available; use a smaller --size or fewer ranks")


def _gib(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / 2**shift:.1f} {unit}"
    return f"{nbytes:,} B"
