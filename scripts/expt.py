"""What the experiment scripts share: a 95 % confidence interval, a CSV of rows, matplotlib if present."""

from __future__ import annotations

import csv
import pathlib
import statistics

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}
"""Student t, two-sided 95 %, by degrees of freedom (1.96 beyond)."""


def ci95(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval; 0 for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / len(values) ** 0.5


def write_csv(path: pathlib.Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))  # rows may differ
        w.writeheader()
        w.writerows(rows)


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (then the script writes no PNG, and says so)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG (pip install matplotlib)")
        return None
    return plt


SOURCE_64 = "source"
"""The name the spec 04 scripts give the source's 64 hosts on "a two-level fat tree of 8-port switches"."""


def scale_specs(text: str) -> list[str]:
    """The ';'-separated topology specs of a script's ``--scale``; ``source`` stands for the closest
    tree of real 8-port switches to the source's 64-host network (which two levels cannot hold at
    full bisection: ``emu.topologies.trees.closest_tree``), and a line says what it is."""
    from emu.topologies.trees import closest_tree

    specs = []
    for s in (s.strip() for s in text.split(";")):
        if s == SOURCE_64:
            s, why = closest_tree(8, 64)
            print(f"the source's 64 hosts on 'a two-level fat tree of 8-port switches': {why}", flush=True)
        if s:
            specs.append(s)
    return specs

