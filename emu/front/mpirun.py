"""``emu mpirun -n N --topo SPEC PROGRAM.py [ARGS...]``: an unchanged mpi4py program on the cluster.

Each rank is an OS process (``python -m emu.rank``) running the program, where ``from mpi4py import
MPI`` gives the emulated MPI (``emu.rank.mpi``); its host runs ``emu.front.mpiserve.rank_app``,
which carries out the rank's calls on the fabric in virtual time. The processes talk over one
``socketpair`` each (``emu.rank.wire``), handed on by file descriptor: no port is opened.

As mpiexec: stdin goes to rank 0; stdout and stderr of the ranks are merged (``--tag-output``
prefixes each line with ``[rank]``); the exit status is not 0 when a rank fails. A rank that raises
prints its traceback (once: its own) and the job ends; a deadlock -- every rank waiting -- is
reported with the call each rank waits in; Ctrl-C and SIGTERM end every rank. At the end one line in
virtual time on stderr, and ``--json`` with the figures per rank and per call kind.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from ..config import ConfigError
from ..errors import AppError, DeadlockError



def add_parser(sub, ascii_int, ascii_float) -> None:
    p = sub.add_parser("mpirun", help="run an unchanged mpi4py program on the emulated cluster, one OS process "
                                      "per rank (as mpiexec)",
                       description="Run PROGRAM.py (or -m MODULE) as N ranks on the hosts of --topo; in the ranks "
                                   "'from mpi4py import MPI' is the emulated MPI: every call is traffic of the "
                                   "rank's host, Wtime() is virtual seconds.", allow_abbrev=False)
    p.add_argument("-n", "-np", dest="n", type=ascii_int, required=True, help="number of ranks")
    p.add_argument("--topo", required=True, help="topology spec, e.g. fattree:k=4,n=3")
    p.add_argument("--hosts", help="the hosts of ranks 0, 1, ... (comma-separated; default: the topology's, in order)")
    p.add_argument("--universe-size", "-usize", dest="universe", type=ascii_int, metavar="N",
                   help="the hosts the job may use (as hydra's -usize): the -n ranks' and, after them, those "
                        "Comm.Spawn may start processes on (default: every host of --hosts or of the topology); "
                        "MPI.UNIVERSE_SIZE")
    from emu.nodes.collectives.offloads import OFFLOADS
    from emu.nodes.collectives.offloads.base import names as offload_names

    p.add_argument("--offload", choices=offload_names(), default="none",
                   help="where collectives that support it run: " + ", ".join(
                       f"{n} ({', '.join(o.operations)})" for n, o in OFFLOADS.items() if not o.hosted)
                        + "; others in host software")
    p.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="as for emu run")
    p.add_argument("--config", metavar="FILE.toml", help="as for emu run")
    p.add_argument("--seed", type=ascii_int, default=0,
                   help="seeds every emulated element's random generator: the same seed gives the same "
                        "figures (default 0)")
    p.add_argument("--direct", action="store_true",
                   help="hand the frames between the emulated elements over in memory instead of as UDP "
                        "datagrams (as emu run --direct: the same figures, faster)")
    p.add_argument("--pcap", help="write a pcapng capture of the job")
    p.add_argument("--json", metavar="FILE", help="write the figures per rank and per MPI call kind as JSON, with "
                                                  "the run record (what was run)")
    p.add_argument("--indent", type=ascii_int, metavar="N", help="indent the JSON by N spaces (default: compact)")
    p.add_argument("--trace", metavar="FILE", help="write the job's timeline as Chrome trace-event JSON (open it "
                                                   "in ui.perfetto.dev): per rank its collective calls and their "
                                                   "steps; per port queue depth and load")
    p.add_argument("--trace-limit", metavar="SIZE", help="stop writing the trace past this size (default 256MiB)")
    p.add_argument("--trace-bin", type=ascii_int, metavar="NS", help="width of the trace's link-load bins (default "
                                                                    "1000 ns)")
    p.add_argument("--tag-output", action="store_true", help="prefix every output line with [rank]")
    p.add_argument("--compute", choices=["zero"],
                   help="zero: the ranks' computation between MPI calls takes no virtual time (deterministic)")
    p.add_argument("--cpu-scale", type=ascii_float, default=1.0, metavar="F",
                   help="virtual time of computation = the rank's measured CPU time x F (default 1)")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module (as python -m)")
    p.add_argument("program", nargs="?", help="the program (PROGRAM.py)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")


class Options:
    """The checked command line: what the ranks run, where, and how time passes."""

    def __init__(self, args):
        from emu.topologies.registry import build

        from ..config import load_settings, parse_settings

        if args.module:
            self.target = ["-m", args.module]
            self.argv = ([args.program] if args.program else []) + list(args.args)
            if importlib.util.find_spec(args.module.split(".")[0]) is None and not os.path.exists(
                    args.module.split(".")[0]) and not os.path.exists(args.module.split(".")[0] + ".py"):
                raise ConfigError(f"-m {args.module}: no such module; give an importable module name")
        else:
            if not args.program:
                raise ConfigError("emu mpirun: give the program to run (PROGRAM.py [ARGS...]) or -m MODULE")
            if not os.path.isfile(args.program):
                raise ConfigError(f"{args.program}: no such file; give the path of a Python program")
            self.target, self.argv = [args.program], list(args.args)
        if not 1 <= args.n <= 4096:
            raise ConfigError(f"-n {args.n}: the number of ranks must be within 1..4096")
        scale = 0.0 if args.compute == "zero" else args.cpu_scale
        if not (math.isfinite(scale) and scale >= 0):
            raise ConfigError(f"--cpu-scale {args.cpu_scale}: give a finite factor >= 0 (or --compute zero)")
        if not 0 <= args.seed < 2**63:
            raise ConfigError(f"--seed must be within 0..2**63-1, got {args.seed}")
        from .trace_options import trace_config

        self.trace = trace_config(args)
        for opt, path in (("--json", args.json), ("--pcap", args.pcap), ("--trace", args.trace)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ConfigError(f"{opt} {path}: its folder does not exist; create it or write elsewhere")
        defaults = load_settings(args.config) if args.config else {}
        given = parse_settings(args.set or [])
        topo = build(args.topo, defaults=defaults, settings=given)
        topo.validate()
        names = topo.host_names()
        if args.hosts:
            hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
            from .topo_cmd import check_host_names

            check_host_names("--hosts", hosts, names, args.topo)
            if len(set(hosts)) != len(hosts):
                raise ConfigError("--hosts names a host twice; one rank per host")
        else:
            hosts = names
        if args.n > len(hosts):
            raise ConfigError(f"-n {args.n} ranks but {len(hosts)} hosts "
                              f"{'given with --hosts' if args.hosts else 'on ' + args.topo}; one rank per host: "
                              "use fewer ranks or a larger topology")
        self.hosts = hosts[:args.n]
        universe = len(hosts) if args.universe is None else args.universe
        if not args.n <= universe <= len(hosts):
            raise ConfigError(f"--universe-size {universe}: give a number within -n {args.n} .. {len(hosts)} (the hosts "
                              f"{'given with --hosts' if args.hosts else 'of ' + args.topo}; one process per host)")
        self.universe = hosts[:universe]
        """The hosts of the job: the ranks' (``hosts``), then those ``Comm.Spawn`` may use (``emu.front.mpispawn``)."""
        from emu.nodes.collectives.offloads import canonical_offload, offload_named

        self.offload = canonical_offload(args.offload)  # None: host software
        off = offload_named(self.offload)
        if off.needs_manager:  # in-network allreduce asks the network manager for a tree
            topo.add_manager()
        if len(self.hosts) > 1:  # the multicast groups its collectives use (hw)
            off.add_groups(topo, self.hosts)
        self.topo, self.spec, self.scale = topo, args.topo, scale
        self.seed, self.pcap, self.json, self.tag = args.seed, args.pcap, args.json, args.tag_output
        self.direct = args.direct
        from .runrecord import record, resolved_settings

        self.indent = args.indent
        self.record = record(getattr(args, "argv", None) or [], topo=[args.topo], offload=[self.offload],
                             seed=args.seed, processes=1, mpi=False, partition="none (one process)",
                             settings=[resolved_settings(args.topo, defaults, {}, given, args.config)],
                             times="virtual_ns counts from the job's start to its last event; a call kind's "
                                   "virtual_ns is the virtual time its calls took")
        self.record.update(ranks=len(self.hosts), hosts=self.hosts, program=self.target + self.argv,
                           compute="zero" if args.compute == "zero" else f"measured CPU time x {scale:g}")


