"""The ``emu`` command. The CLI decides what a person sees; library code only logs.

    emu topo SPEC                       what a topology is made of
    emu run --topo SPEC --test pingall[+TEST...] [--test TEST] [--seed N] [--pcap FILE] [--json FILE|-]
    emu demo                            the mechanisms side by side on a small cluster
"""

from __future__ import annotations

import argparse
import errno
import math
import json
import logging
import sys
import time

import trio
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..config import MIN_REALTIME_NS_PER_S, SECTIONS, ConfigError
from ..errors import EmuError, leaves
from .consoles import make_console
from .trace_options import trace_config

console = make_console()


def _settings(args) -> tuple[dict, dict]:
    """(--config file, --set items) as settings layers: the file under the spec string, --set over it."""
    from ..config import load_settings, parse_settings

    return (load_settings(args.config) if args.config else {}), parse_settings(args.set or [])


def _writable(option: str, path: str | None) -> None:
    """Refuse an output path whose folder does not exist, before anything runs."""
    import os

    if path in (None, "-"):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"{option} {path}: the folder {folder} does not exist; create it or write elsewhere")
    if os.path.isdir(path):
        raise ConfigError(f"{option} {path} is a folder; give a file name")


def cmd_topo(args) -> int:
    from emu.topologies.registry import build

    _writable("--json", args.json)
    defaults, settings = _settings(args)
    t = build(args.spec, defaults=defaults, settings=settings)
    t.validate()
    figures = {"topology": t.name, "hosts": len(t.hosts), "switches": len(t.switches), "links": len(t.links),
               "diameter": t.diameter, "bisection": t.bisection, **t.figures}
    table = Table(title=t.name, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("hosts", str(len(t.hosts)))
    table.add_row("switches", str(len(t.switches)))
    f = t.figures
    if "node_switches" in f:  # a federated network (spec 03, Table I): node-switch chassis and top switches
        tops = [s for s in t.switches if s.info.get("stage") == 3]
        table.add_row("  node switches (chassis of routers)", f"{f['node_switches']} x {2 * 8}")
        table.add_row("  top switches", f"{f['top_switches']}" + (f" of radix {tops[0].info['radix']}" if tops else
                                                                  (" (two chassis joined directly)"
                                                                   if f["node_switches"] == 2 else "")))
        table.add_row("  cables (the nodes' own included)", str(f["cables"]))
        if f.get("top_chassis"):
            table.add_row("  top switches in node-switch chassis (one element each)", str(f["top_chassis"]))
    routers = {s.info["router"] for s in t.switches if "router" in s.info}
    if routers:
        table.add_row("  carved out of routers" + (" (one element each)" if "node_switches" in f else ""),
                      str(len(routers)))
    table.add_row("links", str(len(t.links)))
    table.add_row("diameter (links, host to host)", str(t.diameter))
    table.add_row("bisection width (links)", "n/a" if t.bisection is None else str(t.bisection))
    specs = {(link.spec.latency_ns, link.spec.bandwidth_bps) for link in t.links}
    table.add_row("link latency / bandwidth",
                  ", ".join(f"{lat} ns / {bw / 1e9:g} Gbit/s" for lat, bw in sorted(specs)))
    from .topo_cmd import listing

    if not listing(args, t):  # --links, --nodes, --format: stdout holds them
        (make_console(stderr=True) if args.json == "-" else console).print(table)
    if args.json == "-":
        json.dump(figures, sys.stdout, indent=2)
        print()
    elif args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return 0


OFFLOADS = ("none", "nic", "switch", "hw")
"""``--offload`` values: none = host software, nic = spec 01, hw = spec 03's network hardware (bcast,
barrier, allreduce), switch = spec 04's in-network allreduce (a network manager is attached)."""


def tests_named(given: list[str] | None) -> list[str]:
    """The tests ``--test`` names, in order: each ``--test`` may join several with '+'. A test named
    twice is refused (it would run twice on the same cluster and give two rows of the same name)."""
    from .checks import CHECKS

    names = [n for text in (given or ["pingall"]) for n in text.split("+") if n]
    if not names:
        raise ConfigError(f"--test names no test; known: {', '.join(sorted(CHECKS))}")
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ConfigError(f"unknown test(s) {', '.join(unknown)}; known: {', '.join(sorted(CHECKS))}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--test names {', '.join(twice)} more than once; each test runs once per command")
    return names


def run_epilog() -> str:
    """What ``emu run --help`` shows below the options: the tests by name with a one-line summary
    each (the first line of the test's docstring)."""
    from .checks import CHECKS

    width = max(map(len, CHECKS))
    tests = "\n".join(f"  {name:<{width}}  {(fn.__doc__ or '-').strip().splitlines()[0].rstrip('.')}"
                      for name, fn in CHECKS.items())
    from ..config import settable_fields

    rows = settable_fields()
    fw = max(len(name) for name, *_ in rows)
    fields = "\n".join(f"  {name:<{fw}}  {default!s:>12}  {doc}" for name, _, default, doc in rows)
    return (f"tests (--test NAME; several: --test a+b or --test a --test b):\n{tests}\n\n"
            f"settable fields (--set SECTION.FIELD=VALUE, or [section] field = value in --config FILE.toml;\n"
            f"precedence: --config < the topology spec's parameters < --set), with their defaults:\n{fields}")


async def _run(args) -> int:
    """Every point of the sweep (one without one) checked before any starts, then run in order."""
    from .sweepargs import point_args, sweep

    if getattr(args, "replay", None):
        return await _replay(args)
    if not args.topo:
        raise ConfigError("emu run needs --topo SPEC (or --replay RESULT.json)")
    args.swept, points = sweep(args)
    if len(points) > 1 and (args.pcap or args.trace):
        raise ConfigError(f"--pcap and --trace write one file per cluster; this sweep has {len(points)} points: "
                          "run the point you want to capture on its own")
    prepared = []
    for point in points:  # bad input at any point is refused before the first starts
        pargs = point_args(args, point)
        prepared.append((point, pargs, await _prepare(pargs)))
    args.finished, args.points = [], []
    for point, pargs, (names, topo, faults, extra) in prepared:
        pargs.sink, pargs.point = args.finished, point  # what finished is kept for --json (_keep_finished)
        results, mgr_note = await _run_tests(pargs, topo, names, faults, extra)
        args.trace_summary = getattr(pargs, "trace_summary", None)
        args.partition_used = getattr(pargs, "partition_used", None)
        args.points.append((point, pargs, results, mgr_note))
    return _show_results(args)


async def _replay(args) -> int:
    """``emu run --replay RESULT.json``: the recorded command again; exit 1 with the differences in
    one line when a figure is not the same (wall-clock times aside)."""
    from rich.markup import escape

    from .runrecord import OUTPUTS, compare, load, replay_argv, results_document

    given = [a for a in args.argv[1:] if a.split("=", 1)[0].startswith("--") and a.split("=", 1)[0] not in OUTPUTS]
    if given:
        raise ConfigError(f"--replay takes the command from its file; leave out {given[0]} (only --json, --csv, "
                          "--indent may go with it)")
    run, old = load(args.replay)
    argv = replay_argv(run, args.replay)
    for opt in ("json", "csv", "indent"):
        if getattr(args, opt) is not None:
            argv += [f"--{opt}", str(getattr(args, opt))]
    again = _parser().parse_args(argv)
    again.argv = argv
    code = await _run(again)
    new = results_document(again, again.finished, run_config(again))["results"]
    diffs = compare(old, new)
    out = make_console(stderr=True) if "-" in (args.json, args.csv) else console
    was = run.get("version")
    vnote = f" (recorded with emu {was}, this is {version()})" if was and was != version() else ""
    if diffs:
        more = f"; and {len(diffs) - 3} more" if len(diffs) > 3 else ""
        out.print(f"[red]replay of {args.replay}: {len(diffs)} figure(s) differ:[/] {escape('; '.join(diffs[:3]))}{more}{vnote}",
                  soft_wrap=True, markup=True, highlight=False)
        return 1
    out.print(f"replay of {args.replay}: the figures of its {len(new)} row(s) match{vnote}", soft_wrap=True)
    return code


async def _prepare(args) -> tuple:
    """One point: (tests, topology, faults, options), refused in one line when bad."""
    names, offload = _checked_run_args(args)
    topo, faults, defaults, settings = _topology_with_faults(args)
    extra = _collective_extra(args, names, offload, topo)
    _add_manager_and_group(args, topo, extra, faults, defaults, settings)
    from .buffers import check_buffers
    from .estimate import large_run_note
    from .runrecord import resolved_settings

    check_buffers(topo, names, offload)  # a frame larger than a switch's buffers can never pass
    config, given = _settings(args)
    args.resolved = resolved_settings(args.topo, config, defaults, given, args.config)
    note = await large_run_note(names, topo, extra, args.seed, args.direct)  # before it starts: a person may rather stop
    if note:
        make_console(stderr=True).print(f"[yellow]{escape(note)}[/]")
    return names, topo, faults, extra


def _checked_run_args(args) -> tuple[list[str], str | None]:
    """The tests named and the offload (None: host software), after refusing options out of range
    and output paths that cannot be written."""
    names = tests_named(args.test)
    if args.offload not in (None, *OFFLOADS):
        raise ConfigError(f"--offload {args.offload}: not a place a collective runs; give one of {', '.join(OFFLOADS)}")
    offload = None if args.offload in (None, "none") else args.offload
    if not 0 <= args.seed < 2**63:
        raise ConfigError(f"--seed must be within 0..2**63-1, got {args.seed}")
    if args.realtime is not None and not (math.isfinite(args.realtime) and args.realtime >= MIN_REALTIME_NS_PER_S):
        raise ConfigError(f"--realtime must be a finite number of virtual ns per second, at least "
                          f"{MIN_REALTIME_NS_PER_S:g} (1 us of virtual time per second; slower would pace even a short "
                          f"run over hours), got {args.realtime:g}")
    if args.root is not None and not 0 <= args.root < 2**31:
        raise ConfigError(f"--root {args.root} is not a rank")
    run_config(args)  # refuses a bad --bind (a wildcard address), --processes under mpiexec: before anything starts
    _writable("--pcap", args.pcap)
    _writable("--json", args.json)
    _writable("--csv", args.csv)
    _writable("--trace", args.trace)
    if args.json == "-" and args.csv == "-":
        raise ConfigError("--json - and --csv - both write to stdout; send one of them to a file")
    if args.indent is not None and not 0 <= args.indent <= 16:
        raise ConfigError(f"--indent {args.indent}: give 0..16 spaces")
    return names, offload


def _topology_with_faults(args) -> tuple:
    """(topology, faults, settings file layer, --set layer): the topology built and validated, and the
    ``--fault`` options parsed, each naming real nodes and links of it."""
    from emu.topologies.registry import build

    from ..faults import Fault

    faults = [Fault.parse(f) for f in args.fault or []]
    defaults, settings = _settings(args)
    if faults or args.manager:  # a run that loses frames on purpose: host messages recover them end to end
        defaults = _host_default(defaults, settings, "transport", "reliable")
    from .traffic_checks import PATTERNS

    if set(tests_named(args.test)) & set(PATTERNS):  # open loop: a packet every cycle drawn, not 300 ns later
        defaults = _host_default(defaults, settings, "send_overhead_ns", 0)
    topo = build(args.topo, defaults=defaults, settings=settings)
    topo.validate()
    _check_faults(topo, faults, args.topo)
    return topo, faults, defaults, settings


def _host_default(defaults: dict, settings: dict, field: str, value) -> dict:
    """The settings file layer with ``host.<field>`` = ``value`` where neither it nor --set gives one."""
    if field in defaults.get("host", {}) or field in settings.get("host", {}):
        return defaults
    return {**defaults, "host": {**defaults.get("host", {}), field: value}}


def _check_faults(topo, faults, spec: str = "SPEC") -> None:
    """Refuse a fault on a node or link the topology does not have, before anything starts, naming the
    nearest names it has."""
    from .topo_cmd import check_fault_names

    check_fault_names(topo, faults, spec)


def _collective_extra(args, names: list[str], offload: str | None, topo) -> dict:
    """The collective options as the tests take them (``Options.extra``), refused before anything
    starts where no test named takes them or a collective cannot run with them."""
    extra = {"algo": args.algo, "size": args.size, "dtype": args.dtype, "op": args.op, "root": args.root,
             "ranks": args.ranks.split(",") if args.ranks else None, "offload": offload,
             "branch": args.branch, "density": args.density, "overlap": args.overlap,
             "bucket": args.bucket}
    from emu.nodes.collectives.select import ALGORITHMS

    from .checks import collective_options

    given = [k for k, v in extra.items() if v is not None]
    collectives = [n for n in names if n in ALGORITHMS]
    if any(n in ("put", "get") for n in names):
        from .qsnet_checks import put_size

        put_size(extra)  # refused before anything starts
        if given == ["size"]:
            given = []  # put and get take a size too
    traffic = _traffic_extra(args, names, topo, extra)
    if traffic and given == ["size"]:
        given = []  # a traffic test's packet size
    if given and not collectives:
        raise ConfigError(f"--{', --'.join(given)} apply to collective tests only; --test {'+'.join(names)} has none")
    if args.branch is not None and not offload:
        raise ConfigError("--branch is the offload tree's degree: give --offload nic or hw too")
    from emu.nodes.collectives.operations import rooted

    if args.root is not None and not any(n in rooted() for n in names):
        raise ConfigError(f"--root applies to {', '.join(rooted())} only")
    for name in collectives:  # refuse options a test cannot run with before anything starts
        opts = collective_options(name, extra, topo.host_names(), topo.hosts[0].spec.nic.queue_capacity,
                                  topo.hosts[0].spec.elan)
        limit = topo.hosts[0].spec.max_message_bytes
        if opts.size > limit:
            raise ConfigError(f"--size {opts.size:,} B is over what the hosts accept in one message "
                              f"(host.max_message_bytes = {limit:,}); use a smaller size or --set "
                              "host.max_message_bytes=...")
    return {**extra, **traffic}


def _traffic_extra(args, names: list[str], topo, extra: dict) -> dict:
    """The open-loop traffic options (``--load``, ``--warmup``, ``--measure``), refused before anything
    starts when out of range, when a pattern cannot run on the topology, or when no traffic test is named."""
    from .traffic_checks import PATTERNS, check_pattern, traffic_options

    traffic = {"load": args.load, "warmup": args.warmup, "measure": args.measure}
    patterns = [n for n in names if n in PATTERNS]
    if not patterns:
        if any(v is not None for v in traffic.values()):
            raise ConfigError(f"--load, --warmup and --measure apply to the traffic tests ({', '.join(PATTERNS)}) "
                              f"only; --test {'+'.join(names)} has none")
        return {}
    traffic_options({**extra, **traffic}, topo)
    for name in patterns:
        check_pattern(name, len(topo.hosts))
    return traffic


def _add_manager_and_group(args, topo, extra: dict, faults, defaults: dict, settings: dict) -> None:
    """Attach the network manager (``--manager``, or for the switch offload, which asks it for a tree)
    and, for the hardware offload, the multicast group over the run's ranks."""
    from ..config import ManagerSpec, merge_settings

    mset = merge_settings(defaults, settings).get("manager", {})
    offload = extra["offload"]
    if mset and not args.manager and offload != "switch":
        raise ConfigError(f"manager.{next(iter(mset))} (--set or [manager] in --config) is a setting of the network "
                          "manager, and this run has none: give --manager too (--offload switch attaches one itself)")
    if args.manager or offload == "switch":  # in-network allreduce asks the network manager for a tree
        spec, notes = ManagerSpec(**mset), []
        if spec.bringup:  # enough test frames to catch the links given a bit-error rate from the start
            from ..bringup import sized

            spec, notes = sized(spec, {"-".join(f.link): f.rate for f in faults if f.action == "ber" and f.at_ns == 0})
        topo.add_manager(spec=spec).info["bringup_notes"] = notes
    if offload == "hw":  # hardware collectives use a multicast group over the run's ranks
        from emu.nodes.collectives.hw import HW_GROUP

        # a switch or link down from the start: the group's tree is rooted and routed around it
        avoid = [f.switch or f.link for f in faults if f.action == "down" and f.at_ns == 0]
        topo.add_group(HW_GROUP, extra["ranks"] or topo.host_names(), avoid=avoid)


async def _run_tests(args, topo, names: list[str], faults, extra: dict) -> tuple[list, list[str]]:
    """Start the cluster and run the tests in order under a transient progress line on stderr;
    returns their results and the network manager's notes (empty without one)."""
    from .cluster import Cluster

    results: list = []
    mgr_note: list[str] = []
    err = make_console(stderr=True)
    # a bar that pulses (a run's end is not known in advance) with the virtual time reached and the
    # frames put on links per wall second; nothing at all when stderr is not a terminal
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[speed]}"),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task(f"starting {args.topo}", total=None, speed="")
        last = [time.perf_counter(), 0]

        def on_progress(window: int, t_ns: int) -> None:
            now, frames = time.perf_counter(), net.crossings
            rate = (frames - last[1]) / max(now - last[0], 1e-6)
            last[:] = [now, frames]
            progress.update(task, description=f"{current}: virtual {t_ns / 1000:,.1f} us",
                            speed=f"{rate:,.0f} frames/s, {frames:,} frames, {window:,} windows")

        current = "start"
        async with Cluster(topo, run=run_config(args), capture=args.pcap, progress=on_progress) as net:
            # the manager's settings hold with --offload switch's manager too (bring-up included)
            if topo.manager is not None and topo.nodes[topo.manager].info["manager"].bringup:
                current = "link bring-up"
                progress.update(task, description="link bring-up")
                await _bring_up_links(net, faults)
                from ..bringup import guarantee

                mgr = topo.nodes[topo.manager].info
                mgr_note.append(f"link bring-up over at {net.now:,} ns; {guarantee(mgr['manager'])}")
                mgr_note.extend(mgr.get("bringup_notes", []))
            for name in names:
                current = name
                progress.update(task, description=f"{name}: running")
                results.append(await _run_test(net, name, faults, args.seed, extra))
                args.sink.append((args.point, args, results[-1]))  # kept whatever stops the rest
            if topo.manager is not None and (args.manager or mgr_note):
                mgr_note.extend(await _manager_notes(net, topo))
    args.trace_summary = net.trace_summary
    args.partition_used = net.plan.partition_used
    return results, mgr_note


