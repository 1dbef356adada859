#!/usr/bin/env python3
"""Spec 01's measurement: allreduce without and with NIC offload, on fat trees of 16..256 nodes.

    python scripts/nic_offload_sweep.py [--nodes 16,32,64,128,256] [--sizes 8,16,24,32,40,48,56]
                                        [--types float64,float32,int64,uint64] [--branch 8]
                                        [--png nic_offload.png]

One process per node on binary fat trees (fattree:k=2,n=log2 nodes). "no offload" is the host
software allreduce (the default algorithm for the size, recursive doubling here) over point-to-point
messages, paying the modelled software overheads and reduction cost; "offload" posts triggered
descriptors on a ``branch``-ary tree once and lets the NICs reduce and broadcast. Every result is
checked against numpy. Completion times are virtual (exact, repeatable).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import trio
from rich.console import Console
from rich.table import Table

import emu
from emu.nodes.collectives.run import check_results, run_collective


async def measure(nodes: list[int], sizes: list[int], types: list[str], branch: int, status) -> list[dict]:
    rows = []
    for n in nodes:
        spec = f"fattree:k=2,n={n.bit_length() - 1}"
        async with emu.Cluster(spec) as net:
            for dtype in types:
                item = np.dtype(dtype).itemsize
                for size in sizes:
                    count = size // item
                    status.update(f"{spec} {dtype} {size} B")
                    sw = await run_collective(net, "allreduce", count=count, dtype=dtype, seed=size)
                    check_results(sw, count, dtype, "sum", 0, size)
                    nic = await run_collective(net, "allreduce", count=count, dtype=dtype, seed=size,
                                               offload="nic", branch=branch)
                    check_results(nic, count, dtype, "sum", 0, size)
                    rows.append({"nodes": n, "topology": spec, "dtype": dtype, "size": size,
                                 "sw_ns": sw.completion_ns, "sw_algo": sw.algo, "nic_ns": nic.completion_ns,
                                 "sw_cpu_ns": sw.cpu_ns_max, "nic_cpu_ns": nic.cpu_ns_max,
                                 "sw_frames": sw.frames, "nic_frames": nic.frames})
    return rows


def plot(rows: list[dict], path: str, branch: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    dtype = rows[0]["dtype"]
    for n in sorted({r["nodes"] for r in rows}):
        pts = sorted((r["size"], r["sw_ns"], r["nic_ns"]) for r in rows if r["nodes"] == n and r["dtype"] == dtype)
        line, = a.plot([p[0] for p in pts], [p[2] / 1000 for p in pts], marker="o", label=f"{n} offload")
        a.plot([p[0] for p in pts], [p[1] / 1000 for p in pts], ls="--", color=line.get_color(), label=f"{n} software")
    a.set_xlabel("message size (bytes)")
    a.set_ylabel("completion time (us, virtual)")
    a.set_title(f"allreduce {dtype}: software (dashed) vs NIC offload", fontsize=9)
    a.legend(fontsize=7, ncol=2)
    a.grid(alpha=0.3)
    for dt in sorted({r["dtype"] for r in rows}):
        for size in (8, 48, 56):
            pts = sorted((r["nodes"], r["sw_ns"] / r["nic_ns"]) for r in rows if r["dtype"] == dt and r["size"] == size)
            if pts:
                b.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{dt} {size} B")
    b.set_xscale("log", base=2)
    b.set_xlabel("nodes")
    b.set_ylabel("speedup (software / offload)")
    b.set_title(f"speedup of the NIC offload (branch {branch})", fontsize=9)
    b.axhline(1, color="grey", lw=0.8)
    b.legend(fontsize=7, ncol=2)
    b.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="16,32,64,128,256")
    ap.add_argument("--sizes", default="8,16,24,32,40,48,56")
    ap.add_argument("--types", default="float64,float32,int64,uint64")
    ap.add_argument("--branch", type=int, default=8, help="branch degree of the NIC reduction tree")
    ap.add_argument("--png", default="nic_offload.png")
    args = ap.parse_args()
    nodes = [int(x) for x in args.nodes.split(",")]
    if any(n < 2 or n & (n - 1) for n in nodes):
        raise SystemExit("--nodes: powers of two >= 2 (binary fat trees)")
    sizes = [int(x) for x in args.sizes.split(",")]
    types = args.types.split(",")
    console = Console(width=180)
    wall = time.perf_counter()
    with console.status("running") as status:
        rows = await measure(nodes, sizes, types, args.branch, status)
    for dtype in types:
        t = Table(title=f"allreduce {dtype}: software / NIC offload completion (us, virtual) and speedup; "
                        f"branch {args.branch}")
        t.add_column("nodes", justify="right")
        for s in sizes:
            t.add_column(f"{s} B", justify="right")
        for n in nodes:
            cells = []
            for s in sizes:
                r = next(r for r in rows if r["nodes"] == n and r["dtype"] == dtype and r["size"] == s)
                cells.append(f"{r['sw_ns'] / 1000:.2f}/{r['nic_ns'] / 1000:.2f} x{r['sw_ns'] / r['nic_ns']:.2f}")
            t.add_row(str(n), *cells)
        console.print(t)
    r0 = rows[0]
    console.print(f"host CPU per rank ({r0['dtype']} {r0['size']} B, {r0['nodes']} nodes): software "
                  f"{r0['sw_cpu_ns']} ns ({r0['sw_algo']}), offload {r0['nic_cpu_ns']} ns (posting descriptors)")
    plot(rows, args.png, args.branch)
    console.print(f"plot written to {args.png}; wall {time.perf_counter() - wall:.0f} s")


if __name__ == "__main__":
    trio.run(main)
