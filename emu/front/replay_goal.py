"""``emu replay FILE.goal --topo SPEC``: a GOAL schedule (LogGOPSim's format) replayed on the fabric.

The schedule is read here, at the front door (``emu.nodes.workload.goal``), one rank block at a
time, and checked before anything starts (grammar, dependency cycles, receives no send can match,
ranks that do not fit the hosts); each rank's host then runs ``emu.nodes.workload.goal_replay``:
every send and receive a host message of ``emu mpirun``'s point-to-point protocol. ``--model loggp``
prints LogGOPSim's LogGP figures for the same schedule beside the measured ones. A large schedule
(``--read``) is streamed instead: checked a block at a time, each rank reading its own block as the
run goes (``replay_stream``). A Chakra execution trace goes to ``replay_chakra``. Not the same thing
as ``emu run --replay RESULT.json`` (a recorded run made again).
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time

from ..config import ConfigError


def add_parser(sub, ascii_int) -> None:
    p = sub.add_parser("replay", help="replay a GOAL schedule (LogGOPSim's text format) or a Chakra execution trace "
                                      "on the emulated cluster",
                       description="Replay FILE.goal or a Chakra trace: rank r runs on the r-th host of --ranks (or of the "
                                   "placement); every send and receive is a host message with MPI matching, "
                                   "every calc CPU time (docs/replay.md).", allow_abbrev=False)
    p.add_argument("schedule", metavar="FILE.goal|TRACE", help="the schedule (GOAL text, as LogGOPSim's txt2bin reads), "
                                                               "or a Chakra trace: its folder, a NAME.R.et file or NAME")
    p.add_argument("--format", choices=["goal", "chakra"], help="what the schedule is (default: chakra for .et files, "
                                                                 "a folder or a NAME of NAME.R.et files; else goal)")
    p.add_argument("--comm-groups", metavar="FILE.json", help="Chakra: the process groups {\"pg_name\": [ranks]} "
                                                             "(default: every collective on every rank)")
    p.add_argument("--window", type=ascii_int, default=1024, metavar="N",
                   help="operations a rank holds read and not completed (default 1024; a GOAL operation is taken up "
                        "once N/4 more were read)")
    p.add_argument("--read", choices=["auto", "stream", "whole"], default="auto",
                   help="GOAL: stream: each rank reads its block as the run goes (memory bounded by --window); whole: "
                        "the schedule read first (faster); auto (default): stream files above 32 MB")
    p.add_argument("--algo", metavar="NAME|COLL=NAME,...", help="Chakra: the collectives' algorithm (default: by size)")
    p.add_argument("--offload", help="Chakra: run the collectives it takes there (nic, switch, hw)")
    p.add_argument("--branch", type=ascii_int, help="Chakra: the offload tree's degree")
    p.add_argument("--topo", required=True, help="topology spec, e.g. star:n=16 or fattree:k=4,n=3")
    p.add_argument("--ranks", metavar="HOSTS", help="the hosts of ranks 0, 1, ... (comma-separated)")
    p.add_argument("--placement", choices=["packed", "random"], default="packed",
                   help="packed: rank r on the topology's r-th host (default); random: a seeded shuffle of the hosts")
    p.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="as for emu run")
    p.add_argument("--config", metavar="FILE.toml", help="as for emu run")
    p.add_argument("--seed", type=ascii_int, default=0, help="seeds every element and --placement random (default 0)")
    p.add_argument("--processes", type=ascii_int, default=1, help="spread the cluster over P processes (default 1)")
    p.add_argument("--direct", action="store_true", help="frames handed over in memory, not as UDP datagrams "
                                                         "(the same figures, faster)")
    p.add_argument("--model", choices=["loggp"], help="loggp: also print LogGOPSim's LogGP figures for the schedule, "
                                                      "L, o, g, G, S taken from the topology's settings")
    p.add_argument("--pcap", help="write a pcapng capture of the run")
    p.add_argument("--json", metavar="FILE", help="write the figures (a row emu report reads) as JSON")
    p.add_argument("--csv", metavar="FILE", help="write one line per rank: rank, host, end_ns, ops and per kind figures")
    p.add_argument("--indent", type=ascii_int, metavar="N", help="indent the JSON by N spaces")
    p.add_argument("--trace", metavar="FILE", help="write the timeline (each operation a span) as Chrome trace JSON")
    p.add_argument("--trace-limit", metavar="SIZE", help="stop writing the trace past this size (default 256MiB)")
    p.add_argument("--trace-bin", type=ascii_int, metavar="NS", help="width of the trace's link-load bins")
    p.add_argument("--path", type=ascii_int, default=12, metavar="N",
                   help="print the last N steps of the critical path (default 12; all in --json)")


def read_goal(path: str):
    """The schedule in ``path`` and its sha256, refused in one line when it cannot be read."""
    from emu.nodes.workload.goal import check_matching, read_schedule

    if not os.path.isfile(path):
        raise ConfigError(f"{path}: no such file; give the path of a GOAL schedule (text, as LogGOPSim's txt2bin reads)")
    h = hashlib.sha256()

    def lines(f):
        for raw in f:
            h.update(raw)
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ConfigError(f"{path}: not UTF-8 text; a GOAL schedule is text (a binary .bin of txt2bin is not read)") \
                    from None

    with open(path, "rb") as f:
        s = read_schedule(lines(f), path)
        for _ in f:  # (nothing after the last block is read by the parser: hash the rest too)
            pass
    check_matching(s)
    return s, h.hexdigest()


class Options:
    def __init__(self, args):
        from emu.nodes.collectives.offloads import offload_named
        from emu.topologies.registry import build

        from ..config import load_settings, parse_settings
        from .trace_options import trace_config

        if not 1 <= args.processes <= 256:
            raise ConfigError(f"--processes {args.processes}: give 1..256")
        if not 0 <= args.seed < 2**63:
            raise ConfigError(f"--seed must be within 0..2**63-1, got {args.seed}")
        for opt, path in (("--json", args.json), ("--csv", args.csv), ("--pcap", args.pcap), ("--trace", args.trace)):
            if path and path != "-" and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ConfigError(f"{opt} {path}: its folder does not exist; create it or write elsewhere")
        self.trace = trace_config(args)
        self.chakra = chakra_options(args)
        self.streamed = None
        if self.chakra:
            from .replay_chakra import Trace

            self.schedule = Trace(args.schedule, args.comm_groups, args.window)
            self.sha256 = self.schedule.sha256
        else:
            self.streamed = None
            if _streams(args):
                from .replay_stream import scan_goal

                self.streamed = scan_goal(args.schedule)
            if self.streamed:
                self.schedule, self.sha256 = self.streamed, self.streamed.sha256
            else:
                self.schedule, self.sha256 = read_goal(args.schedule)
        defaults = load_settings(args.config) if args.config else {}
        given = parse_settings(args.set or [])
        topo = build(args.topo, defaults=defaults, settings=given)
        topo.validate()
        names = topo.host_names()
        n = self.schedule.num_ranks
        if args.ranks:
            from .topo_cmd import check_host_names

            hosts = [h.strip() for h in args.ranks.split(",") if h.strip()]
            check_host_names("--ranks", hosts, names, args.topo)
            if len(set(hosts)) != len(hosts):
                raise ConfigError("--ranks names a host twice; one rank per host")
            if len(hosts) != n:
                raise ConfigError(f"--ranks gives {len(hosts)} hosts but {args.schedule} has num_ranks {n}; "
                                  "give one host per rank")
        else:
            if n > len(names):
                raise ConfigError(f"{args.schedule} has {n} ranks but {args.topo} has {len(names)} hosts; one rank per "
                                  "host: use a larger topology")
            hosts = list(names)
            if args.placement == "random":
                random.Random(args.seed).shuffle(hosts)
            hosts = hosts[:n]
        if args.processes > len(topo.nodes):
            raise ConfigError(f"--processes {args.processes} exceeds the {len(topo.nodes)} nodes of {args.topo}")
        if self.chakra and args.offload:
            off = offload_named(args.offload)
            if off.needs_manager:
                topo.add_manager()
            off.add_groups(topo, hosts)
        self.topo, self.hosts, self.args = topo, hosts, args
        from .runrecord import record, resolved_settings

        self.record = record(getattr(args, "argv", None) or [], topo=[args.topo], offload=[None], seed=args.seed,
                             processes=args.processes, mpi=False,
                             partition="none (one process)" if args.processes == 1 else "default",
                             settings=[resolved_settings(args.topo, defaults, {}, given, args.config)],
                             times="end_ns of a rank: when its last operation completed; virtual_ns: the run's")
        self.record.update(schedule=os.path.abspath(args.schedule), sha256=self.sha256, ranks=n, hosts=hosts,
                           placement="--ranks" if args.ranks else args.placement,
                           format="chakra" if self.chakra else "goal")


STREAM_BYTES = 32 << 20
"""``--read auto`` streams a GOAL schedule larger than this (about 700,000 operations)."""


def _streams(args) -> bool:
    """Stream the GOAL schedule? Not for --model loggp (LogGOPSim's simulation takes it whole)."""
    how = getattr(args, "read", "auto")
    if args.model or how == "whole" or not os.path.isfile(args.schedule):
        if how == "stream" and args.model:
            raise ConfigError("--read stream: --model loggp takes the whole schedule; leave one of them out")
        return False
    return how == "stream" or os.path.getsize(args.schedule) > STREAM_BYTES


def chakra_options(args) -> bool:
    """Is the schedule a Chakra trace? Refuses the options of the other format."""
    from .replay_chakra import is_chakra

    chakra = is_chakra(args.schedule, getattr(args, "format", None))
    if not 2 <= getattr(args, "window", 1024) <= 1 << 24:
        raise ConfigError(f"--window {args.window}: give 2..16777216 operations")
    for opt, given in (("--comm-groups", getattr(args, "comm_groups", None)), ("--algo", getattr(args, "algo", None)),
                       ("--offload", getattr(args, "offload", None)), ("--branch", getattr(args, "branch", None))):
        if given is not None and not chakra:
            raise ConfigError(f"{opt} applies to a Chakra trace's collectives; a GOAL schedule has none (leave it out)")
    if chakra:
        if getattr(args, "read", "auto") == "whole":
            raise ConfigError("--read whole: a Chakra trace is always read as the run goes; leave --read out")
        if getattr(args, "model", None):
            raise ConfigError("--model loggp reads GOAL schedules; a Chakra trace's collectives have no LogGP figures here")
        if getattr(args, "offload", None):
            from emu.nodes.collectives.offloads import canonical_offload

            args.offload = canonical_offload(args.offload)
    return chakra


async def _run(topo, schedule, hosts: list[str], run, capture: str | None = None):
    from emu.nodes.workload.goal_replay import goal_rank

    from .cluster import Cluster

    tracing = bool(run.trace)
    async with Cluster(topo, capture=capture, run=run) as net:
        out = await net.run({h: (goal_rank, r, schedule.ranks[r], hosts, tracing) for r, h in enumerate(hosts)})
        return [out[h] for h in hosts], net.metrics


def run_schedule(topo, schedule, hosts: list[str], run=None, capture: str | None = None):
    """Replay ``schedule`` (rank r on ``hosts[r]``) on ``topo`` with ``run`` (a RunConfig); each
    rank's figures (``emu.nodes.workload.goal_replay.goal_rank``) and the run's metrics."""
    import trio

    from ..config import RunConfig

    return trio.run(_run, topo, schedule, hosts, run or RunConfig(), capture)


def replay(args) -> dict:
    """Run the replay; the figures (what ``--json`` writes)."""
    from ..errors import DeadlockError
    from .checks import named_links
    from .replay_path import critical_path, path_summary, per_rank_rows, totals

    from ..config import RunConfig

    opts = Options(args)
    s = opts.schedule
    a = opts.args
    run = RunConfig(seed=a.seed, processes=a.processes, capture=bool(a.pcap), direct=a.direct, **opts.trace)
    if opts.chakra:
        from .replay_chakra import replay_trace

        return {"run": opts.record, "results": [replay_trace(opts, run)]}, opts
    t0 = time.perf_counter()
    keep = not opts.streamed or a.path > 0 or bool(a.json)
    try:
        if opts.streamed:
            from .replay_stream import run_streamed

            results, metrics = run_streamed(opts.topo, s, opts.hosts, run, a.pcap, a.window, keep)
        else:
            results, metrics = run_schedule(opts.topo, s, opts.hosts, run, a.pcap)
    except DeadlockError as e:
        rank_of = {h: r for r, h in enumerate(opts.hosts)}
        text = str(e)
        for h, r in sorted(rank_of.items(), key=lambda x: -len(x[0])):
            text = text.replace(f"{h} blocked", f"rank {r} ({h}) blocked")
        raise DeadlockError(f"{args.schedule}: the replay cannot go on{_why_stuck(opts)}: {text}") from None
    wall = time.perf_counter() - t0
    if opts.streamed:
        from .replay_chakra import PathView

        steps = critical_path(PathView(results, goal=True), results) if keep else []
    else:
        steps = critical_path(s, results)
    figs = {"topology": args.topo, "name": f"replay {os.path.basename(args.schedule)}",
            "schedule": os.path.abspath(args.schedule), "sha256": opts.sha256, "ranks": s.num_ranks, "ops": s.ops,
            "completion_ns": max((r["end_ns"] for r in results), default=0),
            "virtual_ns": metrics.end_ns - metrics.start_ns, "frames": metrics.frames, "bytes": metrics.bytes,
            "hop_count": metrics.hop_count, "wall_s": round(wall, 3),
            "ops_per_wall_s": round(s.ops / wall) if wall > 0 else None,
            "totals": totals(results), "critical_path": {"summary": path_summary(steps), "steps": steps},
            "per_rank": per_rank_rows(s, results, opts.hosts),
            "per_link": named_links(opts.topo, metrics.per_link())}
    if opts.streamed:
        figs["window"] = a.window
        figs["window_delays"] = sum(r["window_delays"] for r in results)
        figs["first_delay"] = next((r["first_delay"] for r in results if r["first_delay"]), None)
    if args.model == "loggp":
        figs["model"] = model_figures(opts)
    return {"run": opts.record, "results": [figs]}, opts


def _why_stuck(opts) -> str:
    """The operations that never complete, as the LogGP model of the same schedule finds them (the
    same matching: a receive no message matches, a rendezvous send no receive matches, what waits
    for them); empty when the model finishes (a race of wildcards the fabric decided otherwise)."""
    from emu.nodes.workload.loggp import Stuck, simulate

    from .replay_path import loggp_of

    schedule = opts.schedule
    if opts.streamed:  # (the model takes the whole schedule, which a streamed run did not keep: read it now)
        schedule = read_goal(opts.args.schedule)[0]
    try:
        simulate(schedule, loggp_of(opts.topo, opts.hosts)[0])
    except Stuck as e:
        return f" ({e})"
    return ""


def model_figures(opts) -> dict:
    from emu.nodes.workload.loggp import simulate

    from .replay_path import loggp_of

    p, how = loggp_of(opts.topo, opts.hosts)
    params = {k: (v if isinstance(v, int) else float(v)) for k, v in p.__dict__.items()}
    try:
        ends = simulate(opts.schedule, p)
    except ValueError as e:
        return {"model": "loggp", "params": params, "line": p.line(), "from": how, "error": str(e)}
    return {"model": "loggp", "params": params, "line": p.line(), "from": how, "completion_ns": max(ends, default=0),
            "end_ns": ends}


def cmd_replay(args) -> int:
    from .runrecord import dump

    doc, opts = replay(args)
    figs = doc["results"][0]
    if args.json == "-":
        dump(doc, sys.stdout, args.indent)
    elif args.json:
        with open(args.json, "w") as f:
            dump(doc, f, args.indent)
    if args.csv:
        write_csv(args.csv, figs)
    out = sys.stderr if args.json == "-" else sys.stdout
    print_summary(figs, args, out)
    return 0


def write_csv(path: str, figs: dict) -> None:
    kinds = ("send", "recv", "calc", "coll") if figs.get("format") == "chakra" else ("send", "recv", "calc")
    with open(path, "w") as f:
        f.write("rank,host,end_ns,ops,unmatched," + ",".join(f"{k}_count,{k}_bytes,{k}_busy_ns" for k in kinds) + "\n")
        for r in figs["per_rank"]:
            cells = [r["rank"], r["host"], r["end_ns"], r["ops"], r["unmatched"]]
            for k in kinds:
                c = r["calls"].get(k, {})
                cells += [c.get("count", 0), c.get("bytes", 0), c.get("virtual_ns", 0)]
            f.write(",".join(map(str, cells)) + "\n")


def print_summary(figs: dict, args, out) -> None:
    n = figs["ranks"]
    last = max(figs["per_rank"], key=lambda r: r["end_ns"]) if figs["per_rank"] else None
    print(f"emu replay {os.path.basename(args.schedule)} (sha256 {figs['sha256'][:12]}...): {n} ranks, {figs['ops']:,} "
          f"operations on {args.topo}: ends at {figs['completion_ns']:,} ns"
          + (f" (rank {last['rank']})" if last else "")
          + f"; {figs['frames']:,} frames, {figs['bytes']:,} bytes; {figs['wall_s']} s wall, "
          f"{figs['ops_per_wall_s'] or 0:,} ops/s", file=out)
    for k, v in figs["totals"].items():
        print(f"  {k:5} {v['count']:>10,} ops {v['bytes']:>14,} bytes {v['busy_ns']:>16,} ns from start to end",
              file=out)
    if figs.get("collectives"):
        print("  collectives (name/algorithm: calls, summed over ranks): "
              + ", ".join(f"{k}: {v:,}" for k, v in sorted(figs["collectives"].items())), file=out)
    if n <= 16:
        print("  end per rank (ns): " + ", ".join(f"{r['rank']}: {r['end_ns']:,}" for r in figs["per_rank"]), file=out)
    cp = figs["critical_path"]
    steps = cp["steps"]
    if steps:
        shown = steps[-args.path:] if args.path > 0 else []
        print(f"  critical path: {len(steps)} operations, {cp['summary']['rank_changes']} rank changes; by kind (ns): "
              + ", ".join(f"{k} {v:,}" for k, v in sorted(cp["summary"]["ns_by_kind"].items())), file=out)
        for st in shown:
            w = f" <- {st['waited_on']}" if "waited_on" in st else ""
            print(f"    rank {st['rank']:>4} {st['op']:>10} {st['kind']:5} {st['start_ns']:>12,} .. {st['end_ns']:>12,}{w}",
                  file=out)
    if figs.get("window_delays"):
        print(f"  the window (--window {figs['window']:,}) held back {figs['window_delays']:,} operations that were ready "
              f"(first: {figs['first_delay']}): the figures may differ from those of the whole schedule; raise --window",
              file=out)
    unmatched = sum(r["unmatched"] for r in figs["per_rank"])
    if unmatched:
        print(f"  {unmatched} message(s) arrived that no receive matched (left in the unexpected queues)", file=out)
    m = figs.get("model")
    if m:
        print(f"  LogGP model (LogGOPSim): {m['line']} (L = {m['from']['L']}; G = {m['from']['G']})", file=out)
        if "error" in m:
            print(f"    {m['error']}", file=out)
        else:
            c, e = m["completion_ns"], figs["completion_ns"]
            share = (f"; {100 * (e - c) / e:.1f}% of the measured time is what LogGP leaves out (contention, routes "
                     "longer than L's, frame headers, store-and-forward, the rendezvous round trip)") if e else ""
            print(f"    LogGP ends at {c:,} ns; measured {e:,} ns{share}", file=out)