async def _bring_up_links(net, faults) -> None:
    """The manager tests every link before the tests start; faults from the start are there for the
    link tests too."""
    for f in faults:
        if f.at_ns == 0:
            await net.schedule(net.now, f.action, link=f.link, switch=f.switch, rate=f.rate)
    await net.run({})


async def _run_test(net, name: str, faults, seed: int, extra: dict):
    """One test, with the faults timed from its own start, and the wall-clock time it took."""
    from .checks import Options, run_check

    for f in faults:
        await net.schedule(net.now + f.at_ns, f.action, link=f.link, switch=f.switch, rate=f.rate)
    wall = time.perf_counter()
    r = await run_check(net, name, Options(seed=seed, extra=extra))
    r.figures["wall_s"] = round(time.perf_counter() - wall, 3)
    if faults:  # this test's faults are its own: those not reached are cancelled, every link back as built
        await net.clear_faults()
    return r


async def _manager_notes(net, topo) -> list[str]:
    """What the network manager counted and did over the run, one line per action."""
    st = next(s for s in await net.stats() if s["name"] == topo.manager)
    e = st["engine"]
    notes = [f"traps {e['traps']}, links out {e['links_out']}, back {e['links_back']}, kept "
             f"{e['links_kept']}, commands {e['commands_sent']} ({e['commands_done']} done, "
             f"{e['commands_failed']} failed)"]
    notes.extend(f"{t:,} ns: {what}" for t, what in st["actions"])
    return notes


