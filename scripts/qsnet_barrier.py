#!/usr/bin/env python3
"""Spec 03's barrier measurement: latency vs node count, the adapters' polled and tree barriers
vs host software (dissemination), all entering together and with skewed arrival.

    python scripts/qsnet_barrier.py [--topos 'star:n=16;fattree:k=4,n=2;fattree:k=4,n=3;fattree:k=4,n=4']
                                    [--skew 0,5000] [--seeds 5] [--branch 4] [--out results/qsnet_barrier/]

Each rank r enters at ``enter[r]``: 0 for all (``--skew 0``), or uniform in [0, skew) ns drawn
from the seeded generator (one draw per seed; ``--seeds`` of them). A barrier's **latency** is the
time from the *last* entry until the *last* rank has left (what the barrier adds once everybody is
there); the table gives the mean over seeds with a 95 % confidence half-width (Student t), and the
host CPU time the barrier cost per rank. Beside the measurement, where the topology is a star (every
rank one switch from every other), the model of ``emu.nodes.collectives.model`` (``hw_tree_barrier_ns``,
``hw_polled_barrier_ns``): the emulator equals it to the nanosecond there (tests/test_qsnet_barrier.py),
so the star rows check the script, and the fat-tree rows show what the model leaves out (more hops,
ports shared on the way up).

Runs use the sans-I/O engine harness ``emu.sim.EngineNet`` (the same engines and virtual-time figures
as ``emu run``, without sockets), links at QsNet's 20 Gbit/s of data unless a spec sets
``bandwidth_gbps``, and the barrier group over every host.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import ci95, pyplot, write_csv  # noqa: E402

import emu.front.engines  # noqa: E402,F401 -- registers the host and switch engines EngineNet builds
from emu.sim import EngineNet  # noqa: E402
from emu.nodes.collectives.comm import Comm  # noqa: E402
from emu.nodes.collectives.hw import HW_GROUP  # noqa: E402
from emu.nodes.collectives.model import hw_polled_barrier_ns, hw_tree_barrier_ns  # noqa: E402
from emu.topologies import build  # noqa: E402

ALGOS = ("hw tree", "hw polled", "sw dissemination")


async def app(host, algo, branch, enter):
    c = Comm(host)
    await host.sleep(enter[c.rank])
    cpu0 = host.cpu_ns
    if algo == "sw dissemination":
        await c.barrier("dissemination")
    else:
        await c.barrier(offload="hw", algo=algo.split()[1], branch=branch)
    return host.now, host.cpu_ns - cpu0


def with_rate(spec: str) -> str:
    return spec if "bandwidth_gbps" in spec else spec + ",bandwidth_gbps=20"


def run(spec: str, algo: str, branch: int, enter: list[int]) -> tuple[int, int, int | None]:
    t = build(spec)
    t.add_group(HW_GROUP, t.host_names())
    res = EngineNet(t).run({h: (app, algo, branch, enter) for h in t.host_names()})
    leave = max(r[0] for r in res.values())
    cpu = max(r[1] for r in res.values())
    model = None
    if spec.startswith("star:") and algo != "sw dissemination":
        host, link, sw = t.hosts[0].spec, t.links[0].spec, t.nodes["s0"].spec
        times = (hw_tree_barrier_ns(enter, branch, host, link, sw) if algo == "hw tree"
                 else hw_polled_barrier_ns(enter, host, link, sw))
        model = max(times) - max(enter)
    return leave - max(enter), cpu, model


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--topos", default="star:n=16;fattree:k=4,n=2;fattree:k=4,n=3;fattree:k=4,n=4")
    ap.add_argument("--skew", default="0,5000", help="comma-separated arrival spreads in ns")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--branch", type=int, default=4)
    ap.add_argument("--out", default="results/qsnet_barrier")
    a = ap.parse_args(argv)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'topology':<34} {'nodes':>5} {'skew':>6} {'algorithm':<17} {'latency ns':>16} {'model':>7} "
          f"{'cpu ns':>7} {'wall s':>6}")
    for spec in [with_rate(s.strip()) for s in a.topos.split(";") if s.strip()]:
        n = len(build(spec).host_names())
        for skew in [int(s) for s in a.skew.split(",")]:
            seeds = range(a.seeds) if skew else range(1)
            for algo in ALGOS:
                lats, cpus, models = [], [], []
                t0 = time.perf_counter()
                for seed in seeds:
                    rng = np.random.default_rng([seed, n])
                    enter = [int(v) for v in rng.integers(0, skew, n)] if skew else [0] * n
                    lat, cpu, model = run(spec, algo, a.branch, enter)
                    lats.append(lat)
                    cpus.append(cpu)
                    models.append(model)
                mean, half = ci95(lats)
                model = ci95(models)[0] if models[0] is not None else None
                row = dict(topology=spec, nodes=n, skew_ns=skew, algo=algo, latency_ns=round(mean, 1),
                           ci95_ns=round(half, 1), model_ns=None if model is None else round(model, 1),
                           cpu_ns=max(cpus), seeds=len(lats))
                rows.append(row)
                ci = f"{mean:,.0f} ± {half:,.0f}" if half else f"{mean:,.0f}"
                print(f"{spec:<34} {n:>5} {skew:>6} {algo:<17} {ci:>16} "
                      f"{'-' if model is None else f'{model:,.0f}':>7} {max(cpus):>7,} {time.perf_counter() - t0:>6.1f}",
                      flush=True)
    write_csv(out / "barrier.csv", rows)
    plt = pyplot()
    if plt is None:
        return rows
    skews = sorted({r["skew_ns"] for r in rows})
    fig, axes = plt.subplots(1, len(skews), figsize=(6 * len(skews), 4), squeeze=False)
    for ax, skew in zip(axes[0], skews):
        for algo in ALGOS:
            pts = sorted((r["nodes"], r["latency_ns"], r["ci95_ns"]) for r in rows
                         if r["skew_ns"] == skew and r["algo"] == algo and not r["topology"].startswith("star"))
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o",
                            capsize=3, label=algo)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("nodes (every topology but the star; see the table for which)")
        ax.set_ylabel("latency after the last arrival (ns)")
        ax.set_title(f"barrier, arrival skew {skew} ns")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "barrier.png", dpi=120)
    print(f"wrote {out / 'barrier.csv'} and {out / 'barrier.png'}")
    return rows


if __name__ == "__main__":
    main()
