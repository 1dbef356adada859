"""Spec 02's broadcast schemes as plans: who sends which packet to whom in which step.

A plan is data every node of a run computes alike (it depends only on the grid and the scheme): for
each node, the packets it starts with, what it forwards when it has a packet (``rules``), and what it
makes once it has some packets (``makes``: encoding at an intermediate node). The NIC's executor
(``emu.nodes.nic.coding``) runs it on real frames; the analytic counter (``counter.py``) counts the same
schemes from closed forms and per-dimension sums, independently of these lists; the two must agree.

Packets (keys): ``("p", s)`` the plain data of source s; ``("x", level, a, b)`` the XOR of the data of
sources a and b (encoded at recursion ``level``); ``("c", level, g)`` group g's data concatenated
(message combining).

Schemes (``Scheme.algo``):

* ``all_at_once`` -- every source unicasts its packet to every other node;
* ``tree`` -- every source multicasts along the coordinate-aware tree (``emu.topologies.grid``);
* ``nc`` -- hierarchical coding, steps A-G: B every source multicasts within its group (``mcast``:
  tree or all_at_once); F every source sends its packet to one node of each other group (the node
  at the same offset; with fewer sources than members, the member at offset j gets it from the
  group's source j mod |sources|); C the group's intermediate node (IN) XORs the group's sources
  into a chain d1^d2, d2^d3, ...; D it multicasts each chain packet to the other INs; E each IN
  multicasts the chain packets it received to its group; G every node decodes (a node holds its
  group's packets from B, one plain packet of each other group from F and that group's chain);
* ``nc_every`` -- every node encodes: after B, the member at position i of the group makes chain
  packet i and unicasts it to every node of every other group (no D or E at the IN; the same
  packet count as ``nc``, as the source says, usually more hops);
* ``nc_recursive`` -- ``nc`` with step B replaced by ``nc`` inside each group (``inner`` shape);
* ``all_at_once_coded`` -- ``nc`` with all-at-once multicasts in B, D and E (the source's "all-at-once
  coded", which it sets against plain all-at-once); ``Scheme.check`` makes it ``nc``/``all_at_once``;
* ``combine`` -- message combining: the IN concatenates its group's packets into one message, which
  goes to the other INs (D) and into their groups (E); no F.

IN placement (step A): in each dimension the group's coordinate nearest the network's centre
((k - 1) // 2, the lower one on a tie); an inner group's IN likewise toward its enclosing group's
centre. Step VCs: B 0, F 1, D 2, E 3, baselines 0 (doubled, with a dateline bit, on tori).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from emu.topologies.grid import Grid, box_tree_edges

from .layout import ALGOS, BASELINES, NAMED, Box, Step, box_centre, check_names, settle, tiles
from .planner import best_shape

__all__ = ["ALGOS", "Plan", "Scheme", "Step", "plan"]


@dataclass(frozen=True)
class Scheme:
    algo: str = "nc"
    shape: tuple[int, ...] | None = None
    """Group side per dimension (``nc*``, ``combine``); None: the planner's choice."""
    mcast: str = "tree"
    """Multicast algorithm of steps B, D and E: tree or all_at_once."""
    sources: tuple[int, ...] | None = None
    """The nodes that broadcast (many-to-all, one-to-all); None: all (all-to-all)."""
    inner: tuple[int, ...] | None = None
    """``nc_recursive``: the shape of the groups inside a group; None: halve the longest side."""

    def check(self, grid: Grid) -> "Scheme":
        """The scheme checked against ``grid``, with its group shape settled: the one given, or the
        planner's choice (``planner.best_shape``); a named scheme (``layout.NAMED``) as what it is."""
        if self.algo in NAMED:
            algo, mcast = NAMED[self.algo]
            return Scheme(algo, self.shape, mcast, self.sources, self.inner).check(grid)
        check_names(grid, self.algo, self.mcast, self.sources)
        if self.algo in BASELINES:
            return self
        shape = self.shape
        if shape is None:
            shape = best_shape(grid, self.mcast, self.algo, self.sources)
        shape, inner = settle(grid, self.algo, shape, self.inner)
        return Scheme(self.algo, shape, self.mcast, self.sources, inner)