def _show_results(args) -> int:
    """The results table and each test's figures for a person (on stderr when stdout holds the
    JSON or CSV), the JSON and CSV if asked; exit 0 if every test passed, else 1."""
    out = make_console(stderr=True) if "-" in (args.json, getattr(args, "csv", None)) else console  # stdout: data
    out.print(_results_table(args, args.finished))
    for point, pargs, r in args.finished:
        rows = {k: v for k, v in r.figures.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
        at = "".join(f" {k}={v}" for k, v in point.items() if k in args.swept)
        out.print(f"[bold]{r.name}[/]{at}: " + escape("  ".join(f"{k}={v}" for k, v in r.figures.items() if k not in rows)))
        for k, v in rows.items():  # a figure that is a list of rows (a test's curve): a table
            out.print(_rows_table(f"{r.name}{at}: {k}", v))
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


class Terminated(KeyboardInterrupt):
    """The process was sent SIGTERM: torn down as on Ctrl-C."""


async def _run_terminable(args) -> int:
    """``_run``; SIGTERM cancels it, so the cluster is torn down as on Ctrl-C (workers ended, sockets
    closed, spilled capture runs removed), then ``Terminated`` is raised."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return await _run(args)
    token = trio.lowlevel.current_trio_token()
    terminated: list[int] = []
    with trio.CancelScope() as scope:
        def on_sigterm(signum, frame) -> None:
            terminated.append(signum)
            token.run_sync_soon(scope.cancel)

        old = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            return await _run(args)
        except BaseException:
            if terminated:  # whatever the teardown raised on the way (a worker that also got the signal)
                raise Terminated() from None
            raise
        finally:
            signal.signal(signal.SIGTERM, old)
    raise Terminated()


def run_config(args) -> "RunConfig":
    """How ``emu run`` runs: under ``mpiexec -n N`` the N ranks are its processes (``emu.mpi``)."""
    from ..config import RunConfig
    from ..mpi import world

    processes, size = args.processes, world()[1]
    if size > 1:
        if args.processes not in (1, size):
            raise ConfigError(f"--processes {args.processes} under mpiexec -n {size}: the ranks are the "
                              "processes; leave --processes out")
        processes = size
    return RunConfig(seed=args.seed, processes=processes, capture=bool(args.pcap), realtime_ns_per_s=args.realtime,
                     direct=args.direct, bind=args.bind, partition=args.partition, mpi=size > 1,
                     **trace_config(args))


def personal_plugin_dir() -> str:
    """Wireshark's personal Lua plugin folder (as tshark reports it, else the Linux default)."""
    import os
    import shutil
    import subprocess

    if shutil.which("tshark"):
        try:
            out = subprocess.run(["tshark", "-G", "folders"], capture_output=True, text=True, timeout=20).stdout
            for line in out.splitlines():
                if line.startswith("Personal Lua Plugins:"):
                    return line.split(":", 1)[1].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return os.path.join(os.path.expanduser("~"), ".local", "lib", "wireshark", "plugins")


def cmd_plan(args) -> int:
    """``emu plan nc mesh:k=16,n=2``: spec 02's planner -- the group shape and IN coordinates it picks
    and the longest-path and per-step hop tables that explain why."""
    from emu.nodes.collectives.coding.planner import report
    from emu.topologies.grid import grid_of
    from emu.topologies.registry import build

    t = build(args.spec)
    grid = grid_of(t)
    if grid is None:
        raise ConfigError(f"emu plan nc: {args.spec} is not a direct network; give mesh:k=..,n=.. or torus:k=..,n=..")
    if grid.size > 1 << 14:
        raise ConfigError(f"emu plan nc: {grid.size} nodes; the planner's tables go up to 16384 (k=128, n=2)")
    print(report(grid, args.mcast, args.scheme, args.by))
    return 0


def cmd_wireshark(args) -> int:
    import pathlib
    import shutil

    from ..dissector import GENERATED_PATH

    src = pathlib.Path(__file__).resolve().parents[1] / GENERATED_PATH
    if args.action == "path":
        print(src)
        return 0
    dest = pathlib.Path(args.dest or personal_plugin_dir())
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest / src.name)
    console.print(f"installed {dest / src.name}; restart Wireshark (or use tshark) to load it")
    return 0


