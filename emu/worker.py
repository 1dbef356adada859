"""A worker process hosting one domain of a cluster: ``python -m emu.worker HOST PORT INDEX PARENT_PID``.

It reads the cluster secret from its standard input (never from its command line), connects back to
the cluster's control listener (127.0.0.1), proves it holds the secret and checks that the listener
does too (``emu.control``), imports what it is told to while the main process makes the plan (the
modules of the engines: the two start-ups overlap), receives the plan, starts its elements as trio tasks, reports their
socket addresses, then serves the synchroniser's calls until told to stop or the connection closes.

It exits quietly -- no traceback -- on SIGINT, SIGTERM, a closed control connection, or the death of
the process that started it (its parent process id changes: checked every ``PARENT_POLL_S``).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import pickle
import signal
import sys

import trio

from .control import SECRET, client_handshake
from .sync import MsgStream, run_thresholds
from .timeline import mark

log = logging.getLogger("emu.worker")

_GONE = (EOFError, trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


async def main_task(host: str, port: int, index: int, secret: bytes, parent: int | None = None,
                    sock=None) -> None:
    """Serve the cluster until done; SIGTERM or the end of the parent cancels everything cleanly
    (and quietly). ``sock``: a forked worker's end of its socket pair (``run_forked``), else the
    control connection is made to ``host:port``."""
    async with trio.open_nursery() as nursery:
        if parent is not None:
            nursery.start_soon(_watch_parent, parent, nursery.cancel_scope)
        async def on_sigterm(task_status=trio.TASK_STATUS_IGNORED) -> None:
            with trio.open_signal_receiver(signal.SIGTERM) as signals:
                task_status.started()
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

        await nursery.start(on_sigterm)
        await serve(host, port, index, secret, sock)
        nursery.cancel_scope.cancel()


async def serve(host: str, port: int, index: int, secret: bytes, sock=None) -> None:
    spilled: list = []
    if sock is None:
        stream = await trio.open_tcp_stream(host, port)
    else:  # (a socket pair with the process that forked us: nobody else holds it, no handshake)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    try:
        if sock is None:
            with trio.fail_after(30):
                await client_handshake(stream, secret, index)
        chan = MsgStream(stream)
        paths, preload = await chan.recv()  # the parent's sys.path, so applications unpickle here too
        sys.path[:0] = [p for p in paths if p not in sys.path]
        mark("worker-connected")
        mark(f"worker-domain {index}")  # (which domain this process serves: the timeline's readers sort by it)
        msg = None
        if index == 1:  # asked for the partition as soon as the main process has its topology: first
            _partition_modules()
            msg = await _answer_partitions(chan, wait=False)  # (asked already: answered before the imports)
        from .build import build_domain

        for module in preload:  # while the main process makes the plan (emu.control.launch_workers)
            importlib.import_module(module)
        mark("worker-preloaded")
        plan, index = msg or await _answer_partitions(chan, wait=True)
        if isinstance(plan, bytes):  # (the main process pickles the plan once for every worker)
            plan = pickle.loads(plan)
        mark("worker-plan")
        domain = build_domain(plan, index, secret)  # (off loopback the secret keys the datagram tags)
        spilled.append(domain)
        gc.freeze()  # (this process serves this domain alone: what it built is never collected apart)
        gc.set_threshold(*run_thresholds())  # (its windows are runs: as emu.sync's)
        async with trio.open_nursery() as nursery:
            addrs = await nursery.start(domain.serve_sockets)
            await chan.send(addrs)
            mark("worker-built")
            await serve_calls(chan, domain)
            mark("worker-stop")
            nursery.cancel_scope.cancel()
    except _GONE:
        pass  # the cluster went away: nothing left to serve
    finally:
        for d in spilled:  # capture runs nobody collected (an error, an interrupt) go with us
            d._drop_runs()
        with trio.CancelScope(shield=True):
            try:
                await stream.aclose()
            except OSError:
                pass


async def _answer_partitions(chan, wait: bool) -> tuple | None:
    """Answer the main process's asks for the partition (``("partition", ...)``: asked while it
    checks its input) until its next message, the plan, which is returned; without ``wait``, only
    while a message has come (None: nothing more yet)."""
    while wait or chan.ready():
        msg = await chan.recv()
        if not isinstance(msg[0], str):
            return msg
        mark("worker-asked")
        await chan.send(partition_answer(*msg[1]))
        mark("worker-partitioned")
    return None


def _partition_modules() -> None:
    """Import what ``partition_answer`` uses before it is asked: METIS's module reads its own
    version from the installed metadata as it is imported (importlib.metadata: most of a
    partition's cost on a 256-host fat tree)."""
    from . import partition  # noqa: F401

    try:
        import pymetis  # noqa: F401
    except ImportError:
        pass


def partition_answer(graph: tuple, parts: int, method: str) -> tuple[str, object]:
    """The partition of ``graph`` (``emu.partition.graph_of``) into ``parts``, made here for the main
    process (``emu.control.Launch.ask_partition``): ``("ok", (part of each node in order, method
    used))``, or ``("err", what went wrong)`` and the main process makes it itself."""
    from .partition import partition_of

    try:
        owner, used = partition_of(*graph, parts, method)
        return "ok", ([owner[n] for n in graph[0]], used)
    except Exception as e:  # noqa: BLE001 -- told, not fatal: the main process makes it itself
        return "err", f"{type(e).__name__}: {e}"


async def serve_calls(chan, domain, special: dict | None = None) -> str:
    """Answer the synchroniser's calls on ``chan`` until it says ``stop`` (or, to an MPI rank,
    ``exit``: rank 0 is ending altogether); returns which. Answers are ``("ok", result)`` or
    ``("err", exception)`` (raised again in the main process). ``special``: methods served by these
    functions instead of the domain (they answer for themselves)."""
    while True:
        method, args = await chan.recv()
        if method in ("stop", "exit"):
            return method
        if special and method in special:
            await special[method](*args)
            continue
        try:
            result = await getattr(domain, "rpc_" + method)(*args)
        except Exception as e:  # report to the synchroniser, which raises it in the main process
            await chan.send(("err", e))
        else:
            await chan.send(("ok", result))


PARENT_POLL_S = 0.5
"""How often a worker checks that the process that started it is still there."""


async def _watch_parent(parent: int, scope: trio.CancelScope) -> None:
    """End the worker when the process that started it is gone (it was re-parented).

    Not ``PR_SET_PDEATHSIG``: Linux sends that signal when the *thread* that forked us ends, and
    trio starts processes from a worker thread that its thread cache retires after ~10 s idle --
    which killed every worker of a run longer than that. A dead parent also closes the control
    connection, which ends us as well; this covers a parent stopped before it closes anything."""
    while os.getppid() == parent:
        await trio.sleep(PARENT_POLL_S)
    log.info("the process that started this worker is gone; ending")
    scope.cancel()


def _quiet(e: BaseException) -> bool:
    """Is ``e`` (or every leaf of it) a way of being told to stop?"""
    if isinstance(e, BaseExceptionGroup):
        return all(_quiet(x) for x in e.exceptions)
    return isinstance(e, (KeyboardInterrupt, trio.Cancelled, *_GONE))


def main() -> int:
    mark("worker-imported")
    logging.basicConfig(level=logging.WARNING, format="worker %(name)s: %(message)s")
    try:
        host, port, index, parent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    except (IndexError, ValueError):
        print("usage: python -m emu.worker HOST PORT INDEX PARENT_PID (secret on stdin); started by "
              "emu.Cluster(processes=N), not by hand", file=sys.stderr)
        return 2
    if os.getppid() != parent:  # it died before we started
        return 0
    secret = sys.stdin.buffer.read(SECRET)
    if len(secret) != SECRET:
        print("worker: no cluster secret on stdin", file=sys.stderr)
        return 2
    return _serve_until_done(host, port, index, secret, parent)


def _serve_until_done(host: str, port: int, index: int, secret: bytes, parent: int, sock=None) -> int:
    try:
        trio.run(main_task, host, port, index, secret, parent, sock)
        mark("worker-done")
    except BaseException as e:  # noqa: BLE001 -- the one place that decides how a worker ends
        if _quiet(e):
            return 0
        if isinstance(e, PermissionError):
            print(f"worker: {e}", file=sys.stderr)
            return 3
        raise
    return 0


def run_forked(sock, index: int, secret: bytes, parent: int, preload: tuple[str, ...]) -> int:
    """A worker forked from the main process before that runs trio (``emu.control.fork_workers``):
    in a session of its own, it imports ``preload`` at once (most of what it needs is imported
    already: the main process's modules are its own; worker 1 what the partition needs first), then
    serves domain ``index`` over ``sock``. Returns the exit status."""
    os.setsid()  # (as a started worker: a share of the machine of its own, no terminal's Ctrl-C)
    mark("worker-forked")
    logging.basicConfig(level=logging.WARNING, format="worker %(name)s: %(message)s", force=True)
    try:  # (worker 1, asked for the partition as soon as the main process has its topology: what that
        # needs first, ``preload`` in ``serve``, after answering if it was asked by then)
        for module in preload if index != 1 else ():
            importlib.import_module(module)
        if index == 1:
            _partition_modules()
    except BaseException as e:  # noqa: BLE001 -- told by the main process when it takes the worker
        if _quiet(e):
            return 0
        raise
    mark("worker-imported")
    return _serve_until_done("", 0, index, secret, parent, sock)


if __name__ == "__main__":
    sys.exit(main())
