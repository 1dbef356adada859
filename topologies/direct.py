"""Direct networks: k-ary n-mesh and k-ary n-torus, a router per node with its host attached.

Node ``i`` has coordinates ``c_d = (i // k**d) % k``; host ``h{i}`` sits on port 0 of router
``s{i}`` (with ``ports=P``, also its ports 1..P-1 on the router's ports ``2n + 1 ..``: more injection
channels; the router sends to its host on port 0). Router port ``1 + 2d`` leads to the neighbour one step down in dimension ``d``, port
``2 + 2d`` one step up (on a mesh, border routers leave those ports unlinked; on a torus they wrap
around, and ``info["wrap_ports"]`` names them: the dateline VC policy switches VC there). Routing is dimension order: dimension 0 first, then 1, ...; on a torus each dimension goes
the shorter way round, the upward way when both are equally long.
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology
from .trees import _check_int


def coords(i: int, k: int, n: int) -> tuple[int, ...]:
    return tuple((i // k ** d) % k for d in range(n))


def mesh(k: int, n: int, ports: int = 1, *, link: LinkSpec | None = None, host: HostSpec | None = None,
         switch: SwitchSpec | None = None) -> Topology:
    """``mesh:k=8,n=2``: k**n routers in an n-dimensional grid of side k (``ports=P``: P links between
    each node and its router, so that a node injects P packets at once)."""
    _check_int("mesh", "k", k, 2, 256)
    _check_int("mesh", "n", n, 1, 4)
    _check_int("mesh", "ports", ports, 1, 8)
    return _direct("mesh", k, n, False, link, host, switch, ports)


def torus(k: int, n: int, ports: int = 1, *, link: LinkSpec | None = None, host: HostSpec | None = None,
          switch: SwitchSpec | None = None) -> Topology:
    """``torus:k=4,n=3``: a mesh with wrap-around links in every dimension (k >= 3)."""
    if isinstance(k, int) and k == 2:
        raise ConfigError("torus: k must be at least 3 (with k=2 the wrap-around link would double "
                          "the mesh link); use mesh:k=2")
    _check_int("torus", "k", k, 3, 256)
    _check_int("torus", "n", n, 1, 4)
    _check_int("torus", "ports", ports, 1, 8)
    return _direct("torus", k, n, True, link, host, switch, ports)


def _direct(family: str, k: int, n: int, wrap: bool, link, host, switch, ports: int = 1) -> Topology:
    size = k ** n
    if size > 65536:
        raise ConfigError(f"{family}: k**n = {size} nodes exceeds 65536; lower k or n")
    t = Topology(f"{family}:k={k},n={n}" + (f",ports={ports}" if ports > 1 else ""))
    for i in range(size):
        t.add_host(f"h{i}", host, coords=coords(i, k, n))
    for i in range(size):
        c = coords(i, k, n)
        # the ports whose links wrap around (the datelines of a torus's dimensions)
        wraps = tuple(sorted([2 + 2 * d for d in range(n) if wrap and c[d] == k - 1]
                             + [1 + 2 * d for d in range(n) if wrap and c[d] == 0]))
        if wrap:
            t.add_switch(f"s{i}", switch, coords=c, wrap_ports=wraps)
        else:
            t.add_switch(f"s{i}", switch, coords=c)
    for i in range(size):
        t.add_link(f"h{i}", f"s{i}", link, a_port=0, b_port=0)
        for q in range(1, ports):  # more links into the router (injection only: routers eject on port 0)
            t.add_link(f"h{i}", f"s{i}", link, a_port=q, b_port=2 * n + q)
    for i in range(size):
        c = coords(i, k, n)
        for d in range(n):
            if c[d] + 1 < k or (wrap and k > 2):
                j = i + (((c[d] + 1) % k) - c[d]) * k ** d
                t.add_link(f"s{i}", f"s{j}", link, a_port=2 + 2 * d, b_port=1 + 2 * d)
    all_coords = np.array([coords(i, k, n) for i in range(size)], dtype=np.int64).reshape(size, n)
    for i, table in enumerate(_dor_tables(all_coords, k, wrap)):
        t.routes[f"s{i}"] = table
    t.grid = (k, n, wrap)  # topologies.grid.Grid: spec 02's planner and coding plans read it
    t.diameter = (n * (k // 2) if wrap else n * (k - 1)) + 2
    t.bisection = (2 if wrap else 1) * k ** (n - 1) if k % 2 == 0 else None
    return t


DOR_CHUNK = 1 << 18
"""``_dor_tables``: (router, node) pairs computed at once, at most (a chunk of routers at a time)."""


def _dor_tables(c: np.ndarray, k: int, wrap: bool):
    """Dimension-order output port of every router toward every node, router by router (vectorised
    ``_dor``: a chunk of routers at once, ``DOR_CHUNK`` pairs, so memory stays bounded)."""
    size = len(c)
    step = max(1, DOR_CHUNK // max(1, size))
    for lo in range(0, size, step):
        diff = c[None, :, :] - c[lo:lo + step, None, :]      # (routers, nodes, n)
        nz = diff != 0
        first = np.where(nz.any(axis=2), nz.argmax(axis=2), -1)
        d = np.take_along_axis(diff, np.maximum(first, 0)[..., None], axis=2)[..., 0]
        if wrap:
            up = d % k
            plus = up <= k - up
        else:
            plus = d > 0
        port = np.where(plus, 2 + 2 * first, 1 + 2 * first)
        yield from np.where(first < 0, 0, port).tolist()


def _dor(here: tuple[int, ...], dst: tuple[int, ...], k: int, wrap: bool) -> int:
    for d, (a, b) in enumerate(zip(here, dst)):
        if a == b:
            continue
        if wrap:
            up = (b - a) % k
            return 2 + 2 * d if up <= k - up else 1 + 2 * d
        return 2 + 2 * d if b > a else 1 + 2 * d
    return 0


def distance(a: int, b: int, k: int, n: int, wrap: bool) -> int:
    """Router hops between nodes a and b (Manhattan, or torus distance)."""
    total = 0
    for x, y in zip(coords(a, k, n), coords(b, k, n)):
        dd = abs(x - y)
        total += min(dd, k - dd) if wrap else dd
    return total
