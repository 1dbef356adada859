"""Spec 02's broadcasts as entries of the algorithm tables (``select``): the coded schemes and the
NIC-run baselines by name, each an ``async def`` that imports their implementation
(``emu.nodes.collectives.coding.run``: the plans, the planner, the hop counter) when it first runs,
so that a command that runs none of them does not import them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

CODED_NAMES = ("nc", "nc_every", "nc_recursive", "combine", "all_at_once_coded")
"""The coded schemes (``mcast_all`` and ``mcast`` algorithms: on a mesh or torus, or an indirect
network's rank line)."""


def _algo(name: str):
    async def run(comm, x: np.ndarray) -> np.ndarray:
        from .coding.run import broadcast, scheme_of

        return await broadcast(comm, x, scheme_of(comm, name))
    run.__name__ = f"mcast_all_{name}"
    run.__doc__ = f"All-to-all broadcast by the {name} scheme (NIC-run plan on a mesh or torus)."
    return run


def _rooted(name: str):
    async def run(comm, x: np.ndarray, root: int) -> np.ndarray:
        from .coding.run import broadcast, scheme_of

        return (await broadcast(comm, x, scheme_of(comm, name, (root,))))[0]
    run.__name__ = f"mcast_{name}"
    run.__doc__ = f"One-to-all multicast from the root by the {name} scheme (NIC-run plan on a mesh or torus)."
    return run


def _baseline(name: str, software, rooted: bool):
    """A baseline (``tree``, ``all_at_once``) run by the NICs from the same plans as the coded schemes
    on the whole of a mesh or torus -- so that a comparison differs only in the scheme -- and by host
    software elsewhere (``comm.last_algo`` says which)."""
    nic = _rooted(name) if rooted else _algo(name)

    async def run(comm, x: np.ndarray, *root) -> np.ndarray:
        from .coding.run import on_grid

        if on_grid(comm):
            return await nic(comm, x, *root)
        out = await software(comm, x, *root)
        comm.last_algo = f"{name} (host software: not the whole of a mesh or torus)"
        return out
    run.__name__ = nic.__name__
    run.__doc__ = f"{name} on the NICs on a mesh or torus, in host software elsewhere."
    return run


def baselines() -> dict[tuple[str, str], object]:
    """(operation, name) -> the baseline as registered (``select``)."""
    from .rooted import mcast_all_all_at_once, mcast_all_at_once, mcast_all_tree, mcast_tree

    return {("mcast_all", "tree"): _baseline("tree", mcast_all_tree, False),
            ("mcast_all", "all_at_once"): _baseline("all_at_once", mcast_all_all_at_once, False),
            ("mcast", "tree"): _baseline("tree", mcast_tree, True),
            ("mcast", "all_at_once"): _baseline("all_at_once", mcast_all_at_once, True)}


CODED = {name: _algo(name) for name in CODED_NAMES}
CODED_ROOTED = {name: _rooted(name) for name in CODED_NAMES}
