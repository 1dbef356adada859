"""``emu run``: the points of a sweep in order, each a cluster running the tests under a progress
line; ``--replay``; SIGTERM tears the cluster down as Ctrl-C does."""

from __future__ import annotations

import time

import trio

from ..config import ConfigError
from ..timeline import mark
from .cli_parser import version
from .consoles import console, make_console
from .run_output import _show_results
from .run_prepare import _prepare, run_config


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
    async with trio.open_nursery() as nursery:
        launch = await _launch_early(nursery, args)
        try:
            prepared = []
            for point in points:  # bad input at any point is refused before the first starts
                pargs = point_args(args, point)
                prepared.append((point, pargs, await _prepare_point(pargs, launch if not prepared else None)))
            mark("prepared")
            args.finished, args.points = [], []
            for point, pargs, (names, topo, faults, extra) in prepared:
                pargs.sink, pargs.point = args.finished, point  # what finished is kept for --json (_keep_finished)
                results, mgr_note = await _run_tests(pargs, topo, names, faults, extra, launch)
                launch = None  # (the first cluster's; the next points start their own)
                args.trace_summary = getattr(pargs, "trace_summary", None)
                args.partition_used = getattr(pargs, "partition_used", None)
                args.points.append((point, pargs, results, mgr_note))
        finally:
            if launch is not None:  # refused before its cluster started: the workers end
                with trio.CancelScope(shield=True):
                    await launch.aclose()
    mark("ran")
    return _show_results(args)


LAUNCH_EARLY_MAX = 64
"""``--processes`` up to this: the worker processes start before the topology is built."""


async def _launch_early(nursery, args):
    """With ``--processes N`` (N > 1, not under mpiexec): start the N - 1 worker processes now, so
    that their start-up (Python, the emulator's modules) overlaps this process's (the topology, the
    checks of the input, the plan); the first cluster takes them (``Cluster(workers=...)``). None
    otherwise; more than ``LAUNCH_EARLY_MAX`` start with their cluster, once the input is checked."""
    from ..mpi import world

    n = args.processes
    forked, args.forked = getattr(args, "forked", None), None
    if forked is not None:  # forked as the command started (emu.front.cli._fork_early)
        if forked.count == n - 1 and world()[1] == 1:
            return await forked.launch(nursery)
        forked.discard()
    if not isinstance(n, int) or n < 2 or n > LAUNCH_EARLY_MAX or world()[1] > 1:
        return None
    from ..control import launch_workers
    from . import WORKER_PRELOAD

    return await launch_workers(nursery, n - 1, preload=WORKER_PRELOAD)


async def _prepare_point(args, launch=None) -> tuple:
    """``_prepare``, or for a run of jobs (``--job``, ``[[job]]``) ``emu.front.jobs.prepare_jobs``.
    ``launch``: the worker processes started for this point's cluster (one of them makes the
    partition while the input is checked)."""
    from .jobs import job_texts, prepare_jobs

    if job_texts(args):
        return await prepare_jobs(args)
    if getattr(args, "no_isolated", False):
        raise ConfigError("--no-isolated applies to runs of --job only")
    return await _prepare(args, launch)


async def _replay(args) -> int:
    """``emu run --replay RESULT.json``: the recorded run again (``emu.front.replay``), writing only
    where the user's own command line says; exit 1 with the differences in one line when a figure
    is not the same (wall-clock times aside)."""
    from rich.markup import escape

    from .replay import check_own, replay_args
    from .runrecord import compare, load, results_document

    check_own(args.argv)
    run, old = load(args.replay)
    again = replay_args(run, args.replay, args)  # from the record as data: it names no file written or read
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


