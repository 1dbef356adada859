#!/usr/bin/env python3
"""Spec 02: execution time per group shape on the 16-ary 2-mesh, measured -- every group shape run,
beside its analytic hop counts and longest paths (the planner's table).

    python scripts/nc_groups.py [--k 16] [--mcast tree|all_at_once] [--scheme nc|nc_every|combine]
                                [--jobs 2] [--router output_queued|input_queued] [--out results/nc_groups]

The source picks its group size by two arguments: the aggregate hop count and the execution time per
group shape. This runs the coded all-to-all broadcast with every group shape that tiles the k-ary
2-mesh (at least 2 groups of at least 2 nodes), on the source's router model (``nc_broadcast``), in
one process with frames in memory (``emu.Cluster(direct=True)``), and prints per shape: the analytic
hops per step and in total (``counter``; the frames' hops are asserted equal), the longest paths
inside a group and between INs, the measured execution time (sum over the sequential steps of each
step's longest packet latency, per phase B+F / C+D / E / G), the modelled one (``timing.model``), the
end-to-end time and the mean packet latency; then which shape each figure prefers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pathlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import nc_broadcast as nb  # noqa: E402
from expt import write_csv  # noqa: E402

COLS = ("shape", "groups", "M", "inner", "between", "hops_B", "hops_D", "hops_E", "hops_F", "analytic", "hops",
        "exec_ns", "phase_ns", "model_ns", "model_phase_ns", "end_to_end_ns", "mean_latency_ns", "wall_s")


def one(args) -> dict:
    k, scheme, mcast, shape, router = args
    nb.ROUTER[0] = router
    wall = time.perf_counter()
    r = nb.em("mesh", k, scheme, shape=shape, mcast=mcast, direct=True)
    r["wall_s"] = round(time.perf_counter() - wall, 1)
    return {c: v for c, v in r.items() if not isinstance(v, dict)}


def main(argv=None) -> list[dict]:
    from emu.nodes.collectives.coding.planner import table
    from emu.topologies.grid import Grid

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--k", type=int, default=16, help="the k-ary 2-mesh (default 16, the source's)")
    ap.add_argument("--mcast", choices=["tree", "all_at_once"], default="tree", help="multicast of B, D, E")
    ap.add_argument("--scheme", choices=["nc", "nc_every", "combine"], default="nc")
    ap.add_argument("--jobs", type=int, default=2, help="shapes run side by side in this many processes")
    ap.add_argument("--router", choices=["output_queued", "input_queued"], default="output_queued")
    ap.add_argument("--out", default="results/nc_groups")
    a = ap.parse_args(argv)
    if not 2 <= a.k <= 32 or a.jobs < 1:
        ap.error("--k must be within 2..32" if a.jobs >= 1 else "--jobs must be 1 or more")
    g = Grid(a.k, 2, False)
    plan_rows = {r["_shape"]: r for r in table(g, a.mcast, a.scheme)}
    if not plan_rows:
        ap.error(f"the {a.k}-ary 2-mesh cannot be cut into 2 groups or more of 2 nodes or more; give --k 4 or more")
    jobs = [(a.k, a.scheme, a.mcast, sh, a.router) for sh in plan_rows]
    wall = time.perf_counter()
    if a.jobs == 1:
        runs = [one(j) for j in jobs]
    else:
        with ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("fork")) as ex:
            runs = list(ex.map(one, jobs))
    wall = time.perf_counter() - wall
    rows = []
    for (sh, p), r in zip(plan_rows.items(), runs):
        row = dict(shape=p["shape"], groups=p["groups"], M=p["members"], inner=p["inner_total"],
                   between=p["between_total"], analytic=p["hops"],
                   **{c: p.get(c, 0) for c in ("hops_B", "hops_D", "hops_E", "hops_F")})
        assert r["hops"] == p["hops"], f"{p['shape']}: measured {r['hops']} hops, the planner counts {p['hops']}"
        row.update({c: r[c] for c in ("hops", "exec_ns", "phase_ns", "model_ns", "model_phase_ns", "end_to_end_ns",
                                      "mean_latency_ns", "wall_s")})
        rows.append(row)
    rows.sort(key=lambda r: (r["M"], r["shape"]))
    print(f"== {a.scheme} ({a.mcast} multicasts) by group shape on the {a.k}-ary 2-mesh, {a.router} router, the "
          f"source's router model: hops analytic (measured from the frames: equal), time measured, model beside ==")
    nb.show(rows, COLS)
    print("inner/between: longest path in hops inside a group / between INs; phase_ns: B+F/C+D/E/G (each the sum of "
          "its rounds' longest latencies); exec_ns their sum; end_to_end_ns: first injection to the last node done")
    for what in ("analytic", "exec_ns", "end_to_end_ns", "mean_latency_ns"):
        best = min(rows, key=lambda r: (r[what], r["M"]))
        by_m: dict[int, int] = {}
        for r in rows:
            by_m[r["M"]] = min(by_m.get(r["M"], r[what]), r[what])
        print(f"least {what}: {best['shape']} ({best['M']}-node groups, {best[what]:,}); best per group size: "
              + ", ".join(f"{m}: {v:,}" for m, v in sorted(by_m.items())))
    print(f"wall time: {wall:.0f} s ({a.jobs} process(es))")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"nc_groups_k{a.k}_{a.scheme}_{a.mcast}.csv", rows)
    return rows


if __name__ == "__main__":
    main()
