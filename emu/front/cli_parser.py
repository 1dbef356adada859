"""The ``emu`` command line: its options, subcommands and help texts (argparse), and the version
it prints."""

from __future__ import annotations

import argparse
import functools
import os

from ..config import SECTIONS, ConfigError


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
            f"precedence: --config < the topology spec's parameters < --set; fields ending in _ns, _bytes, _bps take "
            f"units: 1us, 4KiB, 100Gbps), with their defaults:\n{fields}")


@functools.cache
def version() -> str:
    """The installed package's version (its metadata), as ``emu --version`` prints it (read once per
    process: reading the metadata takes milliseconds, and a run's record asks again)."""
    from ..plugins import installed_version

    fast = installed_version("hpc-emu")
    if fast is not None:
        return fast
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("hpc-emu")
    except PackageNotFoundError:
        return "unknown (not installed; pip install -e . in the checkout)"


def element_loop() -> str:
    """Which element loop a run here uses: the compiled core or pure Python, and why (``emu --version``
    and the run record say it)."""
    from .. import native

    if native.CORE is not None:
        return f"element loop: compiled core ({native.CORE.__file__})"
    why = ("EMU_PURE is set" if os.environ.get("EMU_PURE", "") not in ("", "0") else
           native.WHY or "the compiled core is not built (no C compiler at install)")
    return f"element loop: pure Python ({why})"


def _ascii(kind: type):
    """An option's number type that takes decimal ASCII digits only (``int`` alone would read '٤' as 4,
    and ``1_0`` as 10; ``emu.config.numbers``)."""
    from ..config.numbers import decimal_float, decimal_int, hint

    def convert(text: str):
        if not text.isascii():
            raise argparse.ArgumentTypeError(f"{text!r} must be written in ASCII digits (0-9)")
        try:
            return decimal_int(text) if kind is int else decimal_float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}"
                                             f"{hint(text)}") from None
    return convert


COMMANDS = ("demo", "topo", "plan", "wireshark", "run", "report", "mpirun", "replay", "schedule")
"""The subcommands of ``emu``, in the order of its help (``_parser``)."""


def command_word(argv: list[str]) -> str | None:
    """The subcommand a command line names, when the parser of that subcommand alone parses it as the
    whole parser would: its first word a subcommand, after nothing but ``-v``/``--verbose`` (``-h``,
    ``--version`` or a mistake before it: None, the whole parser)."""
    for word in argv:
        if word in ("-v", "--verbose") or (word.startswith("-v") and set(word[1:]) == {"v"}):
            continue
        return word if word in COMMANDS else None
    return None


def _families_epilog() -> str:
    from emu.topologies.registry import describe_families

    fams = "\n".join(f"  {n}:{p}  {s}" for n, p, s in describe_families())
    return (f"topologies (? = optional; all also take latency_ns, bandwidth_gbps, switch_delay_ns, nic_delay_ns, "
            f"mtu_bytes):\n{fams}")


class _Version(argparse.Action):
    """``--version``: the version and the element loop, read when asked (argparse's ``version``
    action takes the text when the parser is made, at every command's start)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show program's version number and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        import sys

        parser._print_message(f"emu (hpc-emu) {version()}; {element_loop()}\n", sys.stdout)
        parser.exit()


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``emu`` command line: the options, the subcommands and their help. ``only``: a subcommand
    (``command_word`` of the command line), the only one made -- the command's start-up, not the other
    eight; its help texts that list what is installed are filled in when the help is shown."""
    ap = OneLine(prog="emu", description="Packet-level HPC interconnect emulator",
                 formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False, epilog=_families_epilog)
    ap.add_argument("--version", action=_Version)
    ap.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-v info, -vv debug)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    made = [name for name in COMMANDS if only in (None, name)]
    for name in made:
        _SUBCOMMANDS[name](sub, only is not None)
    from .sweepargs import refuse_repeats

    for command in sub.choices.values():  # an option of one value given twice: refused, not the last kept
        refuse_repeats(command)
    return ap


