#!/usr/bin/env python3
"""Wall-clock speed of the fabric against a bare trio UDP pair, side by side in one run.

(a) bare: one trio task sends N 1 KiB datagrams on loopback to another, which receives them;
(b) fabric: host h0 sends N messages of one 1 KiB frame each through switch s0 to host h1
    (star:n=2), with the full machinery: outer encapsulation, window synchronisation, port model,
    switch forwarding, reassembly and delivery to an application. The hosts' modelled software
    overheads are set to 0 so that frames leave back to back: this measures the fabric. Run in both
    transport modes side by side: every link a real UDP socket (the default) and ``--direct``
    (frames handed over in memory within the process); their virtual-time figures are checked equal.

Prints datagrams/s of (a), emulated frames/s end to end of (b) in each mode, the UDP datagrams (b)
actually exchanged per second (frames are batched per port and window), and the ratio (b)/(a).

    python scripts/bench_fabric.py [--frames N] [--repeat R] [--latency-ns L] [--bandwidth-gbps B]
                                   [--mode both|sockets|direct]
"""

from __future__ import annotations

import argparse
import socket
import time

import trio
from rich.table import Table

import emu
from emu.front.consoles import make_console
from emu.config import HostSpec, LinkSpec
from emu.topologies import star

FRAME = 1024
HEADERS = 50  # Ethernet 14 + fabric 16 + message segment 16 + FCS 4


async def bare_pair(n: int) -> tuple[float, int]:
    rx = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    tx = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    await rx.bind(("127.0.0.1", 0))
    await tx.bind(("127.0.0.1", 0))
    addr = rx.getsockname()
    payload = b"x" * FRAME
    got = 0
    done = trio.Event()

    async def receiver():
        nonlocal got
        while got < n:
            await rx.recv(65536)
            got += 1
        done.set()

    async def sender():
        for _ in range(n):
            await tx.sendto(payload, addr)

    t = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        nursery.start_soon(sender)
        with trio.move_on_after(max(5.0, n / 2000)):
            await done.wait()
        nursery.cancel_scope.cancel()
    dt = time.perf_counter() - t
    rx.close()
    tx.close()
    return dt, got


async def _sender(host, dst, n, size):
    chunk = b"y" * size
    for _ in range(n):
        await host.send(dst, chunk)
    return host.now


async def _receiver(host, n):
    for _ in range(n):
        await host.recv()
    return host.now


async def fabric(n: int, latency_ns: int, bandwidth_bps: int, direct: bool = True) -> dict:
    topo = star(2, link=LinkSpec(latency_ns=latency_ns, bandwidth_bps=bandwidth_bps),
                host=HostSpec(mtu_bytes=FRAME - HEADERS, send_overhead_ns=0, recv_overhead_ns=0))
    async with emu.Cluster(topo, direct=direct) as net:
        t = time.perf_counter()
        res = await net.run({"h0": (_sender, "h1", n, FRAME - HEADERS), "h1": (_receiver, n)})
        dt = time.perf_counter() - t
        stats = await net.stats()
        udp = sum(p["udp_received"] for p in await net.process_stats())
        windows = net.windows
    frames_on_links = sum(p["tx_frames"] for el in stats for p in el["ports"])
    return {"wall_s": dt, "frames": n, "virtual_ns": res["h1"], "windows": windows,
            "frames_on_links": frames_on_links,
            "datagrams": udp,
            "retransmitted": sum(el["element"]["retransmitted"] for el in stats)}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs of each")
    ap.add_argument("--latency-ns", type=int, default=LinkSpec().latency_ns)
    ap.add_argument("--bandwidth-gbps", type=float, default=LinkSpec().bandwidth_bps / 1e9)
    ap.add_argument("--mode", choices=["both", "sockets", "direct"], default="both",
                    help="transport modes to time: every link on UDP (sockets, the default of emu), frames "
                         "within the process handed over in memory (direct), or both side by side")
    ap.add_argument("--wire", action="store_true", help="the same as --mode sockets (kept for old command lines)")
    args = ap.parse_args()
    modes = ["sockets"] if args.wire else ["sockets", "direct"] if args.mode == "both" else [args.mode]
    bw = int(args.bandwidth_gbps * 1e9)
    bares, fabs = [], {m: [] for m in modes}
    for _ in range(args.repeat):  # interleaved, so that a noisy spell hits every path alike
        bares.append(await bare_pair(args.frames))
        for m in modes:
            fabs[m].append(await fabric(args.frames, args.latency_ns, bw, m == "direct"))
    bare = min(bares)
    bare_rate = bare[1] / bare[0]
    best = {m: min(fabs[m], key=lambda r: r["wall_s"]) for m in modes}
    model = {(r["virtual_ns"], r["frames_on_links"]) for rs in fabs.values() for r in rs}
    if len(model) != 1:
        raise SystemExit(f"the modes' virtual-time figures differ: {sorted(model)} (a bug)")
    t = Table(title=f"{args.frames} frames of {FRAME} B, best of {args.repeat} "
                    f"(links {args.latency_ns} ns, {args.bandwidth_gbps:g} Gbit/s)")
    for c in ("path", "wall s", "datagrams/s", "frames/s end to end", "notes"):
        t.add_column(c, justify="right" if c != "path" and c != "notes" else "left")
    t.add_row("(a) bare trio UDP pair", f"{bare[0]:.3f}", f"{bare_rate:,.0f}", f"{bare_rate:,.0f}",
              f"{bare[1]} of {args.frames} received")
    for m, fab in best.items():
        t.add_row(f"(b) fabric h0 -> s0 -> h1, {m}", f"{fab['wall_s']:.3f}", f"{fab['datagrams'] / fab['wall_s']:,.0f}",
                  f"{fab['frames'] / fab['wall_s']:,.0f}",
                  f"{fab['windows']} windows, {fab['frames_on_links']} link crossings, "
                  f"{fab['datagrams']} datagrams received, {fab['retransmitted']} retransmitted, "
                  f"virtual {fab['virtual_ns'] / 1e3:.1f} us")
    make_console().print(t)
    for m, fab in best.items():
        print(f"ratio fabric/bare, {m} = {fab['frames'] / fab['wall_s'] / bare_rate:.2f}  (emulated frames delivered "
              "end to end per second, over bare datagrams per second; goal >= 0.8)")
    if len(best) == 2:
        print(f"direct / sockets = {best['sockets']['wall_s'] / best['direct']['wall_s']:.2f}x faster; "
              "the same virtual-time figures (checked)")


if __name__ == "__main__":
    trio.run(main)
