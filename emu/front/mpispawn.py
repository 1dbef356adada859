"""``emu mpirun``: dynamic process creation (MPI 3.1 §10.3), emulator side -- ``Comm.Spawn``,
``Comm.Spawn_multiple`` and the spawned processes' ``Comm.Get_parent``, ``MPI.UNIVERSE_SIZE`` and
``MPI.APPNUM``.

**The universe.** ``emu mpirun --universe-size N`` (hydra's ``-usize``) gives the job the first N
hosts (of ``--hosts``, else of the topology; by default all of them): ``COMM_WORLD`` takes the first
``-n``, and a Spawn takes the hosts of the universe that are free -- one process per host, as for
``COMM_WORLD``; a host is free when no process that has not ended is on it (a world rank's host too,
once that rank ended). A Spawn that asks for more processes than there are free hosts waits while
other processes run -- the children of an earlier Spawn that disconnected may not have ended yet --
looking again every ``WAIT_STEP_NS`` of virtual time, for at most ``WAIT_NS``; then it fails with
``MPI_ERR_SPAWN`` on every parent, saying how many hosts are free (MPICH would put several processes
on one machine; here a process is a host). ``UNIVERSE_SIZE`` is N.

**The processes.** The spawning root's emulator starts them as mpiexec's process manager does, out
of band (no frame on the fabric): ``python -m emu.rank PROGRAM ARGS`` (the command is the Python
interpreter with a script, ``-m MODULE`` or ``-c CODE``, or a Python script itself: emu mpirun runs
mpi4py programs), in the info key ``wdir``'s folder (default: the emulator's), with the stdout and
stderr of the job. Their hosts' applications start at the root's now plus one lookahead of the
synchroniser -- the earliest virtual time the emulator can start anything at while a window runs;
what the process manager itself takes is not modelled. The processes of one Spawn (all the
commands of a ``Spawn_multiple``) make one ``COMM_WORLD``, numbered in command order
(``APPNUM``: the command's index).

**The intercommunicator** is made as MPICH makes it: a spawned process's ``MPI_Init`` is collective
with its parents' Spawn. The spawning root waits on a port of its own for a connection
(``emu.front.mpiports``: a request on the port context, over the fabric); the root of the children's
world connects to it with the children's ranks, each root broadcasts the answer to its group, and
each side makes the intercommunicator of the connection's token (the same context everywhere). The
children's ``Get_parent`` is that intercommunicator; ``Disconnect`` frees it.

The info keys read at the root: ``wdir`` (the folder the processes start in), ``path`` (folders to
look for a command without a slash in), ``host`` (the emulated hosts to use, comma-separated: free
hosts of the universe). Others are ignored, as MPICH ignores the keys it does not know.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field

from .mpicoll import bcast_bytes
from .mpicomms import InterInfo
from .mpiports import accept_at, connect_to, make_intercomm, ports_of
from .mpiserve import MpiError, RankState

ERR_ROOT, ERR_ARG, ERR_COMM, ERR_SPAWN = 7, 12, 5, 42
SUCCESS = 0
WAIT_NS = 1_000_000
"""How long (virtual) a Spawn that finds too few free hosts waits for other processes to end."""
WAIT_STEP_NS = 1000
"""The steps of that wait: the root looks again after each."""


@dataclass
class World:
    """The processes one Spawn started: their ``COMM_WORLD``."""

    sid: int
    members: list[int]
    """The processes' numbers (``Job.enrol``), in rank order."""
    ctx: int
    """The context the collective id ``cid`` was taken for (given back when all of them ended)."""
    cid: int
    parent: int
    """The spawning root (its process number)."""
    tag: int
    """The tag of the root's port the children's root connects to."""
    appnum: dict[int, int] = field(default_factory=dict)
    released: bool = False