def version() -> str:
    """The installed package's version (its metadata), as ``emu --version`` prints it."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("hpc-emu")
    except PackageNotFoundError:
        return "unknown (not installed; pip install -e . in the checkout)"


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    from .. import mpi

    try:  # under mpiexec: rank 0 runs the command, the other ranks serve their domains
        return mpi.entry(lambda: _main(ap, argv))
    except ConfigError as e:  # no key file for the ranks
        return report(e)


def _ascii(kind: type):
    """An option's number type that takes ASCII digits only (``int`` alone would read '٤' as 4)."""
    def convert(text: str):
        if not text.isascii():
            raise argparse.ArgumentTypeError(f"{text!r} must be written in ASCII digits (0-9)")
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    return convert


def _parser() -> argparse.ArgumentParser:
    """The ``emu`` command line: the options, the subcommands and their help."""
    from emu.topologies.registry import describe_families

    fams = "\n".join(f"  {n}:{p}  {s}" for n, p, s in describe_families())
    ap = argparse.ArgumentParser(prog="emu", description="Packet-level HPC interconnect emulator",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=f"topologies (? = optional; all also take latency_ns, bandwidth_gbps, "
                                        f"switch_delay_ns, nic_delay_ns, mtu_bytes):\n{fams}")
    ap.add_argument("--version", action="version", version=f"emu (hpc-emu) {version()}")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-v info, -vv debug)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run a small cluster and print the mechanisms side by side")
    d.add_argument("--hosts", type=_ascii(int), default=8, help="hosts on the star (default 8)")
    d.add_argument("--out", metavar="DIR",
                   help="folder to write the demo's plot into (made if missing; default: a new temporary folder, "
                        "named in the output)")
    d.add_argument("--plot", default="allreduce.png", metavar="FILE",
                   help="the plot's file name inside --out (default allreduce.png; '' for no plot)")
    t = sub.add_parser("topo", help="print a topology's hosts, switches, links, diameter, bisection")
    t.add_argument("spec", help="e.g. fattree:k=4,n=3, or a file FILE.json|FILE.graphml")
    t.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="as for emu run")
    t.add_argument("--config", metavar="FILE.toml", help="as for emu run")
    t.add_argument("--json", metavar="FILE", help="write the figures as JSON ('-': to stdout, the table to stderr)")
    from .topo_cmd import add_options as add_topo_options

    add_topo_options(t)
    pl = sub.add_parser("plan", help="the planner of network-coded broadcast (docs/network-coding.md): group shape and intermediate "
                                               "nodes")
    pl.add_argument("what", choices=["nc"], help="nc: hierarchical XOR network coding (docs/network-coding.md)")
    pl.add_argument("spec", help="a direct network, e.g. mesh:k=16,n=2 or torus:k=8,n=2")
    pl.add_argument("--mcast", choices=["tree", "all_at_once"], default="tree",
                    help="multicast of steps B, D, E (default tree)")
    pl.add_argument("--scheme", choices=["nc", "nc_every", "combine", "all_at_once_coded"], default="nc",
                    help="the scheme to plan (all_at_once_coded: nc with all-at-once multicasts in B, D, E)")
    pl.add_argument("--by", choices=["hops", "longest-path"], default="hops",
                    help="hops: least total hops (default); longest-path: the source's rule, the longest paths "
                         "inside a group and between intermediate nodes balanced, ties by total hops")
    w = sub.add_parser("wireshark", help="the Lua dissector for every header: where it is, or install it")
    w.add_argument("action", choices=["path", "install"],
                   help="path: print where the packaged dissector is; install: copy it into the plugins folder")
    w.add_argument("--dest", help="install into this folder instead of Wireshark's personal Lua plugins folder")
    _add_run(sub)
    rp = sub.add_parser("report", help="plots of an emu run as PNG and SVG: link loads on the topology, "
                                       "per-rank timeline from its trace")
    rp.add_argument("results", metavar="RESULTS.json", help="the --json file of an emu run")
    rp.add_argument("--trace", metavar="FILE", help="the --trace file of the same run (for the timeline)")
    rp.add_argument("--out", metavar="DIR", required=True, help="folder to write the plots into (made if missing)")
    from .mpirun import add_parser as add_mpirun  # emu mpirun: unchanged mpi4py programs on the cluster

    add_mpirun(sub, _ascii(int), _ascii(float))
    from .sweepargs import refuse_repeats

    for command in sub.choices.values():  # an option of one value given twice: refused, not the last kept
        refuse_repeats(command)
    return ap


