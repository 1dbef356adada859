#!/usr/bin/env python3
"""Routing state of large topologies: build time, candidate next hops (time, memory kept, peak),
and the channel dependency check; wall time per phase.

    python scripts/bench_routes.py [--cdg] [SPEC ...]   (default: a few topologies of 1-4 thousand hosts)

Wall-clock figures measure the emulator on this machine, not the model.
"""

from __future__ import annotations

import sys
import time
import tracemalloc

from rich.console import Console
from rich.table import Table

from emu.topologies import build
from emu.topologies.deadlock import dependency_cycle

DEFAULT = ["fattree:k=4,n=5", "qsnet:nodes=1024", "torus:k=32,n=2", "star:n=2048", "fattree:k=8,n=4", "qsnet:nodes=4096"]


def one(spec: str, cdg: bool) -> dict:
    t0 = time.perf_counter()
    t = build(spec)
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    t.compute_candidates()
    t_cand = time.perf_counter() - t1
    t.candidates = {}
    tracemalloc.start()
    t.compute_candidates()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    row = {"spec": spec, "hosts": len(t.hosts), "switches": len(t.switches), "build_s": t_build,
           "candidates_s": t_cand, "kept_mib": kept / 2**20, "peak_mib": peak / 2**20}
    if cdg:
        t2 = time.perf_counter()
        row["cycle"] = len(dependency_cycle(t, adaptive=True))
        row["cdg_s"] = time.perf_counter() - t2
    return row


def main(argv: list[str]) -> None:
    cdg = "--cdg" in argv
    specs = [a for a in argv if a != "--cdg"] or DEFAULT
    table = Table(title="routing state")
    cols = ["spec", "hosts", "switches", "build_s", "candidates_s", "kept_mib", "peak_mib"] + (["cycle", "cdg_s"] if cdg else [])
    for c in cols:
        table.add_column(c, justify="left" if c == "spec" else "right", no_wrap=True)
    for spec in specs:
        r = one(spec, cdg)
        table.add_row(*(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    Console(width=None if sys.stdout.isatty() else 130).print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
