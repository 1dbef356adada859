"""Spec 02's broadcasts as collectives: ``comm.mcast_all(x, algo=...)`` with the coded schemes and
the coordinate-aware tree, run by the NICs (``emu.nodes.nic.coding``) on a mesh or torus."""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError

from .plan import Scheme, plan


def _grid(comm):
    grid = getattr(comm.host, "grid", None)
    if grid is None:
        raise ConfigError("coded broadcast (spec 02) runs on a direct network: use --topo mesh:k=8,n=2 or torus:k=8,n=2")
    if list(comm.members) != list(comm.host.hosts):
        raise ConfigError("coded broadcast runs over every node of the grid in rank order (h0, h1, ...): use the "
                          "world communicator")
    return grid


async def broadcast(comm, x: np.ndarray, scheme: Scheme) -> np.ndarray:
    """Every source's ``x`` to every node by ``scheme``; returns the sources' arrays in source order
    (every rank passes an ``x`` of the same size; a non-source's is not sent). The NIC's per-step
    figures are left in ``comm.nc_stats``."""
    grid = _grid(comm)
    p = plan(grid, scheme)
    flat = np.ascontiguousarray(x).ravel()
    out, stats = await comm.host.nc_run(p, flat.tobytes())
    comm.nc_stats = stats
    sc = p.scheme
    shape = f", groups {'x'.join(map(str, sc.shape))}" if sc.shape else ""
    comm.last_algo = f"{sc.algo}({sc.mcast if sc.shape else 'unicasts'}{shape})" if sc.algo != "tree" \
        else "tree(coordinate-aware)"
    return np.stack([np.frombuffer(out[s], flat.dtype) for s in p.sources])


def scheme_of(comm, algo: str) -> Scheme:
    """The scheme ``comm.mcast_all(algo=...)`` runs: the algorithm's name, with the communicator's
    ``nc_shape``, ``nc_mcast``, ``nc_inner`` if set."""
    return Scheme(algo, getattr(comm, "nc_shape", None), getattr(comm, "nc_mcast", "tree"), None,
                  getattr(comm, "nc_inner", None))


def _algo(name: str):
    async def run(comm, x: np.ndarray) -> np.ndarray:
        return await broadcast(comm, x, scheme_of(comm, name))
    run.__name__ = f"mcast_all_{name}"
    run.__doc__ = f"All-to-all broadcast by spec 02's {name} scheme (NIC-run plan on a mesh or torus)."
    return run


async def mcast_all_tree(comm, x: np.ndarray) -> np.ndarray:
    """All-to-all broadcast along the coordinate-aware tree (halving per dimension) on a mesh or torus;
    elsewhere the rank-order binomial tree (``binomial``), and ``comm.last_algo`` says so."""
    if getattr(comm.host, "grid", None) is None or list(comm.members) != list(comm.host.hosts):
        from ..rooted import mcast_all_tree as binomial

        out = await binomial(comm, x)
        comm.last_algo = "tree (binomial over rank order: not the whole of a mesh or torus)"
        return out
    return await broadcast(comm, x, Scheme("tree"))


CODED = {name: _algo(name) for name in ("nc", "nc_every", "nc_recursive", "combine")}
