#!/usr/bin/env python3
"""Spec 01's two measurements: MPI_Reduce of 8 bytes per type, and allreduce of doubles, without and
with NIC offload, the pipeline model beside each.

    python scripts/nic_offload_sweep.py [--experiment reduce,allreduce] [--nodes 16,32,64,128,256]
                                        [--reduce-types float64,float32,int64,uint64] [--reduce-bytes 8]
                                        [--sizes 16,24,32,40,48,56] [--types float64] [--branch K]
                                        [--tree kary|flat|both] [--crossover] [--png nic_offload.png]

One process per node on binary fat trees (fattree:k=2,n=log2 nodes), as the source's k-ary n-trees.

Experiment 1 (``reduce``), the source's MPI_Reduce of 8 bytes for double, float, int64 and uint64
(8 bytes: one 64-bit element, or two float32): "software" is the host software reduce (the default
algorithm, a binomial tree, paying the modelled software overheads and reduction cost), "NIC" the
offloaded reduce (one descriptor per rank on a ``branch``-ary tree, the NICs reduce up to the root,
no broadcast), and the speed-up software / NIC per type and node count; "model" is
``nicmodel.reduce_ns`` on the same routes.

Experiment 2 (``allreduce``), the source's allreduce of doubles at 16..48 bytes and just above (56
bytes need a second descriptor, a step in completion time): "software" is the host software
allreduce (recursive doubling when small, Rabenseifner when large), "NIC" posts triggered
descriptors on a ``branch``-ary tree (default: the degree the pipeline model picks for the size,
``offload.default_branch``) and lets the NICs reduce and broadcast, parts of 48 bytes pipelined
over lanes (virtual ports). "model" is the analytic pipeline model (``nicmodel``) for the same tree
on the same routes. Every result is checked against numpy; completion times are virtual (exact,
repeatable). With --crossover, the size where software overtakes the NIC is found by bisection
(whole elements) between the last size of the sweep the NIC wins and the first it loses (give
--sizes up to a few KiB).

Two readings of the tree (``--tree``): ``kary`` (the default) keeps the spec's 6-bit CpCnt, so a
node counts at most 63 children and 128 and 256 nodes get a second tree level; ``flat`` is the
source's test harness (the root waits for every leaf: branch nodes - 1) with a wider counter
(``nic.counter_bits = 8``: the count read from the 8-bit BranchDegree, departing from the 6-bit
CpCnt) and a request receive queue that holds every leaf's message (``nic.queue_capacity`` raised
to nodes - 1 where the default 64 is smaller: the source's queue is shared dynamically); ``both``
runs each. Every table says which reading ran. The source's growth from 16 nodes up can be read
off the ``vs 16`` column (each row's NIC completion over the 16-node row of its reading).

Assumed: the project's default host, NIC and link specs (100 Gbit/s links, NicSpec timings); every
rank enters the operation at the same instant (no noise, no skew).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import trio
from rich.console import Console
from rich.table import Table

import emu
from emu.nodes.collectives.offload import DEFAULT_VP, depth, predict, predict_reduce
from emu.nodes.collectives.offloads.nic import branch_of
from emu.nodes.collectives.run import check_results, run_collective

SIZES = "16,24,32,40,48,56"
REDUCE_TYPES = "float64,float32,int64,uint64"


async def one(net, spec: str, n: int, dtype: str, size: int, branch: int | None) -> dict:
    item = np.dtype(dtype).itemsize
    count = size // item
    sw = await run_collective(net, "allreduce", count=count, dtype=dtype, seed=size)
    check_results(sw, count, dtype, "sum", 0, size)
    nic = await run_collective(net, "allreduce", count=count, dtype=dtype, seed=size, offload="nic", branch=branch)
    check_results(nic, count, dtype, "sum", 0, size)
    k = branch_of(nic.algo)
    model = predict(net.topology, list(net.hosts), k, count, dtype, DEFAULT_VP)
    return {"nodes": n, "topology": spec, "dtype": dtype, "size": size, "branch": k, "lanes": model.lanes,
            "parts": model.parts, "sw_ns": sw.completion_ns, "sw_algo": sw.algo, "nic_ns": nic.completion_ns,
            "model_ns": model.total_ns, "model": model.explain(), "sw_cpu_ns": sw.cpu_ns_max,
            "nic_cpu_ns": nic.cpu_ns_max}


async def one_reduce(net, spec: str, n: int, dtype: str, size: int, branch: int | None) -> dict:
    count = size // np.dtype(dtype).itemsize
    sw = await run_collective(net, "reduce", count=count, dtype=dtype, seed=size)
    check_results(sw, count, dtype, "sum", 0, size)
    nic = await run_collective(net, "reduce", count=count, dtype=dtype, seed=size, offload="nic", branch=branch)
    check_results(nic, count, dtype, "sum", 0, size)
    k = branch_of(nic.algo)
    model = predict_reduce(net.topology, list(net.hosts), k, count, dtype)
    return {"nodes": n, "topology": spec, "dtype": dtype, "size": size, "branch": k, "sw_ns": sw.completion_ns,
            "sw_algo": sw.algo, "nic_ns": nic.completion_ns, "model_ns": model}


def tree_setup(tree: str, n: int, branch: int | None):
    """(topology with the reading's NIC settings, branch degree, what ran, in words) for ``tree``."""
    from emu.config import NicSpec
    from emu.nodes.collectives.offload import reading
    from emu.topologies import build

    spec = f"fattree:k=2,n={n.bit_length() - 1}"
    if tree == "kary":
        return build(spec), branch, f"k-ary tree ({reading(6)}: at most 63 children a node)"
    nic = {"counter_bits": 8}
    queue = max(NicSpec().queue_capacity, n - 1)
    if queue != NicSpec().queue_capacity:
        nic["queue_capacity"] = queue
    return (build(spec, settings={"nic": nic}), n - 1,
            f"flat tree (the source's harness: the root counts {n - 1} leaves; {reading(8)}; receive queue {queue})")


async def measure_reduce(nodes, size, types, branch, status, tree="kary") -> list[dict]:
    rows = []
    for n in nodes:
        topo, k, what = tree_setup(tree, n, branch)
        spec = f"fattree:k=2,n={n.bit_length() - 1}"
        async with emu.Cluster(topo) as net:
            for dtype in types:
                status.update(f"reduce {spec} {dtype} {size} B, {tree}")
                rows.append(dict(await one_reduce(net, spec, n, dtype, size, k), tree=tree, reading=what))
    return rows


def report_reduce(console: Console, rows: list[dict], nodes, types) -> None:
    for tree in dict.fromkeys(r["tree"] for r in rows):
        mine = [r for r in rows if r["tree"] == tree]
        t = Table(title=f"experiment 1: MPI_Reduce of {mine[0]['size']} B per rank, software vs NIC offload; "
                        f"completion ns (virtual), speed-up = software / NIC; {tree}")
        for col in ("nodes", "type", "software", "algorithm", "NIC", "branch", "levels", "model", "NIC/model",
                    "speed-up", "NIC vs 16"):
            t.add_column(col, justify="right")
        for n in nodes:
            for dtype in types:
                r = next(r for r in mine if r["nodes"] == n and r["dtype"] == dtype)
                first = next((q for q in mine if q["nodes"] == 16 and q["dtype"] == dtype), None)
                t.add_row(str(n), dtype, f"{r['sw_ns']:,}", r["sw_algo"], f"{r['nic_ns']:,}", str(r["branch"]),
                          str(depth(n, r["branch"])), f"{r['model_ns']:,}", f"{r['nic_ns'] / r['model_ns']:.3f}",
                          f"{r['sw_ns'] / r['nic_ns']:.2f}", f"{r['nic_ns'] / first['nic_ns']:.2f}" if first else "-")
        console.print(t)
        console.print(f"ran: {'; '.join(dict.fromkeys(r['reading'] for r in mine))}")
    console.print("reduce model: the one-part critical path up the tree on these routes (leaves post and send, "
                  "parents read, fold and fire in order of arrival; the root completes after folding its own data)")


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


async def measure(nodes, sizes, types, branch, find_crossover, status, tree="kary") -> tuple[list[dict], dict]:
    rows, cross = [], {}
    for n in nodes:
        topo, k, what = tree_setup(tree, n, branch)
        spec = f"fattree:k=2,n={n.bit_length() - 1}"
        async with emu.Cluster(topo) as net:
            for dtype in types:
                for size in sizes:
                    status.update(f"{spec} {dtype} {size} B, {tree}")
                    rows.append(dict(await one(net, spec, n, dtype, size, k), tree=tree, reading=what))
                if find_crossover:
                    status.update(f"{spec} {dtype}: where software overtakes")
                    cross[(n, dtype, tree)] = await crossover(net, spec, n, dtype,
                                                              [r for r in rows if r["tree"] == tree], k)
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
    for tree, n, dtype in itertools.product(dict.fromkeys(r["tree"] for r in rows), nodes, types):
        mine = [r for r in rows if r["nodes"] == n and r["dtype"] == dtype and r["tree"] == tree]
        t = Table(title=f"allreduce {dtype} on {n} nodes (fattree:k=2,n={n.bit_length() - 1}), {mine[0]['reading']}: "
                        "completion, us (virtual)")
        for col in ("size B", "parts", "branch", "levels", "lanes", "software", "algorithm", "NIC", "model",
                    "NIC/model", "NIC/software", "NIC vs 16"):
            t.add_column(col, justify="right")
        for s in sizes:
            r = next(r for r in mine if r["size"] == s)
            first = next((q for q in rows if q["nodes"] == 16 and q["dtype"] == dtype and q["size"] == s
                          and q["tree"] == tree), None)
            t.add_row(str(s), str(r["parts"]), str(r["branch"]), str(depth(n, r["branch"])), str(r["lanes"]),
                      f"{r['sw_ns'] / 1000:.2f}", r["sw_algo"], f"{r['nic_ns'] / 1000:.2f}",
                      f"{r['model_ns'] / 1000:.2f}", f"{r['nic_ns'] / r['model_ns']:.3f}",
                      f"{r['nic_ns'] / r['sw_ns']:.2f}", f"{r['nic_ns'] / first['nic_ns']:.2f}" if first else "-")
        console.print(t)
        if (n, dtype, tree) in cross:
            c = cross[(n, dtype, tree)]
            console.print("software overtakes the NIC: never in this sweep" if c is None else
                          f"software overtakes the NIC at {c['size']} B ({c['parts']} parts): software "
                          f"{c['sw_ns']:,} ns, NIC {c['nic_ns']:,} ns (branch {c['branch']}, {c['lanes']} lanes), "
                          f"model {c['model_ns']:,} ns")
    console.print("model: T1 (one part's critical path over the tree, on these routes), then the parts "
                  "spaced by the busiest NIC resource, by the host writing descriptors, and by a lane's round "
                  "trip; it leaves out contention in the fabric and between lanes at a process unit")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--experiment", default="reduce,allreduce", help="reduce, allreduce or both (comma-separated)")
    ap.add_argument("--nodes", default="16,32,64,128,256")
    ap.add_argument("--reduce-types", default=REDUCE_TYPES)
    ap.add_argument("--reduce-bytes", type=int, default=8, help="bytes per rank of the reduce (the source: 8)")
    ap.add_argument("--sizes", default=SIZES, help="allreduce: bytes per rank, comma-separated")
    ap.add_argument("--types", default="float64", help="allreduce element types (the source: doubles)")
    ap.add_argument("--branch", type=int, default=None,
                    help="branch degree of the NIC reduction tree (default: the model's pick for the size)")
    ap.add_argument("--tree", default="kary", choices=("kary", "flat", "both"),
                    help="kary: the spec's 6-bit CpCnt (63 children at most); flat: the source's harness, a root "
                         "counting every leaf with a wider counter; both")
    ap.add_argument("--crossover", action="store_true", help="allreduce: bisect for where software overtakes")
    ap.add_argument("--png", default="nic_offload.png")
    args = ap.parse_args()
    experiments = args.experiment.split(",")
    if not experiments or any(e not in ("reduce", "allreduce") for e in experiments):
        raise SystemExit(f"--experiment {args.experiment}: reduce, allreduce or reduce,allreduce")
    try:
        nodes = [int(x) for x in args.nodes.split(",")]
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        raise SystemExit("--nodes and --sizes: comma-separated integers") from None
    if any(n < 2 or n & (n - 1) for n in nodes):
        raise SystemExit("--nodes: powers of two >= 2 (binary fat trees)")
    types, rtypes = args.types.split(","), args.reduce_types.split(",")
    for dt in set(types) | set(rtypes):
        try:
            np.dtype(dt)
        except TypeError:
            raise SystemExit(f"--types/--reduce-types: unknown element type {dt!r}") from None
    for dt in types:
        if any(s % np.dtype(dt).itemsize for s in sizes):
            raise SystemExit(f"--sizes: every size must be a whole number of {dt} elements")
    for dt in rtypes:
        if args.reduce_bytes % np.dtype(dt).itemsize or not 0 < args.reduce_bytes <= 48:
            raise SystemExit(f"--reduce-bytes {args.reduce_bytes}: a whole number of {dt} elements, 48 bytes at most "
                             "(one descriptor)")
    if args.branch is not None:
        from emu.config import ConfigError
        from emu.nodes.collectives.offload import validate

        try:
            validate("allreduce", np.dtype("float64"), "sum", args.branch)
        except ConfigError as e:
            raise SystemExit(f"--branch: {e}") from None
    trees = ("kary", "flat") if args.tree == "both" else (args.tree,)
    if args.branch is not None and args.tree != "kary":
        raise SystemExit("--branch goes with --tree kary (the flat tree's branch is nodes - 1)")
    console = Console(width=180)
    wall = time.perf_counter()
    if "reduce" in experiments:
        with console.status("running") as status:
            rrows = []
            for tree in trees:
                rrows += await measure_reduce(nodes, args.reduce_bytes, rtypes, args.branch, status, tree)
        report_reduce(console, rrows, nodes, rtypes)
    if "allreduce" in experiments:
        with console.status("running") as status:
            rows, cross = [], {}
            for tree in trees:
                got, c = await measure(nodes, sizes, types, args.branch, args.crossover, status, tree)
                rows += got
                cross.update(c)
        report(console, rows, cross, nodes, sizes, types)
        r0 = rows[0]
        console.print(f"host CPU per rank ({r0['dtype']} {r0['size']} B, {r0['nodes']} nodes): software "
                      f"{r0['sw_cpu_ns']} ns ({r0['sw_algo']}), offload {r0['nic_cpu_ns']} ns (posting descriptors)")
        plot([r for r in rows if r["tree"] == trees[0]], args.png)
        console.print(f"plot written to {args.png}")
    console.print("assumed: default host/NIC/link specs, 100 Gbit/s links, every rank entering at once (no noise, "
                  f"no skew); wall {time.perf_counter() - wall:.0f} s")


if __name__ == "__main__":
    trio.run(main)
