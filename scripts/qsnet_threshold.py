#!/usr/bin/env python3
"""Spec 03's adaptive threshold sweep: per-node bandwidth of QsNet routing (``routing=qsnet``) as
``emu.switch.adaptive_threshold`` varies, for each pick, beside static routing and the model.

    python scripts/qsnet_threshold.py [--topo fattree:k=4,n=3] [--thresholds 0,1,2,4,8,16,64]
                                      [--picks first_free,next_free,random] [--patterns permutation,alltoall]
                                      [--seeds 3] [--size 4KiB] [--jobs 2] [--out results/qsnet_threshold/]

The source publishes no threshold: a link is "lightly loaded" below it (pending frames at the port,
``switch/routing/qsnet.py``), and the pick chooses among the lightly loaded links. Each point is
the mean over ``--seeds`` runs (the seed draws the permutation and the random pick) with a 95 %
confidence half-width (Student t); static routing is the baseline row, the model the injection and
bisection limit of ``scripts/qsnet_alltoall.py`` (the same runs, the same code).
"""

from __future__ import annotations

import argparse
import multiprocessing
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import qsnet_alltoall as qa  # noqa: E402
from expt import ci95 as ci, pyplot, write_csv  # noqa: E402

def main(argv=None) -> list[dict]:
    from emu.front.checks import parse_size

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--topo", default="fattree:k=4,n=3")
    ap.add_argument("--thresholds", default="0,1,2,4,8,16,64")
    ap.add_argument("--picks", default="first_free,next_free,random")
    ap.add_argument("--patterns", default="permutation,alltoall")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--size", default="4KiB")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="results/qsnet_threshold")
    a = ap.parse_args(argv)
    size = parse_size(a.size)
    thresholds = [int(x) for x in a.thresholds.split(",")]
    picks = [p for p in a.picks.split(",") if p]
    patterns = [p for p in a.patterns.split(",") if p]
    jobs = []
    for pattern in patterns:
        for seed in range(1, a.seeds + 1):
            jobs.append(qa.Job(a.topo, "static", pattern, False, size, seed))
            for pick in picks:
                for th in thresholds:
                    jobs.append(qa.Job(a.topo, f"qsnet/{pick}", pattern, False, size, seed,
                                       (f"switch.adaptive_threshold={th}",)))
    w = time.perf_counter()
    if a.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(a.jobs) as pool:
            rows = list(pool.map(qa.run_job, jobs))
    else:
        rows = [qa.run_job(j) for j in jobs]
    for j, r in zip(jobs, rows):
        r["threshold"] = int(j.settings[0].split("=")[1]) if j.settings else None
        r["seed"] = j.seed
    table = []
    print(f"{a.topo}, puts of {size} B, {a.seeds} seeds, Gbit/s of data per node (mean ± 95% CI)")
    print(f"{'pattern':<12} {'routing':<17} {'threshold':>9} {'avg':>14} {'worst':>14} {'model':>7} {'resent':>7}")
    for pattern in patterns:
        groups: dict[tuple, list[dict]] = {}
        for r in rows:
            if r["pattern"] == pattern:
                groups.setdefault((r["routing"], r["threshold"]), []).append(r)
        for (routing, th), rs in groups.items():
            avg, avg_ci = ci([r["avg_gbps"] for r in rs])
            worst, worst_ci = ci([r["worst_gbps"] for r in rs])
            row = dict(pattern=pattern, routing=routing, threshold=th, avg=avg, avg_ci=avg_ci, worst=worst,
                       worst_ci=worst_ci, model=rs[0]["model_gbps"], resent=sum(r["resent"] for r in rs))
            table.append(row)
            print(f"{pattern:<12} {routing:<17} {'-' if th is None else th:>9} {avg:>8.2f} ± {avg_ci:<4.2f} "
                  f"{worst:>8.2f} ± {worst_ci:<4.2f} {row['model']:>7.2f} {row['resent']:>7}")
    out = pathlib.Path(a.out)
    write_csv(out / "threshold.csv", table)
    plt = pyplot()
    if plt is None:
        return table
    fig, axes = plt.subplots(1, len(patterns), figsize=(6 * len(patterns), 4), squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        for k, pick in enumerate(picks):
            pts = sorted((r["threshold"], r["avg"], r["avg_ci"]) for r in table
                         if r["pattern"] == pattern and r["routing"] == f"qsnet/{pick}")
            ax.errorbar([max(p[0], 0.5) for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o",
                        capsize=3, label=f"qsnet {pick}", color=f"C{k}")
        st = [r for r in table if r["pattern"] == pattern and r["routing"] == "static"]
        if st:
            ax.axhline(st[0]["avg"], color="k", ls="--", label="static")
            ax.axhline(st[0]["model"], color="k", ls=":", label="model")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("adaptive threshold (pending frames; 0 plotted at 0.5)")
        ax.set_ylabel("Gbit/s per node (mean)")
        ax.set_title(f"{a.topo}: {pattern}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "threshold.png", dpi=120)
    print(f"{len(rows)} runs in {time.perf_counter() - w:.0f} s; wrote {out}/threshold.csv and threshold.png")
    return table


if __name__ == "__main__":
    main()
