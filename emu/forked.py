"""Worker processes forked from the main process as it starts (``emu run --processes N``).

A started worker (``emu.control.launch_workers``) spends most of its start-up importing Python and
the emulator's modules, about as long as the main process takes to build a topology like the
256-host fat tree and its plan. Forked before the command line is even parsed, a worker has all the
main process's modules already: worker 1 (forked first: it makes the partition) imports the rest (the
engines) while the main process builds the topology, the others are forked once the main process has
imported them too, and import nothing: their start-up leaves the critical path. It is connected to the main process by a socket pair
that nobody else holds (no listener, no handshake: the secret is inherited, never sent), in a
session of its own as a started worker is, and served by the same code (``emu.worker``).
"""

from __future__ import annotations

import gc
import importlib
import os
import secrets
import signal
import socket
import sys

import trio

from .control import SECRET, Launch
from .sync import MsgStream
from .timeline import mark
from .worker import run_forked


def fork_workers(count: int, preload: tuple[str, ...] = ()) -> ForkedWorkers | None:
    """Fork ``count`` workers (domains 1..count) now, before this process runs trio or any thread of
    its own: each is this process as it is -- its modules imported already -- connected to it by a
    socket pair, and has ``preload`` imported (``emu run`` forks them as it starts, so that their
    start-up costs next to nothing and overlaps the topology's). ``ForkedWorkers.launch`` makes them
    a ``Launch``. None where processes cannot be forked and waited for so (not Linux).

    Worker 1, which makes the partition first, is forked first; then this process imports ``preload``
    itself (it builds a domain of its own with the same engines, so it would import them soon anyway)
    and forks workers 2..count with them imported: they start with nothing left to import. With a
    timeline, ``worker-1-launched`` marks worker 1's fork, ``workers-launched`` the last one."""
    if count < 1 or not hasattr(os, "fork") or not hasattr(os, "pidfd_open"):
        return None
    secret = secrets.token_bytes(SECRET)
    parent = os.getpid()
    kids: list[tuple[int, int, socket.socket]] = []
    for d in range(1, count + 1):
        if d == 2:
            try:
                _import_for_workers(preload)
            except BaseException:  # (an interrupt meanwhile: worker 1 does not outlive us)
                ForkedWorkers(secret, kids, preload).discard()
                raise
        mine, theirs = socket.socketpair()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker: it never returns from here
            code = 1
            try:
                mine.close()
                for _, _, other in kids:
                    other.close()
                code = run_forked(theirs, d, secret, parent, preload)
            except BaseException:  # noqa: BLE001 -- a bug: its traceback, then out
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        theirs.close()
        kids.append((d, pid, mine))
        if d == 1:
            mark("worker-1-launched")
    mark("workers-launched")
    return ForkedWorkers(secret, kids, preload)


def _import_for_workers(preload: tuple[str, ...]) -> None:
    """Import ``preload`` here before forking the workers that would each import it (with the cyclic
    collector off, as the start-up's imports); what the start-up froze (``emu.sync.freeze_until_run``)
    is frozen with it, so that no collection in a worker traverses -- and copies -- those pages."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for module in preload:
            importlib.import_module(module)
    finally:
        if enabled:
            gc.enable()
    if gc.get_freeze_count():  # (the command's start-up froze the modules: these join them)
        gc.freeze()


class ForkedWorkers:
    """Workers forked by ``fork_workers``, not yet in a trio run."""

    def __init__(self, secret: bytes, kids: list, preload: tuple[str, ...]):
        self.secret, self.kids, self.preload = secret, kids, preload
        self.count = len(kids)

    async def launch(self, nursery: trio.Nursery) -> Launch:
        """The workers as a ``Launch`` whose every worker is in (their tasks in ``nursery``)."""
        launch = Launch(self.count, self.secret, [], self.preload)
        kids, self.kids = self.kids, []
        try:
            for (d, pid, sock), w in zip(kids, launch.workers):
                await nursery.start(launch._hold_forked, w, pid)
                chan = MsgStream(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
                await chan.send((list(sys.path), self.preload))
                launch.chans[d] = chan
        except BaseException:
            with trio.CancelScope(shield=True):
                await launch.aclose()
            raise
        launch._settled.set()
        return launch

    def discard(self) -> None:
        """Not wanted after all (outside trio): their connections close, so they end."""
        for _, pid, sock in self.kids:
            sock.close()
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for _, pid, _ in self.kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.kids = []
