#!/usr/bin/env python3
"""Spec 02 at the source's headline size: every broadcast scheme on the k-ary 2-mesh, emulated --
execution time and hops.

    python scripts/nc_scale.py [--k 8] [--full] [--jobs 2] [--schemes tree,all_at_once,...]
                               [--router output_queued|input_queued] [--model] [--out results/nc_scale]

``--full``: the 32-ary 2-mesh (1024 nodes, N(N-1) = 1,047,552 receptions by every scheme); default a
reduced size (``--k``, 8). Every scheme (tree, all-at-once, nc, all-at-once coded, nc_every,
nc_recursive, combine) runs on the same NICs and router model: the source's (``nc_broadcast``: 1 ns
cycles, 3 header cycles per hop, virtual cut-through, 1-flit packets, 4 VCs, XOR 1 cycle), in one
process with frames in memory between its elements (``emu.Cluster(direct=True)``: the same figures
as over UDP). Each run is checked bit for bit at every node, and its hops measured from the frames
equal the analytic count (``nodes/collectives/coding/counter.py``; printed beside, with the floor
N(N-1)). ``--jobs``: schemes run side by side in that many processes. The model of each step's
critical path (``timing.model``) is printed beside the measurement up to 256 nodes, or with ``--model``
(at 1024 nodes it walks every one of the million unicasts' paths: minutes and gigabytes).

Prints each scheme's wall-clock time and the total: the script is meant to finish the 32-ary mesh in
under 30 minutes on 2 cores (measured with the output-queued router; the input-queued one takes
about three times as long per frame).
"""

from __future__ import annotations

import argparse
import multiprocessing
import pathlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import nc_broadcast as nb  # noqa: E402
from expt import write_csv  # noqa: E402

SCHEMES = {"tree": ("tree", "tree"), "all_at_once": ("all_at_once", "tree"), "nc": ("nc", "tree"),
           "all_at_once_coded": ("all_at_once_coded", "tree"), "nc_every": ("nc_every", "tree"),
           "nc_recursive": ("nc_recursive", "tree"), "combine": ("combine", "tree")}
COST = ("all_at_once", "nc_every", "all_at_once_coded", "tree", "nc_recursive", "nc", "combine")
"""Dearest first, so that side-by-side processes finish together."""
COLS = ("scheme", "shape", "hops", "analytic", "floor", "hops/floor", "unicasts", "packet_hops", "exec_ns", "model_ns", "phase_ns",
        "mean_latency_ns", "end_to_end_ns", "completion_ns", "wall_s", "cpu_s")


def one(args) -> dict:
    """One scheme's run (in a worker process, or here)."""
    k, name, router, with_model = args
    nb.ROUTER[0] = router
    algo, mcast = SCHEMES[name]
    wall, cpu = time.perf_counter(), time.process_time()
    r = nb.em("mesh", k, algo, mcast=mcast, direct=True, with_model=with_model)
    r["scheme"] = name
    r["hops/floor"] = round(r["hops"] / r["floor"], 3)
    r["wall_s"] = round(time.perf_counter() - wall, 1)
    r["cpu_s"] = round(time.process_time() - cpu, 1)
    return {c: v for c, v in r.items() if not isinstance(v, dict)}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--k", type=int, default=8, help="the k-ary 2-mesh (default 8; --full: 32)")
    ap.add_argument("--full", action="store_true", help="the source's headline size: the 32-ary 2-mesh")
    ap.add_argument("--jobs", type=int, default=2, help="schemes run side by side in this many processes")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--router", choices=["output_queued", "input_queued"], default="output_queued")
    ap.add_argument("--model", action="store_true", help="the critical-path model also above 256 nodes")
    ap.add_argument("--out", default="results/nc_scale")
    a = ap.parse_args(argv)
    k = 32 if a.full else a.k
    names = [s for s in a.schemes.split(",") if s]
    bad = [s for s in names if s not in SCHEMES]
    if bad or not 2 <= k <= 64 or a.jobs < 1:
        ap.error(f"--schemes takes {', '.join(SCHEMES)}" if bad else
                 "--k must be within 2..64" if not 2 <= k <= 64 else "--jobs must be 1 or more")
    with_model = a.model or k * k <= 256
    print(f"== every scheme on the {k}-ary 2-mesh ({k * k} nodes, floor N(N-1) = {k * k * (k * k - 1):,} receptions "
          f"and hops), {a.router} router, the source's router model; {a.jobs} process(es) ==", flush=True)
    wall = time.perf_counter()
    jobs = [(k, n, a.router, with_model) for n in sorted(names, key=COST.index)]
    if a.jobs == 1:
        rows = []
        for j in jobs:
            rows.append(one(j))
            print(f"  {rows[-1]['scheme']}: {rows[-1]['wall_s']} s wall, {rows[-1]['cpu_s']} s CPU", flush=True)
    else:
        with ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("fork")) as ex:
            rows = []
            for fut in as_completed([ex.submit(one, j) for j in jobs]):
                rows.append(fut.result())
                print(f"  {rows[-1]['scheme']}: {rows[-1]['wall_s']} s wall, {rows[-1]['cpu_s']} s CPU, "
                      f"exec {rows[-1]['exec_ns']} ns, {rows[-1]['hops']:,} hops", flush=True)
    rows.sort(key=lambda r: names.index(r["scheme"]))
    wall = time.perf_counter() - wall
    nb.show(rows, COLS)
    print("hops: router-to-router links crossed, measured from the frames (= analytic, asserted); exec_ns: sum over "
          "the sequential steps of each step's longest packet latency; end_to_end_ns: first injection to the last "
          "node done" + ("" if with_model else "; model_ns: not computed at this size (--model)"))
    print(f"wall time: {wall:.0f} s in all ({a.jobs} process(es); per scheme in wall_s, its CPU time in cpu_s: on "
          f"{a.jobs} idle cores the run takes about the larger of {sum(r['cpu_s'] for r in rows):.0f} / {a.jobs} s "
          f"and the dearest scheme's {max(r['cpu_s'] for r in rows):.0f} s)")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"nc_scale_k{k}.csv", rows)
    print(f"wrote {out}/nc_scale_k{k}.csv")
    return rows


if __name__ == "__main__":
    main()