def _add_demo(sub, late: bool) -> None:
    d = sub.add_parser("demo", help="run a small cluster and print the mechanisms side by side", allow_abbrev=False)
    d.add_argument("--hosts", type=_ascii(int), default=8, help="hosts on the star (default 8)")
    d.add_argument("--out", metavar="DIR",
                   help="folder to write the demo's plot into (made if missing; default: a new temporary folder, "
                        "named in the output)")
    d.add_argument("--plot", default="allreduce.png", metavar="FILE",
                   help="the plot's file name inside --out (default allreduce.png; '' for no plot)")


def _add_topo(sub, late: bool) -> None:
    t = sub.add_parser("topo", help="print a topology's hosts, switches, links, diameter, bisection",
                       allow_abbrev=False)
    t.add_argument("spec", help="e.g. fattree:k=4,n=3, or a file FILE.json|FILE.graphml")
    t.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="as for emu run")
    t.add_argument("--config", metavar="FILE.toml", help="as for emu run")
    t.add_argument("--json", metavar="FILE", help="write the figures as JSON ('-': to stdout, the table to stderr)")
    from .topo_cmd import add_options as add_topo_options

    add_topo_options(t)


def _add_plan(sub, late: bool) -> None:
    pl = sub.add_parser("plan", help="the planner of network-coded broadcast (docs/network-coding.md): group shape and intermediate "
                                               "nodes", allow_abbrev=False)
    pl.add_argument("what", choices=["nc"], help="nc: hierarchical XOR network coding (docs/network-coding.md)")
    pl.add_argument("spec", help="a direct network, e.g. mesh:k=16,n=2 or torus:k=8,n=2")
    pl.add_argument("--mcast", choices=["tree", "all_at_once"], default="tree",
                    help="multicast of steps B, D, E (default tree)")
    pl.add_argument("--scheme", choices=["nc", "nc_every", "combine", "all_at_once_coded"], default="nc",
                    help="the scheme to plan (all_at_once_coded: nc with all-at-once multicasts in B, D, E)")
    pl.add_argument("--by", choices=["hops", "longest-path"], default="hops",
                    help="hops: least total hops (default); longest-path: the source's rule, the longest paths "
                         "inside a group and between intermediate nodes balanced, ties by total hops")


def _add_wireshark(sub, late: bool) -> None:
    w = sub.add_parser("wireshark", help="the Lua dissector for every header: where it is, or install it",
                       allow_abbrev=False)
    w.add_argument("action", choices=["path", "install"],
                   help="path: print where the packaged dissector is; install: copy it into the plugins folder")
    w.add_argument("--dest", help="install into this folder instead of Wireshark's personal Lua plugins folder")


def _add_report(sub, late: bool) -> None:
    rp = sub.add_parser("report", help="plots of an emu run as PNG and SVG: link loads on the topology, "
                                       "per-rank timeline from its trace, flow slowdown by size, queues over "
                                       "time", allow_abbrev=False)
    rp.add_argument("results", metavar="RESULTS.json", help="the --json file of an emu run or an emu mpirun")
    rp.add_argument("--trace", metavar="FILE", help="the --trace file of the same run (for the timeline and the "
                                                    "queues over time)")
    rp.add_argument("--out", metavar="DIR", required=True, help="folder to write the plots into (made if missing)")
    rp.add_argument("--x", metavar="PARAM", help="a sweep's x axis: a swept parameter (default: the one that varies "
                                                 "fastest)")
    rp.add_argument("--y", metavar="FIGURE", default="completion",
                    help="a sweep's y axis: completion (us), algbw or busbw (GB/s, as nccl-tests computes them), or any "
                         "numeric figure of the rows (default completion)")
    rp.add_argument("--log", choices=["auto", "x", "y", "xy", "none"], default="auto",
                    help="log axes: auto (each axis whose values span a decade or more; default), x, y, xy or none")


def _add_mpirun(sub, late: bool) -> None:
    from .mpirun import add_parser as add_mpirun  # emu mpirun: unchanged mpi4py programs on the cluster

    add_mpirun(sub, _ascii(int), _ascii(float))


