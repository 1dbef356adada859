#!/usr/bin/env python3
"""Spec 02 on indirect networks (hosts on switches): coded all-to-all broadcast with the XOR done at a
host, against tree and all-at-once on the same NICs, measured beside the model of each step's
critical path.

    python scripts/nc_indirect.py [--topos star:n=16,fattree:k=4,n=2,fattree:k=4,n=3]
                                  [--schemes tree,all_at_once,nc,all_at_once_coded,combine] [--groups 0,4]
                                  [--size 40] [--out results/nc_indirect]

The source argues that coding still pays where the routers cannot code: the intermediate node is a
host (three packet transfers per coded pair -- two packets in, the XOR out -- where a coding router
needs two). Every scheme runs on the hosts' NICs from the plans of ``nodes/collectives/coding`` laid on
the hosts' rank line (``indirect``: groups of consecutive ranks -- on a fat tree the hosts of a leaf
switch --, the IN the group's rank nearest the middle), every payload checked bit for bit. Per run:
hops (switch-to-switch links crossed, from the frames; equal by assertion to the count along the
topology's routes), frames on the switch-to-switch links, receptions against the floor N(N-1), and
the execution time (sum over the sequential steps of each step's longest packet latency) beside the
model (``timing.model`` on the topology's routes: the unloaded path plus the queue at the injection
channel, the ejection channel or the busiest switch link). ``--groups``: group sizes to try (0: the
default, the smallest divisor of N at least sqrt(N)); GxM: G groups of M hosts. The topologies keep their own link and switch
settings (the families' defaults), said in the output.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import write_csv  # noqa: E402

COLS = ("topology", "hosts", "scheme", "GxM", "hops", "route_hops", "busiest_switch_link", "unicasts", "floor",
        "exec_ns", "model_ns", "end_to_end_ns", "mean_latency_ns", "phase_ns", "binds_most")


async def app(host, algo, shape, size):
    from emu.nodes.collectives.coding.plan import Scheme
    from emu.nodes.collectives.coding.run import broadcast
    from emu.nodes.collectives.comm import Comm

    c = Comm(host)
    x = np.random.default_rng([c.rank, size]).integers(0, 256, size, dtype=np.uint8)
    y = await broadcast(c, x, Scheme(algo, shape))
    return y, c.nc_stats, c.last_algo


async def emulate(spec: str, algo: str, shape=None, size: int = 40) -> dict:
    import emu
    from emu.nodes.collectives.coding import Scheme, plan
    from emu.nodes.collectives.coding.indirect import default_shape, hops, line
    from emu.nodes.collectives.coding.timing import figures
    from emu.topologies import build

    t = build(spec)
    n = len(t.hosts)
    coded = algo not in ("tree", "all_at_once")
    shape = (shape or default_shape(n)) if coded else None
    async with emu.Cluster(t, direct=True) as net:
        res = await net.run({h: (app, algo, shape, size) for h in net.hosts})
        m = net.metrics
    names = t.host_names()
    ref = np.stack([np.random.default_rng([r, size]).integers(0, 256, size, dtype=np.uint8) for r in range(n)])
    assert all(res[h][0].tobytes() == ref.tobytes() for h in names), f"{spec} {algo}: not decoded"
    p = plan(line(n), Scheme(algo, shape))
    measured_hops = m.hop_count - 2 * m.frames
    assert measured_hops == hops(t, p) and m.frames == p.unicasts, f"{spec} {algo}: hops {measured_hops}"
    core = {t.port_name(a, port) for a, es in t.neighbours().items() if t.nodes[a].kind == "switch"
            for port, peer, _pp, _l in es if t.nodes[peer].kind == "switch"}
    busiest = max((v["frames"] for name, v in m.per_link().items() if name in core), default=0)
    f = figures(t, [res[h][1] for h in names])
    big = max((s for s in f["model_steps"] if s != "G"), key=f["model_steps"].get)
    phases: dict = {}
    for name, v in f["steps"].items():
        ph = name.rsplit(" r", 1)[0]
        phases[ph] = phases.get(ph, 0) + v
    return dict(topology=spec, hosts=n, scheme=algo, GxM=f"{n // shape[0]}x{shape[0]}" if shape else "",
                hops=measured_hops, route_hops=hops(t, p), busiest_switch_link=busiest, unicasts=m.frames,
                floor=n * (n - 1), exec_ns=f["execution_ns"], model_ns=f["model_execution_ns"],
                end_to_end_ns=f["end_to_end_ns"], mean_latency_ns=f["packet_latency_mean_ns"],
                phase_ns="/".join(str(v) for v in phases.values()), binds_most=f"{big}: {f['model_binds'][big]}",
                algo=res[names[0]][2])


def main(argv=None) -> list[dict]:
    from emu.config import ConfigError

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--topos", default="star:n=16;fattree:k=4,n=2;fattree:k=4,n=3",
                    help="indirect topologies, separated by ';'")
    ap.add_argument("--schemes", default="tree,all_at_once,nc,all_at_once_coded,combine")
    ap.add_argument("--groups", default="0", help="group sizes (0: the default, about sqrt(N))")
    ap.add_argument("--size", type=int, default=40, help="payload bytes per packet")
    ap.add_argument("--out", default="results/nc_indirect")
    a = ap.parse_args(argv)
    rows = []
    for spec in [s for s in a.topos.split(";") if s]:
        for algo in a.schemes.split(","):
            sizes = [int(x) for x in a.groups.split(",")] if algo not in ("tree", "all_at_once") else [0]
            for m in sizes:
                try:
                    rows.append(trio.run(emulate, spec, algo, (m,) if m else None, a.size))
                except ConfigError as e:
                    ap.error(f"{spec} {algo} groups of {m}: {e}")
    from nc_broadcast import show

    print("== coded all-to-all broadcast on indirect networks, the XOR at host INs; every scheme on the NICs, the "
          "families' own link and switch settings ==")
    show(rows, COLS)
    print("hops: switch-to-switch links crossed (from the frames; route_hops: along the topology's routes, equal); "
          "busiest_switch_link: the frames on the busiest switch-to-switch link direction; exec_ns: sum over the sequential steps of each step's "
          "longest packet latency; model_ns: each step's critical path (unloaded path + the queue at the resource "
          "that binds, binds_most: the largest step's)")
    for spec in dict.fromkeys(r["topology"] for r in rows):
        rs = [r for r in rows if r["topology"] == spec]
        base = {r["scheme"]: r for r in rs if r["scheme"] in ("tree", "all_at_once")}
        coded = [r for r in rs if r["scheme"] not in ("tree", "all_at_once")]
        if not coded or not base:
            continue
        best = min(coded, key=lambda r: r["exec_ns"])
        fewest = min(coded, key=lambda r: r["hops"])
        print(f"{spec}: fastest coded {best['scheme']} {best['GxM']} {best['exec_ns']} ns; fewest hops coded "
              f"{fewest['scheme']} {fewest['GxM']} {fewest['hops']:,}; against "
              + ", ".join(f"{b['scheme']} {b['exec_ns']} ns / {b['hops']:,} hops" for b in base.values()))
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "nc_indirect.csv", rows)
    return rows


if __name__ == "__main__":
    main()
