"""Dynamic process creation of the emulated ``mpi4py.MPI`` (MPI 3.1 §10.3), rank side:
``Intracomm.Spawn``, ``Intracomm.Spawn_multiple``, ``Comm.Get_parent``. The emulator starts the
processes on free hosts of the job's universe and makes the intercommunicator
(``emu.front.mpispawn``); the arguments are checked here as mpi4py checks them (at the root only:
elsewhere they are not looked at)."""

from __future__ import annotations

import os

from .channel import CHANNEL
from .info import Info
from .inter import Intercomm, attach
from .intracomm import Comm, Intracomm

SUCCESS = 0


def _path(command) -> str:
    """A command as mpi4py takes it: a str, bytes or path-like."""
    path = os.fspath(command)
    return os.fsdecode(path) if isinstance(path, bytes) else path


def _argv(args) -> list[str] | None:
    if args is None:
        return None
    if isinstance(args, (str, bytes)):
        args = [args]
    out = []
    for a in args:
        if isinstance(a, bytes):
            a = a.decode()
        if not isinstance(a, str):
            raise TypeError(f"expected str or bytes, got {type(a).__name__}")
        out.append(a)
    return out


def _info(info) -> dict:
    if info is None:
        return {}
    if not isinstance(info, Info):
        raise TypeError(f"Argument 'info' has incorrect type (expected mpi4py.MPI.Info, got {type(info).__name__})")
    return dict(info._h.items) if info._h is not None else {}


def _items(seq, count: int) -> list:
    seq = list(seq)
    if len(seq) != count:
        raise ValueError(f"expecting {count} items, got {len(seq)}")
    return seq


def _nprocs(maxprocs, count: int) -> list[int]:
    if maxprocs is None or isinstance(maxprocs, int):
        return [1 if maxprocs is None else int(maxprocs)] * count
    return [int(n) for n in _items(maxprocs, count)]


def _spawn(comm: Intracomm, apps: list[dict] | None, root: int, call: str) -> tuple[Intercomm, list[int]]:
    """The intercommunicator to the processes started, and their error codes (in order)."""
    head, _ = CHANNEL.call("spawn", ctx=comm._ok(), root=int(root), apps=apps, call=call)
    return Intercomm._from_head(head), head.get("errcodes", [])


def _codes(got: list[int], n: int) -> list[int]:
    """``n`` error codes: the processes' (one each, in order), SUCCESS for any more."""
    return (list(got) + [SUCCESS] * n)[:max(n, 0)]


def spawn(self, command, args=None, maxprocs: int = 1, info=None, root: int = 0, errcodes=None) -> Intercomm:
    """``Intracomm.Spawn``: ``maxprocs`` processes of ``command args``, collective over this
    communicator; the intercommunicator to them (their ``Get_parent``)."""
    maxprocs, root = int(maxprocs), int(root)
    apps = None
    if self._ok() is not None and self._rank == root:
        apps = [{"command": _path(command), "args": _argv(args), "maxprocs": maxprocs, "info": _info(info)}]
    child, codes = _spawn(self, apps, root, "Spawn")
    if errcodes is not None:
        errcodes[:] = _codes(codes, maxprocs)
    return child


def spawn_multiple(self, command, args=None, maxprocs=None, info=None, root: int = 0, errcodes=None) -> Intercomm:
    """``Intracomm.Spawn_multiple``: the processes of several commands, in one ``COMM_WORLD`` (in command
    order; ``APPNUM`` is a process's command's index)."""
    root = int(root)
    apps = None
    nprocs: list[int] = []
    if self._ok() is not None and self._rank == root:
        if isinstance(command, (str, bytes)) or hasattr(command, "__fspath__"):
            raise ValueError("expecting a sequence of path-like")
        cmds = [_path(c) for c in command]
        count = len(cmds)
        if args is None:
            argvs = [None] * count
        elif isinstance(args, (str, bytes)):
            argvs = [_argv(args)] * count
        else:
            argvs = [_argv(a if a is not None else []) for a in _items(args, count)]
        nprocs = _nprocs(maxprocs, count)
        infos = [_info(info)] * count if info is None or isinstance(info, Info) else \
            [_info(i) for i in _items(info, count)]
        apps = [{"command": c, "args": a, "maxprocs": n, "info": i} for c, a, n, i in zip(cmds, argvs, nprocs, infos)]
    elif errcodes is not None:
        nprocs = _nprocs(maxprocs, len(maxprocs))
    child, got = _spawn(self, apps, root, "Spawn_multiple")
    if errcodes is not None:
        out = []
        for n in nprocs:
            out.append(_codes(got[:n], n))
            got = got[n:]
        errcodes[:] = out
    return child


_PARENT: list = []


def get_parent(cls) -> Intercomm:
    """``Comm.Get_parent``: the intercommunicator to the processes that spawned this one, the same object
    at every call (as mpi4py's); null in a process ``emu mpirun`` started, and once it was freed or
    disconnected."""
    if not _PARENT:
        _PARENT.append(Intercomm._from_head(CHANNEL.parent) if CHANNEL.parent else Intercomm())
    return _PARENT[0]


attach(Intracomm, {"Spawn": spawn, "Spawn_multiple": spawn_multiple})
attach(Comm, {"Get_parent": classmethod(get_parent)})
