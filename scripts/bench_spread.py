#!/usr/bin/env python3
"""Does spreading a run pay off, and how much memory does a large one take? (issue 14's targets)

Speed: the 256-host recursive-doubling 64 KiB allreduce (``fattree:k=4,n=4``, ``emu run``) and the
64-host fat-tree all-to-all of ``bench_alltoall.py``, each in one process,
with ``--processes 2`` and, with ``--mpi``, under ``mpiexec -n 2``, each in both transport modes side
by side (every link a real UDP socket, emu's default, and ``--direct``: frames within a process
handed over in memory). Prints the run's wall time (the ``wall_s`` figure: the cluster's start-up
excluded), the speed-up against one process in the same mode (goal 1.5x) and checks that every
virtual-time figure is the same in every way and mode.

Memory (``--memory``): a 1 GiB-per-rank allreduce on ``star:n=2``, peak RSS of the process against
the goal (4 GiB); takes about a minute and ~6 GB.

    python scripts/bench_spread.py [--mpi] [--memory] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

GOAL_SPEEDUP = 1.5
GOAL_RSS_GB = 4 * 2**30 / 1e9
WORKLOADS = {
    "allreduce rd 64KiB, 256 hosts": ["--topo", "fattree:k=4,n=4", "--test", "allreduce", "--algo",
                                      "recursive_doubling", "--size", "64KiB"],
}
HERE = os.path.dirname(os.path.abspath(__file__))


def emu_run(args: list[str], prefix: list[str] | None = None) -> tuple[dict, int]:
    """Figures of one ``emu run`` (JSON) and the peak RSS (KiB) of the processes it took."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        p = subprocess.run((prefix or []) + [sys.executable, "-m", "emu.front.cli", "run", *args, "--json", out],
                           capture_output=True, text=True)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if p.returncode != 0:
            raise SystemExit(f"emu run {' '.join(args)} failed:\n{p.stdout}{p.stderr}")
        with open(out) as f:
            return json.load(f)["results"][0], max(rss, before)


def alltoall(ways, repeat: int, mode: str, first=None):
    """bench_alltoall.py's workload (10 messages of 1 KiB from every host to every other), in one
    transport mode; ``first``: the figures of the other mode, to check against."""
    import re

    base = None
    for way, extra, prefix in ways:
        walls = []
        way = f"{way}, {mode}"
        for _ in range(repeat):
            p = subprocess.run(prefix + [sys.executable, os.path.join(HERE, "bench_alltoall.py"), *extra,
                                         "--mode", mode],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"bench_alltoall failed:\n{p.stdout}{p.stderr}")
            walls.append(float(re.search(r"wall=([0-9.]+) s", p.stdout).group(1)))
            fig = re.search(r"frames=.*virtual completion=[0-9,]+ ns", p.stdout).group(0)
        wall = min(walls)
        if first is not None and fig != first:
            raise SystemExit(f"alltoall {way}: FIGURES DIFFER from the other mode's")
        if base is None:
            base = (wall, fig)
            print(f"alltoall 10 x 1 KiB, 64 hosts: {way}: {wall:.2f} s  ({fig})", flush=True)
            continue
        speedup = base[0] / wall
        print(f"alltoall 10 x 1 KiB, 64 hosts: {way}: {wall:.2f} s  speed-up {speedup:.2f}x (goal {GOAL_SPEEDUP}x: "
              f"{'met' if speedup >= GOAL_SPEEDUP else 'not met'}); "
              f"{'same figures' if fig == base[1] else 'FIGURES DIFFER'}", flush=True)
    return base[1]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--mpi", action="store_true", help="also under mpiexec -n 2")
    ap.add_argument("--memory", action="store_true", help="also the 1 GiB star:n=2 allreduce's peak RSS")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (the fastest counts)")
    a = ap.parse_args(argv)
    ways = [("1 process", [], []), ("--processes 2", ["--processes", "2"], [])]
    if a.mpi:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
        if mpiexec is None:
            raise SystemExit("mpiexec not found: pip install 'hpc-emu[parallel]'")
        ways.append(("mpiexec -n 2", [], [mpiexec, "-n", "2"]))
    for name, args in WORKLOADS.items():
        base = None
        for way, extra, prefix in [(f"{w}, {m}", e + (["--direct"] if m == "direct" else []), p)
                                   for m in ("sockets", "direct") for w, e, p in ways]:
            if base is not None and way.startswith("1 process"):  # the other mode: its own one-process base
                first, base = base, None
            runs = [emu_run(args + extra, prefix)[0] for _ in range(a.repeat)]
            wall = min(r.pop("wall_s") for r in runs)
            fig = runs[0]
            if base is None and way.endswith("direct") and fig != first[1]:
                raise SystemExit(f"{name}: {way}: FIGURES DIFFER from the sockets mode's")
            if base is None:
                base = (wall, fig)
                print(f"{name}: {way}: {wall:.2f} s  (virtual completion {fig['completion_ns']:,} ns, "
                      f"{fig['hop_count']:,} link crossings)", flush=True)
                continue
            same = "same figures" if fig == base[1] else "FIGURES DIFFER"
            speedup = base[0] / wall
            print(f"{name}: {way}: {wall:.2f} s  speed-up {speedup:.2f}x (goal {GOAL_SPEEDUP}x: "
                  f"{'met' if speedup >= GOAL_SPEEDUP else 'not met'}); {same}", flush=True)
    fig = alltoall(ways, a.repeat, "sockets")
    alltoall(ways, a.repeat, "direct", fig)
    if a.memory:
        fig, rss = emu_run(["--topo", "star:n=2", "--test", "allreduce", "--size", "1GiB"])
        gb = rss * 1024 / 1e9
        print(f"allreduce 1 GiB per rank, star:n=2: peak RSS {gb:.2f} GB (goal under {GOAL_RSS_GB:.2f} GB: "
              f"{'met' if gb < GOAL_RSS_GB else 'not met'}); result {fig['result']}, wall {fig['wall_s']} s")


if __name__ == "__main__":
    main()