def _add_replay(sub, late: bool) -> None:
    from .replay_goal import add_parser as add_replay  # emu replay: a GOAL schedule on the cluster

    add_replay(sub, _ascii(int))


def _add_schedule(sub, late: bool) -> None:
    from .schedule_cmd import add_parser as add_schedule  # emu schedule: a collective as a GOAL schedule

    add_schedule(sub, _ascii(int))


class _LazyEpilog:
    """A parser whose epilog may be given as a function, called when the help is shown: ``emu run``'s
    lists every test and settable field, which imports every test (a third of a second of every
    run's start-up otherwise); likewise the help texts of its ``late_texts``."""

    @property
    def epilog(self):
        text = self.__dict__.get("_epilog")
        if callable(text):
            text = self.__dict__["_epilog"] = text()
        return text

    @epilog.setter
    def epilog(self, text) -> None:
        self.__dict__["_epilog"] = text

    @property
    def late_texts(self) -> list:
        """Functions that fill in help texts, called once before the help or usage is first shown."""
        return self.__dict__.setdefault("_late", [])

    def format_help(self) -> str:
        self._fill_late()
        return super().format_help()

    def format_usage(self) -> str:
        self._fill_late()
        return super().format_usage()

    def _fill_late(self) -> None:
        for fill in self.__dict__.pop("_late", []):
            fill()


class _Refusing(_LazyEpilog, argparse.ArgumentParser):
    """A parser that raises ``ConfigError`` with argparse's message where argparse would print its
    usage text and exit: for a command line that is data, not a person's typing."""

    def error(self, message: str):
        raise ConfigError(message)


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean --json?)`` for a misspelt or shortened option or subcommand; empty when nothing
    is close."""
    import difflib

    choices = sorted(set(choices))
    starts = [c for c in choices if c.startswith(word) and c != word]
    near = starts[:3] or difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


class OneLine(_LazyEpilog, argparse.ArgumentParser):
    """A person's command line: a mistake is one line on stderr, ``emu: refused: ...`` with a "did you
    mean" where an option or subcommand is close to one that exists, and exit status 2 (argparse's
    usage text stays behind ``--help``)."""

    _argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        import sys

        self._argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        return super().parse_known_args(args, namespace)

    def _words(self) -> tuple[str, list[str]]:
        """(the prog, the option strings and subcommands) of the subcommand the command line names,
        else of this parser."""
        words: list[str] = []
        for a in self._actions:
            if isinstance(a, argparse._SubParsersAction):
                for token in self._argv:
                    if token in a.choices:
                        sub = a.choices[token]
                        return sub.prog, [o for x in sub._actions for o in x.option_strings]
                words += list(a.choices)
            words += a.option_strings
        return self.prog, words

    def error(self, message: str):
        import re
        import sys

        prog, words = self._words()
        bad = re.findall(r"(?:unrecognized arguments|invalid choice): '?([^' ]+)", message)
        hint = did_you_mean(bad[0], words) if bad else ""
        sys.stderr.write(f"{prog}: refused: {message}{hint}; see {prog} --help\n")
        sys.exit(2)


def run_parser_refusing() -> argparse.ArgumentParser:
    """The parser of ``emu run``'s options, refusing in one line (``ConfigError``), never with a usage
    text: ``--replay`` parses a record's command line with it."""
    sub = _Refusing(prog="emu", allow_abbrev=False).add_subparsers(dest="cmd", required=True)
    _add_run(sub)
    from .sweepargs import refuse_repeats

    run = sub.choices["run"]
    refuse_repeats(run)
    run.set_defaults(cmd="run")
    return run


def _run_epilog_sweeps() -> str:
    """``emu run --help`` below the options: the tests, the settable fields, the sweeps."""
    from .sweepargs import ORDER

    return run_epilog() + (f"\n\nsweeps: --{', --'.join(o for o in ORDER)} take comma-separated lists; the run is "
                           f"their product, --{ORDER[0]} varying slowest and --{ORDER[-1]} fastest, one cluster per "
                           "point, one row per test and point in one table (--json, --csv); an option of one value "
                           "refuses a second")


