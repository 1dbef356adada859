#!/usr/bin/env python3
"""Wall-clock speed of the fabric on a many-element workload: link crossings per wall second.

Every host of ``fattree:k=4,n=3,latency_ns=1000,bandwidth_gbps=10,switch_delay_ns=0,nic_delay_ns=0``
(64 hosts, 48 switches) sends ``--messages`` messages of 1 KiB to every other host; the hosts'
software overheads are 0. Prints the link crossings (frames delivered over a link), the wall time of
the run (the cluster's start-up excluded), crossings per wall second against the goal (300,000), and
the virtual completion time -- which must be the same whatever the speed. Beside them, in the same
run, a plain Python loopback loop (one 1 KiB datagram sent and received on 127.0.0.1 per turn, blocking
sockets, no emulator): the goal is 0.75 of its datagrams per second (issue 27), wall and CPU seconds
both (on a shared machine the CPU seconds are the steadier figure). Both transport modes run
side by side (``--mode both``, the default): every link a real UDP socket (emu's default) and
``--direct`` (frames within a process handed over in memory); their figures are checked equal.

    python scripts/bench_alltoall.py [--messages 10] [--processes 1] [--repeat 1] [--topo SPEC] [--pcap F]
        [--mode both|sockets|direct] [--partition metis|order] [--bind ADDRESS|INTERFACE] [--trace F]
    mpiexec -n 2 python scripts/bench_alltoall.py ...    (one domain per MPI rank)
"""

from __future__ import annotations

import argparse
import pathlib
import socket
import sys
import time

import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import emu  # noqa: E402
from emu.mpi import world  # noqa: E402
from emu.topologies import build  # noqa: E402

TOPO = "fattree:k=4,n=3,latency_ns=1000,bandwidth_gbps=10,switch_delay_ns=0,nic_delay_ns=0"
GOAL = 300_000
SIZE = 1024
LOOP_SHARE = 0.75
"""The goal of issue 27: crossings per second at least this share of the plain loopback loop's datagrams."""


