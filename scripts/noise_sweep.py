#!/usr/bin/env python3
"""OS noise against a small allreduce: host software vs the NIC offload (spec 01's argument).

    python scripts/noise_sweep.py [--nodes 16] [--size 48] [--interval-ns 10000]
                                  [--durations 0,100,250,500,1000] [--kind periodic|random]
                                  [--phase random|aligned] [--seeds 3] [--full]

Every host's CPU takes a detour of ``d`` ns every ``--interval-ns`` (``host.noise=periodic``, each
host at its own seeded phase unless ``--phase aligned``; ``--kind random``: exponential gaps of that
mean), for each d of ``--durations`` (noise level d / interval). Host CPU work (send and receive
overheads, reductions, the offload's descriptor posts) does not progress during a detour; waiting
does. "software" is the host software allreduce (the default algorithm for the size); "NIC" posts
triggered descriptors and lets the NICs reduce (spec 01), so its hosts spend only the posts' CPU
time. Both run on the same fat tree, links and NICs; completion is from the common start to the
last rank's result, averaged and maxed over ``--seeds`` seeds (the detours' phases differ per
seed). Printed: completion per noise level and its growth over the noiseless run. The source
argues the offload is less sensitive to noise: the growth columns compare exactly that. Default: 16
nodes; --full: 16, 64 and 256 nodes.
"""

from __future__ import annotations

import argparse

import numpy as np
import trio
from rich.console import Console
from rich.table import Table

import emu
from emu.nodes.collectives.run import check_results, run_collective
from emu.topologies import build


async def level(n: int, size: int, kind: str, interval: int, d: int, phase: str, seed: int) -> dict:
    host = {"noise": kind, "noise_interval_ns": interval, "noise_duration_ns": d, "noise_phase": phase} if d else {}
    t = build(f"fattree:k=2,n={n.bit_length() - 1}", settings={"host": host})
    count = size // 8
    async with emu.Cluster(t, seed=seed) as net:
        sw = await run_collective(net, "allreduce", count=count, dtype="float64", seed=seed)
        check_results(sw, count, "float64", "sum", 0, seed)
        nic = await run_collective(net, "allreduce", count=count, dtype="float64", seed=seed, offload="nic")
        check_results(nic, count, "float64", "sum", 0, seed)
    return {"sw_ns": sw.completion_ns, "sw_algo": sw.algo, "sw_cpu_ns": sw.cpu_ns_max,
            "nic_ns": nic.completion_ns, "nic_cpu_ns": nic.cpu_ns_max}


async def sweep(a) -> list[dict]:
    rows = []
    for n in a.nodes:
        for d in a.durations:
            runs = [await level(n, a.size, a.kind, a.interval_ns, d, a.phase, s) for s in range(a.seeds)]
            sw = [r["sw_ns"] for r in runs]
            nic = [r["nic_ns"] for r in runs]
            rows.append({"nodes": n, "d_ns": d, "level": d / a.interval_ns, "sw_mean": float(np.mean(sw)),
                         "sw_max": max(sw), "nic_mean": float(np.mean(nic)), "nic_max": max(nic),
                         "sw_algo": runs[0]["sw_algo"], "sw_cpu_ns": runs[0]["sw_cpu_ns"],
                         "nic_cpu_ns": runs[0]["nic_cpu_ns"]})
    for r in rows:
        quiet = next(q for q in rows if q["nodes"] == r["nodes"] and q["d_ns"] == 0) if 0 in a.durations else r
        r["sw_growth"] = r["sw_mean"] / quiet["sw_mean"]
        r["nic_growth"] = r["nic_mean"] / quiet["nic_mean"]
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument("--size", type=int, default=48, help="bytes of float64 per rank (default 48: one descriptor)")
    ap.add_argument("--interval-ns", type=int, default=10_000)
    ap.add_argument("--durations", type=lambda s: [int(x) for x in s.split(",")], default=[0, 100, 250, 500, 1000])
    ap.add_argument("--kind", choices=("periodic", "random"), default="periodic")
    ap.add_argument("--phase", choices=("random", "aligned"), default="random")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="16, 64 and 256 nodes")
    a = ap.parse_args(argv)
    if a.nodes is None:
        a.nodes = [16, 64, 256] if a.full else [16]
    bad = [n for n in a.nodes if n < 2 or n & (n - 1)]
    if bad or a.size % 8 or not 8 <= a.size or a.seeds < 1 or any(not 0 <= d < a.interval_ns for d in a.durations):
        ap.error("--nodes must be powers of two >= 2, --size a multiple of 8, --seeds >= 1, "
                 "every duration within 0..interval-1")
    rows = trio.run(sweep, a)
    tab = Table(title=f"allreduce of {a.size} B float64, OS noise {a.kind} every {a.interval_ns} ns "
                      f"(phase {a.phase}), {a.seeds} seed(s); completion in ns (mean / max over seeds)")
    for c in ("nodes", "detour ns", "level", "software", "growth", "NIC", "growth", "CPU ns sw / NIC"):
        tab.add_column(c, justify="right")
    for r in rows:
        tab.add_row(str(r["nodes"]), str(r["d_ns"]), f"{r['level']:.1%}", f"{r['sw_mean']:,.0f} / {r['sw_max']:,}",
                    f"x{r['sw_growth']:.3f}", f"{r['nic_mean']:,.0f} / {r['nic_max']:,}", f"x{r['nic_growth']:.3f}",
                    f"{r['sw_cpu_ns']:,} / {r['nic_cpu_ns']:,}")
    Console(width=140).print(tab)
    print(f"assumed: fattree:k=2 with the default links, NICs and host costs; software = {rows[0]['sw_algo']}; "
          "NIC = triggered descriptors (spec 01); detours delay host CPU work only (noise model: emu.nodes.host.noise)")
    return rows


if __name__ == "__main__":
    main()