class Spawner:
    """The job's process manager for Spawn: the universe's hosts, and how to start a process and its
    host's application (``emu.front.mpirun``)."""

    def __init__(self, universe: list[str], start_process, lookahead_ns: int):
        self.universe = universe
        self.start_process = start_process
        """``start_process(number, argv, world size, cwd)`` -> (``Popen``, channel socket): ``python -m emu.rank
        ARGV``."""
        self.start_app = None
        """``start_app(host, number, at_ns)``: the host runs the process's calls from ``at_ns`` on (set once the
        cluster runs)."""
        self.lookahead_ns = lookahead_ns
        self.worlds: dict[int, World] = {}
        """Process number -> the world it was spawned in."""
        self.next_sid = 1

    def free_hosts(self, job) -> list[str]:
        """Hosts of the universe whose last process ended and is quiet (``quiet``), in order."""
        last = {h: r for r, h in enumerate(job.hosts)}
        return [h for h in self.universe if h not in last or (last[h] in job.exit_codes and quiet(job, last[h]))]

    def _give_back(self, job) -> None:
        """The collective ids of spawned worlds whose every process ended."""
        for w in {id(w): w for w in self.worlds.values()}.values():
            if not w.released and all(r in job.exit_codes for r in w.members):
                w.released = True
                for _ in w.members:
                    job.release(w.ctx)

    @staticmethod
    def plan(apps: list[dict]) -> list[tuple]:
        """The root's arguments checked: (maxprocs, program, folder, hosts named or None) per command."""
        plans = []
        for a in apps:
            n = a.get("maxprocs")
            if type(n) is not int or n < 0:
                raise MpiError(f"Invalid value for maxprocs, must be non-negative but is {n}", ERR_ARG)
            info = {str(k): str(v) for k, v in (a.get("info") or {}).items()}
            cwd = info.get("wdir") or os.getcwd()
            if not os.path.isdir(cwd):
                raise MpiError(f"Spawn: the info key wdir names no folder ({cwd!r})", ERR_SPAWN)
            hosts = [h.strip() for h in info["host"].split(",") if h.strip()] if info.get("host") else None
            if hosts is not None and len(hosts) < n:
                raise MpiError(f"Spawn: the info key host names {len(hosts)} hosts for {n} processes (one process per "
                               "host)", ERR_SPAWN)
            plans.append((n, program(a.get("command"), a.get("args"), cwd, info.get("path")), cwd, hosts))
        if not plans or sum(p[0] for p in plans) == 0:
            raise MpiError("Spawn: maxprocs is 0: no process to start", ERR_ARG)
        return plans

    def choose(self, job, plans: list[tuple]) -> list[list[str]] | str:
        """The hosts of each command's processes: those the info key host names, else the free hosts of the
        universe in order; or why there are not enough."""
        self._give_back(job)
        free = self.free_hosts(job)
        assign: list[list[str]] = [[] for _ in plans]
        for i, (n, _, _, hosts) in enumerate(plans):  # the hosts the info key host names first
            if hosts is not None:
                busy = [h for h in hosts[:n] if h not in free or any(h in a for a in assign)]
                if busy:
                    return (f"Spawn: the info key host names {', '.join(busy)}, not free hosts of the universe "
                            f"({', '.join(self.universe)})")
                assign[i] = hosts[:n]
        rest = [h for h in free if not any(h in a for a in assign)]
        for i, (n, _, _, hosts) in enumerate(plans):
            if hosts is None:
                assign[i], rest = rest[:n], rest[n:]
        total = sum(p[0] for p in plans)
        if sum(map(len, assign)) < total:
            return (f"Spawn: {total} processes asked for, but {len(free)} of the universe's {len(self.universe)} "
                    "hosts are free (one process per host); give emu mpirun a larger --universe-size or topology")
        return assign

    def start(self, st: RankState, plans: list[tuple], assign: list[list[str]], tag: int) -> World:
        """Start the processes on their hosts for the spawning root ``st``: their world."""
        job = st.job
        total = sum(p[0] for p in plans)
        sid = self.next_sid
        self.next_sid += 1
        ctx, cid = job.context(("spawn", sid), total)
        world = World(sid, [], ctx, cid, st.rank, tag)
        started = []
        for i, (n, argv, cwd, _) in enumerate(plans):
            for host in assign[i]:
                try:
                    proc, conn = self.start_process(len(job.hosts), argv, total, cwd)
                except OSError as e:  # (the processes started before it go on: they wait for their parents)
                    raise MpiError(f"Spawn: a process could not be started ({e.strerror})", ERR_SPAWN) from None
                r = job.enrol(host, conn, proc)
                world.members.append(r)
                world.appnum[r] = i
                self.worlds[r] = world
                started.append((host, r))
        for host, r in started:
            self.start_app(host, r, st.host.now + self.lookahead_ns)
        return world

    async def launch(self, st: RankState, apps: list[dict], tag: int, parents: list[int]) -> World:
        """Start the processes of ``apps`` (the root's arguments) for the root ``st``; while too few hosts are
        free and processes other than the ``parents`` run, wait for them to end (up to ``WAIT_NS``)."""
        plans = self.plan(apps)
        until = st.host.now + WAIT_NS
        while isinstance(assign := self.choose(st.job, plans), str):
            others = [r for r in range(len(st.job.hosts)) if r not in st.job.exit_codes and r not in parents]
            if not others or st.host.now >= until:
                raise MpiError(assign, ERR_SPAWN)
            await st.host.sleep(WAIT_STEP_NS)
        return self.start(st, plans, assign, tag)

    async def hello(self, st: RankState) -> dict:
        """What a process is told at its ``MPI_Init``: the universe's size; a spawned one also its world,
        its command's index and -- its ``MPI_Init`` meeting the parents' Spawn -- its parent
        intercommunicator."""
        out = {"universe": len(self.universe)}
        w = self.worlds.get(st.rank)
        if w is None:
            return out
        info = st.comms[0]
        got = None
        if info.rank == 0:
            got = json.dumps(await connect_to(st, w.parent, w.tag, w.members)).encode()
        if len(w.members) > 1:
            got = await bcast_bytes(st, info, 0, got)
        parent = make_intercomm(st, w.members, info.rank, json.loads(got))
        return out | {"world": w.members, "appnum": w.appnum[st.rank], "parent": parent}


