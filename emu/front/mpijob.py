"""``emu mpirun``: what the ranks of a job share, emulator side -- the processes (their hosts,
channels, looks at their processes), the context and collective ids of communicators, how the job
failed -- and the errors of the MPI library (``MpiError``) and of the job (``RankFailed``).

The processes are numbered in the order they started: the ``-n`` of ``COMM_WORLD`` first, then those
``Comm.Spawn`` started (``emu.front.mpispawn``), each with a ``COMM_WORLD`` of its own. That number
(``RankState.rank``, a rank's "world rank" everywhere in the library) is what a group lists and what
a message's envelope is routed by."""

from __future__ import annotations

from functools import partial

from emu.rank import wire

from .mpiwatch import Outside, Watch, check_interval, signal_text

MAX_COLL_IDS = 250


class MpiError(Exception):
    """An MPI call that fails: the rank gets ``MPI.Exception`` with this text (its error class in
    ``code``)."""

    def __init__(self, text: str, code: int = 15):
        super().__init__(text)
        self.code = code


class RankFailed(Exception):
    """A rank aborted, raised, or ended without saying so: the job ends."""


class Job:
    """What the ranks share: the world, the context ids, the options."""

    def __init__(self, hosts: list[str], conns: list, offload: str | None, cpu_scale: float, pids: list[int],
                 procs: list | None = None):
        self.hosts = list(hosts)
        self.host_rank = {h: r for r, h in enumerate(hosts)}
        self.conns = list(conns)
        self.pids = list(pids)
        self.offload = offload
        self.cpu_scale = cpu_scale
        self.ranks: list = [None] * len(hosts)
        """Each process's ``emu.front.mpiserve.RankState`` once its host runs it (None before)."""
        self.first = len(hosts)
        """The processes ``emu mpirun`` started (``COMM_WORLD``); those after them were spawned."""
        self.spawner = None
        """``emu.front.mpispawn.Spawner``: the universe's hosts and the processes spawned (None: no Spawn)."""
        self._ctx_of: dict[tuple, int] = {}
        self._next_ctx = 2  # 0: COMM_WORLD, 1: COMM_SELF
        self._coll_ids: dict[int, int] = {0: 1}
        self._frees: dict[int, int] = {}
        self.failed: list[tuple[int, str]] = []
        self.exit_codes: dict[int, int] = {}
        self.procs = list(procs) if procs is not None else None
        """The rank processes (``subprocess.Popen``): how one that closed its channel ended."""
        self.ended: tuple[int, int, int] | None = None
        """(rank, pid, exit status) of the first rank that ended without finishing its MPI calls."""
        self.stopped: tuple[int, int] | None = None
        """(rank, pid) of a rank found stopped (SIGSTOP) while the emulator waited for its call."""
        self.watches = [Watch(r, pid) for r, pid in enumerate(pids)]
        check_s = check_interval()  # a look at the rank's process when it keeps the emulator waiting that long
        self.readers = [wire.Reader(c, partial(self.look, r), check_s) for r, c in enumerate(conns)]

    def world_of(self, r: int) -> tuple[list[int], int, int]:
        """Process ``r``'s ``COMM_WORLD``: its members, ``r``'s rank in it, its collective id."""
        w = self.spawner.worlds.get(r) if self.spawner is not None else None
        if w is None:
            return list(range(self.first)), r, 1
        return w.members, w.members.index(r), w.cid

    def enrol(self, host: str, conn, proc) -> int:
        """A process started on ``host`` during the run (``Comm.Spawn``): its number."""
        r = len(self.hosts)
        self.hosts.append(host)
        self.host_rank[host] = r  # (the host's earlier process, if any, has ended)
        self.conns.append(conn)
        self.pids.append(proc.pid)
        if self.procs is not None:
            self.procs.append(proc)
        self.ranks.append(None)
        self.watches.append(Watch(r, proc.pid))
        self.readers.append(wire.Reader(conn, partial(self.look, r), check_interval()))
        return r

    def look(self, r: int, outside: bool = True) -> None:
        """A look at rank ``r``'s process while the emulator waits for its call: a failure raised, or
        (``outside``) ``Outside`` when it waits for something outside MPI (``emu.front.mpiwatch``)."""
        why = self.watches[r].look()
        if why == "outside" and outside and not self.readers[r].pending():
            raise Outside(r)
        if why == "stopped":
            self.stopped = (r, self.pids[r])
            self.failed.append((r, f"the process (pid {self.pids[r]}) is stopped (state T: SIGSTOP or SIGTSTP) "
                                   "and answers no MPI call"))
            raise RankFailed(f"rank {r} (pid {self.pids[r]}) is stopped")
        if why == "gone":
            raise ConnectionResetError(f"rank {r}'s process (pid {self.pids[r]}) is gone")

    def rank_ended(self, r: int, e: BaseException) -> RankFailed:
        """Rank ``r`` closed its channel (or its process is gone) before it said it ended: how."""
        code = None
        if self.procs is not None:
            try:
                code = self.procs[r].wait(5)
            except Exception:  # noqa: BLE001 -- still running, or not ours to wait for: said as such
                code = None
        if self.ended is None and code is not None:
            self.ended = (r, self.pids[r], code)
        how = f"ended ({signal_text(code)})" if code is not None else f"closed its channel ({e})"
        self.failed.append((r, f"the process (pid {self.pids[r]}) {how} without finishing its MPI calls"))
        return RankFailed(f"rank {r} {how} without finishing its MPI calls")

    def context(self, key: tuple, members: int) -> tuple[int, int]:
        """(context, collective id) of the communicator ``key`` names (the same on every member)."""
        ctx = self._ctx_of.get(key)
        if ctx is None:
            ctx = self._ctx_of[key] = self._next_ctx
            self._next_ctx += 1
            used = set(self._coll_ids.values())
            free = next((i for i in range(1, MAX_COLL_IDS + 1) if i not in used), None)
            if free is None:
                raise MpiError(f"more than {MAX_COLL_IDS} communicators at once: the emulated library has "
                               "that many collective ids; free some (Comm.Free)", 16)
            self._coll_ids[ctx] = free
            self._frees[ctx] = members
        return ctx, self._coll_ids[ctx]

    def release(self, ctx: int) -> None:
        """A member freed communicator ``ctx``; the last one gives its collective id back."""
        if ctx not in self._frees:
            return
        self._frees[ctx] -= 1
        if self._frees[ctx] == 0:
            del self._frees[ctx]
            self._coll_ids.pop(ctx, None)