# -- plans -------------------------------------------------------------------------------------------
@dataclass(eq=False)
class Plan:
    grid: Grid
    scheme: Scheme
    sources: list[int]
    origin: dict[int, list] = field(default_factory=dict)
    """node -> the packets it starts with (its own data)."""
    rules: dict[int, dict] = field(default_factory=dict)
    """node -> key -> [(step, level, destination, multicast root)] sent when it first has the key."""
    makes: dict[int, list] = field(default_factory=dict)
    """node -> [(keys needed, key made)]: encoding (XOR chain or concatenation) at that node."""
    unicasts: int = 0
    groups: list[list[int]] = field(default_factory=list)
    ins: list[int] = field(default_factory=list)
    """Top-level groups (node lists, rank order) and their intermediate nodes."""
    rounds: dict = field(default_factory=dict)
    """(sender, receiver, key) -> (phase, round): the sequential step a unicast belongs to (``phase``)."""

    def send(self, node: int, key, step: int, level: int, dst: int, root: int, rnd: int = 0) -> None:
        if dst == node:
            return
        self.rules.setdefault(node, {}).setdefault(key, []).append((step, level, dst, root))
        self.rounds[(node, dst, key)] = (self.phase(step, level), rnd)
        self.unicasts += 1

    def phase(self, step: int, level: int) -> int:
        """The sequential phase of a step (spec 02: B with F, then C+D, then E; G after): 0 for B and F
        (and a baseline's one multicast), 1 for D, 2 for E; ``nc_recursive``'s inner level (1) runs
        its phases first, the outer D and E come after them (3 + 1, 3 + 2), the outer F with phase 0."""
        if step in (Step.BASE, Step.B, Step.F):
            return 0
        top = 1 if self.scheme.algo == "nc_recursive" else 0
        return 3 * (top - level) + (1 if step == Step.D else 2)

    def mcast(self, key, step: int, level: int, root: int, box: Box, how: str, skip=()) -> None:
        """``root`` sends ``key`` to every node of ``box`` (which holds the root)."""
        g = self.grid
        if how == "all_at_once":
            for v in box.nodes(g):
                if v not in skip:
                    self.send(root, key, step, level, v, root)
            return
        for rnd, parent, c in box_tree_edges(box.axes, g.coords(root)):
            self.send(g.index(parent), key, step, level, g.index(c), root, rnd)

    def make(self, node: int, needs, key) -> None:
        self.makes.setdefault(node, []).append((frozenset(needs), key))

    def expected(self, node: int) -> set:
        """(sender, key) pairs the plan sends to ``node``: what its NIC accepts."""
        exp = self.__dict__.get("_expected")
        if exp is None:
            exp = {}
            for src, rs in self.rules.items():
                for key, lst in rs.items():
                    for _step, _lvl, dst, _root in lst:
                        exp.setdefault(dst, set()).add((src, key))
            self._expected = exp
        return exp.get(node, set())

    def group_of(self, node: int) -> int:
        """The top-level group of ``node`` (0 for the baselines, which have none)."""
        g = self.__dict__.get("_group_of")
        if g is None:
            g = self._group_of = {v: gi for gi, m in enumerate(self.groups) for v in m}
        return g.get(node, 0)

    def group_sources(self, gi: int) -> list[int]:
        srcs = set(self.sources)
        return [v for v in self.groups[gi] if v in srcs]


@lru_cache(maxsize=16)
def plan(grid: Grid, scheme: Scheme) -> Plan:
    scheme = scheme.check(grid)
    sources = sorted(scheme.sources) if scheme.sources is not None else list(range(grid.size))
    p = Plan(grid, scheme, sources)
    for s in sources:
        p.origin.setdefault(s, []).append(("p", s))
    whole = Box(tuple(tuple(range(grid.k)) for _ in range(grid.n)))
    if scheme.algo in ("all_at_once", "tree"):
        for s in sources:
            p.mcast(("p", s), Step.BASE, 0, s, whole, scheme.algo)
        return p
    _coded(p, whole, scheme.shape, sources, level=0, top=True)
    return p


def _coded(p: Plan, box: Box, shape, sources: list[int], level: int, top: bool) -> None:
    g, sc = p.grid, p.scheme
    groups = tiles(box, shape)
    members = [b.nodes(g) for b in groups]
    centre = box_centre(box, g, top)
    ins = [g.index(b.centre_node(g, centre)) for b in groups]
    if top:
        p.groups, p.ins = members, ins
    srcs = [[s for s in m if s in set(sources)] for m in members]
    in_box = Box(tuple(tuple(sorted({g.coords(i)[d] for i in ins})) for d in range(g.n)))
    # B: the group's sources reach every member (recursively: coding inside the group)
    for gi, b in enumerate(groups):
        if sc.algo == "nc_recursive" and level == 0:
            _coded(p, b, sc.inner, srcs[gi], level + 1, top=False)
        else:
            for s in srcs[gi]:
                p.mcast(("p", s), Step.B, level, s, b, sc.mcast)
    if sc.algo == "combine":
        for gi, b in enumerate(groups):
            if not srcs[gi]:
                continue
            key = ("c", level, gi)
            p.make(ins[gi], [("p", s) for s in srcs[gi]], key)
            p.mcast(key, Step.D, level, ins[gi], in_box, sc.mcast)
            for gj, bj in enumerate(groups):  # E: each other IN takes it into its group
                if gj != gi:
                    p.mcast(key, Step.E, level, ins[gj], bj, sc.mcast)
        return
    # F: one plain packet of each other group to every node
    for gi in range(len(groups)):
        if not srcs[gi]:
            continue
        for gj, mj in enumerate(members):
            if gj != gi:
                for j, v in enumerate(mj):
                    s = srcs[gi][j % len(srcs[gi])]
                    p.send(s, ("p", s), Step.F, level, v, s)
    # C, D, E: the chains
    for gi, b in enumerate(groups):
        chain = [("x", level, a, c) for a, c in zip(srcs[gi], srcs[gi][1:])]
        for i, key in enumerate(chain):
            a, c = key[2], key[3]
            if sc.algo == "nc_every":  # the member at position i encodes and unicasts to all others
                enc = members[gi][i]
                p.make(enc, [("p", a), ("p", c)], key)
                for gj, mj in enumerate(members):
                    if gj != gi:
                        for v in mj:
                            p.send(enc, key, Step.D, level, v, enc)
                continue
            p.make(ins[gi], [("p", a), ("p", c)], key)
            p.mcast(key, Step.D, level, ins[gi], in_box, sc.mcast)
            for gj, bj in enumerate(groups):
                if gj != gi:
                    p.mcast(key, Step.E, level, ins[gj], bj, sc.mcast)
