"""The control channel of a multi-process cluster: launching workers and letting only them in.

Why it is safe. The main process listens on 127.0.0.1, where any local process (of any user) can
connect while a cluster starts. Nothing that arrives there is deserialised before its sender has
proved it holds the cluster's secret:

1. the secret (32 random bytes) reaches each worker on its standard input, never its command line
   or environment (``/proc/PID/cmdline`` is readable by every user);
2. on each connection the main process sends a fresh 32-byte nonce and reads exactly
   ``HELLO.size`` bytes: the worker's domain index, its own nonce and
   ``HMAC-SHA256(secret, "worker" | server nonce | index)``, compared in constant time;
3. it answers ``HMAC-SHA256(secret, "server" | worker nonce | index)``, so that a worker, too,
   unpickles only what comes from the process that started it.

Only then do pickled messages flow. Every connection is served by a task of its own with a
deadline, so a silent or slow stranger cannot hold up the workers; a stranger that fails the
handshake is logged and cut off, and the cluster starts anyway. A worker that dies before it
connects is reported at once, with its exit status and the end of what it wrote to stderr.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import signal
import struct
import subprocess
import sys
from collections.abc import Callable

import trio

from .errors import EmuError
from .sync import MsgStream
from .timeline import mark

log = logging.getLogger(__name__)

NONCE = 32
SECRET = 32
HELLO = struct.Struct(f"!I{NONCE}s32s")
"""What a worker sends first: domain index, its nonce, its proof."""
HANDSHAKE_TIMEOUT_S = 5.0
"""Wall-clock time a connection has to complete the handshake."""
CONNECT_TIMEOUT_S = 60.0
"""Wall-clock time every worker has to start and connect."""
STDERR_TAIL = 2000


def _proof(secret: bytes, who: bytes, nonce: bytes, index: int) -> bytes:
    return hmac.new(secret, who + nonce + index.to_bytes(4, "big"), hashlib.sha256).digest()


async def _read_exactly(stream: trio.abc.Stream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = await stream.receive_some(n - len(buf))
        if not chunk:
            raise EOFError("connection closed during the handshake")
        buf += chunk
    return bytes(buf)


async def server_handshake(stream: trio.abc.Stream, secret: bytes, expected: set[int]) -> int:
    """Authenticate a connecting worker; returns its domain index. Raises PermissionError (a
    stranger or a wrong proof), EOFError or trio errors; reads nothing beyond the fixed hello."""
    nonce = secrets.token_bytes(NONCE)
    await stream.send_all(nonce)
    index, wnonce, proof = HELLO.unpack(await _read_exactly(stream, HELLO.size))
    if not hmac.compare_digest(proof, _proof(secret, b"worker", nonce, index)):
        raise PermissionError("wrong proof of the cluster secret")
    if index not in expected:
        raise PermissionError(f"domain {index} is not expected (again)")
    await stream.send_all(_proof(secret, b"server", wnonce, index))
    return index


async def client_handshake(stream: trio.abc.Stream, secret: bytes, index: int) -> None:
    """The worker's side: prove we hold the secret, and check that the server does too."""
    nonce = await _read_exactly(stream, NONCE)
    wnonce = secrets.token_bytes(NONCE)
    await stream.send_all(HELLO.pack(index, wnonce, _proof(secret, b"worker", nonce, index)))
    answer = await _read_exactly(stream, 32)
    if not hmac.compare_digest(answer, _proof(secret, b"server", wnonce, index)):
        raise PermissionError("the control listener does not hold the cluster secret")


def worker_command(host: str, port: int, index: int) -> list[str]:
    """How a worker is started (the secret follows on its standard input)."""
    return [sys.executable, "-m", "emu.worker", host, str(port), str(index), str(os.getpid())]


def one_math_thread(env) -> None:
    """numpy's BLAS and OpenMP on one thread in ``env`` (a dict, or ``os.environ`` before numpy is
    imported), unless the user chose otherwise: the emulator calls no BLAS, and a process of it is
    meant to have a core of its own -- threads of the math library's pool spinning beside it would
    take the other processes' cores (as numpy is imported: ~40 ms of CPU on this machine)."""
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(k, "1")


