"""``emu report``'s plots of flow workloads (issue 47, item 4):

* ``fct_slowdown.{png,svg}`` (rows with ``buckets``: ``emu run --test incast|permutation|alltoall_flows|
  poisson|flows``): per test, the p50, p95 and p99 slowdown of each flow-size bucket, against the
  flow alone on the idle network (1, dashed);
* ``queues.{png,svg}`` (a ``--trace`` with port queue counters): the queued bytes of the busiest
  ports over virtual time, the ``MAX_PORTS`` with the highest peaks, one line each.
"""

from __future__ import annotations

from typing import Any

from ..config import ConfigError
from .report_plot import save

MAX_PORTS = 8
MAX_PANELS = 8


def _bad(path: str, where: str, want: str) -> ConfigError:
    return ConfigError(f"emu report: {path}: {where} must be {want}; give the files of one emu run")


def flow_rows(rows: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The rows with size buckets, checked (one-line ConfigError)."""
    out = [r for r in rows if "buckets" in r]
    for i, r in enumerate(out):
        b = r["buckets"]
        if not isinstance(b, list) or not b:
            raise _bad(path, f"the buckets of {r.get('name')!r}", "a list of rows")
        for j, row in enumerate(b):
            w = f"the buckets of {r.get('name')!r}[{j}]"
            if not isinstance(row, dict) or not isinstance(row.get("bucket"), str):
                raise _bad(path, w, "an object with a bucket name")
            for k in ("flows", "slowdown_p50", "slowdown_p95", "slowdown_p99"):
                v = row.get(k)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                    raise _bad(path, f"{w}.{k}", "a number >= 0")
    if len(out) > MAX_PANELS:
        raise _bad(path, "the flow tests", f"at most {MAX_PANELS} to draw side by side")
    return out


def plot_slowdown(rows: list[dict[str, Any]], out: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    fig, axes = plt.subplots(1, n, figsize=(5 * n, 4), squeeze=False)
    for ax, r in zip(axes[0], rows):
        b = r["buckets"]
        xs = range(len(b))
        for key, style in (("slowdown_p50", "o-"), ("slowdown_p95", "s-"), ("slowdown_p99", "^-")):
            ax.plot(xs, [row[key] for row in b], style, label=key.split("_")[1])
        ax.axhline(1, color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(list(xs), [f"{row['bucket']}\n({row['flows']})" for row in b], fontsize=8)
        ys = [row[k] for row in b for k in ("slowdown_p50", "slowdown_p99")]
        if min(ys) > 0 and max(ys) / min(ys) > 10:
            ax.set_yscale("log")
        ax.set_xlabel("flow size (flows)")
        ax.set_ylabel("FCT slowdown (1: alone on the idle network)")
        ax.set_title(f"{r.get('name')}: {r.get('flows')} flows", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, out, "fct_slowdown")


def queue_tracks(trace: dict[str, Any], path: str) -> dict[str, list[tuple[float, float]]]:
    """{port: [(ts us, bytes)]} from the trace's ``<port> queue`` counters (one-line ConfigError on a
    counter the plot cannot use)."""
    tracks: dict[str, list[tuple[float, float]]] = {}
    for i, e in enumerate(trace["traceEvents"]):
        name = e.get("name")
        if e.get("ph") != "C" or not isinstance(name, str) or not name.endswith(" queue"):
            continue
        args, ts = e.get("args"), e.get("ts")
        nb = args.get("bytes") if isinstance(args, dict) else None
        for v, what in ((ts, "ts"), (nb, "args.bytes")):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ConfigError(f"emu report: {path}: traceEvents[{i}].{what} must be a number >= 0; give the "
                                  "--trace file of an emu run")
        tracks.setdefault(name[:-len(" queue")], []).append((ts, nb))
    return tracks


def plot_queues(tracks: dict[str, list[tuple[float, float]]], out: str) -> list[str]:
    """Two panels: the switches' output ports and the hosts' NIC ports (their send queues: a host's
    messages wait there in the order taken), each the ``MAX_PORTS`` with the highest peaks, from
    :func:`queue_tracks`."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nic = re.compile(r"-nic\d+$")
    kinds = [("switch ports", [p for p in tracks if not nic.search(p)]), ("host NICs", [p for p in tracks if nic.search(p)])]
    kinds = [(k, ps) for k, ps in kinds if ps]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(8, 3.2 * len(kinds)), squeeze=False, sharex=True)
    for ax, (kind, ports) in zip(axes[:, 0], kinds):
        top = sorted(ports, key=lambda p: (-max(b for _, b in tracks[p]), p))[:MAX_PORTS]
        for p in top:
            pts = tracks[p]
            ax.step([t for t, _ in pts], [b / 1000 for _, b in pts], where="post", label=p)
        ax.set_ylabel("queued (KB)")
        shown = "" if len(ports) <= MAX_PORTS else f", the {MAX_PORTS} of {len(ports)} with the highest peaks"
        ax.set_title(f"queue occupancy: {kind}{shown}", fontsize=9)
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("virtual time (us)")
    fig.tight_layout()
    return save(fig, out, "queues")
