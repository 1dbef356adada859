"""Clusters that span MPI ranks: ``mpiexec -n N emu run ...`` (mpi4py; the ``mpich`` wheel).

Rank ``d`` hosts domain ``d`` of the plan (the partition of ``emu.partition``): rank 0 runs the
command -- it parses the arguments, builds the plan, runs the tests and reports -- and the other
ranks serve their domains (:func:`serve_rank`), so the same command line works on every rank.

What travels where.

* Frames between ranks are real UDP datagrams between the elements' sockets, on the interface the
  user names (``--bind``: an address or an interface name, resolved by each rank on its own
  machine; loopback by default). They are checked as always: a link's frames are accepted only
  from the socket at its other end.
* The window barrier is an MPI collective: every rank runs the same window loop
  (:func:`window_loop`); after each window it contributes (error flag, next event time, latest event
  time, frames sent to each domain) to one ``MPI_Iallgather`` of integers, from which every rank
  computes the next window by itself. No rank waits on another's reply, and nothing is pickled.
* Everything else (the plan, starting applications, statistics, captures) is a call from rank 0 to
  a rank, pickled, as with worker processes (:mod:`emu.control`).

Why it is safe. An MPI transport does not authenticate who connects to it, so control messages are
signed: each is ``HMAC-SHA256(key, direction | sequence number | payload) | payload`` and is
unpickled only once the tag checks out (a forged, altered, replayed or reordered message is refused).
The key is 32 bytes in a file readable by its owner only (``EMU_KEY_FILE``, default
``~/.config/emu/mpi.key``), never on a command line: on one machine rank 0 makes it on first use
and the other ranks wait for it; for several machines, copy it to the same path on each (or keep it
in a shared home directory). As ssh does with a private key, a key file that is not a regular file
(a symbolic link, a folder, a FIFO), not owned by the user, or open to group or others is refused
on one line saying what to fix; it is made under an unpredictable temporary name and hard-linked
into place, so nothing planted beside it is followed or overwritten.

Waiting never blocks trio: requests are polled between checkpoints, so the elements' sockets are
read while a rank waits for the others.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import secrets
import stat
import struct
import sys
import time
from typing import Any

import trio

from .config import ConfigError
from .config.files import kind_of
from .element import INF
from .errors import EmuError, FrameLossError
from .sync import LocalHandle, RemoteHandle, Synchroniser, faults_reached, find_exception, window_start

log = logging.getLogger(__name__)

TAG = 7701
"""MPI tag of the control messages."""
KEY_BYTES = 32
_SEQ = struct.Struct("!Q")


def world() -> tuple[int, int]:
    """(rank, size) of the MPI job this process belongs to, from the launcher's environment
    (MPICH/Hydra, Intel MPI, Slurm's PMI, Open MPI); (0, 1) outside one. mpi4py is not imported."""
    env = os.environ
    for r, s in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                 ("PMIX_RANK", "PMIX_SIZE")):
        if r in env and s in env:
            try:
                return int(env[r]), int(env[s])
            except ValueError:
                break
    return 0, 1


