"""What was run: the ``run`` record of ``emu run --json`` / ``--csv`` and ``emu mpirun --json``,
and ``emu run --replay RESULT.json``, which runs it again and checks that the figures match.

The record holds the tool's version, the command line, the topology spec(s), the offload, the
resolved settings (every field that differs from its dataclass default, with where its value comes
from: the topology family's own default -- a mesh's input-queued router --, a ``--config`` file, the
spec's parameters, ``--set``, or a default ``emu run`` gives a test), the seed, the processes or MPI
ranks and the partition method actually used, and, for a sweep, the swept parameters in product
order. Times in the rows: ``start_ns``/``end_ns`` are on the cluster's clock (virtual ns from the
cluster's start, as ``net.now``, a message's ``t_ns`` and the trace's timestamps); ``completion_ns``
= ``end_ns - start_ns`` counts from the test's start.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ..config import SECTIONS, ConfigError

FORMAT = 1
"""Version of the results file's layout: ``{"run": {...}, "results": [row, ...]}``."""

TIMES = ("completion_ns counts from the test's start to its last application's end; start_ns, end_ns, a "
         "message's t_ns and trace timestamps are virtual ns on the cluster's clock (from its start); end_ns is "
         "the run's last event, after the applications' end by what still trails on the wire (acknowledgements, "
         "credits)")
"""How the times of ``emu run``'s rows count."""

VOLATILE = {"wall_s"}
"""Row figures that are not virtual-time figures (they differ from run to run)."""


CLI_DEFAULTS = {"host.transport": "emu run's default with --fault or --manager (host messages recover losses)",
                "host.send_overhead_ns": "emu run's default for the open-loop traffic tests (a packet every cycle)",
                "host.recv_overhead_ns": "emu run's default with --drain measured or global (a source receives "
                                         "between its packets)"}
"""Where a default ``emu run`` gives a test comes from, by field (``run_prepare._topology_with_faults``)."""


def resolved_settings(spec: str, config: dict, cli_defaults: dict, settings: dict,
                      config_path: str | None = None) -> dict[str, dict[str, Any]]:
    """``{"section.field": {"value", "default", "from"}}`` of every field that differs from its
    dataclass default in the topology built from ``spec``, with the layer its value comes from
    (later layers win as in ``build``: family, --config, emu run's test defaults, spec, --set)."""
    from emu.topologies.registry import COMMON, family, parse

    try:
        name, raw = parse(spec)
    except ConfigError:
        return {}
    fam = family(name)
    spec_layer: dict[str, dict] = {}
    for key, value in raw.items():
        if key in COMMON:
            cls, fname, scale, kind = COMMON[key]
            section = {"LinkSpec": "link", "HostSpec": "host", "SwitchSpec": "switch"}[cls.__name__]
            spec_layer.setdefault(section, {})[fname] = int(round(kind(value) * scale))
    cli_only = {s: {f: v for f, v in fs.items() if f not in config.get(s, {})} for s, fs in cli_defaults.items()}
    layers = [(f"family {name}" if fam else "", (fam.defaults or {}) if fam else {}),
              (f"--config {config_path}" if config_path else "--config", config),
              ("emu run", cli_only), (f"topology spec {spec}", spec_layer),
              ("--set", settings)]
    out: dict[str, dict[str, Any]] = {}
    for source, layer in layers:
        for section, fields in (layer or {}).items():
            cls = SECTIONS.get(section)
            base = cls() if cls else None
            for field, value in fields.items():
                default = getattr(base, field, None)
                key = f"{section}.{field}"
                if value == default:
                    out.pop(key, None)
                else:
                    out[key] = {"value": value, "default": default, "from": CLI_DEFAULTS.get(key, source)
                                if source == "emu run" else source}
    return dict(sorted(out.items()))


@functools.cache
def version() -> str:
    """The installed package's version (as ``emu --version`` prints it; read once per process)."""
    from ..plugins import installed_version

    fast = installed_version("hpc-emu")
    if fast is not None:
        return fast
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("hpc-emu")
    except PackageNotFoundError:
        return "unknown (not installed)"


def record(argv: list[str], *, topo: list[str], offload: list[str | None], seed: int, processes: int, mpi: bool,
           partition: str | None, settings: list[dict], swept: dict[str, list[str]] | None = None,
           order: tuple[str, ...] = (), times: str = TIMES) -> dict[str, Any]:
    """The ``run`` record (see the module's docstring)."""
    import shlex  # (only a run that writes its record)

    rec: dict[str, Any] = {
        "format": FORMAT, "tool": "emu (hpc-emu)", "version": version(), "argv": list(argv),
        "command": "emu " + shlex.join(argv), "topology": topo[0] if len(topo) == 1 else topo,
        "offload": [o or "none" for o in offload] if len(offload) > 1 else (offload[0] or "none"),
        "settings": settings[0] if len(settings) == 1 else settings,
        "settings_note": "fields that differ from their defaults (emu.config), with where each value comes from",
        "seed": seed, ("mpi_ranks" if mpi else "processes"): processes, "partition": partition,
        "times": times, "element_loop": _element_loop()}
    if swept:
        rec["sweep"] = swept
        rec["sweep_order"] = list(swept)  # product order: the first varies slowest (emu.front.sweepargs.ORDER)
    return rec


def _element_loop() -> str:
    """``compiled`` or ``pure-python``: which element loop ran (the figures are the same; speed is not)."""
    from ..native import in_use

    return in_use()


