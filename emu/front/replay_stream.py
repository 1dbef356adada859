"""``emu replay FILE.goal``, streamed: the schedule checked a block at a time, then each rank's block
read by its host as the run consumes it (``emu.nodes.workload.goal_stream``).

The check before the run is the whole-schedule reader's (grammar, cycles, receives no send can
match), holding one rank block at a time and, of the others, where each begins and the counts the
receive check needs. A schedule whose ``rank r {`` shares its line with anything else, and a run
with ``--model loggp`` (LogGOPSim's simulation takes the whole schedule), are read whole as before.
"""

from __future__ import annotations

import hashlib

from ..config import ConfigError


class GoalIndex:
    """A checked schedule's rank count, operations, and where each rank's block begins."""

    def __init__(self, path: str, num_ranks: int, ops: int, blocks: list[tuple[int, int]], sha256: str):
        self.path, self.num_ranks, self.ops, self.blocks, self.sha256 = path, num_ranks, ops, blocks, sha256
        self.ranks = None


def scan_goal(path: str) -> GoalIndex | None:
    """Check the schedule a block at a time; its index, or None when a block cannot be found by its
    line (the caller reads it whole)."""
    from emu.nodes.workload.goal import Matching, check_acyclic, iter_ranks, read_schedule

    h = hashlib.sha256()
    ends: dict[int, int] = {}
    clean: set[int] = set()
    pos = 0

    def lines(f):
        nonlocal pos
        for no, raw in enumerate(f, 1):
            h.update(raw)
            pos += len(raw)
            if b"rank" in raw:
                ends[no] = pos
                if b"/*" not in raw and b"*/" not in raw:
                    clean.add(no)
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ConfigError(f"{path}: not UTF-8 text; a GOAL schedule is text (a binary .bin of txt2bin is not "
                                  "read)") from None

    blocks: list[tuple[int, int] | None] = []
    ops, streamable, match = 0, True, None
    with open(path, "rb") as f:
        for item in iter_ranks(lines(f), path):
            if isinstance(item, int):
                blocks = [None] * item
                match = Matching(item, path)
                continue
            check_acyclic(item, path)
            match.add(item)
            ops += len(item)
            streamable &= item.alone and item.first_line in clean
            blocks[item.rank] = (ends.get(item.first_line, 0), item.first_line)
        for raw in f:
            h.update(raw)
    match.check(lambda r: _block(path, r, read_schedule))
    if not streamable:
        return None
    return GoalIndex(path, len(blocks), ops, blocks, h.hexdigest())


def _block(path: str, r: int, read_schedule):
    with open(path, encoding="utf-8") as f:
        return read_schedule(f, path).ranks[r]


async def _run(topo, index: GoalIndex, hosts, run, capture, window, keep):
    from emu.nodes.workload.goal_stream import goal_stream_rank

    from .cluster import Cluster

    async with Cluster(topo, capture=capture, run=run) as net:
        out = await net.run({h: (goal_stream_rank, r, index.path, index.blocks[r][0], index.blocks[r][1],
                                 index.num_ranks, hosts, bool(run.trace), window, keep) for r, h in enumerate(hosts)})
        return [out[h] for h in hosts], net.metrics


def run_streamed(topo, index: GoalIndex, hosts: list[str], run=None, capture: str | None = None, window: int = 1024,
                 keep: bool = True):
    """Replay the schedule of ``index`` (rank r on ``hosts[r]``), each rank reading its own block:
    each rank's figures and the run's metrics. A refusal only the run finds (a dependency line too
    far from its operations for the window) is raised as the one line it is."""
    import trio

    from ..config import RunConfig
    from ..errors import AppError

    try:
        return trio.run(_run, topo, index, hosts, run or RunConfig(), capture, window, keep)
    except AppError as e:
        for _host, _t, tb in e.failures:
            last = tb.strip().splitlines()[-1] if tb.strip() else ""
            if last.startswith(("GoalError: ", "emu.nodes.workload.goal.GoalError: ")):
                raise ConfigError(last.split(": ", 1)[1]) from None
        raise
