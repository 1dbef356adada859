"""Spec 02's planner: the group shape and IN coordinates for a k-ary n-mesh or torus, chosen by a rule
(``RULES``: the least aggregate hop count (``counter``), or the source's balance of the longest paths
inside a group and between INs), with the reasons printed: the longest-path table (per
group shape, the longest path inside a group and between INs, per dimension and in total) and the
per-step hop counts beside the floor N (N - 1).
"""

from __future__ import annotations

import itertools

from emu.config import ConfigError
from emu.topologies.grid import Grid

from .counter import Count, count_settled
from .layout import BASELINES, NAMED, Box, box_centre, check_names, settle, tiles


def shapes(grid: Grid) -> list[tuple[int, ...]]:
    """Every group shape that tiles the grid with at least 2 nodes per group and 2 groups."""
    divs = [d for d in range(1, grid.k + 1) if grid.k % d == 0]
    out = []
    for sh in itertools.product(divs, repeat=grid.n):
        m = 1
        for s in sh:
            m *= s
        if m >= 2 and m < grid.size:
            out.append(tuple(sh))
    return out


def longest_paths(grid: Grid, shape) -> dict:
    """Longest path inside a group and between INs, per dimension and in total (hops)."""
    whole = Box(tuple(tuple(range(grid.k)) for _ in range(grid.n)))
    groups = tiles(whole, tuple(shape))
    ins = [b.centre_node(grid, box_centre(whole, grid, True)) for b in groups]
    inner = [min(s - 1, grid.k // 2) if grid.wrap else s - 1 for s in shape]
    between = []
    for d in range(grid.n):
        xs = sorted({p[d] for p in ins})
        between.append(int(grid.d1_matrix(xs, xs).max()))
    return {"inner": inner, "inner_total": sum(inner), "between": between, "between_total": sum(between),
            "ins": ins}


def table(grid: Grid, mcast: str = "tree", algo: str = "nc", sources: tuple[int, ...] | None = None) -> list[dict]:
    rows = []
    for sh in shapes(grid):
        c = _count(grid, algo, sh, mcast, sources)
        lp = longest_paths(grid, sh)
        rows.append(dict(shape="x".join(map(str, sh)), groups=grid.size // _prod(sh), members=_prod(sh),
                         inner=lp["inner"], inner_total=lp["inner_total"], between=lp["between"],
                         between_total=lp["between_total"], **{f"hops_{k}": v for k, v in sorted(c.hops.items())},
                         hops=c.total, unicasts=c.total_unicasts, _shape=sh))
    return rows


def _count(grid: Grid, algo: str, shape: tuple[int, ...], mcast: str, sources: tuple[int, ...] | None) -> Count:
    """The hops of the scheme with this group shape (checked as ``Scheme.check`` checks a given one)."""
    check_names(grid, algo, mcast, sources)
    inner = None
    if algo not in BASELINES:
        shape, inner = settle(grid, algo, shape)
    return count_settled(grid, algo, shape, mcast, sources, inner)


def _prod(sh) -> int:
    m = 1
    for s in sh:
        m *= s
    return m


RULES = {
    "hops": "least total hops (ties: the closer longest paths inside a group and between INs, then the smaller group)",
    "longest-path": "the source's rule: the longest path inside a group and the longest path between INs closest "
                    "to equal (ties: least total hops, then the smaller group)",
}
"""The planner's rules for the group shape (``emu plan nc --by``)."""


def _key(by: str):
    if by not in RULES:
        raise ConfigError(f"planner rule {by!r} is not one of {', '.join(RULES)}")
    bal = lambda r: abs(r["inner_total"] - r["between_total"])  # noqa: E731
    if by == "hops":
        return lambda r: (r["hops"], bal(r), r["members"], r["_shape"])
    return lambda r: (bal(r), r["hops"], r["members"], r["_shape"])


def best_shape(grid: Grid, mcast: str = "tree", algo: str = "nc", sources: tuple[int, ...] | None = None,
               by: str = "hops") -> tuple[int, ...]:
    """The group shape for these sources (None: all) by rule ``by`` (``RULES``)."""
    return _best(table(grid, mcast, _outer(algo), sources), grid, by)["_shape"]


def _outer(algo: str) -> str:
    return "nc" if algo == "nc_recursive" else algo  # the outer shape of the plain scheme, halved inside


def _best(rows: list[dict], grid: Grid, by: str) -> dict:
    key = _key(by)
    if not rows:
        raise ConfigError(f"{grid.family}:k={grid.k},n={grid.n} cannot be cut into groups: hierarchical coding "
                          "needs at least 2 groups of at least 2 nodes (a k with a divisor between 2 and k-1, "
                          "or n >= 2), e.g. mesh:k=4,n=2")
    return min(rows, key=key)


def report(grid: Grid, mcast: str = "tree", algo: str = "nc", by: str = "hops") -> str:
    """The planner's choice by rule ``by`` and why, as text; the other rule's choice beside it."""
    algo, mcast = NAMED.get(algo, (algo, mcast))  # all_at_once_coded: nc with all-at-once multicasts
    rows = table(grid, mcast, _outer(algo))
    b = _best(rows, grid, by)
    best = b["_shape"]
    N = grid.size
    steps = sorted({k for r in rows for k in r if k.startswith("hops_")})
    head = (f"{'shape':>9} {'groups':>6} {'M':>5} {'inner/dim':>12} {'inner':>5} {'INs/dim':>12} {'INs':>4} "
            + " ".join(f"{s[5:]:>9}" for s in steps) + f" {'hops':>10} {'unicasts':>9}")
    lines = [f"planner: hierarchical coding ({algo}, {mcast} multicast) on {grid.family}:k={grid.k},n={grid.n}, "
             f"N = {N}; a hop is a router-to-router link (host links not counted)",
             f"floor: any unicast all-to-all broadcast needs N(N-1) = {N * (N - 1):,} receptions and as many hops",
             "longest paths in hops: inside a group (per dimension, total) and between INs (per dimension, total)",
             head]
    others = {r: _best(rows, grid, r) for r in RULES if r != by}
    for r in sorted(rows, key=lambda r: (r["members"], r["_shape"])):
        mark = " <- chosen" if r["_shape"] == best else ""
        mark += "".join(f" <- by {o}" for o, ob in others.items() if ob["_shape"] == r["_shape"] and not mark)
        lines.append(f"{r['shape']:>9} {r['groups']:>6} {r['members']:>5} {str(r['inner']):>12} {r['inner_total']:>5} "
                     f"{str(r['between']):>12} {r['between_total']:>4} "
                     + " ".join(f"{r.get(s, 0):>9,}" for s in steps) + f" {r['hops']:>10,} {r['unicasts']:>9,}{mark}")
    aao = count_settled(grid, "all_at_once")
    tree = count_settled(grid, "tree")
    lp = longest_paths(grid, best)
    lines.append(f"rule (--by {by}): {RULES[by]}")
    lines.append(f"chosen: groups of {b['shape']} ({b['groups']} groups of {b['members']}), INs at "
                 f"{', '.join(str(p) for p in lp['ins'][:8])}{' ...' if len(lp['ins']) > 8 else ''}: "
                 f"{b['hops']:,} hops against {tree.total:,} (tree) and {aao.total:,} (all-at-once), "
                 f"floor {N * (N - 1):,}; longest path inside a group {b['inner_total']}, between INs "
                 f"{b['between_total']} ({_balance(b)})")
    for o, ob in others.items():
        lines.append(f"by {o} instead: {ob['shape']} ({ob['groups']} groups of {ob['members']}), {ob['hops']:,} hops, "
                     f"longest paths {ob['inner_total']} inside and {ob['between_total']} between INs ({_balance(ob)})"
                     + (" -- the same shape" if ob["_shape"] == best else ""))
    if algo == "nc" and mcast == "tree":
        from .countings import explain

        lines += explain(grid, [r["_shape"] for r in rows])
    return "\n".join(lines)


def _balance(r: dict) -> str:
    d = r["inner_total"] - r["between_total"]
    return "balanced" if d == 0 else f"{abs(d)} apart"
