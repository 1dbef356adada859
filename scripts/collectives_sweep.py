#!/usr/bin/env python3
"""Host software collectives compared: algorithms x message sizes x node counts.

    python scripts/collectives_sweep.py [--operation allreduce] [--nodes 8,16,32,64]
                                        [--sizes 8,1KiB,16KiB,256KiB] [--png collectives.png]

Binary fat trees (fattree:k=2,n=log2(nodes)) with the default link, switch and host figures; every
result is checked against numpy; completion times are virtual (exact, repeatable).
"""

from __future__ import annotations

import argparse

import trio
from rich.console import Console
from rich.table import Table

from emu.front.checks import parse_size
from emu.nodes.collectives import ALGORITHMS
from emu.front.sweep import plot, sweep


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--operation", default="allreduce", choices=sorted(ALGORITHMS))
    ap.add_argument("--nodes", default="8,16,32,64")
    ap.add_argument("--sizes", default="8,1KiB,16KiB,256KiB")
    ap.add_argument("--algos", default=None, help="comma-separated (default: all that fit every node count)")
    ap.add_argument("--png", default="collectives.png")
    args = ap.parse_args()
    nodes = [int(n) for n in args.nodes.split(",")]
    for n in nodes:
        if n & (n - 1) or n < 2:
            raise SystemExit(f"--nodes: {n} is not a power of two >= 2 (binary fat trees)")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    algos = args.algos.split(",") if args.algos else list(ALGORITHMS[args.operation])
    specs = [f"fattree:k=2,n={n.bit_length() - 1}" for n in nodes]
    console = Console(width=140)
    with console.status("running") as status:
        rows = await sweep(specs, sizes, algos, args.operation,
                           progress=lambda r: status.update(f"{r.topology} {r.algo} {r.size_bytes} B"))
    t = Table(title=f"{args.operation}: virtual completion time (us) on binary fat trees; * = fastest")
    t.add_column("nodes", justify="right")
    t.add_column("size", justify="right")
    for a in algos:
        t.add_column(a, justify="right")
    for n in nodes:
        for s in sizes:
            cells = {r.algo: r.completion_ns for r in rows if r.nodes == n and r.requested_bytes == s}
            best = min(cells.values())
            t.add_row(str(n), f"{s:,}", *[f"{cells[a] / 1000:,.2f}{'*' if cells[a] == best else ''}" for a in algos])
    console.print(t)
    plot(rows, args.png, f"{args.operation}, host software, binary fat trees")
    console.print(f"plot written to {args.png}")


if __name__ == "__main__":
    trio.run(main)