class Ranks:
    """The rank processes, their channels and the threads that relay their output."""

    def __init__(self, opts: Options):
        self.opts = opts
        self.procs: list[subprocess.Popen] = []
        self.conns: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        n = len(self.opts.hosts)
        for r in range(n):
            self.launch(r, [*self.opts.target, *self.opts.argv], n)

    def launch(self, r: int, argv: list[str], size: int, cwd: str | None = None) -> tuple:
        """Start process ``r`` of a ``COMM_WORLD`` of ``size``: ``python -m emu.rank ARGV`` (in ``cwd``), its
        channel and its output's relays (also for ``Comm.Spawn``, during the run)."""
        ours, theirs = socket.socketpair()
        env = dict(os.environ, EMU_MPIRUN_FD=str(theirs.fileno()), EMU_MPIRUN_RANK=str(r),
                   EMU_MPIRUN_SIZE=str(size), EMU_MPIRUN_CPU_SCALE=repr(self.opts.scale), EMU_MPIRUN_PARENT=str(os.getpid()))
        try:
            p = subprocess.Popen([sys.executable, "-m", "emu.rank", *argv], pass_fds=[theirs.fileno()], env=env,
                                 stdin=None if r == 0 else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=cwd)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self.procs.append(p)
        self.conns.append(ours)
        for pipe, out in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
            t = threading.Thread(target=self._relay, args=(r, pipe, out), daemon=True)
            t.start()
            self.threads.append(t)
        return p, ours

    def _relay(self, rank: int, pipe, out) -> None:
        prefix = f"[{rank}] ".encode() if self.opts.tag else b""
        for line in iter(pipe.readline, b""):
            with self.lock:
                try:
                    out.flush()
                    out.buffer.write(prefix + line)
                    out.buffer.flush()
                except (OSError, ValueError):  # our own output closed: drain the rest
                    pass

    def stop(self, grace_s: float = 2.0) -> list[int | None]:
        """Wait briefly for the ranks to end, end those still running, close everything."""
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in self.threads:
            t.join(5)
        for c in self.conns:
            c.close()
        return [p.returncode for p in self.procs]

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass


