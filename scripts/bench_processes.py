#!/usr/bin/env python3
"""Does spreading a run over processes pay off, and where does each process spend its time?

The 256-host recursive-doubling allreduce of issue 27 (``fattree:k=4,n=4``, 64 KiB, ``emu run
--test allreduce --algo recursive_doubling``) with 1, 2, ... processes, in both transport modes
(every link a real UDP socket, emu's default, and ``--direct``). For each run: the wall time of the
run (the cluster's start-up excluded), the speed-up against one process in the same mode and per
core, and each process's CPU seconds during the run -- in windows, reading datagrams between them,
the rest (the synchroniser, the control connection) -- from ``Cluster.cpu_times``. The CPU figures
do not depend on what else the machine runs: "CPU split" is one process's CPU over the busiest
process's, the speed-up the spread allows where every process has a core of its own and nothing
waits; the wall speed-up is what this machine gave (its load average is printed beside it). Every
virtual-time figure must be the same in every run.

    python scripts/bench_processes.py [--processes 1,2] [--mode both|sockets|direct] [--repeat 1]
        [--topo SPEC] [--size 64KiB]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import emu  # noqa: E402
from emu.nodes.collectives.run import check_results, run_collective  # noqa: E402
from emu.topologies import build  # noqa: E402

TOPO = "fattree:k=4,n=4"
GOAL = 1.6


def parse_size(text: str) -> int:
    units = {"B": 1, "KIB": 1 << 10, "MIB": 1 << 20}
    t = text.strip().upper()
    for u in sorted(units, key=len, reverse=True):
        if t.endswith(u) and t[:-len(u)].isdigit():
            return int(t[:-len(u)]) * units[u]
    if t.isdigit():
        return int(t)
    raise SystemExit(f"--size {text}: give bytes, e.g. 64KiB")


async def once(spec: str, size: int, processes: int, direct: bool) -> dict:
    count = size // 4
    async with emu.Cluster(build(spec), processes=processes, direct=direct) as net:
        before = await net.cpu_times()
        w0 = net.windows
        t = time.perf_counter()
        res = await run_collective(net, "allreduce", count=count, algo="recursive_doubling")
        wall = time.perf_counter() - t
        after = await net.cpu_times()
        windows = net.windows - w0
    check_results(res, count, "float32", "sum", 0, 0)
    cpu = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    return {"wall": wall, "cpu": cpu, "windows": windows,
            "figures": (res.figures(), res.link_frames, res.link_bytes)}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="1,2", help="process counts, comma-separated (1 first: the base)")
    ap.add_argument("--mode", choices=["both", "sockets", "direct"], default="both")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (the fastest wall time counts)")
    ap.add_argument("--topo", default=TOPO)
    ap.add_argument("--size", default="64KiB")
    a = ap.parse_args(argv)
    counts = [int(x) for x in a.processes.split(",")]
    if counts[0] != 1:
        counts.insert(0, 1)
    size = parse_size(a.size)
    cores = os.cpu_count()
    print(f"{cores} cores; recursive-doubling allreduce of {size:,} B on {a.topo}; goal {GOAL}x with 2 processes",
          flush=True)
    rows = []
    for mode in (["sockets", "direct"] if a.mode == "both" else [a.mode]):
        base = None
        for p in counts:
            load = os.getloadavg()[0]
            runs = [trio.run(once, a.topo, size, p, mode == "direct") for _ in range(a.repeat)]
            r = min(runs, key=lambda x: x["wall"])
            if base is None:
                base = r
            elif r["figures"] != base["figures"]:
                raise SystemExit(f"{mode}, {p} processes: FIGURES DIFFER from one process's")
            cpu = [c["process_s"] for c in r["cpu"]]
            split = base["cpu"][0]["process_s"] / max(cpu)
            speed = base["wall"] / r["wall"]
            parts = ", ".join(f"{c['process_s']:.2f} (windows {c['window_s']:.2f}, datagrams {c['drain_s']:.2f})"
                              for c in r["cpu"])
            print(f"{mode:>7}, {p} process{'es' if p > 1 else ''}: wall {r['wall']:.2f} s, speed-up {speed:.2f}x "
                  f"({speed / min(p, cores):.2f} per core{'' if p <= cores else ', more processes than cores'}), "
                  f"load average {load:.1f}; {r['windows']:,} windows; CPU s per process: {parts}; CPU split "
                  f"{split:.2f}x{'' if p == 1 else (' (goal ' + str(GOAL) + 'x: ' + ('met' if split >= GOAL else 'not met') + ')')}"
                  f"; same figures", flush=True)
            rows.append({"mode": mode, "processes": p, **r, "speedup": speed, "cpu_split": split})
    return rows


if __name__ == "__main__":
    main()
