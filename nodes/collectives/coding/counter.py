"""The analytic hop counter of spec 02: aggregate hops of every scheme, per step, from closed forms
and per-dimension sums -- not from the plan's unicast lists, which the emulation counts from frames.

Counting (the same everywhere in spec 02's reports):

* a *hop* is a router-to-router link crossed under dimension-order routing; a unicast from node a to
  node b costs ``distance(a, b)`` hops; the host links at either end are not hops (link crossings
  measured from frames are hops + 2 per unicast, and reports say which they print);
* every unicast counts, also those of an IN to the nodes of its own group and of tree relays; the
  IN's own packets count like any node's (it is a member of its group in step B);
* a *reception* is a unicast's arrival; every node must receive the N - 1 packet-sized unknowns, so a
  broadcast from S sources needs at least S (N - 1) receptions and S (N - 1) hops (the floor); a
  message-combining message of m packets is one unicast (its packet-hops, m times its hops, are
  reported beside);
* step F's unicast from a source goes to the node at the same offset in each other group (with fewer
  sources than members, offset j takes source j mod |sources|).

Closed forms: one dimension of k nodes, the sum of hops over all ordered pairs is L1 = (k^3 - k) / 3
on a line, k * sum_x min(x, k - x) on a ring (k^3 / 4 for even k); all-to-all all-at-once on the
k-ary n-cube costs n k^(2(n-1)) L1; the coordinate-aware tree on a full line of k = 2^m nodes costs
(k/2) log2 k from any root, so an all-to-all costs N (k/2) log2 k (k^n - 1)/(k - 1). Boxes (groups,
the INs) are Cartesian products, so every pair sum splits into per-dimension sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from emu.topologies.grid import Grid, box_tree_hops

from .layout import BASELINES, Box, Step, box_centre, tiles


@dataclass
class Count:
    hops: dict[str, int] = field(default_factory=dict)
    """Per step name (base, B, D, E, F)."""
    unicasts: dict[str, int] = field(default_factory=dict)
    packet_hops: int = 0
    """Hops weighted by the packets a unicast carries (message combining: a message of m packets)."""

    @property
    def total(self) -> int:
        return sum(self.hops.values())

    @property
    def total_unicasts(self) -> int:
        return sum(self.unicasts.values())

    def add(self, step: int, hops: int, unicasts: int, packets: int = 1) -> None:
        name = Step.NAMES[step]
        self.hops[name] = self.hops.get(name, 0) + int(hops)
        self.unicasts[name] = self.unicasts.get(name, 0) + int(unicasts)
        self.packet_hops += int(hops) * packets


def line_pairs(grid: Grid) -> int:
    """L1: hops summed over all ordered pairs of one full dimension."""
    k = grid.k
    if grid.wrap:
        return k * sum(min(x, k - x) for x in range(k))
    return (k ** 3 - k) // 3


def all_to_all_closed(grid: Grid) -> int:
    """All-at-once all-to-all: n k^(2(n-1)) L1."""
    return grid.n * grid.k ** (2 * (grid.n - 1)) * line_pairs(grid)


def tree_all_to_all_closed(grid: Grid) -> int | None:
    """The coordinate-aware tree's all-to-all, when k is a power of 2 (None otherwise)."""
    k, n = grid.k, grid.n
    if k & (k - 1):
        return None
    return grid.size * (k // 2) * int(math.log2(k)) * (k ** n - 1) // (k - 1)


def _row(grid: Grid, c: int, ax) -> int:
    """Hops from coordinate c to every coordinate of ``ax`` (one dimension)."""
    return int(grid.d1_matrix([c], ax).sum())


def _size(axes) -> int:
    return int(np.prod([len(a) for a in axes]))


def star(grid: Grid, root, axes) -> int:
    """All-at-once from ``root`` (coordinates) to every node of the box ``axes``."""
    total = _size(axes)
    return sum(_row(grid, root[d], ax) * (total // len(ax)) for d, ax in enumerate(axes))


def mcast_hops(grid: Grid, root, axes, how: str) -> int:
    """One multicast from ``root`` (coordinates) to every node of the box ``axes``, by ``how``."""
    return star(grid, root, axes) if how == "all_at_once" else box_tree_hops(grid, axes, tuple(root))


def count_settled(grid: Grid, algo: str, shape: tuple[int, ...] | None = None, mcast: str = "tree",
                  sources: tuple[int, ...] | None = None, inner: tuple[int, ...] | None = None,
                  in_at: str = "network") -> Count:
    """The hops of a scheme whose names are checked (``layout.check_names``) and whose group shape is
    settled (``layout.settle``; none for the baselines): ``hops.count`` and the planner come here.
    ``in_at``: where a group's IN sits -- ``network``, the node nearest the network's centre (the
    plans' placement, step A), or ``group``, the group's own middle node (the planner's what-if)."""
    c = Count()
    N = grid.size
    whole = tuple(tuple(range(grid.k)) for _ in range(grid.n))
    sources = sorted(sources) if sources is not None else None
    if algo in BASELINES:
        if sources is None and algo == "all_at_once":
            c.add(Step.BASE, all_to_all_closed(grid), N * (N - 1))
        elif sources is None and tree_all_to_all_closed(grid) is not None:
            c.add(Step.BASE, tree_all_to_all_closed(grid), N * (N - 1))
        else:
            srcs = sources if sources is not None else range(N)
            c.add(Step.BASE, sum(mcast_hops(grid, grid.coords(s), whole, algo) for s in srcs), len(srcs) * (N - 1))
        return c
    _coded(grid, _Coded(algo, mcast, inner, in_at), c, Box(whole), shape, sources, level=0)
    return c


@dataclass(frozen=True)
class _Coded:
    """What the recursion of a coded scheme reads of it."""

    algo: str
    mcast: str
    inner: tuple[int, ...] | None
    in_at: str = "network"


def _coded(grid: Grid, sc: _Coded, c: Count, box: Box, shape, sources, level: int) -> None:
    groups = tiles(box, shape)
    G, M = len(groups), _size(groups[0].axes)
    centre = box_centre(box, grid, level == 0)
    ins = [b.centre_node(grid, centre if sc.in_at == "network" else box_centre(b, grid, False)) for b in groups]
    in_axes = tuple(tuple(sorted({p[d] for p in ins})) for d in range(grid.n))
    if sources is None:
        srcs = None
        nsrc = [M] * G
    else:
        srcs = [[s for s in b.nodes(grid) if s in set(sources)] for b in groups]
        nsrc = [len(s) for s in srcs]
    # B
    for gi, b in enumerate(groups):
        if sc.algo == "nc_recursive" and level == 0:
            _coded(grid, sc, c, b, sc.inner, None if srcs is None else srcs[gi], level + 1)
        elif srcs is None:
            c.add(Step.B, _all_sources_mcast(grid, b.axes, sc.mcast), M * (M - 1))
        else:
            c.add(Step.B, sum(mcast_hops(grid, grid.coords(s), b.axes, sc.mcast) for s in srcs[gi]), nsrc[gi] * (M - 1))
    with_src = sum(1 for x in nsrc if x)
    if sc.algo == "combine":
        for gi, b in enumerate(groups):
            if nsrc[gi]:
                c.add(Step.D, mcast_hops(grid, ins[gi], in_axes, sc.mcast), G - 1, nsrc[gi])
        for gj, b in enumerate(groups):
            others = [nsrc[gi] for gi in range(G) if gi != gj and nsrc[gi]]
            one = mcast_hops(grid, ins[gj], b.axes, sc.mcast)
            c.add(Step.E, one * len(others), len(others) * (M - 1), 0)
            c.packet_hops += one * sum(others)
        return
    # F
    if srcs is None and level == 0 and box.axes == tuple(tuple(range(grid.k)) for _ in range(grid.n)):
        c.add(Step.F, _same_offset_closed(grid, shape), G * (grid.size - M))
    else:
        c.add(Step.F, _same_offset(grid, groups, srcs), with_src * (G * M - M))
    chains = [max(0, x - 1) for x in nsrc]
    if sc.algo == "nc_every":
        for gi, b in enumerate(groups):
            members = b.nodes(grid)
            for i in range(chains[gi]):
                enc = grid.coords(members[i])
                c.add(Step.D, star(grid, enc, box.axes) - star(grid, enc, b.axes), G * M - M)
        return
    for gi in range(G):
        if chains[gi]:
            c.add(Step.D, chains[gi] * mcast_hops(grid, ins[gi], in_axes, sc.mcast), chains[gi] * (G - 1))
    for gj, b in enumerate(groups):
        incoming = sum(chains) - chains[gj]
        if incoming:
            c.add(Step.E, incoming * mcast_hops(grid, ins[gj], b.axes, sc.mcast), incoming * (M - 1))


def _all_sources_mcast(grid: Grid, axes, how: str) -> int:
    """Every node of a box multicasts to the box: per-dimension pair sums (all-at-once), or the tree
    from each root."""
    if how == "all_at_once":
        total = _size(axes)
        return sum(int(grid.d1_matrix(ax, ax).sum()) * (total // len(ax)) ** 2 for ax in axes)
    pts = [()]
    for ax in axes:
        pts = [p + (x,) for x in ax for p in pts]
    return sum(box_tree_hops(grid, axes, p) for p in pts)


def _same_offset_closed(grid: Grid, shape) -> int:
    """Step F of the all-to-all: every node to the node at its offset in each other group. Over all
    (node, group) pairs, dimension d contributes, for each pair of group positions (q, q') and
    offset r, d1(q s + r, q' s + r) times the choices of the other dimensions (k G_e each); the
    node's own group adds 0."""
    total = 0
    G = [grid.k // s for s in shape]
    for d, s in enumerate(shape):
        q = np.arange(G[d])
        per = sum(int(grid.d1_matrix(q * s + r, q * s + r).sum()) for r in range(s))
        others = 1
        for e in range(grid.n):
            if e != d:
                others *= grid.k * G[e]
        total += per * others
    return total


def _same_offset(grid: Grid, groups, srcs) -> int:
    coords = np.array([[grid.coords(v) for v in b.nodes(grid)] for b in groups])  # (G, M, n)
    total = 0
    for gi, b in enumerate(groups):
        mine = b.nodes(grid) if srcs is None else srcs[gi]
        if not mine:
            continue
        src = np.array([grid.coords(mine[j % len(mine)]) for j in range(coords.shape[1])])  # (M, n)
        dd = np.abs(coords - src[None, :, :])
        if grid.wrap:
            dd = np.minimum(dd, grid.k - dd)
        total += int(dd.sum())  # the own group: d(src_j, member_j) -- not a unicast when equal ...
        own = np.abs(coords[gi] - src)
        if grid.wrap:
            own = np.minimum(own, grid.k - own)
        total -= int(own.sum())  # ... and not sent at all: F goes to other groups only
    return total