def figures(job, metrics, wall_s: float, opts: Options | None = None) -> dict:
    calls = sum(f.count for st in job.ranks if st for f in st.calls.values())
    out = {}
    if opts is not None:  # what emu report reads of a run: the topology, a name, the time and the links' load
        from .checks import named_links

        out = {"topology": opts.spec, "name": "mpirun " + os.path.basename(opts.target[-1]),
               "completion_ns": metrics.end_ns - metrics.start_ns if metrics else None,
               "per_link": named_links(opts.topo, metrics.per_link()) if metrics else {}}
    out |= {"ranks": job.first, "hosts": job.hosts[:job.first],
           **({"spawned": len(job.hosts) - job.first} if len(job.hosts) > job.first else {}),
           "virtual_ns": metrics.end_ns - metrics.start_ns if metrics else None,
           "frames": metrics.frames if metrics else None, "bytes": metrics.bytes if metrics else None,
           "hop_count": metrics.hop_count if metrics else None, "mpi_calls": calls, "wall_s": round(wall_s, 3),
           "per_rank": []}
    for st in job.ranks:
        if st is None:
            continue
        spawned = job.spawner.worlds.get(st.rank) if job.spawner is not None else None
        out["per_rank"].append({"rank": st.rank, "host": job.hosts[st.rank], "exit": job.exit_codes.get(st.rank),
                                **({"spawn": spawned.sid, "world_rank": st.comms[0].rank} if spawned else {}),
                                "calls": {k: {"count": f.count, "bytes": f.bytes, "virtual_ns": f.ns,
                                              **({"algorithms": sorted(f.algos)} if f.algos else {})}
                                          for k, f in sorted(st.calls.items())}})
    return out