def _add_run(sub) -> None:
    """``emu run``: the cluster, the tests, the outputs, the faults, then the collectives' options."""
    r = sub.add_parser("run", help="build a cluster, run tests, print and save the figures",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=run_epilog())
    r.add_argument("--topo", help="topology spec, e.g. fattree:k=4,n=3, or a file FILE.json|FILE.graphml (emu topo "
                                  "SPEC --format writes one; docs/topologies.md); a sweep: several, comma-separated "
                                  "(star:n=4,star:n=8)")
    r.add_argument("--test", action="append", metavar="TEST[+TEST...]",
                   help="tests to run, in order: joined with '+' or one --test each (default pingall; listed below)")
    r.add_argument("--seed", type=_ascii(int), default=0, help="seeds the run's random choices (every element's generator, sampled pingall peers, the tests' data): the same seed gives the same figures (default 0)")
    r.add_argument("--processes", type=_ascii(int), default=1, help="OS processes to spread the elements over")
    r.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS|INTERFACE",
                   help="where the elements' sockets listen, and frames between processes or MPI ranks "
                        "travel: an IPv4 address or an interface name such as eth0 (default: loopback)")
    r.add_argument("--partition", choices=["metis", "order"], default="metis",
                   help="how nodes are spread over processes: balanced load with the least traffic "
                        "between them (metis, default), or blocks of the node order")
    tr = r.add_mutually_exclusive_group()
    tr.add_argument("--direct", action="store_true",
                    help="for large runs: frames between two elements of one process are handed over in memory, "
                         "straight into the receiver's input queue, not sent as datagrams (the same figures and "
                         "capture bytes; frames between processes stay on UDP)")
    tr.add_argument("--wire", action="store_true",
                    help="every link on real UDP datagrams on --bind's address, also between elements of one "
                         "process, so a live capture (tshark -i lo -f udp) sees every frame; the default now, "
                         "accepted as before")
    r.add_argument("--manager", action="store_true",
                   help="attach the network manager element (docs/qsnet.md): it hears the routers' traps and rewrites their "
                        "tables around dead links (settings manager.*; manager.bringup=true tests every link first)")
    r.add_argument("--pcap", help="write a pcapng capture of the whole run")
    r.add_argument("--json", metavar="FILE", help="write the results as JSON ('-': to stdout, the table to stderr): "
                                                  "{\"run\": what was run, \"results\": a row per test and point}")
    r.add_argument("--csv", metavar="FILE", help="write the rows as CSV ('-': to stdout): a column per swept "
                                                 "parameter and per figure, after a '# run: {...}' line")
    r.add_argument("--indent", type=_ascii(int), metavar="N", help="indent the JSON by N spaces (default: compact)")
    r.add_argument("--replay", metavar="RESULT.json", help="run the command of a --json file again and check that "
                                                           "its figures match (exit 1 with the differences)")
    r.add_argument("--trace", metavar="FILE", help="write the run's timeline as Chrome trace-event JSON (open it in "
                                                   "ui.perfetto.dev): per host the test, collective calls and their "
                                                   "steps; per port queue depth and load; faults, drops, traps, NACKs")
    r.add_argument("--trace-limit", metavar="SIZE", help="stop writing the trace past this size, saying what it "
                                                         "left out (default 256MiB)")
    r.add_argument("--trace-bin", type=_ascii(int), metavar="NS", help="width of the trace's link-load bins "
                                                                       "(default 1000 ns)")
    r.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE",
                   help="set any field of the specs, e.g. --set host.send_overhead_ns=435 (see below); "
                        "wins over the topology spec and --config; a sweep: --set switch.vcs=1,2,4")
    r.add_argument("--config", metavar="FILE.toml",
                   help="settings from a TOML file: " + " ".join(f"[{s}]" for s in SECTIONS)
                        + " sections of the fields listed below (the same names as --set)")
    r.add_argument("--fault", action="append", metavar="at=TIME,link=A-B,down|up|ber=RATE",
                   help="a fault during each test, TIME from the test's start, e.g. at=20us,link=s0-s4,down; "
                        "or at=0,switch=s3,down; or at=0,link=h0-s0,ber=1e-6")
    r.add_argument("--realtime", type=_ascii(float), metavar="NS_PER_S",
                   help="pace virtual time to the wall clock: virtual ns per second (1e9 = real time)")
    _add_collective_options(r)
    from .sweepargs import ORDER

    r.epilog += (f"\n\nsweeps: --{', --'.join(o for o in ORDER)} take comma-separated lists; the run is their "
                 f"product, --{ORDER[0]} varying slowest and --{ORDER[-1]} fastest, one cluster per point, one "
                 "row per test and point in one table (--json, --csv); an option of one value refuses a second")
    g = r.add_argument_group("open-loop traffic (uniform, transpose, bitcomplement, hotspot, neighbor; --size: the "
                             "packet's payload, one frame, default 256B)")
    g.add_argument("--load", help="offered loads, packets per node per cycle = fractions of a host link's capacity "
                                  "in (0, 1], comma-separated (default 0.1,0.3,0.5,0.7,0.9)")
    g.add_argument("--warmup", type=_ascii(int), help="cycles before the measurement window (default 1000)")
    g.add_argument("--measure", type=_ascii(int), help="cycles of the measurement window (default 1000)")


