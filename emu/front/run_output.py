"""What ``emu run`` shows and writes: the results table and each test's figures for a person, the
JSON and CSV files, and the tests that finished when a run stopped half-way."""

from __future__ import annotations

import sys

from rich.markup import escape
from rich.table import Table

from .consoles import console, make_console
from .run_prepare import run_config
from .table_text import print_table


def _show_results(args) -> int:
    """The results table and each test's figures for a person (on stderr when stdout holds the
    JSON or CSV), the JSON and CSV if asked; exit 0 if every test passed, else 1."""
    fmt = getattr(args, "format", "table")
    if fmt != "table":  # stdout: the benchmark's layout, as plain text; the rest to stderr
        from . import formats

        sys.stdout.write((formats.nccl_tests if fmt == "nccl-tests" else formats.osu)(args.finished, args.swept))
        sys.stdout.flush()
    out = make_console(stderr=True) if "-" in (args.json, getattr(args, "csv", None)) or fmt != "table" else console
    if fmt == "table":
        print_table(out, _results_table(args, args.finished))
    for point, pargs, r in args.finished:
        rows = {k: v for k, v in r.figures.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
        at = "".join(f" {k}={v}" for k, v in point.items() if k in args.swept)
        out.print(f"[bold]{r.name}[/]{at}: " + escape("  ".join(f"{k}={v}" for k, v in r.figures.items()
                                                                if k not in rows and k != "gpcnet_table")))
        if r.figures.get("gpcnet_table"):  # --test gpcnet: GPCNeT's own printout
            out.print(escape(r.figures["gpcnet_table"]), highlight=False, soft_wrap=True)
            rows = {}
        for k, v in rows.items():  # a figure that is a list of rows (a test's curve): a table
            print_table(out, _rows_table(f"{r.name}{at}: {k}", v))
        if r.error:
            out.print(f"[red]{r.name}{at} failed:[/] {escape(str(r.error))}", soft_wrap=True)  # one line in a pipe or a log
    for _, _, _, mgr_note in args.points:
        for line in mgr_note:
            out.print(f"[bold]manager[/]: {escape(line)}", soft_wrap=True)
    used = getattr(args, "partition_used", None) or ""
    if "metis asked" in used:  # the partition a user asked for is not the one used: say so
        out.print(f"partition: {escape(used)}", soft_wrap=True)
    if args.pcap:
        out.print(f"capture written to {args.pcap}")
    if args.trace:
        out.print(_trace_note(args.trace, getattr(args, "trace_summary", None)), soft_wrap=True)
    if args.json or getattr(args, "csv", None):
        _write_json(args, args.finished, out)
    return 0 if all(r.ok for _, _, r in args.finished) else 1


def _trace_note(path: str, summary: dict | None) -> str:
    """Where the trace went, and what it left out past its size limit."""
    if summary is None:
        return f"trace {path}: not written"
    note = f"trace written to {path} ({summary['events']:,} events; open it in ui.perfetto.dev)"
    if summary["omitted"]:
        left = ", ".join(f"{n:,} {kind}" for kind, n in sorted(summary["omitted"].items(), key=lambda kv: -kv[1]))
        note += (f"; [yellow]it reached its size limit (--trace-limit) at {summary['first_omitted_ns']:,} ns "
                 f"and left out {sum(summary['omitted'].values()):,} events[/] ({left})")
    return note


def _rows_table(title: str, rows: list[dict]) -> Table:
    table = Table(title=title, box=None, padding=(0, 0, 0, 1), pad_edge=False)
    cols = list(dict.fromkeys(k for row in rows for k in row))
    for col in cols:
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(f"{v:,}" if isinstance(v := row.get(c, "-"), (int, float)) and not isinstance(v, bool)
                        else str(v) for c in cols))
    return table


def _results_table(args, finished: list) -> Table:
    """One table: a row per test and point, a column per swept parameter."""
    swept = list(getattr(args, "swept", {}))
    title = args.topo if "topo" not in swept else "sweep"
    table = Table(title=f"{title} (seed {args.seed}); figures in virtual time")
    for col in (*swept, "test", "ok", "completion (ns)", "frames", "bytes", "hop count"):
        table.add_column(col, justify="left" if col == "test" or col in swept else "right", no_wrap=True)
    for point, _, r in finished:
        table.add_row(*(str(point[k]) for k in swept), r.name, "[green]yes[/]" if r.ok else "[red]NO[/]",
                      "-" if r.completion_ns is None else f"{r.completion_ns:,}", f"{r.frames:,}",
                      f"{r.bytes:,}", f"{r.hop_count:,}")
    return table


def _write_json(args, finished: list, out) -> None:
    """The results with their run record: JSON (``--json``) and CSV rows (``--csv``), to stdout
    (``-``) or to the file named."""
    from .runrecord import dump, results_document, write_csv

    doc = results_document(args, finished, run_config(args))
    if args.json == "-":
        dump(doc, sys.stdout, args.indent)
    elif args.json:
        with open(args.json, "w") as f:
            dump(doc, f, args.indent)
        if out is not None:
            out.print(f"results written to {args.json}")
    if args.csv == "-":
        write_csv(doc, sys.stdout)
    elif args.csv:
        with open(args.csv, "w", newline="") as f:
            write_csv(doc, f)
        if out is not None:
            out.print(f"rows written to {args.csv}")
    args.json_written = True


def _keep_finished(args) -> str | None:
    """A run that stopped half-way (an error, Ctrl-C, SIGTERM, a full disk for the capture): the
    tests that finished go to ``--json`` all the same. Returns what to add to the one line."""
    done = getattr(args, "finished", None)
    dest = getattr(args, "json", None) or getattr(args, "csv", None)
    if not done or not dest or getattr(args, "json_written", False):
        return None
    try:
        _write_json(args, done, None)
    except OSError as e:
        return f"--json {args.json} not written: {e.strerror}"
    return None if dest == "-" else f"the {len(done)} finished test(s) written to {dest}"
