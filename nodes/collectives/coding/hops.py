"""The hop count of a scheme as it is asked for: ``count(grid, Scheme("nc"))`` checks the scheme and
settles its group shape first (``Scheme.check``: the planner's choice where none is given), then
counts it (``counter``, where the counting rules, the closed forms and the counter itself are)."""

from __future__ import annotations

from emu.topologies.grid import Grid

from .counter import Count, all_to_all_closed, count_settled, line_pairs, tree_all_to_all_closed
from .plan import Scheme

__all__ = ["Count", "all_to_all_closed", "count", "line_pairs", "tree_all_to_all_closed"]


def count(grid: Grid, scheme: Scheme) -> Count:
    """Aggregate hops and unicasts of ``scheme`` on ``grid``, per step."""
    sc = scheme.check(grid)
    return count_settled(grid, sc.algo, sc.shape, sc.mcast, sc.sources, sc.inner)