def comm():
    """MPI_COMM_WORLD (imports mpi4py, which starts MPI)."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise ConfigError("this runs under mpiexec but mpi4py is missing: pip install 'hpc-emu[parallel]' "
                          "(mpi4py and the mpich wheel)") from None
    return MPI.COMM_WORLD


def key_path() -> str:
    return os.environ.get("EMU_KEY_FILE") or os.path.join(os.path.expanduser("~"), ".config", "emu", "mpi.key")


def load_key(create: bool, wait_s: float = 20.0) -> bytes:
    """The ranks' shared key (see the module docstring): made by rank 0 (``create``) if missing,
    waited for by the others. Refused on one line, as ssh refuses a private key, unless it is a
    regular file (not a symbolic link, a folder or a FIFO) owned by this user and private to it."""
    path = key_path()
    if create and not os.path.lexists(path):
        _make_key(path)
    deadline = time.monotonic() + wait_s
    while True:
        key = _read_key(path)
        if key is not None:
            return key
        if time.monotonic() > deadline:
            raise ConfigError(f"no MPI key file at {path}: copy rank 0's key there (same path on every "
                              "machine, mode 0600), or set EMU_KEY_FILE to where it is")
        time.sleep(0.05)


def _make_key(path: str) -> None:
    """Write a new key to ``path`` atomically: into a fresh file of an unpredictable name (created
    exclusively, so never through a symbolic link or into a planted file), then hard-linked to
    ``path`` -- which never replaces a key (or anything else) another rank put there first."""
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for _ in range(100):
            tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                break
            except FileExistsError:
                continue
        else:
            raise ConfigError(f"could not make a temporary file for the MPI key in {folder}")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
            try:
                os.link(tmp, path)  # atomic; fails if anything (a key, a link, a folder) is there already
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise ConfigError(f"could not make the MPI key file {path}: {e.strerror or e}; make it yourself "
                          f"(32 random bytes, mode 0600) or set EMU_KEY_FILE") from None


def _read_key(path: str) -> bytes | None:
    """The key in ``path``, None if there is no file yet; ConfigError (one line: what to fix) if it
    is not a regular file owned by this user and readable by it only. Opened without following a
    symbolic link and without blocking (a FIFO), and checked on the open file (no race)."""
    def refuse(why: str) -> ConfigError:
        return ConfigError(f"the MPI key file {path} {why}")

    try:
        st = os.lstat(path)  # refuse a device, FIFO or folder before even opening it
    except FileNotFoundError:
        return None
    except OSError as e:
        raise refuse(f"cannot be read: {e.strerror or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise refuse("is a symbolic link: put the key file itself there (cp --dereference, mode 0600)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise refuse(f"cannot be read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(f"is not a regular file (a {kind_of(st.st_mode)}); remove it and copy the 32-byte "
                         "key file there, mode 0600")
        if st.st_uid != os.geteuid():
            raise refuse(f"is owned by uid {st.st_uid}, not by you (uid {os.geteuid()}); "
                         f"chown {os.geteuid()} {path} or make your own")
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise refuse(f"may be read by others (mode {stat.S_IMODE(st.st_mode):04o}); chmod 600 {path}")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise refuse(f"must hold {KEY_BYTES} bytes, it holds {st.st_size}")
    return key


async def _poll(test) -> Any:
    """Wait for ``test()`` to return something other than None/False without blocking trio: spin
    through trio checkpoints (the sockets are served), then also give the CPU away, then sleep."""
    spins = 0
    while True:
        got = test()
        if got is not None and got is not False:
            return got
        spins += 1
        if spins < 64:
            await trio.sleep(0)
        elif spins < 20_000:
            os.sched_yield()  # another rank on this core may be the one we wait for
            await trio.sleep(0)
        else:
            await trio.sleep(0.001)


class MpiChan:
    """Signed pickled messages to and from one rank (the interface of ``emu.sync.MsgStream``)."""

    def __init__(self, comm, peer: int, key: bytes):
        self.comm = comm
        self.peer = peer
        self.key = key
        me = comm.Get_rank()
        self._out = f"{me}>{peer}".encode()
        self._in = f"{peer}>{me}".encode()
        self._sent = 0
        self._got = 0

    def _tag(self, way: bytes, seq: int, payload: bytes) -> bytes:
        return hmac.new(self.key, way + _SEQ.pack(seq) + payload, hashlib.sha256).digest()

    async def send(self, obj: Any) -> None:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self._sent += 1
        req = self.comm.Isend(self._tag(self._out, self._sent, payload) + payload, dest=self.peer, tag=TAG)
        await _poll(req.Test)

    async def aclose(self) -> None:
        pass  # the channel lives as long as the MPI job

    async def _receive(self) -> bytearray:
        """The next message from the peer, as received (not yet checked)."""
        from mpi4py import MPI

        status = MPI.Status()
        await _poll(lambda: self.comm.Iprobe(source=self.peer, tag=TAG, status=status))
        buf = bytearray(status.Get_count(MPI.BYTE))
        self.comm.Recv(buf, source=self.peer, tag=TAG)
        return buf

    async def recv(self) -> Any:
        buf = await self._receive()
        if len(buf) < 32:
            raise PermissionError(f"rank {self.peer}: a control message of {len(buf)} bytes has no signature: refused")
        tag, payload = bytes(buf[:32]), memoryview(buf)[32:]
        if not hmac.compare_digest(tag, self._tag(self._in, self._got + 1, payload)):
            raise PermissionError(f"rank {self.peer}: a control message failed its signature check "
                                  "(forged, altered, replayed, or a different key file): refused")
        self._got += 1
        return pickle.loads(payload)


# -- the window loop every rank runs --------------------------------------------------------------
async def window_loop(domain, comm, lookahead: int, state: dict, pacer=None, progress=None) -> BaseException | None:
    """Run windows until nothing is left anywhere (see the module docstring). ``state`` -- window,
    sent (n x n), next_times, max_time -- is the same on every rank at the start and is updated in
    place; every rank ends with the same. Returns this rank's exception, if a window raised here
    (every rank stops after the window in which any rank raised)."""
    import numpy as np

    n = comm.Get_size()
    me = domain.index
    sent, next_times = state["sent"], state["next_times"]
    row = np.zeros(n + 3, dtype=np.int64)
    rows = np.zeros((n, n + 3), dtype=np.int64)
    failed = None
    last = time.perf_counter()
    faults = state["faults"]
    while True:
        t0 = window_start(next_times, faults, state["max_time"])
        if t0 >= INF:
            return None
        t1 = t0 + lookahead
        if pacer is not None:
            await pacer.wait_for(t0)
        state["window"] = w = state["window"] + 1
        try:
            sent_to, nt, mt = await domain.window(w, t0, t1, sum(r[me] for r in sent))
        except Exception as e:  # the others stop after this window too
            failed, sent_to, nt, mt = e, sent[me], INF, 0
        row[0] = failed is not None
        row[1], row[2] = nt, mt
        row[3:] = sent_to
        req = comm.Iallgather(row, rows)
        await _poll(req.Test)
        if rows[:, 0].any():
            if failed is None:
                bad = [d for d in range(n) if rows[d, 0]]
                failed = EmuError(f"domain(s) {bad} failed in window {w}; stopped here too")
            return failed
        for d in range(n):
            sent[d] = rows[d, 3:].tolist()
            next_times[d] = int(rows[d, 1])
            if rows[d, 2] > state["max_time"]:
                state["max_time"] = int(rows[d, 2])
        if faults and faults[0] <= t0:
            state["fault_max"] = max(state["fault_max"], faults_reached(faults, t0 + 1))
        if progress is not None and w & 0xFF == 0 and time.perf_counter() - last > 0.05:
            last = time.perf_counter()
            progress(w, t0)


class MpiSynchroniser(Synchroniser):
    """Rank 0's synchroniser: the window loop runs on every rank at once (:func:`window_loop`)."""

    def __init__(self, handles: list, lookahead_ns: int, comm, progress=None, pacer=None):
        super().__init__(handles, lookahead_ns, progress, pacer)
        self.comm = comm

    async def run_until_quiet(self) -> None:
        if self.broken:
            raise EmuError(f"the cluster cannot run any more: {self.broken}; start a new one")
        state = {"window": self.window, "sent": self.sent, "next_times": self.next_times,
                 "max_time": self.max_time, "faults": self.faults, "fault_max": self.fault_max}
        remotes = [h for h in self.handles if not isinstance(h, LocalHandle)]
        local = next(h for h in self.handles if isinstance(h, LocalHandle))
        self.broken = "a run was interrupted"  # until it ends well
        for h in remotes:
            await h.chan.send(("run_windows", (state,)))
        mine = await window_loop(local.domain, self.comm, self.lookahead, state, self.pacer, self.progress)
        errors = [mine] if mine is not None else []
        for h in remotes:
            status, value = await h.chan.recv()
            if status == "err":
                errors.append(value)
        self.window, self.max_time, self.fault_max = state["window"], state["max_time"], state["fault_max"]
        if errors:
            real = [e for e in errors if not str(e).startswith("domain(s) ")] or errors
            self.broken = f"window {self.window} failed ({type(real[0]).__name__})"
            loss = next((e for e in real if find_exception(e, FrameLossError)), None)
            if loss is not None:
                await self._diagnose_loss(loss)
            raise real[0]
        self.broken = None


