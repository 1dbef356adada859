"""The user's front door: ``async with Cluster(topology) as net: ...``.

One nursery owns the cluster: every element is a trio task started with ``nursery.start`` (it
reports its socket address when ready), worker processes are children of the same nursery, and
leaving the ``async with`` block -- normally, on an error or on Ctrl-C -- cancels them all, closes
every socket and ends every process (DESIGN.md principle 6).

Applications run in *episodes*: ``await net.run({...})`` starts the given applications together at
the cluster's current virtual time and runs the emulation until nothing is left to do; the cluster's
virtual clock then stays where the last event happened until the next episode.

Every link carries real UDP datagrams by default; ``Cluster(topology, direct=True)`` (or
``RunConfig(direct=True)``) hands the frames between two elements of one process over in memory
instead, for large runs: the same figures and capture bytes (``RunConfig.direct``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import trio

from emu.topologies.base import Topology
from emu.topologies.registry import build as build_topology

from ..build import Plan, build_domain
from ..config import ConfigError, RunConfig
from ..errors import AppError, DeadlockError, EmuError, leaves
from ..metrics import RunMetrics, add_cc, add_flow, diff, port_counters
from ..control import SECRET, Launch, launch_workers, worker_command
from ..sync import LocalHandle, MsgStream, Pacer, RemoteHandle, Synchroniser, call_everywhere
from .. import timeline
from ..timeline import mark
from ..watchdog import watch_workers
from . import WORKER_PRELOAD, engines  # noqa: F401 -- fills the engine registry with the kinds that come with the emulator
from .cluster_faults import ClusterFaults
from .cluster_figures import ClusterFigures
from . import startup_gc

log = logging.getLogger(__name__)

SHOWN_WAITING = 4
STOP_GRACE_S = 2.0
"""Wall-clock seconds a worker told to stop has to end by itself before it is sent SIGTERM."""
"""A deadlock report names this many waiting applications, then says how many more wait."""

AppSpec = Callable | tuple


class NodeHandle:
    """``net["h3"]``: a node of a running cluster."""

    def __init__(self, net: "Cluster", name: str):
        self._net = net
        self.name = name
        self.node = net.topology.nodes[name]

    async def ping(self, dst: str) -> int:
        """Virtual round-trip time (ns) of an echo from this host to ``dst``."""
        return await self._net.ping(self.name, dst)

    def __repr__(self) -> str:
        return f"<{self.node.kind} {self.name} id={self.node.id}>"


async def _ping_app(host, dst):
    return await host.ping(dst)


class Cluster(ClusterFaults, ClusterFigures):
    def __init__(self, topology: Topology | str, *, seed: int = 0, processes: int = 1,
                 capture: str | os.PathLike | None = None, run: RunConfig | None = None,
                 progress: Callable[[int, int], None] | None = None, realtime_ns_per_s: float | None = None,
                 direct: bool = False, workers: Launch | None = None):
        if isinstance(topology, str):
            topology = build_topology(topology)
        if not isinstance(topology, Topology):
            raise ConfigError(f"Cluster needs a Topology or a spec such as 'fattree:k=4,n=2', "
                              f"got {type(topology).__name__}")
        topology.validate()
        engines.check_names(topology)
        if run is None:
            run = RunConfig(seed=seed, processes=processes, capture=capture is not None,
                            realtime_ns_per_s=realtime_ns_per_s, direct=direct)
        elif capture is not None and not run.capture:
            run = replace(run, capture=True)
        if run.mpi:
            from ..mpi import world

            rank, size = world()
            if size < 2 or rank != 0 or run.processes != size:
                raise ConfigError(f"RunConfig(mpi=True) is for rank 0 of an MPI job of processes={run.processes} "
                                  f"ranks; this is rank {rank} of {size}: start it with mpiexec -n {run.processes}")
        if run.processes > len(topology.nodes):
            raise ConfigError(f"processes={run.processes} exceeds the {len(topology.nodes)} nodes of "
                              f"{topology.name}; use at most one process per node")
        if workers is not None and (run.mpi or workers.admitted or workers.count != run.processes - 1):
            raise ConfigError(f"workers: a launch of {workers.count} worker process(es) not yet admitted is for a "
                              f"cluster of processes={workers.count + 1} (this one: {run.processes}"
                              f"{', under MPI' if run.mpi else ''}); start them with emu.control.launch_workers")
        self._launch = workers
        """Worker processes started before this cluster (``emu run`` starts them before it builds
        the topology: ``emu.control.launch_workers``), else None until ``_start`` launches them."""
        self.topology = topology
        self.run_config = run
        self.capture_path = capture
        self.cluster_id = secrets.randbits(32) | 1
        known = None
        if workers is not None:  # (the partition its first worker made while the input was checked)
            from ..partition import graph_of

            known = workers.known_partition(graph_of(topology), run.processes, run.partition)
        self.plan = Plan.make(topology, run, self.cluster_id, known)
        mark("planned")
        self.lookahead_ns = self.plan.lookahead_ns
        self._progress = progress
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = trio.Lock()
        self._handles: list = []
        self._sync: Synchroniser | None = None
        self._local = None
        self._captured: list[tuple[int, int, int, bytes]] = []
        self._workers: list = []
        self._worker_command = worker_command
        """How worker processes are started (a test hook: ``emu.control.worker_command``)."""
        self.metrics: RunMetrics | None = None
        """Figures of the last ``run`` (completion time, frames, bytes, hop count, per link)."""
        self.trace_summary: dict | None = None
        """With ``RunConfig.trace``: once the cluster is closed, what the trace holds (events, bytes)
        and what it left out past its size limit (``omitted``: events by kind)."""

    # -- names ----------------------------------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        return [n.name for n in self.topology.hosts]

    @property
    def switches(self) -> list[str]:
        return [n.name for n in self.topology.switches]

    def __getitem__(self, name: str) -> NodeHandle:
        if name not in self.topology.nodes:
            raise KeyError(f"no node {name!r} in {self.topology.name}; hosts are {self.hosts[:8]}...")
        return NodeHandle(self, name)

    @property
    def now(self) -> int:
        """Virtual time (ns) of the last event processed (a scheduled change reached included)."""
        return max(self._sync.max_time, self._sync.fault_max) if self._sync else 0

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes (empty for a one-process cluster)."""
        return [p.pid for p in self._workers]

    @property
    def crossings(self) -> int:
        """Frames put on links so far, over every process (a progress figure: credits included)."""
        return sum(map(sum, self._sync.sent)) if self._sync else 0

    @property
    def windows(self) -> int:
        """Synchronisation windows run so far (a cost figure, not a model figure)."""
        return self._sync.window if self._sync else 0

    def __repr__(self) -> str:
        if self._sync is None:
            state = "not started"
        elif self._sync.broken:
            state = "broken"
        else:
            state = "running" if self._stack is not None else "closed"
        def count(n: int, what: str, plural: str) -> str:
            return f"{n} {what if n == 1 else plural}"

        t = self.topology
        return (f"<Cluster {t.name}: {count(len(t.hosts), 'host', 'hosts')}, "
                f"{count(len(t.switches), 'switch', 'switches')}, "
                f"{count(self.run_config.processes, 'process', 'processes')}, virtual time {self.now:,} ns, {state}>")

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> "Cluster":
        mark("cluster-enter")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        self._spill_root()  # (refused before anything starts when its folder cannot be made)
        try:
            self._nursery = await stack.enter_async_context(trio.open_nursery())
            await self._start()
        except BaseException as e:
            self._close_sockets()
            if self._launch is not None:  # (started before the cluster: not in its nursery)
                with trio.CancelScope(shield=True):
                    await self._launch.aclose()
            self._drop_spill_root()
            if self._local is not None and self._local.tracer is not None:
                self._local.tracer.f.close()
            self._nursery.cancel_scope.cancel()  # workers and element tasks end with the failed start
            with _one_error():
                await stack.__aexit__(type(e), e, e.__traceback__)
            raise
        self._stack = stack
        mark("cluster-started")
        return self

    async def __aexit__(self, etype, exc, tb) -> bool:
        mark("cluster-exit")
        stack, self._stack = self._stack, None
        trace_error = None
        try:
            if exc is None and self.capture_path is not None:
                await self.write_capture(self.capture_path)
        finally:
            with trio.CancelScope(shield=True):
                if self._local is not None and self._local.tracer is not None:
                    try:
                        await self._finish_trace()
                    except OSError as e:  # (a full disk) told once everything is torn down
                        trace_error = e
                for h in self._handles:
                    if isinstance(h, RemoteHandle):
                        await h.close()
                if self._launch is not None:  # told to stop, the workers end (those started before the
                    await self._launch.aclose(STOP_GRACE_S)  # cluster are not in its nursery: waited for here)
            self._nursery.cancel_scope.cancel()
            try:
                with _one_error():
                    await stack.__aexit__(etype, exc, tb)
            finally:
                self._close_sockets()
                if self._local is not None:  # capture runs nobody collected (an error) go too
                    self._local._drop_runs()
                self._drop_spill_root()  # and those of a worker that was killed
                mark("cluster-closed")
        if trace_error is not None:
            if exc is None:
                raise trace_error
            log.warning("the trace was not finished: %s", trace_error)  # the run's own error is the one to tell
        return False

    def _spill_root(self) -> None:
        """One folder for the spilled capture runs of every process of the run (``RunConfig.capture_dir``)."""
        if self.run_config.capture:
            import tempfile

            try:
                self._spill_dir = tempfile.mkdtemp(prefix="emu-capture-", dir=self.run_config.capture_dir)
            except OSError as e:
                where = self.run_config.capture_dir or tempfile.gettempdir()
                raise ConfigError(f"the capture's spill folder cannot be made in {where} ({e.strerror}); "
                                  "name a writable folder (RunConfig.capture_dir, or TMPDIR)") from None
            self.plan = replace(self.plan, run=replace(self.plan.run, capture_dir=self._spill_dir))

    def _drop_spill_root(self) -> None:
        import shutil

        if getattr(self, "_spill_dir", None):
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None

    def _close_sockets(self) -> None:
        if self._local is not None:
            for el in self._local.elements:
                el.sock.close()

    async def _start(self) -> None:
        nursery = self._nursery
        p = self.run_config.processes
        if self.run_config.mpi:  # what every process of the run holds (off loopback it keys the datagram tags)
            from .. import mpi

            secret = mpi.load_key(create=True)
        else:
            secret = secrets.token_bytes(SECRET)
        handles: list = []
        addrs: dict[str, tuple[str, int]] = {}
        if self.run_config.mpi:
            from .. import mpi

            self._local = build_domain(self.plan, 0, secret)
            handles.append(LocalHandle(self._local))
            self._handles = handles
            remotes, addrs = await mpi.start_ranks(self.plan, secret)
            handles.extend(remotes)
        elif p > 1:
            self._handles = handles  # so that teardown closes whatever connected, also on error
            if self._launch is None:  # started now, they import while this process builds its domain
                self._launch = await launch_workers(nursery, p - 1, self._worker_command, secret, WORKER_PRELOAD,
                                                    self.run_config.connect_timeout_s)
            secret = self._launch.secret

            pickled: list[bytes] = []

            async def send_plan(chan: MsgStream, d: int) -> None:
                if not pickled:  # (pickled once for every worker: 3 ms each on fattree:k=4,n=4, while they wait)
                    pickled.append(pickle.dumps(self.plan, protocol=pickle.HIGHEST_PROTOCOL))
                await chan.send((pickled[0], d))

            if not self._launch.ready:
                self._local = build_domain(self.plan, 0, secret)
                mark("local-built")
            self._workers, chans = await self._launch.admit(send_plan)
            mark("workers-in")
            if self._local is None:  # (the workers were waiting: they build theirs meanwhile)
                self._local = build_domain(self.plan, 0, secret)
                mark("local-built")
            handles.insert(0, LocalHandle(self._local))
            remotes = {d: RemoteHandle(d, chan) for d, chan in chans.items()}
            handles.extend(remotes[d] for d in sorted(remotes))
            for w in self._workers:  # a worker that stops answering is reported, not waited for
                remotes[w.index].pid = w.pid
            nursery.start_soon(watch_workers, [remotes[d] for d in sorted(remotes)], self.run_config.worker_timeout_s)
            for d in sorted(remotes):
                try:
                    with trio.fail_after(60):
                        addrs.update(await remotes[d].chan.recv())
                except (EOFError, trio.BrokenResourceError, trio.TooSlowError) as e:
                    raise EmuError(f"worker process of domain {d} failed while starting its elements "
                                   f"({type(e).__name__}); see its messages above") from None
        else:
            self._local = build_domain(self.plan, 0, secret)
            handles.append(LocalHandle(self._local))
        mark("workers-built")
        addrs.update(await nursery.start(self._local.serve_sockets))  # one reader for the process's sockets
        self._handles = handles
        await call_everywhere(handles, "set_addresses", lambda d: (addrs,))
        pacer = Pacer(self.run_config.realtime_ns_per_s) if self.run_config.realtime_ns_per_s else None
        if self.run_config.mpi:
            self._sync = mpi.MpiSynchroniser(handles, self.lookahead_ns, mpi.comm(), self._progress, pacer)
        else:
            self._sync = Synchroniser(handles, self.lookahead_ns, self._progress, pacer)

    # -- the trace (RunConfig.trace, emu.trace) -----------------------------------------------------
    @property
    def tracing(self) -> bool:
        return bool(self.run_config.trace)

    async def trace_mark(self, kind: str, name: str = "", args: dict | None = None) -> None:
        """With a trace: begin (``kind="B"``) or end (``"E"``) a span named ``name`` on every host's
        rank track at ``self.now`` (``emu run`` marks each test so). Nothing without one."""
        if not self.tracing or self._sync is None:
            return
        async with self._lock:
            for h in self._handles:
                await h.call("trace_mark", kind, name, self.now, args)

    def _trace_instant(self, node: str | None, name: str, args: dict) -> None:
        tr = self._local.tracer if self._local is not None else None
        if tr is not None:
            tr.instant(node, name, self.now, args, "deadlock")

    async def _finish_trace(self) -> None:
        """Close every process's part of the trace and merge them into the one file (best effort
        on an error: the parts of processes that still answer)."""
        t = self.now
        parts = []
        for h in self._handles:
            if isinstance(h, RemoteHandle):
                try:
                    parts.append(await h.call("trace_close", t, self.run_config.mpi))
                except Exception as e:  # a dead worker's part is lost; the trace says so
                    log.warning("trace: the part of domain %d is lost (%s)", h.index, type(e).__name__)
        tr = self._local.tracer
        self._local.tracer = None
        self.trace_summary = tr.finish(t, parts, {"topology": self.topology.name, "processes": self.run_config.processes,
                                                  "bin_ns": self.run_config.trace_bin_ns})

    # -- running applications -------------------------------------------------------------------
    async def run(self, apps: dict[str, AppSpec]) -> dict[str, Any]:
        """Start ``apps`` ({host: fn or (fn, args)}) together at ``self.now``; run until nothing is
        left to do; return {host: value the app returned}. An app that raised raises AppError; apps
        still waiting when nothing is left to do raise DeadlockError naming what they wait for."""
        if self._sync is None:
            raise EmuError("the cluster is not running; use 'async with Cluster(...) as net:'")
        if self._sync.broken:
            raise EmuError(f"the cluster cannot run any more: {self._sync.broken}; start a new one")
        per_domain: dict[int, dict[str, tuple]] = {}
        for host, spec in apps.items():
            node = self.topology.nodes.get(host)
            if node is None or node.kind != "host":
                raise ConfigError(f"run: {host!r} is not a host of {self.topology.name}")
            fn, args = (spec[0], tuple(spec[1:])) if isinstance(spec, tuple) else (spec, ())
            if not callable(fn):
                raise ConfigError(f"run: the application for {host} is not callable: {fn!r}")
            if self.plan.owner[host] and not self.run_config.mpi and getattr(fn, "__module__", None) == "__main__":
                raise ConfigError(f"run: the application for {host} ({getattr(fn, '__qualname__', fn)}) is defined in "
                                  "the script being run (__main__), which a worker process cannot import; define "
                                  "it in a module of its own and import it from there")
            per_domain.setdefault(self.plan.owner[host], {})[host] = (fn, args)
        async with self._lock:
            sync = self._sync
            start = self.now
            self.metrics = None  # a run that fails half-way has no figures (not the last run's)
            await call_everywhere(self._handles, "reset_peaks", lambda d: (start,))
            raw_before = await self._stats()
            before = port_counters(raw_before)
            started = await call_everywhere(self._handles, "start_apps", lambda d: (start, per_domain.get(d, {})))
            for d, t in enumerate(started):  # apps, and engines with timers of their own
                sync.next_times[d] = min(sync.next_times[d], t)
            probe = await timeline.run_begin(self._handles)  # (None without EMU_TIMELINE)
            mark("run-begin")
            startup_gc.back(freeze=True)  # (the emu run command's start-up ends: the collector on again)
            try:
                await sync.run_until_quiet()
            except BaseException as e:
                # applications of an interrupted run are still in the engines: nothing more may run
                sync.broken = sync.broken or f"a run was interrupted ({type(e).__name__})"
                if isinstance(e, Exception):
                    await self._close_apps()
                raise
            mark("run-end")
            await timeline.run_end(self._handles, probe)
            states = [s for part in await call_everywhere(self._handles, "app_states") for s in part]
            raw_after = await self._stats()
            self.metrics = diff(before, port_counters(raw_after), start, max(start, sync.max_time))
            add_flow(self.metrics, raw_before, raw_after)
            add_cc(self.metrics, raw_before, raw_after)
            stuck = sum(p.get("frames_waiting", 0) for s in raw_after for p in s["ports"])
            if stuck:
                await self._credit_deadlock(stuck)
        results: dict[str, Any] = {}
        errors, waiting = [], []
        for st in states:
            if st.error is not None:
                errors.append((st.host, st.finished_ns, st.error))
            elif not st.done:
                waiting.append(f"{st.host} blocked in {st.waiting} since {st.since_ns} ns")
            else:
                results[st.host] = st.result
        if errors:
            raise AppError(errors)
        if waiting and self.tracing:
            for st in states:
                if not st.done and st.error is None:
                    self._trace_instant(st.host, "deadlock", {"blocked in": st.waiting, "since_ns": st.since_ns})
        if waiting:
            given_up = [f for st in raw_after for f in st.get("transport", {}).get("failures", ())]
            # the root cause first: a host cut off (its own link down) explains its peers' give-ups
            given_up.sort(key=lambda f: "its own link " not in f)
            cause = ""
            if given_up:  # the reason the others wait: say it first
                more = f" (and {len(given_up) - 1} more)" if len(given_up) > 1 else ""
                cause = f"host messages given up: {given_up[0]}{more}; "
                if self.topology.manager is None and any("no way through the network" in f for f in given_up):
                    cause += ("no network manager routes around dead links in this run (emu run attaches one "
                              "unless --manager none; Topology.add_manager() here); ")
            shown = waiting[:SHOWN_WAITING]  # a few, and how many: one readable line whatever the size
            more = f"; and {len(waiting) - len(shown)} more" if len(waiting) > len(shown) else ""
            report = (f"{cause}no events left at {self.now} ns but {len(waiting)} application"
                      f"{'s still wait' if len(waiting) > 1 else ' still waits'}: " + "; ".join(shown) + more)
            self._trace_instant(None, "deadlock", {"report": report})
            raise DeadlockError(report)
        return results

    def start_app_later(self, host: str, fn, args: tuple, at_ns: int) -> None:
        """Start an application on ``host`` at virtual time ``at_ns`` while a run is under way, from
        an application of that run (``emu mpirun``'s ``Comm.Spawn``); the run's end waits for it too.
        ``at_ns`` is at least one lookahead after the caller's now: no element has reached it yet (the
        synchroniser's window is that long). A host of this process's domain only."""
        if self._local is None or host not in self._local.by_name:
            raise EmuError(f"start_app_later: {host!r} is not a host of this process's domain")
        self._local.start_app(at_ns, host, fn, args)

    async def _close_apps(self) -> None:
        """Close the coroutines of a run that broke off (they never end otherwise); best effort."""
        for h in self._handles:
            try:
                await h.call("app_states")
            except Exception:  # a domain that cannot answer has its own error to tell
                pass

    async def ping(self, src: str, dst: str) -> int:
        return (await self.run({src: (_ping_app, dst)}))[src]

    async def each_process(self, fn: Callable, args_of: Callable[[int], tuple] = lambda d: ()) -> list:
        """``fn(*args_of(d))`` in every process of the cluster at once (``d``: its index, 0 this one);
        their answers in that order. ``fn`` goes to a worker by reference, as an application does (a
        function of a module): e.g. to check applications' results where they ran
        (``emu.nodes.collectives.run.check_where_run``)."""
        if self._sync is None:
            raise EmuError("the cluster is not running; use 'async with Cluster(...) as net:'")
        async with self._lock:
            return await call_everywhere(self._handles, "call", lambda d: (fn, *args_of(d)))


@contextlib.contextmanager
def _one_error():
    """Raise the one error an exception group from the cluster's nursery holds (cancellations
    aside), so that callers and the CLI see an ``EmuError``, not a group; a group of several stays."""
    try:
        yield
    except BaseExceptionGroup as eg:
        inner = [e for e in leaves(eg) if not isinstance(e, trio.Cancelled)]
        if len(inner) == 1:
            raise inner[0] from None
        raise
