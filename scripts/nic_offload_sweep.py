#!/usr/bin/env python3
"""Spec 01's measurement: allreduce without and with NIC offload, the pipeline model beside it.

    python scripts/nic_offload_sweep.py [--nodes 16,32,64,128,256] [--sizes 8,16,...,4096]
                                        [--types float64,float32,int64,uint64] [--branch K]
                                        [--no-crossover] [--png nic_offload.png]

One process per node on binary fat trees (fattree:k=2,n=log2 nodes). "software" is the host
software allreduce (the default algorithm for the size: recursive doubling when small, Rabenseifner
when large) over point-to-point messages, paying the modelled software overheads and reduction
cost; "NIC" posts triggered descriptors on a ``branch``-ary tree (default: the degree the pipeline
model picks for the size, ``offload.default_branch``) and lets the NICs reduce and broadcast, parts
of 48 bytes pipelined over lanes (virtual ports). "model" is the analytic pipeline model
(``emu.nodes.collectives.nicmodel``) for the same tree on the same routes. Every result is checked
against numpy; completion times are virtual (exact, repeatable). Unless --no-crossover, the size
where software overtakes the NIC is found by bisection (whole elements) between the last size
of the sweep the NIC wins and the first it loses.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import trio
from rich.console import Console
from rich.table import Table

import emu
from emu.nodes.collectives.offload import DEFAULT_VP, predict
from emu.nodes.collectives.run import check_results, run_collective

SIZES = "8,16,24,32,40,48,56,96,192,384,768,1536,4096"


async def one(net, spec: str, n: int, dtype: str, size: int, branch: int | None) -> dict:
    item = np.dtype(dtype).itemsize
    count = size // item
    sw = await run_collective(net, "allreduce", count=count, dtype=dtype, seed=size)
    check_results(sw, count, dtype, "sum", 0, size)
    nic = await run_collective(net, "allreduce", count=count, dtype=dtype, seed=size, offload="nic", branch=branch)
    check_results(nic, count, dtype, "sum", 0, size)
    k = int(nic.algo.split("=")[1].rstrip(")"))
    model = predict(net.topology, list(net.hosts), k, count, dtype, DEFAULT_VP)
    return {"nodes": n, "topology": spec, "dtype": dtype, "size": size, "branch": k, "lanes": model.lanes,
            "parts": model.parts, "sw_ns": sw.completion_ns, "sw_algo": sw.algo, "nic_ns": nic.completion_ns,
            "model_ns": model.total_ns, "model": model.explain(), "sw_cpu_ns": sw.cpu_ns_max,
            "nic_cpu_ns": nic.cpu_ns_max}


async def crossover(net, spec: str, n: int, dtype: str, rows: list[dict], branch: int | None) -> dict | None:
    """The smallest size (whole elements) where software is faster, by bisection between the
    sweep's last NIC win and first NIC loss (None if the NIC wins or loses everywhere)."""
    mine = sorted((r for r in rows if r["nodes"] == n and r["dtype"] == dtype), key=lambda r: r["size"])
    lose = next((r for r in mine if r["sw_ns"] < r["nic_ns"]), None)
    if lose is None or lose is mine[0]:
        return lose
    win = max((r for r in mine if r["size"] < lose["size"]), key=lambda r: r["size"])
    item = np.dtype(dtype).itemsize
    lo, hi = win["size"] // item, lose["size"] // item
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = await one(net, spec, n, dtype, mid * item, branch)
        if r["sw_ns"] < r["nic_ns"]:
            hi, lose = mid, r
        else:
            lo = mid
    return lose


