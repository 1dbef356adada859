"""``emu demo``: a small cluster showing what the fabric does, with virtual-time figures.

So far the fabric alone (the mechanisms of specs 01-04 join this table as they are built): echo
round trips, one large message, a fan-in through one switch port, each checked against the same
scenario run over two OS processes.
"""

from __future__ import annotations

import time

import trio
from rich.console import Console
from rich.table import Table

from topologies import star

from .cluster import Cluster
from .config import HostSpec


async def _ping(host, dst):
    return await host.ping(dst)


async def _send(host, dst, size, count):
    data = bytes(size)
    for _ in range(count):
        await host.send(dst, data)
    return host.now


async def _recv(host, count):
    total = 0
    for _ in range(count):
        total += len((await host.recv()).data)
    return total, host.now


def scenarios(n: int) -> list[tuple[str, dict]]:
    return [
        ("ping h0 -> h1", {"h0": (_ping, "h1")}),
        ("1 MiB message h0 -> h1", {"h0": (_send, "h1", 1 << 20, 1), "h1": (_recv, 1)}),
        (f"fan-in {n - 1} hosts x 64 KiB -> h0",
         {**{f"h{i}": (_send, "h0", 64 << 10, 1) for i in range(1, n)}, "h0": (_recv, n - 1)}),
    ]


async def _run_all(n: int, processes: int) -> list[tuple[str, int, int, int]]:
    topo = star(n, host=HostSpec(mtu_bytes=4096))
    out = []
    async with Cluster(topo, processes=processes) as net:
        for name, apps in scenarios(n):
            t0 = net.now
            before = await net.stats()
            await net.reset_peaks()
            res = await net.run(apps)
            after = await net.stats()
            frames = sum(p["tx_frames"] for s in after for p in s["ports"]) - \
                sum(p["tx_frames"] for s in before for p in s["ports"])
            peak = max(p["peak_queue_frames"] for s in after for p in s["ports"])
            out.append((name, net.now - t0, frames, peak, res))
    return out


async def demo(n: int = 8) -> int:
    console = Console()
    console.print(f"[bold]hpc-emu demo[/]: star:n={n}, links 100 ns / 100 Gbit/s, switch 50 ns, NIC 100 ns, "
                  "4 KiB frames")
    wall = time.perf_counter()
    one = await _run_all(n, 1)
    wall1 = time.perf_counter() - wall
    two = await _run_all(n, 2)
    table = Table(title="fabric: virtual-time figures (1 process vs 2 processes)")
    for col in ("scenario", "completion (ns)", "frames on links", "peak port queue", "2 processes agree"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    ok = True
    for a, b in zip(one, two):
        same = a[1:] == b[1:]
        ok &= same
        table.add_row(a[0], f"{a[1]:,}", f"{a[2]:,}", f"{a[3]} frames", "yes" if same else "[red]NO[/]")
    console.print(table)
    console.print(f"wall clock: {wall1:.2f} s in one process; figures are virtual time and identical run after run")
    return 0 if ok else 1


def main(n: int = 8) -> int:
    return trio.run(demo, n)
