"""``emu report``'s plot of a sweep: a figure of each test against the swept parameter."""

from __future__ import annotations

from typing import Any

from ..config import ConfigError
from .report_plot import save as _save


# -- a sweep --------------------------------------------------------------------------------------
def _number(param: str, value: str) -> float | None:
    """A swept value as a number for an axis (sizes in bytes), None when it is a name."""
    from .sizes import parse_size

    try:
        return float(parse_size(value)) if param == "size" else float(value)
    except (ConfigError, ValueError, TypeError):
        return None


def sweep_lines(run: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple]]]:
    """test -> line label -> [(x value, completion_ns)]: x is the swept parameter that varies
    fastest (the last of ``sweep_order``), a line per combination of the others."""
    order = run.get("sweep_order") or list(run.get("sweep", {}))
    x, others = order[-1], order[:-1]
    out: dict[str, dict[str, list[tuple]]] = {}
    for r in rows:
        point = r.get("point") or {}
        if r.get("completion_ns") is None or x not in point:
            continue
        label = ", ".join(f"{k}={point[k]}" for k in others) or r["name"]
        out.setdefault(r["name"], {}).setdefault(label, []).append((point[x], r["completion_ns"]))
    return out


def plot_sweep(run: dict[str, Any], rows: list[dict[str, Any]], out: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = run.get("sweep_order") or list(run.get("sweep", {}))
    x = order[-1]
    values = run["sweep"][x]
    nums = [_number(x, v) for v in values]
    numeric = all(n is not None for n in nums)
    where = dict(zip(values, nums if numeric else range(len(values))))
    lines = sweep_lines(run, rows)
    tests = list(lines)
    fig, axes = plt.subplots(1, max(1, len(tests)), figsize=(5.5 * max(1, len(tests)), 4.2), squeeze=False)
    for ax, test in zip(axes[0], tests):
        for label, pts in lines[test].items():
            pts = sorted((where[v], ns / 1000) for v, ns in pts)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        if numeric and min(nums) > 0 and max(nums) >= 10 * min(nums):
            ax.set_xscale("log", base=2 if x == "size" else 10)
        if not numeric:
            ax.set_xticks(range(len(values)), values, rotation=20, fontsize=8)
        elif x == "size":
            ax.set_xticks([where[v] for v in values], values, fontsize=8)
            ax.minorticks_off()
        ax.set_xlabel(x)
        ax.set_ylabel("completion (us, virtual)")
        ax.set_title(test, fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    topo = run.get("topology")
    fig.suptitle(f"sweep over {', '.join(order)}" + (f" on {topo}" if isinstance(topo, str) else "")
                 + f" (seed {run.get('seed', 0)})")
    fig.tight_layout()
    return _save(fig, out, "sweep")


