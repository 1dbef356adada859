#!/usr/bin/env python3
"""Wall-clock cost of lossy sockets: a 1 MiB ring allreduce on ``star:n=8`` with every link on UDP
(``emu run --wire``), without loss and with a fraction of the datagrams dropped before ``sendto``
(``RunConfig.socket_drop_rate``: what a full receive buffer does to a run).

Prints per drop rate the wall time of the run (start-up excluded), the datagrams dropped and resent,
and the virtual figures (completion, frames, bytes, hop count, capture hash), which must be the same
at every drop rate. The goal (issue 22, item 7): at 5 % loss within 5x the lossless wall time.

    python scripts/bench_lossy.py [--rates 0,0.05] [--size 1MiB] [--topo star:n=8] [--processes 1]
        [--repeat 1] [--no-pcap]
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import sys
import tempfile
import time

import trio

import emu  # the installed package (pip install -e .): emu.nodes lives in nodes/
from emu.front.checks import Options, run_check

GOAL = 5.0
"""At 5 % loss, the wall time may be at most this many times the lossless one."""


async def once(topo: str, size: str, rate: float, processes: int, pcap: bool) -> dict:
    run = emu.RunConfig(processes=processes, direct=False, socket_drop_rate=rate, capture=pcap,
                        stall_timeout_s=0.2)
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/r.pcapng" if pcap else None
        async with emu.Cluster(topo, run=run, capture=path) as net:
            wall = time.perf_counter()
            r = await run_check(net, "allreduce", Options(extra={"algo": "ring", "size": size}))
            wall = time.perf_counter() - wall
            st = await net.stats()
        digest = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16] if pcap else "-"
    assert r.ok, r.error
    el = [s["element"] for s in st]
    return dict(rate=rate, wall_s=wall, figures=(r.completion_ns, r.frames, r.bytes, r.hop_count, digest),
                dropped=sum(e["sock_dropped"] for e in el), resent=sum(e["retransmitted"] for e in el),
                nacks=sum(e["nacks_sent"] for e in el))


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--rates", default="0,0.05", help="drop rates, comma-separated (the first is the baseline)")
    ap.add_argument("--size", default="1MiB")
    ap.add_argument("--topo", default="star:n=8")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-pcap", action="store_true", help="no capture (then no capture hash)")
    a = ap.parse_args(argv)
    rows = []
    for _ in range(a.repeat):
        for rate in (float(x) for x in a.rates.split(",")):
            r = trio.run(once, a.topo, a.size, rate, a.processes, not a.no_pcap)
            rows.append(r)
            print(f"drop {rate:5.1%}: wall {r['wall_s']:7.2f} s  dropped {r['dropped']:6,}  resent {r['resent']:6,}  "
                  f"nacks {r['nacks']:6,}  (completion ns, frames, bytes, hops, capture) = {r['figures']}", flush=True)
    base = min(r["wall_s"] for r in rows if r["rate"] == rows[0]["rate"])
    same = len({r["figures"] for r in rows}) == 1
    for rate in sorted({r["rate"] for r in rows} - {rows[0]["rate"]}):
        worst = max(r["wall_s"] for r in rows if r["rate"] == rate)
        verdict = "ok" if worst <= GOAL * base else "OVER"
        print(f"drop {rate:.1%}: {worst / base:.2f}x the lossless wall time (goal <= {GOAL:g}x): {verdict}")
    print("figures identical at every drop rate" if same else "FIGURES DIFFER")
    if not same:
        sys.exit(1)
    return rows


if __name__ == "__main__":
    main()