def _add_collective_options(r: argparse.ArgumentParser) -> None:
    """``emu run``'s options of the collective tests, in a group of their own."""
    from emu.nodes.collectives.operations import OPERATIONS

    c = r.add_argument_group(f"collectives ({', '.join(OPERATIONS)})")
    from emu.nodes.collectives.select import ALGORITHMS

    soft = "; ".join(f"{op} {', '.join(algos)}" for op, algos in ALGORITHMS.items())
    c.add_argument("--algo", help=f"algorithm by name (default: chosen by size, as MPI libraries do); in host "
                                  f"software: {soft}; with --offload hw the hardware's: barrier tree|polled; "
                                  "a sweep: ring,rabenseifner")
    c.add_argument("--size", help="bytes per rank, e.g. 64KiB (alltoall: per destination; default 1KiB); a sweep: "
                                  "1KiB,64KiB,1MiB")
    c.add_argument("--dtype", help="int8..int64, uint8..uint64, float16/32/64 (default float32)")
    c.add_argument("--op", help="sum prod min max minloc maxloc land lor lxor band bor bxor (default sum)")
    c.add_argument("--root", type=_ascii(int), help="root rank of reduce, bcast, mcast (default 0)")
    c.add_argument("--ranks", help="communicator: comma-separated hosts (default: all)")
    c.add_argument("--offload", metavar="{" + ",".join(OFFLOADS) + "}",
                   help="a sweep: several, comma-separated; where a collective runs: none = host software (default), "
                        "nic = on the NICs (NIC-offloaded reduction, triggered descriptors, docs/nic-offload.md: "
                        "allreduce, reduce), hw = the QsNet network hardware (docs/qsnet.md: bcast, barrier --algo "
                        "tree|polled, allreduce), switch = aggregated in the switches (in-network allreduce, "
                        "docs/in-network-allreduce.md: allreduce; a network manager is attached)")
    c.add_argument("--branch", type=_ascii(int),
                   help="branch degree of the offload reduction tree (default: the shallowest tree the NIC's "
                        "receive queue allows, as even as that depth permits: a level costs a fabric crossing "
                        "each way, a child only tens of ns at its parent; for several 48-byte parts on the NICs, "
                        "the degree the pipeline model predicts fastest)")
    c.add_argument("--density", type=_ascii(float),
                   help="allreduce of sparse vectors: the share of non-zero elements (default 1: dense); in host "
                        "software (--offload none: SparCML's split allgather of (index, value) pairs, dense "
                        "where fill-in makes that smaller; --algo recursive_doubling) or the switches (--offload "
                        "switch: shards of pairs)")
    c.add_argument("--bucket", type=_ascii(int),
                   help="allreduce of the source's gradient-like sparse data: one value per bucket of this many "
                        "elements at a random place in it (density 1 / bucket; the source: 512); --overlap is then "
                        "the share of buckets whose value sits at the same place on every rank")
    c.add_argument("--overlap", type=_ascii(float),
                   help="with --density: the share of each rank's non-zero indices drawn from a pool common to "
                        "all ranks (default 0: every rank's drawn on its own; 1: the same indices everywhere)")


