"""Spec 02: hierarchical XOR network coding for broadcast on meshes and tori -- the plans
(``plan``), the analytic hop counter (``hops``) and the planner (``planner``); the NIC runs the
plans on real frames (``emu.nodes.nic.coding``)."""

from .hops import Count, count
from .plan import ALGOS, Plan, Scheme, Step, plan

__all__ = ["ALGOS", "Count", "Plan", "Scheme", "Step", "count", "plan"]
