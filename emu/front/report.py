"""``emu report RESULTS.json [--trace FILE] --out DIR``: plots of a run, as PNG and SVG.

* ``topology.{png,svg}``: the topology with each link coloured by its load in each test (the time
  its busier direction spent sending over the test's completion time: ``per_link`` of the
  results), one panel per test, side by side. Meshes and tori are drawn on their grid, trees (fat
  tree, Clos, QsNet) in stages, the others by networkx's spring layout (seeded).
* ``sweep.{png,svg}`` (the results of a sweep, ``emu run --size 1KiB,64KiB ...``): a panel per test,
  completion time against the swept parameter that varies fastest (log scale for sizes and numbers
  spanning a decade), one line per combination of the other swept parameters.
* ``mpi_calls.{png,svg}`` (the ``--json`` of ``emu mpirun``, which also gives the topology plot its
  link loads): per rank, the virtual time its MPI calls took, by call kind, with their counts.
* ``timeline.{png,svg}`` (with ``--trace``): per host, the spans of its rank track (the test, each
  collective call, each step: send, recv) over virtual time, one panel per test; instant events
  of the hosts (drops, retransmissions, deadlock reports) as marks.
* ``fct_slowdown.{png,svg}`` (flow workloads) and ``queues.{png,svg}`` (a ``--trace`` with port queue
  counters): slowdown by flow size and queue occupancy over time (:mod:`emu.front.report_flows`).

matplotlib and networkx draw; this module only lays out and reads the files.
"""

from __future__ import annotations

import os
from typing import Any

from ..config import ConfigError
from .report_input import check_run, check_trace
from .report_flows import flow_rows, plot_queues, plot_slowdown, queue_tracks
from .report_plot import save as _save
from .report_sweep import plot_sweep, sweep_lines  # noqa: F401 -- names of this module as before
from .runrecord import read_json

MAX_HOSTS = 64
"""Hosts drawn in a timeline at most (the first ones, in the topology's order)."""
COLOURS = {"test": "#d9d9d9", "collective": "#4c72b0", "send": "#55a868", "recv": "#dd8452", "step": "#8172b2"}


def load_results(path: str) -> list[dict[str, Any]]:
    """The rows ``emu run --json`` wrote, refused in one line when the file is not that."""
    return load_run(path)[1]