def _serve_windows(chan, domain, comm, lookahead: int, pacer):
    async def run_windows(state: dict) -> None:
        err = await window_loop(domain, comm, lookahead, state, pacer)
        await chan.send(("err", err) if err is not None else ("ok", None))
    return run_windows


# -- rank 0: starting and ending the other ranks' domains ----------------------------------------
async def start_ranks(plan, key: bytes) -> tuple[list[RemoteHandle], dict[str, tuple[str, int]]]:
    """Send each rank its domain of ``plan``; returns handles and the ranks' socket addresses."""
    c = comm()
    handles, addrs = [], {}
    for d in range(1, c.Get_size()):
        chan = chan_to(c, d, key)
        await chan.send(("cluster", (list(sys.path), plan, d)))
        handles.append(RemoteHandle(d, chan))
    for h in handles:
        status, value = await h.chan.recv()
        if status == "err":
            raise EmuError(f"rank {h.index} could not start its domain: {value}")
        addrs.update(value)
    return handles, addrs


_chans: dict[int, MpiChan] = {}


def release_ranks(key: bytes | None = None) -> None:
    """Rank 0, at the very end: tell every other rank to exit (also when nothing ever started)."""
    c = comm()
    key = key or load_key(create=True)
    for d in range(1, c.Get_size()):
        chan = _chans.get(d) or MpiChan(c, d, key)
        trio.run(chan.send, ("exit", ()))


