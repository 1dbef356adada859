#!/usr/bin/env python3
"""Peak memory of a large allreduce against the ranks' own data (issue 27's goal: at most twice).

Each size runs ``emu run --topo star:n=2 --test allreduce --size SIZE`` (the result checked against
numpy, as always) in a fresh process, and prints the ranks' own data (ranks x size), the run's peak
resident set size (the process and any worker it started: ``getrusage(RUSAGE_CHILDREN)`` of a
process that does nothing else) and their ratio against the goal (2.0). An empty run (``--size 4B``)
is printed beside them: what the interpreter, numpy and the emulator take before any data.

    python scripts/bench_memory.py [--sizes 64MiB,256MiB,1GiB] [--topo star:n=2] [--processes 1]

Peak RSS is a measurement of the emulator, not of the model; the virtual-time figures are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

GOAL = 2.0
_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise SystemExit(f"--sizes: {text!r} is not a size; give e.g. 64MiB, 256MiB, 1GiB")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def ratio(peak_bytes: int, ranks: int, size: int) -> float:
    """Peak RSS over the ranks' own data (ranks x size bytes)."""
    return peak_bytes / (ranks * size)


_CHILD = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(p.stdout[-2000:] + p.stderr[-2000:])
print("PEAK_KIB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "RC", p.returncode)
"""


def measure(size: int, topo: str, processes: int) -> dict:
    """One run in a fresh process: its peak RSS (bytes) and the figures of its JSON results."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [sys.executable, "-m", "emu.front.cli", "run", "--topo", topo, "--test", "allreduce",
               "--size", f"{size}B", "--processes", str(processes), "--json", out]
        p = subprocess.run([sys.executable, "-c", _CHILD, *cmd], capture_output=True, text=True)
        m = re.search(r"PEAK_KIB (\d+) RC (-?\d+)", p.stdout)
        if m is None or m.group(2) != "0":
            raise SystemExit(f"emu run of {size} bytes failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        with open(out) as f:
            row = json.load(f)["results"][0]
    return {"size": size, "peak": int(m.group(1)) * 1024, "ranks": int(row.get("ranks", 2)),
            "result": row.get("result"), "completion_ns": row.get("completion_ns"), "wall_s": row.get("wall_s")}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--sizes", default="64MiB,256MiB,1GiB", help="sizes per rank, comma-separated")
    ap.add_argument("--topo", default="star:n=2")
    ap.add_argument("--processes", type=int, default=1)
    a = ap.parse_args(argv)
    sizes = [parse_size(s) for s in a.sizes.split(",") if s.strip()]
    print(f"{os.cpu_count()} cores; allreduce on {a.topo}, {a.processes} process(es); goal: peak RSS at most "
          f"{GOAL:.1f}x the ranks' own data", flush=True)
    empty = measure(4, a.topo, a.processes)
    print(f"empty run (4 B per rank): peak RSS {empty['peak'] / 1e6:,.0f} MB (interpreter, numpy, emulator)", flush=True)
    print(f"{'size per rank':>14} {'ranks data MB':>14} {'peak RSS MB':>12} {'ratio':>6} {'goal':>5}  result  "
          f"completion ns  wall s", flush=True)
    rows = []
    for size in sizes:
        r = measure(size, a.topo, a.processes)
        data = r["ranks"] * size
        q = ratio(r["peak"], r["ranks"], size)
        print(f"{size / 2**20:>11,.0f} MiB {data / 1e6:>14,.0f} {r['peak'] / 1e6:>12,.0f} {q:>6.2f} "
              f"{'met' if q <= GOAL else 'NOT':>5}  {r['result']}  {r['completion_ns']:,}  {r['wall_s']}", flush=True)
        rows.append({**r, "ratio": q})
    return rows


if __name__ == "__main__":
    main()
