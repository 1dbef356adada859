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


METRICS = {"completion": "completion (us, virtual)", "algbw": "algorithm bandwidth (GB/s, nccl-tests' algbw)",
           "busbw": "bus bandwidth (GB/s, nccl-tests' busbw)"}
"""The figures ``emu report --y`` names besides any numeric figure of the rows."""
LOGS = ("auto", "x", "y", "xy", "none")


def metric(row: dict[str, Any], name: str) -> float | None:
    """The figure ``name`` of a row: ``completion`` in us, ``algbw``/``busbw`` in GB/s
    (emu.front.units), else the row's own numeric field; None where the row has none."""
    if name == "completion":
        v = row.get("completion_ns")
        return v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if name in ("algbw", "busbw"):
        from .units import nccl_bandwidth

        bw = nccl_bandwidth(row)
        return None if bw is None else bw[name == "busbw"]
    v = row.get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def check_axes(run: dict[str, Any], rows: list[dict[str, Any]], x: str | None, y: str, log: str) -> str:
    """The x parameter to draw (``x``, else the fastest-varying swept one); ConfigError in one line
    when ``x`` is not swept, ``y`` names no figure of the rows, or ``log`` is not one of LOGS."""
    order = run.get("sweep_order") or list(run.get("sweep", {}))
    if log not in LOGS:
        raise ConfigError(f"emu report --log {log!r}: give one of {', '.join(LOGS)}")
    if x is not None and x not in order:
        raise ConfigError(f"emu report --x {x!r}: not a swept parameter of this run; swept: {', '.join(order) or 'none'}")
    if not any(metric(r, y) is not None for r in rows):
        numeric = sorted({k for r in rows for k, v in r.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)})
        raise ConfigError(f"emu report --y {y!r}: no row has this figure; give {', '.join(METRICS)} or a numeric "
                          f"figure of the rows ({', '.join(numeric[:12])}{', ...' if len(numeric) > 12 else ''})")
    return x or order[-1]


def _spans_decades(vals: list[float]) -> bool:
    return bool(vals) and min(vals) > 0 and max(vals) >= 10 * min(vals)


def sweep_lines(run: dict[str, Any], rows: list[dict[str, Any]], x: str | None = None,
                y: str = "completion") -> dict[str, dict[str, list[tuple]]]:
    """test -> line label -> [(x value, y figure)]: x is the swept parameter ``x`` (default: the one
    that varies fastest, the last of ``sweep_order``), a line per combination of the others; y the
    figure ``y`` (:func:`metric`; ``completion``: ns -- as before -- in ``completion_ns``)."""
    order = run.get("sweep_order") or list(run.get("sweep", {}))
    x = x or order[-1]
    others = [k for k in order if k != x]
    out: dict[str, dict[str, list[tuple]]] = {}
    for r in rows:
        point = r.get("point") or {}
        v = r.get("completion_ns") if y == "completion" else metric(r, y)
        if v is None or x not in point:
            continue
        label = ", ".join(f"{k}={point[k]}" for k in others) or r["name"]
        out.setdefault(r["name"], {}).setdefault(label, []).append((point[x], v))
    return out