def _add_run(sub, late: bool = False) -> None:
    """``emu run``: the cluster, the tests, the outputs, the faults, then the collectives' options
    (``late``: the help texts that list what is installed filled in when the help is shown)."""
    r = sub.add_parser("run", help="build a cluster, run tests, print and save the figures",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_run_epilog_sweeps,
                       allow_abbrev=False)
    r.add_argument("--topo", help="topology spec, e.g. fattree:k=4,n=3, or a file FILE.json|FILE.graphml (emu topo "
                                  "SPEC --format writes one; docs/topologies.md); a sweep: several, comma-separated "
                                  "(star:n=4,star:n=8)")
    r.add_argument("--test", action="append", metavar="TEST[+TEST...]",
                   help="tests to run, in order: joined with '+' or one --test each (default pingall; listed below)")
    r.add_argument("--job", action="append", metavar="NAME:hosts=...,test=...",
                   help="a job: a test on its own hosts, run at once with the other jobs on one cluster; keys hosts= "
                        "(h0+h3, h0-h7, packed:N, random:N, interleaved:N, file:PATH), test=, start=TIME, class=0..7 "
                        "(its prio through queues.class_map) and the test's options (size=, algo=, load=, ...); "
                        "also [[job]] tables in --config "
                        "(docs/jobs.md). Each job's row gives its slowdown against itself alone on the same hosts")
    r.add_argument("--no-isolated", action="store_true",
                   help="with --job: do not run each job alone afterwards (no slowdown column)")
    r.add_argument("--gpcnet", metavar="KEY=VALUE,...",
                   help="--test gpcnet's counts and sizes (docs/jobs.md): victims=0.2, rings=, lat_iters=, bw_iters=, "
                        "bw_size=, ar_iters=, cong_size=, cong_iters= (default GPCNeT's figures scaled to an emulator)")
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
    r.add_argument("--manager", nargs="?", const="on", choices=("on", "none"), metavar="none",
                   help="the network manager element (docs/qsnet.md): it hears the routers' traps and rewrites their "
                        "tables around dead links (settings manager.*; manager.bringup=true tests every link first). "
                        "As in the fabrics modelled, it is there when a --fault takes a link or switch down; "
                        "--manager attaches it to any run, --manager none leaves it out (the bare network)")
    r.add_argument("--pcap", help="write a pcapng capture of the whole run")
    r.add_argument("--json", metavar="FILE", help="write the results as JSON ('-': to stdout, the table to stderr): "
                                                  "{\"run\": what was run, \"results\": a row per test and point}")
    r.add_argument("--csv", metavar="FILE", help="write the rows as CSV ('-': to stdout): a column per swept "
                                                 "parameter and per figure, after a '# run: {...}' line")
    r.add_argument("--format", choices=("table", "nccl-tests", "osu"), default="table",
                   help="how the results are printed: table (default); nccl-tests or osu: the collectives in those "
                        "benchmarks' layouts (a block per collective, a row per --size; times are virtual), so the "
                        "figures set beside a real machine's and the scripts that read theirs read them")
    r.add_argument("--indent", type=_ascii(int), metavar="N", help="indent the JSON by N spaces (default: compact)")
    r.add_argument("--replay", metavar="RESULT.json", help="run the command of a --json file again and check that "
                                                           "its figures match (exit 1 with the differences); only "
                                                           "its options of what is run are taken, the outputs are "
                                                           "this command line's")
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
    _add_collective_options(r, late)
    from .flow_options import add_flow_options

    add_flow_options(r, _ascii(int))
    g = r.add_argument_group("open-loop traffic (uniform, transpose, bitcomplement, hotspot, neighbor, worst_case, "
                             "tornado, shuffle, randperm; --size: the "
                             "packet's payload, one frame, default 256B)")
    g.add_argument("--load", help="offered loads, packets per node per cycle = fractions of a host link's capacity "
                                  "in (0, 1], comma-separated (default 0.1,0.3,0.5,0.7,0.9)")
    g.add_argument("--warmup", type=_ascii(int), help="cycles before the measurement window (default 1000)")
    g.add_argument("--measure", type=_ascii(int), help="cycles of the measurement window (default 1000)")
    g.add_argument("--drain", choices=("fixed", "measured", "global"),
                   help="after the window the sources keep injecting: fixed (--warmup more cycles, the default); "
                        "measured (each until the measured packets sent to it have arrived, then it sends every host "
                        "a count message: n x n messages, not BookSim's drain; at most 10x the window); or global "
                        "(BookSim's drain: all until every measured packet anywhere has arrived, counted out of band "
                        "with no messages, then none; they stop at the first cycle at least the lookahead -- "
                        "drain_lag_ns in the results, one cycle on BookSim's mesh -- after the last one arrived, "
                        "BookSim the cycle after; at most 10x the window; one process only)")
    g.add_argument("--to-self", action="store_true", default=None,
                   help="uniform (and hotspot's uniform part): a host may draw itself, as BookSim's uniform does "
                        "(its packet crosses its router)")


