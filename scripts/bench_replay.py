"""Replay speed and memory of ``emu replay``: operations per wall second, in memory (--direct) and on
UDP sockets, and the process's peak memory.

The workload: ``rounds`` rounds in which every rank computes 1 us, sends ``size`` bytes to rank r + 1
and receives from rank r - 1 (3 operations per rank a round; every receive posted at the start, or
with --chain once the round's send completed), written as a GOAL schedule or as a
Chakra trace (one .et file per rank; ``--allreduce K``: an allreduce of K bytes every round too),
on a star of ``ranks`` hosts (or --topo). ``--read whole`` reads the GOAL schedule whole before the
run (as ``--model loggp`` does); ``stream`` (the default) is what ``emu replay`` does: a rank block
at a time checked, then each rank reading its own block as the run consumes it. Run one
configuration per process: the peak memory is the process's (and its children's, with
--processes).

    python scripts/bench_replay.py --ranks 64 --rounds 50 [--sockets] [--format chakra] [--read whole]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

from emu.config import RunConfig
from emu.topologies.registry import build


def write_ring(path: str, ranks: int, rounds: int, size: int, chain: bool = False) -> None:
    with open(path, "w") as f:
        f.write(f"num_ranks {ranks}\n")
        for r in range(ranks):
            f.write(f"rank {r} {{\n")
            for k in range(rounds):
                f.write(f"c{k}: calc 1000\ns{k}: send {size}b to {(r + 1) % ranks} tag {k}\n"
                        f"r{k}: recv {size}b from {(r - 1) % ranks} tag {k}\ns{k} requires c{k}\n")
                if chain:
                    f.write(f"r{k} requires s{k}\n")
                if k:
                    f.write(f"c{k} requires r{k - 1}\n")
            f.write("}\n")


def write_ring_chakra(prefix: str, ranks: int, rounds: int, size: int, allreduce: int = 0, chain: bool = False) -> None:
    """The same ring as Chakra nodes (each round's receive waits for nothing, as in the GOAL one)."""
    from emu.nodes.workload.chakra_write import coll, comp, metadata_bytes, node_bytes, recv, send

    per = 4 if allreduce else 3
    for r in range(ranks):
        with open(f"{prefix}.{r}.et", "wb") as f:
            f.write(metadata_bytes())
            for k in range(rounds):
                b = per * k
                f.write(node_bytes(comp(b, 1, deps=[b - per + 2] if k else [])))
                f.write(node_bytes(send(b + 1, (r + 1) % ranks, size, k, [b])))
                f.write(node_bytes(recv(b + 2, (r - 1) % ranks, size, k, [b + 1] if chain else ())))
                if allreduce:
                    f.write(node_bytes(coll(b + 3, "allreduce", allreduce, deps=[b + 2])))


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--topo", help="default: star:n=RANKS")
    ap.add_argument("--sockets", action="store_true", help="frames over UDP sockets (default: in memory)")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--format", choices=["goal", "chakra"], default="goal")
    ap.add_argument("--read", choices=["stream", "whole"], default="stream", help="GOAL: streamed or read whole first")
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--allreduce", type=int, default=0, metavar="BYTES", help="chakra: an allreduce every round")
    ap.add_argument("--chain", action="store_true", help="each round's receive posted once its send completed "
                                                       "(default: every receive posted at the start)")
    ap.add_argument("--path", action="store_true", help="keep what the critical path needs (emu replay's default)")
    a = ap.parse_args()
    spec = a.topo or f"star:n={a.ranks}"
    topo = build(spec)
    hosts = topo.host_names()[:a.ranks]
    run = RunConfig(direct=not a.sockets, processes=a.processes)
    import emu.front.replay_chakra  # noqa: F401 -- (imported before the clocks start)
    import emu.front.replay_goal  # noqa: F401
    import emu.front.replay_stream  # noqa: F401
    import emu.nodes.workload.chakra_replay  # noqa: F401
    import emu.nodes.workload.goal_stream  # noqa: F401
    from emu.nodes.workload import chakra_et_pb2  # noqa: F401

    base = peak_mb()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        if a.format == "chakra":
            from emu.front.replay_chakra import Trace, run_trace

            write_ring_chakra(os.path.join(tmp, "ring"), a.ranks, a.rounds, a.size, a.allreduce, a.chain)
            mb = sum(os.path.getsize(os.path.join(tmp, p)) for p in os.listdir(tmp)) / 1e6
            t_write = time.perf_counter() - t0
            t0 = time.perf_counter()
            s = Trace(tmp, None, a.window)
            t_read = time.perf_counter() - t0
            t0 = time.perf_counter()
            res, m, _ = run_trace(topo, s, hosts, run, keep=a.path)
        else:
            from emu.front.replay_goal import read_goal, run_schedule
            from emu.front.replay_stream import run_streamed, scan_goal

            path = os.path.join(tmp, "ring.goal")
            write_ring(path, a.ranks, a.rounds, a.size, a.chain)
            mb = os.path.getsize(path) / 1e6
            t_write = time.perf_counter() - t0
            t0 = time.perf_counter()
            s = read_goal(path)[0] if a.read == "whole" else scan_goal(path)
            t_read = time.perf_counter() - t0
            t0 = time.perf_counter()
            if a.read == "whole":
                res, m = run_schedule(topo, s, hosts, run)
            else:
                res, m = run_streamed(topo, s, hosts, run, window=a.window, keep=a.path)
        wall = time.perf_counter() - t0
    delays = sum(r.get("window_delays", 0) for r in res)
    print(f"{a.format} ({a.read if a.format == 'goal' else 'stream'}, window {a.window}): {s.ops:,} operations "
          f"({a.ranks} ranks x {a.rounds} rounds, {mb:.1f} MB written in {t_write:.1f} s) checked in {t_read:.2f} s "
          f"({s.ops / t_read:,.0f} ops/s); replayed on {spec} {'sockets' if a.sockets else 'in memory'}, "
          f"{a.processes} process(es) in {wall:.2f} s wall: {s.ops / wall:,.0f} ops/s, {m.frames:,} frames; "
          f"virtual completion {max(r['end_ns'] for r in res):,} ns; window delays {delays}; "
          f"peak memory {peak_mb():,.0f} MB ({base:,.0f} MB before)")


if __name__ == "__main__":
    main()