def plot_sweep(run: dict[str, Any], rows: list[dict[str, Any]], out: str, x: str | None = None,
               y: str = "completion", log: str = "auto") -> list[str]:
    """A panel per test: the figure ``y`` against the swept parameter ``x``, a line per combination of
    the other swept parameters; log axes where ``log`` says (``auto``: each axis whose values span a
    decade or more, as the demo's and the scripts' log-log plots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = run.get("sweep_order") or list(run.get("sweep", {}))
    x = check_axes(run, rows, x, y, log)
    values = run["sweep"][x]
    nums = [_number(x, v) for v in values]
    numeric = all(n is not None for n in nums)
    where = dict(zip(values, nums if numeric else range(len(values))))
    lines = sweep_lines(run, rows, x, y)
    tests = list(lines)
    fig, axes = plt.subplots(1, max(1, len(tests)), figsize=(5.5 * max(1, len(tests)), 4.2), squeeze=False)
    for ax, test in zip(axes[0], tests):
        ys = []
        for label, pts in lines[test].items():
            pts = sorted((where[v], fy / 1000 if y == "completion" else fy) for v, fy in pts if v in where)
            ys += [p[1] for p in pts]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        logx = numeric and (log in ("x", "xy") or (log == "auto" and _spans_decades(nums)))
        logy = log in ("y", "xy") or (log == "auto" and _spans_decades(ys))
        if logx and min(nums) > 0:
            ax.set_xscale("log", base=2 if x == "size" else 10)
        if logy and ys and min(ys) > 0:
            ax.set_yscale("log")
        if not numeric:
            ax.set_xticks(range(len(values)), values, rotation=20, fontsize=8)
        elif x == "size":
            ax.set_xticks([where[v] for v in values], values, fontsize=8)
            ax.minorticks_off()
        ax.set_xlabel(x)
        ax.set_ylabel(METRICS.get(y, y))
        ax.set_title(test, fontsize=9)
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=7)
    topo = run.get("topology")
    fig.suptitle(f"sweep over {', '.join(order)}" + (f" on {topo}" if isinstance(topo, str) else "")
                 + f" (seed {run.get('seed', 0)})")
    fig.tight_layout()
    return _save(fig, out, "sweep")


def plot_curves(run: dict[str, Any], rows: list[dict[str, Any]], out: str, log: str = "auto") -> list[str]:
    """Open-loop traffic (rows with a ``curve``): latency against offered load, a panel per test, a
    line per row (per swept setting), its zero-load model dashed in the same colour; p99 dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tests: dict[str, list[dict]] = {}
    for r in rows:
        if isinstance(r.get("curve"), list):
            tests.setdefault(r["name"], []).append(r)
    fig, axes = plt.subplots(1, max(1, len(tests)), figsize=(5.5 * max(1, len(tests)), 4.2), squeeze=False)
    for ax, (test, group) in zip(axes[0], tests.items()):
        ys = []
        for i, r in enumerate(group):
            pts = [(c["offered"], c["mean_ns"], c.get("p99_ns"), c.get("model_ns")) for c in r["curve"]
                   if isinstance(c, dict) and isinstance(c.get("offered"), (int, float))
                   and isinstance(c.get("mean_ns"), (int, float))]
            if not pts:
                continue
            colour = plt.get_cmap("tab10")(i % 10)
            label = ", ".join(f"{k}={v}" for k, v in (r.get("point") or {}).items()) or r["name"]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colour, label=f"{label}: mean")
            p99 = [(p[0], p[2]) for p in pts if isinstance(p[2], (int, float))]
            if p99:
                ax.plot([p[0] for p in p99], [p[1] for p in p99], ":", color=colour, label=f"{label}: p99")
            zero = r.get("zero_load_model_ns")
            if isinstance(zero, (int, float)):
                ax.axhline(zero, linestyle="--", color=colour, linewidth=1, label=f"{label}: zero-load model")
            if r.get("saturation_load") is not None:
                ax.axvline(r["saturation_load"], color=colour, linewidth=0.8, alpha=0.5)
            ys += [p[1] for p in pts] + [p[1] for p in p99]
        if log in ("y", "xy") or (log == "auto" and _spans_decades(ys)):
            ax.set_yscale("log")
        ax.set_xlabel("offered load (packets per source per cycle)")
        ax.set_ylabel("latency (ns, virtual)")
        ax.set_title(f"{test}: latency against load (vertical: saturation)", fontsize=9)
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=6)
    topo = run.get("topology") or (rows[0].get("topology") if rows else "")
    fig.suptitle(f"open-loop traffic on {topo} (seed {run.get('seed', 0)})")
    fig.tight_layout()
    return _save(fig, out, "curves")