async def _serve(opts: Options, job, handlers) -> object:
    from .cluster import Cluster
    from .mpiserve import rank_app

    from ..config import RunConfig

    run = RunConfig(seed=opts.seed, capture=bool(opts.pcap), direct=opts.direct, **opts.trace)
    async with Cluster(opts.topo, capture=opts.pcap, run=run) as net:
        if job.spawner is not None:  # Comm.Spawn starts its processes' hosts during the run
            job.spawner.start_app = lambda host, r, at: net.start_app_later(host, rank_app, (job, r, handlers), at)
            job.spawner.lookahead_ns = net.lookahead_ns
        await net.run({h: (rank_app, job, r, handlers) for r, h in enumerate(opts.hosts)})
        return net.metrics


def _dead_rank(job, ranks: Ranks) -> str | None:
    """Every rank waits because one of them is gone or stopped (while it waited for an answer): that one."""
    from .mpiwatch import proc_state

    for r, p in enumerate(ranks.procs):
        if r not in job.exit_codes and p.poll() is not None:
            job.rank_ended(r, ConnectionResetError("its process ended"))
            return f"rank {r} ({job.hosts[r]}) failed: {job.failed[-1][1]}; the job was ended"
    for r, p in enumerate(ranks.procs):
        if r not in job.exit_codes and proc_state(p.pid) == "T":
            job.stopped = (r, p.pid)
            return (f"rank {r} ({job.hosts[r]}) failed: the process (pid {p.pid}) is stopped (state T: SIGSTOP or "
                    "SIGTSTP) while it waits in an MPI call; the job was ended")
    return None


def _waiting(job) -> str:
    from .mpiserve import describe

    rows = [f"rank {st.rank} ({job.hosts[st.rank]}) in {describe(st.waiting)} since {st.since_ns:,} ns"
            for st in job.ranks if st is not None and st.waiting is not None]
    return "; ".join(rows)


def cmd_mpirun(args) -> int:
    import trio

    from .mpicalls import HANDLERS
    from .mpicoll import h_coll
    from .mpicomms import with_comms
    from .mpiports import HANDLERS as PORTS
    from .mpiserve import Job
    from .mpispawn import HANDLERS as SPAWN, Spawner

    opts = Options(args)
    ranks = Ranks(opts)
    stopped: list[int] = []

    def on_signal(signum, frame) -> None:  # end the ranks; the emulator sees their channels close
        stopped.append(signum)
        ranks.kill()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.perf_counter()
    metrics, error, job = None, None, None
    try:
        ranks.start()
        job = Job(opts.hosts, ranks.conns, opts.offload, opts.scale, [p.pid for p in ranks.procs], ranks.procs)
        job.spawner = Spawner(opts.universe, ranks.launch, 0)
        try:
            metrics = trio.run(_serve, opts, job, with_comms({**HANDLERS, **PORTS, **SPAWN, "coll": h_coll}))
        except DeadlockError:
            error = _dead_rank(job, ranks) or f"deadlock: every rank waits, no message is on its way: {_waiting(job)}"
        except AppError as e:
            first = job.failed[0] if job.failed else None
            error = (f"rank {first[0]} ({job.hosts[first[0]]}) failed: {first[1]}; the job was ended"
                     if first else str(e))  # the library's own failure: its traceback is what helps
    finally:
        codes = ranks.stop(0.5 if (error or stopped) else 10.0)
        for s, h in old.items():
            signal.signal(s, h)
    wall = time.perf_counter() - t0
    if stopped:
        name = "SIGTERM" if stopped[0] == signal.SIGTERM else "Ctrl-C"
        print(f"emu mpirun: interrupted ({name}); the {len(opts.hosts)} ranks were ended", file=sys.stderr)
        return 143 if stopped[0] == signal.SIGTERM else 130
    if job is None:  # the ranks did not start (the error is on its way up)
        return 1
    figs = {"run": opts.record, **figures(job, metrics, wall, opts)}
    if opts.json:
        from .runrecord import dump

        with open(opts.json, "w") as f:
            dump(figs, f, opts.indent)
    bad = [c for c in codes if c]
    if job.ended is not None and job.ended[2] != 0:  # a rank's process ended badly: as mpiexec says it
        from .mpiwatch import bad_termination

        r, pid, code = job.ended
        print(bad_termination(pid, f"{job.hosts[r]} (rank {r})", code), file=sys.stderr)
        return -code if code < 0 else code
    if error:
        print(f"emu mpirun: error: {error}", file=sys.stderr)
        return max([c for c in bad if c > 0] + [1])
    n, more = len(opts.hosts), figs.get("spawned")
    print(f"emu mpirun: {n} rank{'s' if n != 1 else ''}{f' (and {more} spawned)' if more else ''} on {opts.spec}: virtual time {figs['virtual_ns']:,} ns, "
          f"{figs['frames']:,} frames, {figs['bytes']:,} bytes, {figs['hop_count']:,} hops; "
          f"{figs['mpi_calls']:,} MPI calls in {wall:.2f} s wall"
          + (f"; capture written to {opts.pcap}" if opts.pcap else ""), file=sys.stderr)
    return max(bad) if bad else 0


