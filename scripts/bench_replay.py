"""Replay speed of ``emu replay``: operations per wall second, in memory (--direct) and on UDP sockets.

The schedule: ``rounds`` rounds in which every rank computes, sends ``size`` bytes to rank r + 1 and
receives from rank r - 1 (3 operations per rank a round), on a star of ``ranks`` hosts (a fat tree
with --topo). Prints the time to read the schedule, the replay's wall time and ops/s, and the
virtual completion.

    python scripts/bench_replay.py --ranks 64 --rounds 50 [--sockets] [--topo fattree:k=8,n=2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from emu.config import RunConfig
from emu.front.replay_goal import read_goal, run_schedule
from emu.topologies.registry import build


def write_ring(path: str, ranks: int, rounds: int, size: int) -> None:
    with open(path, "w") as f:
        f.write(f"num_ranks {ranks}\n")
        for r in range(ranks):
            f.write(f"rank {r} {{\n")
            for k in range(rounds):
                f.write(f"c{k}: calc 1000\ns{k}: send {size}b to {(r + 1) % ranks} tag {k}\n"
                        f"r{k}: recv {size}b from {(r - 1) % ranks} tag {k}\ns{k} requires c{k}\n")
                if k:
                    f.write(f"c{k} requires r{k - 1}\n")
            f.write("}\n")


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--topo", help="default: star:n=RANKS")
    ap.add_argument("--sockets", action="store_true", help="frames over UDP sockets (default: in memory)")
    ap.add_argument("--processes", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ring.goal")
        write_ring(path, a.ranks, a.rounds, a.size)
        mb = os.path.getsize(path) / 1e6
        t0 = time.perf_counter()
        s, _ = read_goal(path)
        t_read = time.perf_counter() - t0
    spec = a.topo or f"star:n={a.ranks}"
    topo = build(spec)
    t0 = time.perf_counter()
    res, m = run_schedule(topo, s, topo.host_names()[:a.ranks], RunConfig(direct=not a.sockets, processes=a.processes))
    wall = time.perf_counter() - t0
    print(f"{s.ops:,} operations ({a.ranks} ranks x {a.rounds} rounds, {mb:.1f} MB) read in {t_read:.2f} s "
          f"({s.ops / t_read:,.0f} ops/s); replayed on {spec} {'sockets' if a.sockets else 'in memory'}, "
          f"{a.processes} process(es) in {wall:.2f} s wall: {s.ops / wall:,.0f} ops/s, {m.frames:,} frames; "
          f"virtual completion {max(r['end_ns'] for r in res):,} ns")


if __name__ == "__main__":
    main()