def load_run(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(run record, rows) of ``emu run --json`` (a bare list of rows, as before the run record, too)."""
    rows = read_json(path, f"emu report: no file {path}; give the --json file of an emu run",
                     f"emu report: {path} is not JSON ({{e}}); give the --json file of an emu run",
                     what=f"emu report {path}")
    run: dict[str, Any] = {}
    if isinstance(rows, dict) and isinstance(rows.get("results"), list):
        run, rows = rows.get("run") or {}, rows["results"]
    elif isinstance(rows, dict) and isinstance(rows.get("per_rank"), list):  # emu mpirun --json: one row
        if "per_link" not in rows:
            raise ConfigError(f"emu report: {path} is the --json of an emu mpirun older than emu report's support "
                              "for it (no topology, per_link); run the job again with this version")
        run, rows = rows.get("run") or {}, [rows]
    elif isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) and "topology" in r and "name" in r
                                                         and isinstance(r.get("per_link"), dict) for r in rows):
        raise ConfigError(f"emu report: {path} is not the --json of emu run or emu mpirun (rows with topology, "
                          "name and per_link); write one with emu run ... --json FILE")
    check_run(path, run, rows)
    return run, rows


def load_trace(path: str) -> dict[str, Any]:
    trace = read_json(path, f"emu report: no trace file {path}; give the --trace file of the same emu run",
                      f"emu report: {path} is not a trace-event JSON file ({{e}}); give the --trace file of "
                      "an emu run (one cut off by a crash cannot be read)", what=f"emu report --trace {path}",
                      kind="trace")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ConfigError(f"emu report: {path} has no traceEvents; give the --trace file of an emu run")
    check_trace(path, trace)
    return trace


# -- the topology ---------------------------------------------------------------------------------
def positions(t) -> dict[str, tuple[float, float]]:
    """Where to draw each node: the grid for meshes and tori, stages for trees, else networkx."""
    import networkx as nx

    nodes = t.nodes
    if all("coords" in n.info for n in nodes.values() if n.kind != "manager") and t.switches:
        pos = {}
        k = 1 + max(max(n.info["coords"]) for n in t.switches)
        for n in nodes.values():
            c = tuple(n.info.get("coords", (0,)))
            x = c[0] + (c[2] * (k + 1) if len(c) > 2 else 0)
            y = c[1] if len(c) > 1 else 0
            off = 0.3 if n.kind == "host" else 0.0
            pos[n.name] = (x + off, y + off)
        return pos
    g = nx.Graph()
    g.add_nodes_from(nodes)  # first: a stage's nodes are drawn in the topology's order
    for link in t.links:
        g.add_edge(link.a, link.b)
    if any("stage" in n.info for n in t.switches):
        return _tree_positions(t, g)
    try:  # (force-directed; networkx needs scipy past 500 nodes)
        pos = nx.spring_layout(g, seed=0)
    except ImportError:
        pos = nx.circular_layout(g)
    return {k: (float(x), float(y)) for k, (x, y) in pos.items()}


def _tree_positions(t, g) -> dict[str, tuple[float, float]]:
    """Trees in stages: hosts at the bottom, each switch one level above its nearest host's, every level
    spread evenly; the leaf switches in the topology's order, each host under its leaf, each higher
    switch above the mean place of the switches below it (ties in the topology's order), so that the
    drawing has no needless crossings."""
    import networkx as nx

    hosts = [h.name for h in t.hosts]
    depth = nx.multi_source_dijkstra_path_length(g, hosts) if hosts else {}
    order = {name: i for i, name in enumerate(t.nodes)}
    levels: dict[int, list[str]] = {}
    for name in t.nodes:
        levels.setdefault(int(depth.get(name, max(depth.values(), default=0) + 1)), []).append(name)
    pos: dict[str, tuple[float, float]] = {}

    def spread(names: list[str], y: int) -> None:
        for i, name in enumerate(names):
            pos[name] = ((i + 0.5) / len(names), float(y))

    top = max(levels)
    leaves = sorted(levels.get(1, []), key=order.__getitem__)
    spread(leaves, 1)
    under = {leaf: i for i, leaf in enumerate(leaves)}
    spread(sorted(levels.get(0, []), key=lambda h: (min((under[n] for n in g[h] if n in under), default=len(under)),
                                                      order[h])), 0)
    for y in range(2, top + 1):
        def place(name: str, y=y) -> tuple[float, int]:
            below = [pos[n][0] for n in g[name] if n in pos and pos[n][1] < y]
            return (sum(below) / len(below) if below else 0.5, order[name])
        spread(sorted(levels.get(y, []), key=place), y)
    return pos


def link_loads(t, row: dict[str, Any]) -> tuple[list[float], int]:
    """Per link of ``t``: the load of its busier direction in this test (busy_ns / completion);
    and how many per_link entries name no link of ``t``."""
    span = row.get("completion_ns") or 0
    index = {}
    for i, link in enumerate(t.links):
        index[t.port_name(link.a, link.a_port)] = i
        index[t.port_name(link.b, link.b_port)] = i
    loads = [0.0] * len(t.links)
    unknown = 0
    for port, v in row["per_link"].items():
        i = index.get(port)
        if i is None:
            unknown += 1
            continue
        busy = v.get("busy_ns", 0) if isinstance(v, dict) else 0
        if span > 0:
            loads[i] = max(loads[i], busy / span)
    return loads, unknown


LOAD_FLOOR = 1e-3
"""The colour scale of link load is logarithmic from 0.1 % (and below) to 100 %: a lightly loaded
network is not drawn as saturated, and a busy one is not flattened."""


def failed_links(run: dict[str, Any]) -> tuple[set[frozenset], set[str]]:
    """(links, switches) the recorded command line's ``--fault``s take down at some time (the record
    is data: each fault parsed by the fault parser, one it refuses left out)."""
    from emu.faults import Fault

    argv = run.get("argv") if isinstance(run.get("argv"), list) else []
    texts = [b for a, b in zip(argv, argv[1:]) if a == "--fault" and isinstance(b, str)]
    texts += [a.split("=", 1)[1] for a in argv if isinstance(a, str) and a.startswith("--fault=")]
    links: set[frozenset] = set()
    switches: set[str] = set()
    for text in texts:
        try:
            f = Fault.parse(text)
        except ConfigError:
            continue
        if f.action == "down" and f.link is not None:
            links.add(frozenset(f.link))
        elif f.action == "down" and f.switch is not None:
            switches.add(f.switch)
    return links, switches


def plot_topology(t, rows: list[dict[str, Any]], out: str, point: dict | None = None,
                  failed: tuple[set, set] = (set(), set())) -> list[str]:
    """A panel per test: every link coloured by its load (:data:`LOAD_FLOOR`); ``point``: the sweep
    point these rows are of (said in the title); ``failed`` (:func:`failed_links`): links and
    switches a fault takes down, marked with a red cross."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    pos = positions(t)
    tree = any("stage" in n.info for n in t.switches)
    per = [link_loads(t, r) for r in rows]
    n = len(rows)
    big = len(t.nodes) > 200
    width = max(6.0, 0.07 * len(t.hosts)) if tree and len(t.hosts) <= 256 else 6.0  # room for the host names
    fig, axes = plt.subplots(1, n, figsize=(width * n + 1, 6), squeeze=False)
    g = nx.MultiGraph()
    g.add_nodes_from(t.nodes)
    cmap = plt.get_cmap("viridis")
    norm = matplotlib.colors.LogNorm(LOAD_FLOOR, 1.0, clip=True)
    for ax, row, (loads, unknown) in zip(axes[0], rows, per):
        edges = [(link.a, link.b) for link in t.links]
        hosts = [h.name for h in t.hosts]
        switches = [s.name for s in t.nodes.values() if s.kind != "host"]
        colours = [cmap(norm(max(lo, LOAD_FLOOR))) for lo in loads]
        nx.draw_networkx_edges(g, pos, edgelist=edges, edge_color=colours, width=1.0 if big else 2.5, ax=ax)
        nx.draw_networkx_nodes(g, pos, nodelist=switches, node_color="#444444", node_size=10 if big else 80,
                               node_shape="o", ax=ax)
        nx.draw_networkx_nodes(g, pos, nodelist=hosts, node_color="#bbbbbb", node_size=6 if big else 40,
                               node_shape="s", ax=ax)
        if len(t.nodes) <= 40:
            nx.draw_networkx_labels(g, pos, font_size=6, ax=ax)
        elif len(hosts) <= 256 and tree:  # host names under the hosts, turned, as small as they must be
            size = max(3.0, min(6.0, 500 / len(hosts)))
            for h in hosts:
                ax.text(pos[h][0], pos[h][1] - 0.04, h, rotation=90, ha="center", va="top", fontsize=size)
        down = [(lk.a, lk.b) for lk in t.links if frozenset((lk.a, lk.b)) in failed[0]]
        if down:
            nx.draw_networkx_edges(g, pos, edgelist=down, edge_color="#d62728", style="dashed", width=1.5, ax=ax)
            mids = [((pos[a][0] + pos[b][0]) / 2, (pos[a][1] + pos[b][1]) / 2) for a, b in down]
            ax.plot([m[0] for m in mids], [m[1] for m in mids], "x", color="#d62728", markersize=9, mew=2)
        dead = [s for s in failed[1] if s in pos]
        if dead:
            ax.plot([pos[s][0] for s in dead], [pos[s][1] for s in dead], "x", color="#d62728", markersize=12, mew=2)
        if down or dead:
            ax.text(0.01, 0.01, "x: taken down by a --fault", transform=ax.transAxes, color="#d62728", fontsize=7)
        busiest = max(loads, default=0)
        note = f"; {unknown} port(s) not drawn" if unknown else ""
        ax.set_title(f"{row['name']}: {row.get('completion_ns') or 0:,} ns, busiest link {busiest:.1%}{note}",
                     fontsize=9)
        ax.set_axis_off()
    sm = matplotlib.cm.ScalarMappable(cmap=cmap, norm=norm)
    fig.colorbar(sm, ax=list(axes[0]), label="link load: busier direction's busy time / test completion (log)",
                 shrink=0.8)
    at = f"; sweep point {', '.join(f'{k}={v}' for k, v in point.items())}" if point else ""
    fig.suptitle(f"{rows[0]['topology']} (seed {rows[0].get('seed', 0)}{at}): link load per test")
    return _save(fig, out, "topology")


# -- the timeline ---------------------------------------------------------------------------------
def host_spans(trace: dict[str, Any]) -> tuple[dict[int, str], dict[int, list], dict[int, list]]:
    """(pid -> host name, pid -> [(start_us, end_us, depth, name, cat)], pid -> [(ts_us, name)]) from
    the rank tracks (tid 1) and events tracks (tid 2) of the hosts."""
    names: dict[int, str] = {}
    ranks: set[int] = set()
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("tid") == 1:
            ranks.add(e["pid"])
    spans: dict[int, list] = {p: [] for p in ranks}
    marks: dict[int, list] = {p: [] for p in ranks}
    stacks: dict[int, list] = {p: [] for p in ranks}
    for e in trace["traceEvents"]:
        pid, ph = e.get("pid"), e.get("ph")
        if pid not in ranks:
            continue
        if ph == "B":
            stacks[pid].append((e["ts"], e.get("name", ""), e.get("cat", "")))
        elif ph == "E" and stacks[pid]:
            start, name, cat = stacks[pid].pop()
            spans[pid].append((start, e["ts"], len(stacks[pid]), name, cat))
        elif ph == "i":
            marks[pid].append((e["ts"], e.get("name", "")))
    return {p: names.get(p, str(p)) for p in ranks}, spans, marks


def _colour(name: str, cat: str, depth: int) -> str:
    if cat == "test":
        return COLOURS["test"]
    if name in ("send", "recv"):
        return COLOURS[name]
    if name.startswith("step"):
        return COLOURS["step"]
    return COLOURS["collective"] if depth <= 1 else COLOURS["step"]


def plot_timeline(trace: dict[str, Any], rows: list[dict[str, Any]], out: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names, spans, marks = host_spans(trace)
    pids = sorted(names)[:MAX_HOSTS]
    windows = []  # (test name, start us, end us): each test's outer span over every host
    for r in rows:
        ends = [(s, e) for p in pids for s, e, d, n, c in spans[p] if c == "test" and n == r["name"]]
        if ends:
            windows.append((r["name"], min(s for s, _ in ends), max(e for _, e in ends)))
    if not windows:  # a trace of something else than these tests: the whole of it
        ends = [(s, e) for p in pids for s, e, *_ in spans[p]]
        windows = [("run", min((s for s, _ in ends), default=0), max((e for _, e in ends), default=1))]
    n = len(windows)
    fig, axes = plt.subplots(1, n, figsize=(7 * n, 1.5 + 0.28 * len(pids)), squeeze=False, sharey=True)
    for ax, (test, lo, hi) in zip(axes[0], windows):
        for row, pid in enumerate(pids):
            for depth in range(0, 6):
                bars = [(s, max(e - s, 1e-3)) for s, e, d, name, cat in spans[pid] if d == depth and e >= lo and s <= hi]
                if not bars:
                    continue
                cols = [_colour(name, cat, d) for s, e, d, name, cat in spans[pid] if d == depth and e >= lo and s <= hi]
                h = 0.8 - 0.15 * depth
                ax.broken_barh(bars, (row - h / 2, h), facecolors=cols, linewidth=0)
            xs = [t for t, _ in marks[pid] if lo <= t <= hi]
            if xs:
                ax.plot(xs, [row] * len(xs), "x", color="#c44e52", markersize=4)
        ax.set_xlim(lo, hi if hi > lo else lo + 1)
        ax.set_yticks(range(len(pids)), [names[p] for p in pids], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("virtual time (us)")
        ax.set_title(f"{test}: {hi - lo:,.3f} us", fontsize=9)
    legend = [Patch(color=c, label=k) for k, c in COLOURS.items()]
    axes[0][-1].legend(handles=legend, fontsize=7, loc="upper right")
    shown = "" if len(names) <= MAX_HOSTS else f" (the first {MAX_HOSTS} of {len(names)} hosts)"
    fig.suptitle(f"per-rank timeline{shown}; x: instant events (drops, retransmissions, deadlocks)")
    fig.tight_layout()
    return _save(fig, out, "timeline")


# -- an emu mpirun job ---------------------------------------------------------------------------
def plot_mpi_calls(row: dict[str, Any], out: str) -> list[str]:
    """Per rank, a bar of the virtual time its MPI calls took, a segment per call kind (the kinds
    that took the most time coloured, the rest together), the counts in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = row["per_rank"]
    total: dict[str, int] = {}
    count: dict[str, int] = {}
    for r in ranks:
        for kind, f in r.get("calls", {}).items():
            total[kind] = total.get(kind, 0) + int(f.get("virtual_ns") or 0)
            count[kind] = count.get(kind, 0) + int(f.get("count") or 0)
    kinds = sorted(total, key=lambda k: (-total[k], k))
    shown, rest = kinds[:9], kinds[9:]
    fig, ax = plt.subplots(figsize=(10, 1.8 + 0.3 * len(ranks)))
    left = [0.0] * len(ranks)
    for i, kind in enumerate(shown + (["other"] if rest else [])):
        group = rest if kind == "other" else [kind]
        widths = [sum(int(r.get("calls", {}).get(k, {}).get("virtual_ns") or 0) for k in group) / 1000
                  for r in ranks]
        n = sum(count[k] for k in group)
        ax.barh(range(len(ranks)), widths, left=left, color=plt.get_cmap("tab10")(i % 10),
                label=f"{kind} ({n:,} calls)")
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(range(len(ranks)), [f"rank {r['rank']} ({r.get('host', '')})" for r in ranks], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("virtual time in MPI calls (us)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(f"{row['name']} on {row['topology']}: {row.get('mpi_calls', 0):,} MPI calls, "
                 f"{(row.get('virtual_ns') or 0):,} ns", fontsize=9)
    fig.tight_layout()
    return _save(fig, out, "mpi_calls")


def report(results: str, trace: str | None, out: str, x: str | None = None, y: str = "completion",
           log: str = "auto") -> list[str]:
    """Write the plots of ``results`` (and ``trace``) into folder ``out``; returns the files. ``x``,
    ``y``, ``log``: a sweep's axes (:func:`emu.front.report_sweep.plot_sweep`)."""
    from emu.topologies.registry import build

    from .report_sweep import check_axes, plot_curves

    run, rows = load_run(results)
    tr = load_trace(trace) if trace else None
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ConfigError(f"emu report --out {out}: the folder {parent} does not exist; create it or write elsewhere")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"emu report --out {out} is a file; give a folder")
    swept = bool(run.get("sweep"))
    curves = [r for r in rows if isinstance(r.get("curve"), list)]
    others = [r for r in rows if not isinstance(r.get("curve"), list)]
    if swept and others:
        check_axes(run, others, x, y, log)
    elif x is not None or y != "completion":
        raise ConfigError(f"emu report --x/--y: {results} holds no sweep of collectives to draw them for "
                          "(emu run ... --size 1KiB,64KiB makes one)")
    first = rows[0].get("point") if swept else None
    if swept:  # the topology drawn with the loads of the sweep's first point
        rows = [r for r in rows if r.get("point") == first]
    specs = {r["topology"] for r in rows}
    if len(specs) > 1:
        raise ConfigError(f"emu report: {results} holds runs of {len(specs)} topologies ({', '.join(sorted(specs))}); "
                          "give the results of one emu run")
    try:
        t = build(rows[0]["topology"])
    except ConfigError as e:
        raise ConfigError(f"emu report: the topology of {results} cannot be built: {e}") from None
    flows = flow_rows(rows, results)
    queues = queue_tracks(tr, trace) if tr is not None else None
    os.makedirs(out, exist_ok=True)
    try:
        files = plot_sweep(run, others, out, x, y, log) if swept and others else []
        files += plot_curves(run, curves, out, log) if curves else []
        files += plot_topology(t, rows, out, first, failed_links(run))
        if "per_rank" in rows[0]:
            files += plot_mpi_calls(rows[0], out)
        if tr is not None:
            files += plot_timeline(tr, rows, out)
        files += plot_slowdown(flows, out) if flows else []
        files += plot_queues(queues, out) if queues else []
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, RecursionError) as e:
        # report_input checks every field the plots use; this is the net for a combination it missed
        raise ConfigError(f"emu report: {results}{' or ' + trace if trace else ''} cannot be drawn "
                          f"({type(e).__name__}: {e}); give the files of one emu run") from None
    return files