async def _run_tests(args, topo, names: list[str], faults, extra: dict, launch=None) -> tuple[list, list[str]]:
    """Start the cluster and run the tests in order under a transient progress line on stderr;
    returns their results and the network manager's notes (empty without one). ``launch``: its
    worker processes, started already (``_launch_early``)."""
    from .cluster import Cluster

    from .run_prepare import wants_manager

    results: list = []
    mgr_note: list[str] = []
    auto = args.manager is None and wants_manager(args, faults)
    if auto:  # said, since the user did not ask for it
        mgr_note.append("a --fault takes a link or switch down: the network manager is attached, as in the fabrics "
                        "modelled (--manager none: the bare network)")
    err = make_console(stderr=True)
    # a bar that pulses (a run's end is not known in advance) with the virtual time reached and the
    # frames put on links per wall second; nothing at all when stderr is not a terminal
    with _progress_bar(err) as progress:
        task = progress.add_task(f"starting {args.topo}", total=None, speed="")
        last = [time.perf_counter(), 0]

        def on_progress(window: int, t_ns: int) -> None:
            now, frames = time.perf_counter(), net.crossings
            rate = (frames - last[1]) / max(now - last[0], 1e-6)
            last[:] = [now, frames]
            progress.update(task, description=f"{current}: virtual {t_ns / 1000:,.1f} us",
                            speed=f"{rate:,.0f} frames/s, {frames:,} frames, {window:,} windows")

        current = "start"
        if launch is not None:  # (the partition a worker made meanwhile: _prepare asked it)
            await launch.partition_answer()
        async with Cluster(topo, run=run_config(args), capture=args.pcap, workers=launch,
                           progress=on_progress if err.is_terminal else None) as net:
            # the manager's settings hold with --offload switch's manager too (bring-up included)
            if topo.manager is not None and topo.nodes[topo.manager].info["manager"].bringup:
                current = "link bring-up"
                progress.update(task, description="link bring-up")
                await _bring_up_links(net, faults)
                from ..bringup import guarantee

                mgr = topo.nodes[topo.manager].info
                mgr_note.append(f"link bring-up over at {net.now:,} ns; {guarantee(mgr['manager'])}")
                mgr_note.extend(mgr.get("bringup_notes", []))
            if extra.get("jobs"):  # --job: the jobs at once, then each alone (emu.front.jobs_run)
                from .jobs_run import run_jobs

                current = "jobs"
                progress.update(task, description="jobs: running")
                for r in await run_jobs(net, extra["jobs"], args.seed, not args.no_isolated):
                    results.append(r)
                    args.sink.append((args.point, args, r))
            for name in names:
                current = name
                progress.update(task, description=f"{name}: running")
                results.append(await _run_test(net, name, faults, args.seed, extra))
                args.sink.append((args.point, args, results[-1]))  # kept whatever stops the rest
            if topo.manager is not None and (args.manager == "on" or mgr_note or auto):
                mgr_note.extend(await _manager_notes(net, topo))
    args.trace_summary = net.trace_summary
    args.partition_used = net.plan.partition_used
    return results, mgr_note


class _NoBar:
    """The progress bar where stderr is not a terminal: nothing shown, nothing computed."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, *args, **kw) -> int:
        return 0

    def update(self, *args, **kw) -> None:
        return None


def _progress_bar(err):
    """rich's progress bar on the console ``err`` if it is a terminal, else :class:`_NoBar`."""
    if not err.is_terminal:
        return _NoBar()
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[speed]}"),
                    TimeElapsedColumn(), console=err, transient=True)


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


class Terminated(KeyboardInterrupt):
    """The process was sent SIGTERM: torn down as on Ctrl-C."""


async def _run_terminable(args) -> int:
    """``_run``; SIGTERM ends it as Ctrl-C does, so the cluster is torn down (workers ended, sockets
    closed, spilled capture runs removed), then ``Terminated`` is raised. As trio delivers Ctrl-C: at
    once where the code it lands in may be interrupted -- a long stretch without an await, such as
    the draws of a long open-loop schedule or a large topology's build, does not delay it (it waited
    for the next await: ~10 s into a 2M-cycle schedule) -- and as a cancellation where trio's own code
    must not be (``trio.lowlevel.currently_ki_protected``)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return await _run(args)
    token = trio.lowlevel.current_trio_token()
    terminated: list[int] = []
    with trio.CancelScope() as scope:
        def on_sigterm(signum, frame) -> None:
            terminated.append(signum)
            if len(terminated) == 1 and not trio.lowlevel.currently_ki_protected():
                raise Terminated()  # (where the signal landed: the teardown runs as on a KeyboardInterrupt)
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
