"""The algorithm tables and the default choice per operation and message size (as MPICH does).

``ALGORITHMS[operation][name]`` is the implementation; ``choose`` picks a default from the
message size in bytes and the number of ranks. Register more with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable

from .operations import OPERATIONS

ALGORITHMS: dict[str, dict[str, Callable]] = {k: {} for k in OPERATIONS}


POWER_OF_TWO_ONLY = {("allgather", "recursive_doubling"), ("reduce_scatter", "recursive_halving")}
"""Algorithms that need a power-of-two number of ranks."""


ALIASES: dict[tuple[str, str], str] = {}
"""(operation, another spelling) -> the algorithm's name."""


def canonical(operation: str, name: str) -> str:
    """An algorithm's name as registered (``all-at-once`` -> ``all_at_once``)."""
    return ALIASES.get((operation, name), name)


def register(operation: str, name: str, fn: Callable) -> None:
    ALGORITHMS[operation][name] = fn


GRID_ONLY: set[tuple[str, str]] = set()
"""(operation, algorithm) that run only over every node of the network in rank order (spec 02's coded
schemes: on a mesh or torus, or on an indirect network's rank line)."""


def check(operation: str, name: str, n: int) -> None:
    """Refuse an algorithm that does not exist or cannot run on ``n`` ranks, naming the choices."""
    from emu.config import ConfigError

    if operation not in ALGORITHMS:
        raise ConfigError(f"unknown collective {operation!r}; known: {', '.join(ALGORITHMS)}")
    name = canonical(operation, name)
    if name not in ALGORITHMS[operation]:
        raise ConfigError(f"unknown {operation} algorithm {name!r}; known: {', '.join(ALGORITHMS[operation])}")
    if (operation, name) in POWER_OF_TWO_ONLY and n & (n - 1):
        raise ConfigError(f"{operation} algorithm {name} needs a power-of-two number of ranks, not {n}; "
                          f"use {', '.join(a for a in ALGORITHMS[operation] if (operation, a) not in POWER_OF_TWO_ONLY)}")


def _pof2(n: int) -> bool:
    return n & (n - 1) == 0


def choose(operation: str, nbytes: int, n: int) -> str:
    """Default algorithm: latency-bound algorithms for small messages, bandwidth-bound for large."""
    if operation == "allreduce":
        return "recursive_doubling" if nbytes <= 2048 else "rabenseifner"
    if operation == "bcast":
        return "binomial" if nbytes < 12288 or n < 8 else "scatter_allgather"
    if operation == "reduce":
        return "binomial"
    if operation == "barrier":
        return "dissemination"
    if operation == "allgather":
        return "recursive_doubling" if _pof2(n) and nbytes < 80 * 1024 else "ring"
    if operation == "reduce_scatter":
        return "recursive_halving" if _pof2(n) and nbytes < 512 * 1024 else "ring"
    if operation == "alltoall":
        return "pairwise"
    if operation in ("mcast", "mcast_all"):
        return "tree"
    raise KeyError(operation)


def _register_builtin() -> None:
    from . import allreduce as ar
    from . import exchange as ex
    from . import rooted as ro

    for name, fn in (("ring", ar.ring), ("recursive_doubling", ar.recursive_doubling),
                     ("rabenseifner", ar.rabenseifner), ("binomial", ar.binomial)):
        register("allreduce", name, fn)
    register("reduce", "binomial", ro.reduce_binomial)
    register("reduce", "flat", ro.reduce_flat)
    register("bcast", "binomial", ro.bcast_binomial)
    register("bcast", "flat", ro.bcast_flat)
    register("bcast", "scatter_allgather", ro.bcast_scatter_allgather)
    register("barrier", "dissemination", ex.barrier_dissemination)
    register("barrier", "tree", ex.barrier_tree)
    register("allgather", "ring", ex.allgather_ring)
    register("allgather", "recursive_doubling", ex.allgather_recursive_doubling)
    register("reduce_scatter", "ring", ex.reduce_scatter_ring)
    register("reduce_scatter", "recursive_halving", ex.reduce_scatter_recursive_halving)
    register("alltoall", "pairwise", ex.alltoall_pairwise)
    register("alltoall", "flat", ex.alltoall_flat)
    register("mcast_all", "binomial", ro.mcast_all_tree)
    from .coded_algos import CODED, CODED_ROOTED, baselines  # (the plans themselves imported when one runs)

    # spec 02: on a mesh or torus every scheme runs on the NICs (the baselines in host software elsewhere)
    for (operation, name), fn in baselines().items():
        register(operation, name, fn)
    for operation, table in (("mcast_all", CODED), ("mcast", CODED_ROOTED)):
        for name, fn in table.items():
            register(operation, name, fn)
            GRID_ONLY.add((operation, name))
    for operation in ("mcast", "mcast_all"):  # spec 02's spelling
        ALIASES[(operation, "all-at-once")] = "all_at_once"
        ALIASES[(operation, "all-at-once-coded")] = "all_at_once_coded"


_register_builtin()
