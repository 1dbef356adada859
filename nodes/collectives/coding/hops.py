"""The hop count of a scheme as it is asked for (``count``); the counting rules, the closed forms and
the counter itself are in ``counter``."""

from __future__ import annotations

from .counter import Count, all_to_all_closed, count, line_pairs, tree_all_to_all_closed

__all__ = ["Count", "all_to_all_closed", "count", "line_pairs", "tree_all_to_all_closed"]