def loopback_loop(n: int = 200_000, size: int = SIZE) -> tuple[float, float]:
    """The plain Python loopback loop: ``n`` turns of one ``size``-byte datagram sent on one UDP socket
    and received on another (127.0.0.1, blocking). Returns (datagrams per wall second, per CPU second)."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        addr = rx.getsockname()
        payload = bytes(size)
        send, recv = tx.sendto, rx.recv
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            send(payload, addr)
            recv(65536)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        rx.close()
        tx.close()
    return n / wall, n / max(cpu, 1e-9)


async def alltoall(host, hosts, messages):
    me = hosts.index(host.name)
    n = len(hosts)
    data = bytes(SIZE)
    for k in range(messages):
        for s in range(1, n):
            await host.send(hosts[(me + s) % n], data, tag=k)
    for k in range(messages):
        for s in range(1, n):
            await host.recv(hosts[(me - s) % n], k)
    return None


async def once(spec: str, messages: int, processes: int, pcap: str | None = None, direct: bool = False,
               partition: str = "metis", bind: str = "127.0.0.1", trace: str | None = None,
               batch: bool = True) -> dict:
    t = build(spec, settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0}})
    size = world()[1]  # under mpiexec -n N: the N ranks are the processes
    run = emu.RunConfig(processes=size if size > 1 else processes, capture=pcap is not None, direct=direct,
                        partition=partition, mpi=size > 1, bind=bind, trace=trace, batch=batch)
    async with emu.Cluster(t, run=run, capture=pcap) as net:
        hosts = net.hosts
        wall, cpu = time.perf_counter(), time.process_time()
        await net.run({h: (alltoall, hosts, messages) for h in hosts})
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        m = net.metrics
    import resource

    return dict(crossings=m.hop_count, frames=m.frames, wall_s=wall, completion_ns=m.end_ns - m.start_ns,
                per_s=m.hop_count / wall, cpu_s=cpu, per_cpu_s=m.hop_count / max(cpu, 1e-9), peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--messages", type=int, default=10)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--topo", default=TOPO)
    ap.add_argument("--pcap", help="also capture every frame to this pcapng file (its cost is in the wall time)")
    ap.add_argument("--mode", choices=["both", "sockets", "direct"], default="both",
                    help="every link on UDP (sockets, emu's default), frames within a process handed over in "
                         "memory (direct, emu run --direct), or both side by side")
    ap.add_argument("--wire", action="store_true", help="the same as --mode sockets (kept for old command lines)")
    ap.add_argument("--loop", type=int, default=200_000, metavar="N",
                    help="turns of the plain loopback loop measured beside each repeat (0: none)")
    ap.add_argument("--partition", choices=["metis", "order"], default="metis")
    ap.add_argument("--trace", help="also write the run's trace to this file (emu.trace; its cost is in the wall time)")
    ap.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS|INTERFACE",
                    help="where the elements' sockets listen (as emu run --bind); off loopback every "
                         "datagram carries a keyed tag")
    ap.add_argument("--no-batch", action="store_true",
                    help="a socket per element, every port's frames of a window a datagram of their own "
                         "(RunConfig.batch=False; the default joins a process's frames per destination socket)")
    a = ap.parse_args(argv)
    from emu import native

    print(f"element loop: {native.in_use()} ({'emu/_core.c; EMU_PURE=1 for pure Python' if native.CORE else 'the compiled core is not built or EMU_PURE is set'})")
    procs = world()[1] if world()[1] > 1 else a.processes
    modes = ["sockets"] if a.wire else ["sockets", "direct"] if a.mode == "both" else [a.mode]
    rows = []
    loops = []
    for _ in range(a.repeat):
        if a.loop:
            loops.append(loopback_loop(a.loop))
            print(f"loopback loop: {loops[-1][0]:,.0f} datagrams/s wall, {loops[-1][1]:,.0f} per CPU s  "
                  f"(goal {LOOP_SHARE} of it: {LOOP_SHARE * loops[-1][0]:,.0f} crossings/s wall)", flush=True)
        for mode in modes:  # interleaved, so that a noisy spell hits both modes alike
            r = trio.run(once, a.topo, a.messages, a.processes, a.pcap, mode == "direct", a.partition, a.bind, a.trace,
                         not a.no_batch)
            r["mode"] = mode
            if loops:
                r["loop_per_s"], r["loop_per_cpu_s"] = loops[-1]
            rows.append(r)
            print(f"mode={mode:<7}{' (no batch)' if a.no_batch else ''}  {a.topo}  processes={procs}{' (MPI ranks)' if world()[1] > 1 else ''} partition={a.partition} bind={a.bind}  frames={r['frames']:,}  crossings={r['crossings']:,}  "
                  f"virtual completion={r['completion_ns']:,} ns  wall={r['wall_s']:.2f} s  "
                  f"crossings/s={r['per_s']:,.0f} (per CPU s {r['per_cpu_s']:,.0f})  peak RSS {r['peak_rss_mb']:,} MB  (goal {GOAL:,}: {'met' if r['per_s'] >= GOAL else 'not met'})",
                  flush=True)
    if len({(r["frames"], r["crossings"], r["completion_ns"]) for r in rows}) != 1:
        raise SystemExit("the runs' virtual-time figures differ (a bug)")
    if len(modes) == 2:
        best = {m: min(r["wall_s"] for r in rows if r["mode"] == m) for m in modes}
        print(f"sockets {best['sockets']:.2f} s, direct {best['direct']:.2f} s: direct is "
              f"{best['sockets'] / best['direct']:.2f}x faster; the same figures (checked)", flush=True)
    if loops:
        for mode in modes:  # each run against the loop measured just before it; the best of the repeats
            mine = [r for r in rows if r["mode"] == mode]
            wall = max(r["per_s"] / r["loop_per_s"] for r in mine)
            cpu = max(r["per_cpu_s"] / r["loop_per_cpu_s"] for r in mine)
            print(f"{mode}: best {max(r['per_s'] for r in mine):,.0f} crossings/s wall "
                  f"({max(r['per_cpu_s'] for r in mine):,.0f} per CPU s) = {wall:.2f} of the loopback loop "
                  f"(per CPU s {cpu:.2f}); goal {LOOP_SHARE}: {'met' if wall >= LOOP_SHARE else 'not met'}", flush=True)
    return rows


if __name__ == "__main__":
    # the applications must pickle by an importable name for worker processes (not ``__main__``)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import bench_alltoall

    from emu.mpi import entry

    entry(bench_alltoall.main)  # under mpiexec -n N: rank 0 runs it, the others serve their domains