def quiet(job, r: int) -> bool:
    """Has every point-to-point message from and to the ended process ``r`` been taken in, and no process
    waits for a word of it (a synchronous send's ack, a rendezvous message's clear-to-send or data)? Only
    then may its host take another process: a message's sender is known by its host
    (``RankState.incoming``), so one of ``r``'s still on its way would be taken for the new process's."""
    me = job.ranks[r]
    if me is None:  # (it ended before its first call)
        return True
    for p, st in enumerate(job.ranks):
        if st is None or p == r:
            continue
        if st.recv_seq.get(r, 0) != me.send_seq.get(p, 0) or me.recv_seq.get(p, 0) != st.send_seq.get(r, 0):
            return False
        if any(k[0] == r for k in (*st.sync_wait, *st.rndv_send, *st.rndv_recv)):
            return False
    return True


PYTHON = re.compile(r"python[0-9.]*$")
FLAGS = {"-B", "-b", "-bb", "-d", "-E", "-I", "-O", "-OO", "-q", "-R", "-s", "-S", "-u", "-v", "-x"}
"""Options of the interpreter a Spawn's arguments may start with (as ``mpi4py.futures`` gives ``-B``): the rank
runs without them."""


def _is_python(command: str) -> bool:
    if PYTHON.match(os.path.basename(command)):
        return True
    found = shutil.which(command)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def program(command, args, cwd: str, path: str | None) -> list[str]:
    """What ``python -m emu.rank`` runs for ``command args`` (in ``cwd``): the Python interpreter's own
    arguments (a script, ``-m MODULE``, ``-c CODE``), or a Python script and its arguments."""
    if not isinstance(command, str) or not command:
        raise MpiError("Spawn: no command at the root", ERR_SPAWN)
    args = [str(a) for a in (args or [])]
    if _is_python(command):
        if not args:
            raise MpiError(f"Spawn: {command} without a program; give the script (or -m MODULE, -c CODE) in args",
                           ERR_SPAWN)
        while args and args[0] in FLAGS or args[:1] in (["-W"], ["-X"]):  # the interpreter's own options: dropped
            args = args[2:] if args[0] in ("-W", "-X") else args[1:]
        if args[:1] in (["-m"], ["-c"]):
            if len(args) < 2:
                raise MpiError(f"Spawn: {command} {args[0]} without its argument", ERR_SPAWN)
            return args
        if not args or args[0].startswith("-"):
            raise MpiError(f"Spawn: {command} {' '.join(args[:1])}: emu mpirun runs a script, -m MODULE or -c CODE",
                           ERR_SPAWN)
        if not os.path.isfile(os.path.join(cwd, args[0])):
            raise MpiError(f"Spawn: {args[0]}: no such file (in {cwd})", ERR_SPAWN)
        return args
    exe = os.path.join(cwd, command) if os.sep in command else shutil.which(command, path=path) or ""
    if not os.path.isfile(exe):
        raise MpiError(f"Spawn: {command}: no such program", ERR_SPAWN)
    try:
        with open(exe, "rb") as f:
            first = f.readline(200)
    except OSError as e:
        raise MpiError(f"Spawn: {command}: {e.strerror}", ERR_SPAWN) from None
    if not (exe.endswith(".py") or (first.startswith(b"#!") and b"python" in first)):
        raise MpiError(f"Spawn: {command} is not a Python program; emu mpirun runs mpi4py programs (give "
                       "sys.executable and a script, or a script with a python #! line)", ERR_SPAWN)
    return [exe, *args]


async def h_spawn(st: RankState, head: dict, payload):
    """``Intracomm.Spawn``/``Spawn_multiple``: collective over the communicator; the root's ``apps``
    (command, args, maxprocs, info each) matter."""
    info = st.comm(head["ctx"])
    if isinstance(info, InterInfo):
        raise MpiError("Spawn: the communicator must be an intracommunicator", ERR_COMM)
    root = int(head.get("root", 0))
    if not 0 <= root < len(info.ranks):
        raise MpiError(f"invalid root {root} (the communicator has {len(info.ranks)})", ERR_ROOT)
    got = None
    if info.rank == root:
        spawner = st.job.spawner
        try:
            if spawner is None:
                raise MpiError("Spawn: this job has no process manager for Spawn (emu mpirun has one)", ERR_SPAWN)
            ports = ports_of(st)
            tag = ports.next_id
            ports.next_id += 1
            world = await spawner.launch(st, head.get("apps") or [], tag, info.ranks)
            theirs = await accept_at(st, tag, info.ranks)
            got = json.dumps({"ok": theirs, "codes": [SUCCESS] * len(world.members)}).encode()
        except MpiError as e:
            got = json.dumps({"err": str(e), "code": e.code}).encode()
    if len(info.ranks) > 1:
        got = await bcast_bytes(st, info, root, got)
    out = json.loads(got)
    if "err" in out:
        raise MpiError(out["err"], out["code"])
    return {**make_intercomm(st, info.ranks, info.rank, out["ok"]), "errcodes": out["codes"]}, b""


HANDLERS = {"spawn": h_spawn}
