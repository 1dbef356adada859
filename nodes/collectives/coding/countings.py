"""Why our hop count and the source's pick different group sizes: the planner's best group shape under
other ways of counting the same all-to-all broadcast (``emu plan nc`` prints it).

The source reports (its Fig. 6) that 32-node groups give the fewest total hops on the 16-ary 2-mesh;
our count (``counter``: every unicast of B, D, E and F, the IN nearest the network's centre, tree
multicasts) makes 16x4 groups the best. Each counting here changes one choice and keeps the rest:

* where the INs sit: the group's node nearest the network's centre (ours) or its own middle node;
* the multicast of B, D and E: the coordinate-aware tree (ours) or all-at-once (the source's
  "all-at-once coded", which most of its figures use);
* torus wrap-around links (the same grid as a torus);
* which unicasts count: step E (the IN passing the other groups' chain packets into its group) once
  per chain -- one message per other group, not one per encoded packet -- or not at all; step F not
  at all.

Every count is analytic (``counter.count_settled``, per step); a counting that changes what is
counted says whether its best total falls below the floor N(N-1) that any unicast broadcast needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from emu.topologies.grid import Grid

from .counter import count_settled

SOURCE_REPORT = {(16, 2, False): 32}
"""(k, n, wrap) -> the group size (nodes) the source reports as giving the fewest hops (its Fig. 6)."""


@dataclass(frozen=True)
class Counting:
    name: str
    mcast: str = "tree"
    in_at: str = "network"
    wrap: bool | None = None
    """None: the grid as given; True: the grid as a torus."""
    e: str = "packet"
    """Step E counted per encoded ``packet`` (ours), once per ``chain``, or ``none``."""
    f: bool = True


COUNTINGS = (
    Counting("ours: every unicast, INs nearest the network centre, tree multicasts"),
    Counting("INs at their group's own middle node", in_at="group"),
    Counting("on the torus (wrap-around links)", wrap=True),
    Counting("all-at-once multicasts in B, D, E (all-at-once coded)", mcast="all_at_once"),
    Counting("all-at-once coded, INs at their group's middle", mcast="all_at_once", in_at="group"),
    Counting("step E once per chain (one message per other group)", e="chain"),
    Counting("all-at-once coded, step E once per chain", mcast="all_at_once", e="chain"),
    Counting("step E not counted", e="none"),
    Counting("step F not counted", f=False),
)


def _total(c, counting: Counting, members: int) -> int:
    h = c.hops
    e = h.get("E", 0)
    e = e if counting.e == "packet" else e // max(1, members - 1) if counting.e == "chain" else 0
    return h.get("B", 0) + h.get("D", 0) + e + (h.get("F", 0) if counting.f else 0)


def best_by_counting(grid: Grid, shapes, counting: Counting) -> dict:
    """The least total hops over ``shapes`` under ``counting``: shape, members, total, the floor."""
    g = Grid(grid.k, grid.n, grid.wrap if counting.wrap is None else counting.wrap)
    best = None
    for sh in shapes:
        m = 1
        for s in sh:
            m *= s
        c = count_settled(g, "nc", tuple(sh), counting.mcast, None, None, counting.in_at)
        key = (_total(c, counting, m), m, tuple(sh))
        if best is None or key < best[0]:
            best = (key, c)
    (total, m, sh), c = best
    N = grid.size
    return {"counting": counting.name, "shape": "x".join(map(str, sh)), "members": m, "hops": total,
            "below_floor": total < N * (N - 1), "floor": N * (N - 1)}


def explain(grid: Grid, shapes) -> list[str]:
    """The lines ``emu plan nc`` prints: the best group shape under every counting, and what differs."""
    rows = [best_by_counting(grid, shapes, c) for c in COUNTINGS]
    w = max(len(r["counting"]) for r in rows)
    lines = ["why counts differ -- the least-hops group shape when one counting choice changes:",
             f"  {'counting':<{w}} {'shape':>6} {'M':>4} {'hops':>10}"]
    for r in rows:
        lines.append(f"  {r['counting']:<{w}} {r['shape']:>6} {r['members']:>4} {r['hops']:>10,}"
                     + ("  < floor N(N-1): not a count of unicasts" if r["below_floor"] else ""))
    reported = SOURCE_REPORT.get((grid.k, grid.n, grid.wrap))
    if reported is None:
        return lines
    ours = rows[0]
    match = [r for r in rows if r["members"] == reported]
    lines.append(f"the source reports {reported}-node groups as the fewest hops here; ours picks {ours['shape']} "
                 f"({ours['members']} nodes).")
    if match:
        lines.append("  only these countings pick " + f"{reported}-node groups: "
                     + "; ".join(f"{r['counting']} ({r['shape']}, {r['hops']:,} hops"
                                 + (", below the floor" if r["below_floor"] else "") + ")" for r in match) + ".")
        moved = {r["counting"] for r in match}
        kept = [r["counting"] for r in rows[1:] if r["counting"] not in moved]
        lines.append("  the others do not: " + "; ".join(kept) + ".")
        if any(c.e != "packet" for c in COUNTINGS if c.name in moved):
            lines.append("  the difference is in which unicasts are counted: ours counts every one of the (M-1) "
                         "chain packets each IN passes into its group from every other group (step E: each is a "
                         "packet every member must receive); counted once per chain, as one message, E no longer "
                         "grows with the group's chain and the totals fall below the N(N-1) floor -- as the "
                         "source's 32-ary figures do.")
    else:
        lines.append(f"  none of these countings picks {reported}-node groups.")
    return lines