def worker_env() -> dict[str, str]:
    """A worker's environment: this one, with numpy's math library on one thread (``one_math_thread``)."""
    env = dict(os.environ)
    one_math_thread(env)
    return env



async def _end(proc) -> None:
    """End a worker still running when its waiter is cancelled (teardown, error, Ctrl-C): SIGTERM,
    up to 2 s to go, then SIGKILL."""
    if proc.returncode is None:
        proc.terminate()
        with trio.move_on_after(2) as scope:
            scope.shield = True
            await proc.wait()
        if proc.returncode is None:
            proc.kill()


class Worker:
    """A worker process: started with the secret on stdin, in a session of its own (so that it gets
    a share of the machine of its own where the kernel shares it out by session; a terminal's
    Ctrl-C reaches the main process, which ends its workers); stderr passed through and its end kept."""

    def __init__(self, index: int):
        self.index = index
        self.proc: trio.Process | None = None
        self.tail = b""
        self.exited = trio.Event()

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def run(self, cmd: list[str], secret: bytes, task_status=trio.TASK_STATUS_IGNORED) -> None:
        # a session of its own: where the kernel shares the cores between sessions (Linux's
        # autogroup, on by default), a worker in ours would split our one share with us, and while
        # another session keeps a core busy --processes 2 would gain nothing (the 256-host allreduce
        # beside two busy sessions: 0.85x in our session, 1.50x in its own, medians of 3)
        proc = self.proc = await trio.lowlevel.open_process(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                                            env=worker_env(), start_new_session=True)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._feed, secret)
                nursery.start_soon(self._drain)
                task_status.started(self)
                await proc.wait()
                self.exited.set()
        finally:
            await _end(proc)
            self.exited.set()

    async def adopt(self, pid: int, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """A worker forked from this process (``fork_workers``): waited for as ``run`` waits for a
        started one (its stderr is this process's: nothing to keep)."""
        proc = self.proc = _Forked(pid)
        try:
            task_status.started(self)
            await proc.wait()
            self.exited.set()
        finally:
            try:
                await _end(proc)
            finally:
                self.exited.set()

    async def _feed(self, secret: bytes) -> None:
        try:
            await self.proc.stdin.send_all(secret)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # it died at once; the exit status says why
        finally:
            await self.proc.stdin.aclose()

    async def _drain(self) -> None:
        out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
        while True:
            try:
                chunk = await self.proc.stderr.receive_some(1 << 14)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not chunk:
                return
            self.tail = (self.tail + chunk)[-STDERR_TAIL:]
            if out is not None:
                out.write(chunk)
                out.flush()

    def failure(self) -> str:
        last = self.tail.decode(errors="replace").strip().splitlines()
        why = f": {last[-1].strip()}" if last else ""
        return f"worker process of domain {self.index} exited with status {self.proc.returncode} before connecting{why}"


class _Forked:
    """A forked child process, as much of ``trio.Process`` as ``Worker`` uses: waited for through a
    pidfd (Linux), its status kept."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._fd = os.pidfd_open(pid)

    def reap(self) -> bool:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # (reaped by someone else: its status is lost)
                pid, status = self.pid, 255 << 8
            if pid == 0:
                return False
            self.returncode = os.waitstatus_to_exitcode(status)
            os.close(self._fd)
        return True

    async def wait(self) -> int:
        while not self.reap():
            await trio.lowlevel.wait_readable(self._fd)
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.returncode is None:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.returncode = -signal.SIGKILL
            os.close(self._fd)

    def _signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # (gone and reaped)
                pass


async def start_workers(nursery: trio.Nursery, count: int, send_plan: Callable[[MsgStream, int], object],
                        command: Callable[[str, int, int], list[str]] = worker_command,
                        secret: bytes | None = None) -> tuple[list[Worker], dict[int, MsgStream]]:
    """Start ``count`` workers (domains 1..count), let them in, and hand each authenticated
    connection to ``send_plan``. Returns the workers and their control streams by domain.
    ``secret``: the cluster's (``SECRET`` bytes; also the key of its datagram tags), else a new one."""
    launch = await launch_workers(nursery, count, command, secret)
    try:
        return await launch.admit(send_plan)
    except BaseException:
        with trio.CancelScope(shield=True):
            await launch.aclose()
        raise


async def launch_workers(nursery: trio.Nursery, count: int,
                         command: Callable[[str, int, int], list[str]] = worker_command,
                         secret: bytes | None = None, preload: tuple[str, ...] = (),
                         connect_timeout_s: float = CONNECT_TIMEOUT_S) -> "Launch":
    """Start ``count`` workers (domains 1..count) before their plan exists: each starts Python,
    imports the modules named in ``preload`` and proves itself on the control connection while this
    process goes on (``emu run`` builds the topology and the plan meanwhile: the two start-ups
    overlap). ``Launch.admit`` then hands each its plan; ``Launch.aclose`` ends workers not wanted
    after all. The workers' tasks run in ``nursery``."""
    secret = secret or secrets.token_bytes(SECRET)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    launch = Launch(count, secret, listeners, preload, connect_timeout_s)
    port = listeners[0].socket.getsockname()[1]
    try:
        for w in launch.workers:
            await nursery.start(launch._hold, w, command("127.0.0.1", port, w.index))
        await nursery.start(launch._accept)
        mark("workers-launched")
    except BaseException:
        with trio.CancelScope(shield=True):
            await launch.aclose()
        raise
    return launch


class Launch:
    """Worker processes started, connecting or connected, not yet given their plan (``launch_workers``)."""

    def __init__(self, count: int, secret: bytes, listeners: list, preload: tuple[str, ...],
                 connect_timeout_s: float = CONNECT_TIMEOUT_S):
        self.count = count
        self.secret = secret
        """The cluster's secret: the workers hold it (the key of the datagram tags off loopback)."""
        self.workers = [Worker(d) for d in range(1, count + 1)]
        self.chans: dict[int, MsgStream] = {}
        self.preload = tuple(preload)
        self.connect_timeout_s = connect_timeout_s
        self.deadline = trio.current_time() + connect_timeout_s
        self._listeners = listeners
        self._expected = {w.index for w in self.workers}
        self._settled = trio.Event()
        """Set when every worker is in, or one ended before connecting (``_failure``)."""
        self._failure: str | None = None
        self._accepting = trio.CancelScope()
        self._scopes: list[trio.CancelScope] = []
        self.admitted = False
        self._asked: tuple | None = None
        """The partition asked of worker 1 (``ask_partition``), its answer not read yet."""
        self._partition: tuple | None = None
        """(what was asked, (part of each node, method used)): worker 1's answer."""

    @property
    def ready(self) -> bool:
        """Every worker connected and proved itself (``admit`` will not wait)."""
        return len(self.chans) == self.count

    async def _hold(self, w: Worker, cmd: list[str], task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:  # (aclose ends the workers of this launch only)
            self._scopes.append(scope)
            await w.run(cmd, self.secret, task_status=task_status)

    async def _hold_forked(self, w: Worker, pid: int, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._scopes.append(scope)
            await w.adopt(pid, task_status=task_status)

    async def _accept(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with self._accepting:
            try:
                async with trio.open_nursery() as conns:
                    for w in self.workers:
                        conns.start_soon(self._watch, w)
                    task_status.started()
                    while True:
                        stream = await self._listeners[0].accept()
                        conns.start_soon(self._serve, stream)
            finally:
                for lst in self._listeners:
                    with trio.CancelScope(shield=True):
                        await lst.aclose()

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            with trio.fail_after(HANDSHAKE_TIMEOUT_S):
                index = await server_handshake(stream, self.secret, self._expected)
        except (PermissionError, EOFError, trio.TooSlowError, trio.BrokenResourceError, struct.error) as e:
            log.warning("control listener: refused a connection (%s)", e or type(e).__name__)
            await stream.aclose()
            return
        self._expected.discard(index)
        chan = MsgStream(stream)
        try:  # what a worker imports while its plan is being made
            await chan.send((list(sys.path), self.preload))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.aclose()
            return  # (it ended: its watch tells)
        self.chans[index] = chan
        if self.ready:
            self._settled.set()

    async def _watch(self, w: Worker) -> None:
        await w.exited.wait()
        if w.index not in self.chans and self._failure is None:
            self._failure = w.failure()
            self._settled.set()

    async def ask_partition(self, graph: tuple, parts: int, method: str) -> None:
        """Ask worker 1, connected and waiting for its plan, to make the partition of ``graph``
        (``emu.partition.graph_of``) into ``parts`` while this process goes on (``emu run`` checks
        the rest of its input meanwhile): the partition, most of a plan's cost, leaves the serial
        start-up. Nothing when no worker is in yet or one was asked already."""
        if self._asked is not None or self._partition is not None or 1 not in self.chans or self.admitted:
            return
        ask = (graph, parts, method)
        try:
            await self.chans[1].send(("partition", ask))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # (it ended: admit tells)
        self._asked = ask
        mark("partition-asked")

    async def partition_answer(self) -> None:
        """Read worker 1's answer to ``ask_partition``, if asked (``known_partition`` then has it)."""
        ask, self._asked = self._asked, None
        if ask is None:
            return
        try:
            status, value = await self.chans[1].recv()
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            return  # (it ended: admit tells)
        if status == "ok":
            self._partition = (ask, value)
        else:
            log.warning("worker 1 did not make the partition (%s); this process makes it", value)

    def known_partition(self, graph: tuple, parts: int, method: str) -> tuple[dict[str, int], str] | None:
        """(node -> part, method used) as worker 1 made it for this very graph, parts and method, else None."""
        if self._partition is None or self._partition[0] != (graph, parts, method):
            return None
        parts_of, used = self._partition[1]
        return dict(zip(graph[0], parts_of)), used

    async def admit(self, send_plan: Callable[[MsgStream, int], object]) -> tuple[list[Worker], dict[int, MsgStream]]:
        """Wait for every worker (until ``connect_timeout_s`` after the launch), then hand each
        connection to ``send_plan`` in domain order. Returns the workers and their control streams
        by domain. Raises EmuError when a worker ended before connecting or did not connect."""
        with trio.move_on_at(self.deadline):
            await self._settled.wait()
        self._accepting.cancel()  # nobody else gets in
        if self._failure is not None:
            raise EmuError(self._failure)
        if not self.ready:
            missing = sorted(set(range(1, self.count + 1)) - set(self.chans))
            raise EmuError(f"only {len(self.chans)} of {self.count} worker processes connected within "
                           f"{self.connect_timeout_s:g} s (missing domains {missing}; "
                           f"RunConfig.connect_timeout_s gives them longer)")
        await self.partition_answer()  # (an answer not read yet would come before worker 1's addresses)
        for d in sorted(self.chans):
            await send_plan(self.chans[d], d)
        self.admitted = True
        return self.workers, self.chans

    async def aclose(self, grace_s: float = 0.0) -> None:
        """End the workers and wait for them: those told to stop have ``grace_s`` seconds to end by
        themselves, then every one still there is sent SIGTERM; close the listener and the connections."""
        self._accepting.cancel()
        if grace_s > 0:
            with trio.move_on_after(grace_s) as scope:
                scope.shield = True
                for w in self.workers:
                    if w.proc is not None:
                        await w.exited.wait()
        for chan in self.chans.values():
            with trio.CancelScope(shield=True):
                try:
                    await chan.aclose()
                except (trio.ClosedResourceError, OSError):
                    pass
        for scope in self._scopes:
            scope.cancel()
        with trio.CancelScope(shield=True):
            for w in self.workers:
                if w.proc is not None:
                    await w.exited.wait()
