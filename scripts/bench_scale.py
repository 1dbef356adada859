#!/usr/bin/env python3
"""Large clusters: start, ping a sample of pairs, tear down; wall time and peak memory per phase.

    python scripts/bench_scale.py [SPEC ...] [--processes=P] [--mode=both|sockets|direct]
                                        (default: fattree:k=32,n=2 mesh:k=32,n=2, both modes)

Both transport modes side by side: every link a real UDP socket (emu's default) and direct (frames
within a process handed over in memory, ``emu run --direct``); their virtual figures must agree.

Wall-clock figures are measurements of the emulator, not of the model; the virtual-time figures
(completion, RTTs) are exact and repeatable.
"""

from __future__ import annotations

import resource
import sys
import time

import trio
from rich.console import Console
from rich.table import Table

import emu
from emu.front.checks import Options, run_check
from emu.topologies import build


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def one(spec: str, processes: int, direct: bool = False) -> dict:
    t0 = time.perf_counter()
    topo = build(spec)
    t_build = time.perf_counter() - t0
    net = emu.Cluster(topo, processes=processes, direct=direct)
    t1 = time.perf_counter()
    async with net:
        t_start = time.perf_counter() - t1
        t2 = time.perf_counter()
        r = await run_check(net, "pingall", Options())
        t_ping = time.perf_counter() - t2
        windows = net.windows
        t3 = time.perf_counter()
    t_stop = time.perf_counter() - t3
    return {"spec": spec, "mode": "direct" if direct else "sockets", "hosts": len(topo.hosts), "elements": len(topo.nodes), "build_s": t_build,
            "start_s": t_start, "ping_s": t_ping, "stop_s": t_stop, "ok": r.ok, "pairs": r.figures.get("pairs"),
            "completion_ns": r.completion_ns, "windows": windows, "rss_mib": peak_rss_mib(), "error": r.error}


async def main(specs: list[str], processes: int, modes: list[str]) -> None:
    rows = []
    for spec in specs:
        for mode in modes:
            rows.append(await one(spec, processes, mode == "direct"))
        same = {(r["completion_ns"], r["pairs"], r["ok"]) for r in rows if r["spec"] == spec}
        if len(same) != 1:
            raise SystemExit(f"{spec}: the modes' virtual figures differ: {sorted(same)} (a bug)")
    t = Table(title=f"scale: start, pingall (sampled), teardown; {processes} process(es)")
    for c in ("topology", "mode", "hosts", "elements", "topology build s", "start s", "pingall s", "teardown s",
              "pairs", "virtual completion ns", "windows", "peak RSS MiB (so far)", "ok"):
        t.add_column(c, justify="left" if c == "topology" else "right")
    for r in rows:
        t.add_row(r["spec"], r["mode"], str(r["hosts"]), str(r["elements"]), f"{r['build_s']:.2f}", f"{r['start_s']:.2f}",
                  f"{r['ping_s']:.2f}", f"{r['stop_s']:.2f}", str(r["pairs"]), f"{r['completion_ns']:,}",
                  f"{r['windows']:,}", f"{r['rss_mib']:.0f}", "yes" if r["ok"] else f"NO {r['error']}")
    Console(width=200).print(t)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    procs = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--processes=")), 1)
    mode = next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--mode=")), "both")
    if mode not in ("both", "sockets", "direct"):
        raise SystemExit(f"--mode={mode}: give both, sockets or direct")
    trio.run(main, args or ["fattree:k=32,n=2", "mesh:k=32,n=2"], procs,
             ["sockets", "direct"] if mode == "both" else [mode])