def _add_collective_options(r: argparse.ArgumentParser, late: bool = False) -> None:
    """``emu run``'s options of the collective tests, in a group of their own. Their help lists the
    operations, algorithms and offloads (installed packages' too: a scan of every package's metadata);
    ``late``: those texts are filled in when the help is shown."""
    c = r.add_argument_group("collectives")
    algo = c.add_argument("--algo", help="algorithm by name")
    c.add_argument("--size", help="bytes per rank, e.g. 64KiB (alltoall: per destination; default 1KiB; 64K is 64 KiB "
                                  "as in nccl-tests, 64KB is 64,000); a sweep: 1KiB,64KiB,1MiB")
    c.add_argument("--dtype", help="int8..int64, uint8..uint64, float16/32/64 (default float32)")
    c.add_argument("--op", help="sum prod min max minloc maxloc land lor lxor band bor bxor (default sum)")
    c.add_argument("--root", type=_ascii(int), help="root rank of reduce, bcast, mcast (default 0)")
    c.add_argument("--ranks", help="communicator: comma-separated hosts (default: all)")
    offload = c.add_argument("--offload", metavar="OFFLOAD", help="where a collective runs")

    def fill() -> None:
        from emu.nodes.collectives.offloads import OFFLOADS as registry
        from emu.nodes.collectives.offloads.base import names as offload_names
        from emu.nodes.collectives.operations import OPERATIONS
        from emu.nodes.collectives.select import ALGORITHMS
        from emu.plugins import OFFLOADS as GROUP, others

        c.title = f"collectives ({', '.join(OPERATIONS)})"
        soft = "; ".join(f"{op} {', '.join(algos)}" for op, algos in ALGORITHMS.items())
        algo.help = (f"algorithm by name (default: chosen by size, as MPI libraries do); in host software: {soft}; "
                     "with --offload hw the hardware's: barrier tree|polled; a sweep: ring,rabenseifner")
        installed = others(GROUP, registry)  # (one scan of the entry points for the help text)
        offload.metavar = "{" + ",".join(offload_names()) + "}"
        offload.help = ("a sweep: several, comma-separated; where a collective runs: "
                        + ", ".join(f"{n} = {o.summary}" for n, o in registry.items())
                        + (f"; from installed packages: {installed[2:]}" if installed else ""))

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
    if late:
        r.late_texts.append(fill)
    else:
        fill()


_SUBCOMMANDS = {"demo": _add_demo, "topo": _add_topo, "plan": _add_plan, "wireshark": _add_wireshark, "run": _add_run,
                "report": _add_report, "mpirun": _add_mpirun, "replay": _add_replay, "schedule": _add_schedule}
"""Each subcommand's maker (``_parser``), by name, as :data:`COMMANDS` lists them."""
