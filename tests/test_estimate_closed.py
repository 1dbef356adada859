"""The large-run estimate's closed-form message counts (``emu.front.estimate.counted_messages``) equal
the dry run's (``emu.nodes.collectives.dryrun.count_messages``: the real algorithms, run without a
network) for every algorithm the emulator comes with, and ``emu run`` no longer runs the dry run."""

from __future__ import annotations

from collections import Counter

import pytest

from emu.front.estimate import counted_messages, message_sizes
from emu.nodes.collectives.dryrun import count_messages
from emu.nodes.collectives.select import ALGORITHMS, GRID_ONLY, POWER_OF_TWO_ONLY

RANKS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16)
COUNTS = (1, 3, 16, 37, 250)


def _cases():
    for operation, table in ALGORITHMS.items():
        for algo in table:
            if (operation, algo) in GRID_ONLY:
                continue
            yield operation, algo


def test_every_algorithm_but_the_coded_schemes_has_a_closed_form():
    missing = [(o, a) for o, a in _cases() if message_sizes(o, a, 4, 8) is None]
    assert missing == []
    assert message_sizes("mcast", "nc", 4, 8) is None  # (a plan on the NICs: counted elsewhere or by the dry run)


@pytest.mark.parametrize("operation,algo", sorted(_cases()))
async def test_the_closed_form_equals_the_dry_run(operation, algo):
    for n in RANKS:
        if (operation, algo) in POWER_OF_TWO_ONLY and n & (n - 1):
            continue
        for count in COUNTS:
            if operation == "reduce_scatter":
                count *= n
            dry = await count_messages(operation, n, count, "float32", "sum", algo)
            got = counted_messages(operation, n, count, "float32", "sum", algo)
            assert dry.complete and got.algo == dry.algo
            assert got.sizes == dict(Counter(dry.sizes)), (operation, algo, n, count)
            assert got.frames(64) == dry.frames(64) and got.messages == len(dry.sizes)


@pytest.mark.parametrize("operation,dtype,op", [("allreduce", "float64", "maxloc"), ("reduce", "int8", "minloc"),
                                                ("reduce_scatter", "int16", "max"), ("alltoall", "float64", "sum"),
                                                ("allgather", "int8", "sum"), ("bcast", "float64", "sum")])
async def test_default_choices_and_wire_types_as_the_dry_run(operation, dtype, op):
    """No algorithm named: the default by size (as ``Comm`` chooses), over sizes either side of the
    thresholds; paired operators send (value, rank) pairs."""
    for n in (3, 8, 16):
        for count in (1, 100, 2048, 30_000):
            if operation == "reduce_scatter":
                count = count // n * n or n
            dry = await count_messages(operation, n, count, dtype, op)
            got = counted_messages(operation, n, count, dtype, op)
            assert (got.algo, got.sizes) == (dry.algo, dict(Counter(dry.sizes))), (operation, n, count)


async def test_counts_past_the_dry_runs_budget_are_exact():
    """Where the dry run stops counting (a lower bound), the closed form counts every message."""
    stopped = await count_messages("alltoall", 256, 16, budget=1000)
    got = counted_messages("alltoall", 256, 16)
    assert not stopped.complete and got.complete and got.messages == 256 * 255 > len(stopped.sizes)


async def test_emu_runs_estimate_uses_no_dry_run_for_the_emulators_algorithms(monkeypatch):
    import emu.nodes.collectives.dryrun as dryrun
    from emu.front.estimate import estimate
    from emu.topologies import build

    async def refused(*a, **kw):
        raise AssertionError("the dry run ran")

    monkeypatch.setattr(dryrun, "count_messages", refused)
    topo = build("fattree:k=4,n=3")
    extra = {"algo": "recursive_doubling", "size": "64KiB"}
    e = await estimate("allreduce", topo, extra)
    # 64 ranks x 6 exchanges of 64 KiB, each cut into frames of the hosts' MTU
    mtu = topo.hosts[0].spec.mtu_bytes
    assert len(topo.hosts) == 64
    assert (e.frames, e.at_least) == (64 * 6 * -(-65536 // mtu), False) and "384 messages" in e.how
