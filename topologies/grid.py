"""Geometry of direct networks (k-ary n-mesh and n-torus) for spec 02: coordinates, distances and the
coordinate-aware multicast tree. Pure data: no emulation here.

Node ``i`` of ``mesh:k=..,n=..`` has coordinates ``c_d = (i // k**d) % k`` (``emu.topologies.direct``).
A *hop* is a router-to-router link crossed under dimension-order routing: a unicast between nodes
``a`` and ``b`` costs ``distance(a, b)`` hops (Manhattan distance; on a torus each dimension the
shorter way round). The two host links of a unicast (host -> its router, router -> host) are not
hops here; link crossings counted from frames are hops + 2 per unicast.

The coordinate-aware tree (spec 02's tree-based baseline, "halve the distance per step along one
dimension, then the next") over a *box* -- a Cartesian product of per-dimension coordinate lists, as
the whole network, a group, or the intermediate nodes of all groups are -- works one dimension after
the other: along dimension 0 the root's line is covered by recursive halving (the holder of a segment
sends to the node at the same offset in the other half; with an odd size the upper half is the
smaller and the offset is clamped to it), then every node of that line does the same along dimension
1 within its line, and so on. On a full line of k = 2**m nodes this costs (k/2) log2 k hops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Grid:
    k: int
    n: int
    wrap: bool

    @property
    def size(self) -> int:
        return self.k ** self.n

    @property
    def family(self) -> str:
        return "torus" if self.wrap else "mesh"

    def coords(self, i: int) -> tuple[int, ...]:
        return tuple((i // self.k ** d) % self.k for d in range(self.n))

    def index(self, c) -> int:
        return sum(int(x) * self.k ** d for d, x in enumerate(c))

    def d1(self, a: int, b: int) -> int:
        """Hops between coordinates a and b of one dimension."""
        dd = abs(a - b)
        return min(dd, self.k - dd) if self.wrap else dd

    def distance(self, a: int, b: int) -> int:
        return sum(self.d1(x, y) for x, y in zip(self.coords(a), self.coords(b)))

    def all_coords(self) -> np.ndarray:
        i = np.arange(self.size)
        return np.stack([(i // self.k ** d) % self.k for d in range(self.n)], axis=1)

    def d1_matrix(self, xs, ys) -> np.ndarray:
        """Hops between every coordinate of ``xs`` and every one of ``ys`` (one dimension)."""
        dd = np.abs(np.asarray(xs)[:, None] - np.asarray(ys)[None, :])
        return np.minimum(dd, self.k - dd) if self.wrap else dd


def grid_of(topology) -> Grid | None:
    """The grid of a mesh or torus topology (None for other families)."""
    g = getattr(topology, "grid", None)
    return Grid(*g) if g is not None else None


# -- the coordinate-aware tree ------------------------------------------------------------------
def line_halving(m: int, root: int) -> list[tuple[int, int, int]]:
    """Edges (round, sender, receiver) of recursive halving over positions 0..m-1 from ``root``,
    in rounds (a sender's edges are in the order it sends them)."""
    out: list[tuple[int, int, int]] = []

    def split(lo: int, hi: int, holder: int, rnd: int) -> None:
        if hi - lo <= 1:
            return
        mid = lo + (hi - lo + 1) // 2
        if holder < mid:
            other = min(holder + (mid - lo), hi - 1)
            out.append((rnd, holder, other))
            split(lo, mid, holder, rnd + 1)
            split(mid, hi, other, rnd + 1)
        else:
            other = holder - (mid - lo)
            out.append((rnd, holder, other))
            split(lo, mid, other, rnd + 1)
            split(mid, hi, holder, rnd + 1)

    split(0, m, root, 0)
    return out


@lru_cache(maxsize=4096)
def _line(m: int, root: int) -> tuple[tuple[int, int, int], ...]:
    return tuple(line_halving(m, root))


def box_tree(axes: tuple[tuple[int, ...], ...], root: tuple[int, ...]) -> dict[tuple, list[tuple]]:
    """The coordinate-aware tree over the box ``axes`` (per dimension, its coordinates in order)
    from ``root`` (a point of the box, as coordinates): node -> its children, in sending order
    (its dimension-0 children by round, then dimension 1, ...)."""
    children: dict[tuple, list[tuple]] = {}
    for _rnd, a, b in box_tree_edges(axes, root):
        children.setdefault(a, []).append(b)
    return children


def box_tree_edges(axes: tuple[tuple[int, ...], ...], root: tuple[int, ...]) -> list[tuple[int, tuple, tuple]]:
    """The tree's edges (round, parent, child) in sending order. Rounds are recursive doubling's: along
    dimension d a line of m nodes takes ceil(log2 m) rounds, which start when the earlier dimensions'
    rounds are over; a box of N = 2**r nodes takes r rounds (spec 02: log2(d + 1) for d destinations)."""
    pos = [{x: i for i, x in enumerate(ax)} for ax in axes]
    out: list[tuple[int, tuple, tuple]] = []
    holders = [tuple(root)]
    offset = 0
    for d, ax in enumerate(axes):
        if len(ax) <= 1:
            continue
        new = []
        for h in holders:
            edges = _line(len(ax), pos[d][h[d]])
            for rnd, s, r in sorted(edges):
                a = h[:d] + (ax[s],) + h[d + 1:]
                b = h[:d] + (ax[r],) + h[d + 1:]
                out.append((offset + rnd, a, b))
                new.append(b)
        holders += new
        offset += (len(ax) - 1).bit_length()
    return out


def line_tree_hops(grid: Grid, ax: tuple[int, ...], root_pos: int) -> int:
    """Hops of recursive halving along one dimension over coordinates ``ax`` from position ``root_pos``."""
    return sum(grid.d1(ax[s], ax[r]) for _rnd, s, r in _line(len(ax), root_pos))


def box_tree_hops(grid: Grid, axes: tuple[tuple[int, ...], ...], root: tuple[int, ...]) -> int:
    """Hops of the coordinate-aware tree over ``axes`` from ``root``: dimension d's line is walked
    from every node already reached (the product of the earlier dimensions' sizes), each line's cost
    depending only on the root's position along d."""
    total, lines = 0, 1
    for d, ax in enumerate(axes):
        total += lines * line_tree_hops(grid, ax, ax.index(root[d]))
        lines *= len(ax)
    return total