def chan_to(c, d: int, key: bytes) -> MpiChan:
    """Rank 0's one channel to rank ``d`` (its sequence numbers run over the whole job)."""
    if d not in _chans:
        _chans[d] = MpiChan(c, d, key)
    return _chans[d]


# -- ranks > 0 ------------------------------------------------------------------------------------
async def _serve(key: bytes) -> None:
    from .build import build_domain
    from .sync import Pacer
    from .worker import serve_calls

    c = comm()
    chan = MpiChan(c, 0, key)
    while True:
        what, args = await chan.recv()
        if what == "exit":
            return
        if what != "cluster":
            raise EmuError(f"rank {c.Get_rank()}: unexpected control message {what!r}")
        paths, plan, index = args
        sys.path[:0] = [p for p in paths if p not in sys.path]
        try:
            domain = build_domain(plan, index, key)  # (off loopback the key keys the datagram tags)
        except Exception as e:  # noqa: BLE001 -- told to rank 0, which reports it
            await chan.send(("err", e))
            continue
        try:
            async with trio.open_nursery() as nursery:
                addrs = await nursery.start(domain.serve_sockets)
                await chan.send(("ok", addrs))
                pacer = Pacer(plan.run.realtime_ns_per_s) if plan.run.realtime_ns_per_s else None
                how = await serve_calls(chan, domain,
                                        {"run_windows": _serve_windows(chan, domain, c, plan.lookahead_ns, pacer)})
                nursery.cancel_scope.cancel()
            if how == "exit":  # rank 0 ended without closing this cluster (it failed to start)
                return
        finally:
            domain._drop_runs()
            for el in domain.elements:
                el.sock.close()


def entry(fn) -> Any:
    """Run a program that makes clusters under ``mpiexec`` or not: outside an MPI job (or in one of
    one rank) ``fn()``; under ``mpiexec -n N``, ``fn()`` on rank 0 (whose clusters use
    ``RunConfig(mpi=True, processes=N)``) while the other ranks serve their domains, and rank 0 lets
    them go when ``fn`` returns or fails."""
    rank, size = world()
    if size < 2:
        return fn()
    if rank:
        return serve_rank()
    key = load_key(create=True)
    try:
        return fn()
    finally:
        try:
            release_ranks(key)
        except (ConfigError, OSError) as e:
            print(f"rank 0: could not release the other ranks: {e}", file=sys.stderr)


def serve_rank() -> int:
    """What a rank other than 0 does for a whole ``mpiexec ... emu`` command: serve its domains
    until rank 0 says exit. Quiet on Ctrl-C (mpiexec passes it on)."""
    from .errors import leaves

    try:
        key = load_key(create=False)
        trio.run(_serve, key)
    except BaseException as e:  # noqa: BLE001 -- the one place that decides how a rank ends
        inner = [x for x in leaves(e) if not isinstance(x, trio.Cancelled)]
        if all(isinstance(x, KeyboardInterrupt) for x in inner):
            return 130  # Ctrl-C, passed on by mpiexec: rank 0 says so, quietly here
        known = [x for x in inner if isinstance(x, (ConfigError, EmuError, PermissionError))]
        if known:
            print(f"rank {world()[0]}: error: {known[0]}", file=sys.stderr)
            return 1
        raise
    return 0
