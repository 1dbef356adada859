"""``--job NAME:hosts=...,goal=FILE``: a GOAL schedule (``emu replay``'s, LogGOPSim's text) as a job's
workload, rank r on the job's r-th host; its completion is its last rank's end from the job's start.
Registered as the test ``goal``, which only a job can name (it needs the schedule the job reads)."""

from __future__ import annotations

from typing import Any

from ..config import ConfigError
from .check_registry import Options, register


@register("goal")
async def goal(net, options: Options) -> dict[str, Any]:
    """A GOAL schedule replayed on the job's hosts (a job's goal=FILE; alone: emu replay FILE)."""
    from emu.nodes.workload.goal_replay import goal_rank

    schedule = options.extra.get("goal_schedule")
    if schedule is None:
        raise ConfigError("the test goal replays a job's schedule: give --job NAME:hosts=...,goal=FILE (alone: emu replay FILE)")
    hosts = net.hosts[:schedule.num_ranks]
    t0 = net.now
    out = await net.run({h: (goal_rank, r, schedule.ranks[r], hosts, False) for r, h in enumerate(hosts)})
    return {"completion_ns": max(out[h]["end_ns"] for h in hosts) - t0, "ranks": schedule.num_ranks,
            "ops": schedule.ops, "schedule": options.extra.get("goal")}