async def measure(nodes, sizes, types, branch, find_crossover, status) -> tuple[list[dict], dict]:
    rows, cross = [], {}
    for n in nodes:
        spec = f"fattree:k=2,n={n.bit_length() - 1}"
        async with emu.Cluster(spec) as net:
            for dtype in types:
                for size in sizes:
                    status.update(f"{spec} {dtype} {size} B")
                    rows.append(await one(net, spec, n, dtype, size, branch))
                if find_crossover:
                    status.update(f"{spec} {dtype}: where software overtakes")
                    cross[(n, dtype)] = await crossover(net, spec, n, dtype, rows, branch)
    return rows, cross


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, a = plt.subplots(figsize=(7, 4.5))
    dtype = rows[0]["dtype"]
    for n in sorted({r["nodes"] for r in rows}):
        pts = sorted((r["size"], r["sw_ns"], r["nic_ns"], r["model_ns"]) for r in rows
                     if r["nodes"] == n and r["dtype"] == dtype)
        line, = a.plot([p[0] for p in pts], [p[2] / 1000 for p in pts], marker="o", label=f"{n} NIC")
        a.plot([p[0] for p in pts], [p[3] / 1000 for p in pts], ls=":", color=line.get_color(), label=f"{n} model")
        a.plot([p[0] for p in pts], [p[1] / 1000 for p in pts], ls="--", color=line.get_color(), label=f"{n} software")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("message size (bytes)")
    a.set_ylabel("completion time (us, virtual)")
    a.set_title(f"allreduce {dtype}: NIC offload (model dotted) vs software (dashed)", fontsize=9)
    a.legend(fontsize=7, ncol=3)
    a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(console: Console, rows: list[dict], cross: dict, nodes, sizes, types) -> None:
    for n in nodes:
        for dtype in types:
            t = Table(title=f"allreduce {dtype} on {n} nodes (fattree:k=2,n={n.bit_length() - 1}): completion, us "
                            "(virtual)")
            for col in ("size B", "parts", "branch", "lanes", "software", "algorithm", "NIC", "model", "NIC/model",
                        "NIC/software"):
                t.add_column(col, justify="right")
            for s in sizes:
                r = next(r for r in rows if r["nodes"] == n and r["dtype"] == dtype and r["size"] == s)
                t.add_row(str(s), str(r["parts"]), str(r["branch"]), str(r["lanes"]), f"{r['sw_ns'] / 1000:.2f}",
                          r["sw_algo"], f"{r['nic_ns'] / 1000:.2f}", f"{r['model_ns'] / 1000:.2f}",
                          f"{r['nic_ns'] / r['model_ns']:.3f}", f"{r['nic_ns'] / r['sw_ns']:.2f}")
            console.print(t)
            if (n, dtype) in cross:
                c = cross[(n, dtype)]
                console.print("software overtakes the NIC: never in this sweep" if c is None else
                              f"software overtakes the NIC at {c['size']} B ({c['parts']} parts): software "
                              f"{c['sw_ns']:,} ns, NIC {c['nic_ns']:,} ns (branch {c['branch']}, {c['lanes']} lanes), "
                              f"model {c['model_ns']:,} ns")
    console.print("model: T1 (one part's critical path over the tree, on these routes), then the parts "
                  "spaced by the busiest NIC resource, by the host writing descriptors, and by a lane's round "
                  "trip; it leaves out contention in the fabric and between lanes at a process unit")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="16,32,64,128,256")
    ap.add_argument("--sizes", default=SIZES, help="bytes per rank, comma-separated")
    ap.add_argument("--types", default="float64,float32,int64,uint64")
    ap.add_argument("--branch", type=int, default=None,
                    help="branch degree of the NIC reduction tree (default: the model's pick for the size)")
    ap.add_argument("--no-crossover", action="store_true", help="skip the bisection for where software overtakes")
    ap.add_argument("--png", default="nic_offload.png")
    args = ap.parse_args()
    nodes = [int(x) for x in args.nodes.split(",")]
    if any(n < 2 or n & (n - 1) for n in nodes):
        raise SystemExit("--nodes: powers of two >= 2 (binary fat trees)")
    sizes = [int(x) for x in args.sizes.split(",")]
    types = args.types.split(",")
    for dt in types:
        if any(s % np.dtype(dt).itemsize for s in sizes):
            raise SystemExit(f"--sizes: every size must be a whole number of {dt} elements")
    console = Console(width=180)
    wall = time.perf_counter()
    with console.status("running") as status:
        rows, cross = await measure(nodes, sizes, types, args.branch, not args.no_crossover, status)
    report(console, rows, cross, nodes, sizes, types)
    r0 = rows[0]
    console.print(f"host CPU per rank ({r0['dtype']} {r0['size']} B, {r0['nodes']} nodes): software "
                  f"{r0['sw_cpu_ns']} ns ({r0['sw_algo']}), offload {r0['nic_cpu_ns']} ns (posting descriptors)")
    plot(rows, args.png)
    console.print(f"plot written to {args.png}; wall {time.perf_counter() - wall:.0f} s")


if __name__ == "__main__":
    trio.run(main)