class MpiResult:
    """What ``run_program`` (and the pytest fixture ``mpirun``) gives back."""

    def __init__(self, returncode: int, stdout: str, stderr: str, figures: dict | None):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.figures = figures
        """The ``--json`` figures: virtual_ns, frames, bytes, hop_count, mpi_calls, per_rank (None if the job
        failed before they were written)."""

    def lines(self, rank: int | None = None) -> list[str]:
        """Output lines (with ``tag_output=True``: only rank ``rank``'s, prefix removed)."""
        out = self.stdout.splitlines()
        if rank is None:
            return out
        p = f"[{rank}] "
        return [ln[len(p):] for ln in out if ln.startswith(p)]

    def calls(self, rank: int = 0) -> dict:
        """Rank ``rank``'s figures per MPI call kind: {kind: {count, bytes, virtual_ns}}."""
        return self.figures["per_rank"][rank]["calls"]

    def __repr__(self) -> str:
        return f"<MpiResult rc={self.returncode} stdout={self.stdout[:60]!r} stderr={self.stderr[-200:]!r}>"


def run_program(program: str, n: int = 4, topo: str = "star:n=4", args=(), *, stdin: str | None = None,
                offload: str | None = None, compute: str | None = "zero", cpu_scale: float | None = None,
                tag_output: bool = False, settings=(), hosts=None, pcap: str | None = None, workdir: str | None = None,
                timeout_s: float = 300, universe: int | None = None) -> MpiResult:
    """Run ``program`` (a path, or the source of a program) with ``emu mpirun`` in a process of its
    own; the output and the figures. ``compute="zero"`` by default: the figures are deterministic."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = program
        if "\n" in program:
            path = os.path.join(tmp, "program.py")
            with open(path, "w") as f:
                f.write(program)
        out = os.path.join(tmp, "figures.json")
        cmd = [sys.executable, "-m", "emu", "mpirun", "-n", str(n), "--topo", topo, "--json", out]
        if offload:
            cmd += ["--offload", offload]
        if compute:
            cmd += ["--compute", compute]
        if cpu_scale is not None:
            cmd += ["--cpu-scale", repr(cpu_scale)]
        if tag_output:
            cmd.append("--tag-output")
        if hosts:
            cmd += ["--hosts", ",".join(hosts)]
        if universe is not None:
            cmd += ["--universe-size", str(universe)]
        if pcap:
            cmd += ["--pcap", pcap]
        for s in settings:
            cmd += ["--set", s]
        p = subprocess.run(cmd + [path, *map(str, args)], input=stdin or "", capture_output=True, text=True,
                           timeout=timeout_s)
        figs = None
        if os.path.exists(out):
            with open(out) as f:
                figs = json.load(f)
        return MpiResult(p.returncode, p.stdout, p.stderr, figs)