def dump(obj: Any, fh, indent: int | None) -> None:
    """JSON: compact (one line) unless ``indent`` is given."""
    if indent is None:  # (dumps: the compiled encoder; dump encodes in Python, piece by piece)
        fh.write(json.dumps(obj, separators=(",", ":")))
    else:
        fh.write(json.dumps(obj, indent=indent))
    fh.write("\n")


def read_json(path: str, missing: str, not_json: str, *, what: str | None = None, kind: str = "results") -> Any:
    """The JSON in ``path`` (a regular file of at most ``emu.config.files.LIMITS[kind]`` bytes); refused
    in one line: ``missing`` when there is no such file, ``not_json`` (its "{e}" replaced by the
    reason) when it cannot be read as JSON, and, starting with ``what``, when it is not a regular
    file, too large, or nests too deeply."""
    from ..config.files import parse_json, read

    what = what or path
    try:
        raw = read(path, what, kind)
    except ConfigError as e:
        if str(e) == f"{what}: no such file":
            raise ConfigError(missing) from None
        raise
    try:
        return parse_json(raw, what)
    except ConfigError as e:
        raise ConfigError(not_json.replace("{e}", getattr(e, "reason", str(e)))) from None


def load(path: str, what: str = "--replay") -> tuple[dict, list[dict]]:
    """(run record, rows) of a results file, refused in one line when it is not one."""
    data = read_json(path, f"{what} {path}: no such file; give the --json file of an emu run",
                     f"{what} {path}: not JSON ({{e}}); give the --json file of an emu run", what=f"{what} {path}")
    if not (isinstance(data, dict) and isinstance(data.get("run"), dict) and isinstance(data.get("results"), list)):
        raise ConfigError(f"{what} {path}: no run record (a results file of emu run holds {{\"run\": ..., "
                          "\"results\": [...]}); write one with emu run ... --json FILE")
    return data["run"], data["results"]


def compare(old: list[dict], new: list[dict]) -> list[str]:
    """The differences between two runs' rows, one short item each (empty: the figures match)."""
    if len(old) != len(new):
        return [f"{len(new)} rows against {len(old)} recorded"]
    diffs = []
    for i, (a, b) in enumerate(zip(old, new)):
        label = a.get("name", f"row {i}") + "".join(f" {k}={v}" for k, v in (a.get("point") or {}).items())
        for key in sorted((set(a) | set(b)) - VOLATILE):
            if a.get(key) != b.get(key):
                va, vb = a.get(key), b.get(key)
                if isinstance(va, (dict, list)) or isinstance(vb, (dict, list)):
                    diffs.append(f"{label}: {key} differs")
                else:
                    diffs.append(f"{label}: {key} {va} -> {vb}")
    return diffs


def results_document(args, finished: list, run) -> dict[str, Any]:
    """``{"run": record, "results": rows}`` of ``emu run``: a row per (point, pargs, result) finished."""
    from .sweepargs import ORDER

    swept = getattr(args, "swept", {}) or {}
    rows, settings, seen = [], [], set()
    for point, pargs, r in finished:
        row: dict[str, Any] = {"topology": pargs.topo, "seed": pargs.seed}
        if swept:
            row["point"] = {k: point[k] for k in swept}
        rows.append({**row, **r.as_dict()})
        key = json.dumps(getattr(pargs, "resolved", {}), sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            settings.append(getattr(pargs, "resolved", {}))
    topos = swept.get("topo") or [args.topo if "topo" not in swept else None]
    offloads = swept.get("offload") or [args.offload]
    points = {id(p) for p, _, _ in finished}
    rec = record(getattr(args, "argv", None) or [], topo=topos, offload=offloads, seed=args.seed,
                 processes=run.processes, mpi=run.mpi, partition=getattr(args, "partition_used", None),
                 settings=settings or [{}], swept=swept, order=ORDER)
    if len(settings) > 1:
        rec["settings_note"] += "; one entry per distinct point (the rows say which point they are)"
    rec["points_run"] = len(points)
    rec["frames_in_one_process"] = ("handed over in memory" if getattr(run, "direct", False)
                                    else "UDP datagrams")  # between processes always datagrams
    return {"run": rec, "results": rows}


def csv_rows(doc: dict) -> tuple[list[str], list[dict]]:
    """(columns, rows) of a results document as a table: one column per swept parameter, then one
    per scalar figure (a figure named as a swept parameter gets the suffix ``_result``); lists and
    objects (``per_link``, a traffic test's ``curve``) are left to the JSON."""
    swept = list(doc["run"].get("sweep", {}))
    cols: dict[str, None] = dict.fromkeys(swept)
    out = []
    for row in doc["results"]:
        flat = {k: row["point"][k] for k in swept}
        for k, v in row.items():
            if k == "point" or isinstance(v, (dict, list)):
                continue
            name = f"{k}_result" if k in swept else k
            cols.setdefault(name)
            flat[name] = v
        out.append(flat)
    return list(cols), out


def write_csv(doc: dict, fh) -> None:
    """The rows as CSV, after one comment line holding the run record (``# run: {json}``; pandas:
    ``read_csv(f, comment="#")``)."""
    import csv

    cols, rows = csv_rows(doc)
    fh.write("# run: " + json.dumps(doc["run"], separators=(",", ":"), default=str) + "\n")
    w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
