"""Latency-load curves of the two router models, and what the input-queued one costs per crossing.

For each mesh, router model and number of VCs: open-loop uniform traffic (``emu run --test uniform``)
at a ladder of offered loads, with the mean latency, the accepted throughput and the zero-load model
beside each, and the saturation point. Both router models run on the same engine, topology, links,
packet size and traffic schedules (same seed): only the router differs.

* ``output_queued``: an ideal switch (a frame goes from its input into its output port's FIFO).
* ``input_queued``: per-input VC buffers (two of the largest frames each), credits per flit,
  VC and switch allocation (round robin), head-of-line blocking within a VC; the same delay per
  router (its route stage) and cut-through at flit granularity in both.

    python scripts/router_curves.py                # meshes k=4 and k=8, 1/2/8 VCs, short windows
    python scripts/router_curves.py --full         # the issue's windows (1,000 + 1,000 cycles)
    python scripts/router_curves.py --k 4 --vcs 1  # one configuration

The wall time per link crossing of each model is printed too (``frames x hops / wall s``): a
benchmark figure, not a virtual one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

LOADS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def run(k: int, model: str, vcs: int, loads, warmup: int, measure: int, size: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [sys.executable, "-m", "emu", "run", "--topo", f"mesh:k={k},n=2", "--test", "uniform",
               "--load", ",".join(map(str, loads)), "--warmup", str(warmup), "--measure", str(measure),
               "--size", str(size), "--set", f"switch.model={model}", "--set", f"switch.vcs={vcs}",
               "--set", "switch.cut_through=true", "--json", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["results"][0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--k", type=int, action="append", help="mesh side (repeat; default 4 and 8)")
    ap.add_argument("--vcs", type=int, action="append", help="VCs (repeat; default 1, 2, 8)")
    ap.add_argument("--size", type=int, default=256, help="packet payload bytes (default 256)")
    ap.add_argument("--full", action="store_true", help="1,000-cycle warm-up and measurement windows")
    ap.add_argument("--loads", default=",".join(map(str, LOADS)), help="offered loads, comma-separated")
    ap.add_argument("--cycles", type=int, help="warm-up and measurement cycles (default 300; 1,000 with --full)")
    a = ap.parse_args(argv)
    ks, vcs = a.k or [4, 8], a.vcs or [1, 2, 8]
    loads = tuple(float(x) for x in a.loads.split(","))
    warm = meas = a.cycles or (1000 if a.full else 300)
    print(f"uniform traffic, {a.size}-byte packets, warm-up {warm} and measurement {meas} cycles, "
          f"loads {', '.join(map(str, loads))}; cores: {os.cpu_count()}")
    summary = []
    for k in ks:
        for v in vcs:
            for model in ("output_queued", "input_queued"):
                r = run(k, model, v, loads, warm, meas, a.size)
                print(f"\nmesh:k={k},n=2  {model}  vcs={v}  zero-load model {r['zero_load_model_ns']} ns  "
                      f"saturation: {r['saturation']}")
                print(f"{'offered':>8} {'accepted':>9} {'mean_ns':>10} {'p99_ns':>9} {'model_ns':>9}")
                for row in r["curve"]:
                    print(f"{row['offered']:>8} {row['accepted']:>9} {row['mean_ns']:>10,} {row['p99_ns']:>9,} "
                          f"{row['model_ns']:>9}")
                cross = r["hop_count_all_loads"]
                summary.append((k, v, model, r["saturation_load"], cross / r["wall_s"] if r["wall_s"] else 0))
    print("\nsaturation (lowest load whose accepted throughput falls 5 % short, or latency > 3x the model)")
    print(f"{'mesh':>6} {'vcs':>4} {'model':>14} {'saturation':>11} {'crossings/s':>12}")
    for k, v, model, sat, cps in summary:
        print(f"{'k=' + str(k):>6} {v:>4} {model:>14} {str(sat or '> ' + str(loads[-1])):>11} {cps:>12,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
