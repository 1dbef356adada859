"""The ``emu`` command. The CLI decides what a person sees; library code only logs.

    emu topo SPEC                       what a topology is made of
    emu run --topo SPEC --test pingall[+TEST...] [--test TEST] [--seed N] [--pcap FILE] [--json FILE|-]
    emu demo                            the mechanisms side by side on a small cluster

Here: the entry (``main``), the subcommand dispatch and the one line a failure becomes; the options
are ``cli_parser``'s, ``emu run`` is ``run_prepare`` (its input checked), ``run_cmd`` (the run) and
``run_output`` (what it shows and writes), the commands that start no cluster ``commands``.
"""

from __future__ import annotations

import errno
import logging
import sys

import trio
from rich.markup import escape

from ..config import ConfigError
from ..errors import EmuError, leaves
from ..timeline import mark
from .cli_parser import _parser, command_word, run_epilog, version  # noqa: F401 -- names of this module as before
from .commands import cmd_plan, cmd_topo, cmd_wireshark, personal_plugin_dir  # noqa: F401
from . import startup_gc
from .consoles import console, make_console
from .run_cmd import Terminated, _run_terminable
from .run_output import _keep_finished
from .run_prepare import run_config, tests_named  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    mark("imported")
    if argv is None and sys.argv[1:2] == ["run"]:  # (a command's process: its start-up, not a library's)
        from ..sync import freeze_until_run

        freeze_until_run()
    early = _fork_early(sys.argv[1:]) if argv is None else None
    try:
        ap = _command_parser(command_word(sys.argv[1:] if argv is None else argv))  # (only the subcommand run)
        from .. import mpi

        if mpi.world()[1] > 1:  # (the other ranks serve domains for the whole command: the collector on)
            startup_gc.back()
        try:  # under mpiexec: rank 0 runs the command, the other ranks serve their domains
            return mpi.entry(lambda: _main(ap, argv, early))
        except ConfigError as e:  # no key file for the ranks
            return report(e)
    finally:
        startup_gc.back()  # (a command that ended before any run)
        if early is not None and early.kids:  # not taken by a cluster (refused, another command)
            early.discard()


_PARSERS: dict = {}
"""The parser of one subcommand (``_parser(only=...)``) by (subcommand, the function that made it),
with its help texts' state: made once a process -- a library caller runs many commands (1-2 ms
each). A parse changes nothing of it (only the namespace it returns); one whose help or usage was
shown (its lists of what is installed read then, ``cli_parser._LazyEpilog``) is made anew."""


def _command_parser(only: str | None):
    """``_parser(only=only)``, the same one again for the same subcommand while its help texts are
    still to be read (the whole parser, with no subcommand named, made anew)."""
    if only is None:
        return _parser(only=None)
    key = (only, _parser)  # (a _parser replaced, e.g. by a test: its own)
    kept = _PARSERS.get(key)
    if kept is not None and _lazy_state(kept[0]) == kept[1]:
        return kept[0]
    ap = _parser(only=only)
    _PARSERS[key] = (ap, _lazy_state(ap))
    return ap


def _lazy_state(ap) -> list:
    """Each parser's (under ``ap``, ``ap`` too) epilog and number of help texts still to fill in:
    other ones once its help was shown."""
    import argparse

    out, todo = [], [ap]
    while todo:
        p = todo.pop()
        out.append((p.__dict__.get("_epilog"), len(p.__dict__.get("_late", ()))))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                todo.extend(a.choices.values())
    return out


def _fork_early(argv: list[str]):
    """``emu run ... --processes N`` (N > 1, not under mpiexec; read off the command line before it
    is parsed): fork the N - 1 worker processes now, before anything else (``emu.control.fork_workers``),
    and the cluster takes them; else None."""
    from .. import mpi
    from ..forked import fork_workers
    from . import WORKER_PRELOAD
    from .run_cmd import LAUNCH_EARLY_MAX

    words = [w for w in argv if not w.startswith("-")]
    if not words or words[0] != "run" or mpi.world()[1] > 1 or {"-h", "--help", "--replay"} & set(argv):
        return None
    n = None
    for i, w in enumerate(argv):
        if w == "--processes" and i + 1 < len(argv):
            n = argv[i + 1]
        elif w.startswith("--processes="):
            n = w.split("=", 1)[1]
    if n is None or not (n.isascii() and n.isdigit()) or not 2 <= int(n) <= LAUNCH_EARLY_MAX:
        return None
    with startup_gc.on_for_fork():  # (each worker with the collector on)
        return fork_workers(int(n) - 1, WORKER_PRELOAD)


def _main(ap, argv, early=None) -> int:
    args = ap.parse_args(argv)
    mark("parsed")
    args.forked = early  # (emu.front.run_cmd._launch_early takes them)
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

            for path in write_report(args.results, args.trace, args.out, args.x, args.y, args.log):
                console.print(f"wrote {path}")
            return 0
        if args.cmd == "run":
            try:
                return trio.run(_run_terminable, args)
            finally:
                mark("done")
        if args.cmd == "mpirun":
            from .mpirun import cmd_mpirun

            return cmd_mpirun(args)
        if args.cmd == "replay":
            from .replay_goal import cmd_replay

            return cmd_replay(args)
        if args.cmd == "schedule":
            from .schedule_cmd import cmd_schedule

            return cmd_schedule(args)
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