def _main(ap, argv) -> int:
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what was run, for the run record
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        from .sweepargs import check_repeats

        check_repeats(args)
        if args.cmd == "demo":
            from .demo import main as demo_main, plot_file

            return demo_main(args.hosts, plot_file(args.out, args.plot), make_console)
        if args.cmd == "topo":
            return cmd_topo(args)
        if args.cmd == "wireshark":
            return cmd_wireshark(args)
        if args.cmd == "plan":
            return cmd_plan(args)
        if args.cmd == "report":
            from .report import report as write_report

            for path in write_report(args.results, args.trace, args.out):
                console.print(f"wrote {path}")
            return 0
        if args.cmd == "run":
            return trio.run(_run_terminable, args)
        if args.cmd == "mpirun":
            from .mpirun import cmd_mpirun

            return cmd_mpirun(args)
    except BaseException as e:  # noqa: BLE001 -- the CLI turns every failure into one line
        return report(e, stderr=getattr(args, "json", None) == "-", note=_keep_finished(args))
    return 2


def report(e: BaseException, stderr: bool = False, note: str | None = None) -> int:
    """One line for a person, never a traceback: ``refused:`` (bad input, exit 2), ``error:`` (the
    run failed, exit 1), or interrupted (130; SIGTERM: 143). An exception group from trio is
    reported by its first meaningful leaf. ``note`` goes at the end of the line."""
    if isinstance(e, BaseExceptionGroup):
        inner = [x for x in leaves(e) if not isinstance(x, trio.Cancelled)]
        if not inner:
            return report(KeyboardInterrupt(), stderr, note)
        ki = [x for x in inner if isinstance(x, KeyboardInterrupt)]
        return report(ki[0] if ki else next((x for x in inner if isinstance(x, (ConfigError, EmuError))), inner[0]),
                      stderr, note)
    out = make_console(stderr=True) if stderr else console  # with --json -, stdout holds only JSON
    if note:
        out = _WithNote(out, note)
    if isinstance(e, Terminated):
        out.print("terminated (SIGTERM); the cluster was torn down", soft_wrap=True)
        return 143
    if isinstance(e, ConfigError):
        out.print(f"[red]refused:[/] {escape(str(e))}", soft_wrap=True)  # one line: a pipe or a log gets no breaks in it
        return 2
    if isinstance(e, EmuError):
        out.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)
        return 1
    if isinstance(e, KeyboardInterrupt):
        out.print("interrupted; the cluster was torn down")
        return 130
    if isinstance(e, OSError) and e.errno == errno.EMFILE:
        out.print("[red]error:[/] too many open files: every element holds a socket; raise the limit "
                  "(ulimit -n), use a smaller topology or more --processes")
        return 1
    if isinstance(e, MemoryError):
        out.print("[red]error:[/] out of memory; use a smaller topology")
        return 1
    if isinstance(e, OSError):
        out.print(f"[red]error:[/] " + escape(f"{e.strerror or e}" + (f": {e.filename}" if getattr(e, "filename", None) else "")),
                  soft_wrap=True)
        return 1
    raise e  # SystemExit, or a bug: then the traceback is what a developer needs


class _WithNote:
    """A console whose line ends with a note (still one line)."""

    def __init__(self, out, note: str):
        self.out, self.note = out, note

    def print(self, text: str, **kw) -> None:
        from rich.markup import escape

        self.out.print(f"{text}; {escape(self.note)}", **{"soft_wrap": True, **kw})  # no breaks in the line


if __name__ == "__main__":
    sys.exit(main())
