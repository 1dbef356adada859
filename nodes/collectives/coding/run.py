"""Spec 02's broadcasts as collectives: ``comm.mcast_all(x, algo=...)`` with the coded schemes and
the coordinate-aware tree, run by the NICs (``emu.nodes.nic.coding``) on a mesh or torus. Their
entries in the algorithm tables are ``emu.nodes.collectives.coded_algos``' (which import this module
when one first runs)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from emu.config import ConfigError

from .indirect import default_shape, line
from .layout import BASELINES
from .plan import Scheme, plan


def _grid(comm):
    """The plans' grid: the mesh or torus, or on an indirect network the hosts' rank line
    (``indirect``: groups of consecutive ranks, the XOR at a host)."""
    if list(comm.members) != list(comm.host.hosts):
        raise ConfigError("coded broadcast runs over every node of the network in rank order (h0, h1, ...): use the "
                          "world communicator")
    grid = getattr(comm.host, "grid", None)
    return grid if grid is not None else line(len(comm.host.hosts))


def on_grid(comm) -> bool:
    """The communicator is the whole of a mesh or torus, in rank order (where the NICs run the plans)."""
    return getattr(comm.host, "grid", None) is not None and list(comm.members) == list(comm.host.hosts)


async def broadcast(comm, x: np.ndarray, scheme: Scheme) -> np.ndarray:
    """Every source's ``x`` to every node by ``scheme``; returns the sources' arrays in source order
    (every rank passes an ``x`` of the same size; a non-source's is not sent). The NIC's per-step
    figures are left in ``comm.nc_stats`` (with the scheme as run: ``timing.figures`` reads them)."""
    grid = _grid(comm)
    if getattr(comm.host, "grid", None) is None and scheme.algo not in BASELINES and scheme.shape is None:
        scheme = replace(scheme, shape=default_shape(grid.size))  # the rank line: groups of about sqrt(N)
    p = plan(grid, scheme)
    flat = np.ascontiguousarray(x).ravel()
    out, stats = await comm.host.nc_run(p, flat.tobytes())
    comm.nc_stats = dict(stats, scheme=p.scheme, bytes=flat.nbytes)
    sc = p.scheme
    shape = f", groups {'x'.join(map(str, sc.shape))}" if sc.shape else ""
    if getattr(comm.host, "grid", None) is None:  # an indirect network: the rank line
        shape += " of consecutive ranks, XOR at host INs"
    if sc.algo == "tree":
        comm.last_algo = "tree(coordinate-aware, NICs)"
    elif sc.algo == "all_at_once":
        comm.last_algo = "all_at_once(NICs)"
    else:
        comm.last_algo = ("" if scheme.algo == sc.algo else f"{scheme.algo} = ") + f"{sc.algo}({sc.mcast}{shape})"
    return np.stack([np.frombuffer(out[s], flat.dtype) for s in p.sources])


def scheme_of(comm, algo: str, sources: tuple[int, ...] | None = None) -> Scheme:
    """The scheme ``comm.mcast_all(algo=...)`` (``comm.mcast``: from ``sources``, the root) runs: the
    algorithm's name, with the communicator's ``nc_shape``, ``nc_mcast``, ``nc_inner`` if set."""
    coded = algo not in ("tree", "all_at_once")
    return Scheme(algo, getattr(comm, "nc_shape", None) if coded else None, getattr(comm, "nc_mcast", "tree"),
                  sources, getattr(comm, "nc_inner", None) if coded else None)
