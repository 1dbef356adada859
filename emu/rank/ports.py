"""Ports and names of the emulated ``mpi4py.MPI`` (MPI 3.1 §10.4), rank side: ``Open_port``,
``Close_port``, ``Intracomm.Accept``/``Connect``, ``Comm.Join`` and the name service. The emulator
hands the ports out and carries the connection over the fabric (``emu.front.mpiports``).

``Comm.Join(fd)``: the two ends of a TCP socket name the connection by the socket's two addresses,
which both see (other sockets: by two random words sent over it), and the emulator pairs them."""

from __future__ import annotations

import os
import socket
import struct

from .channel import CHANNEL
from .inter import Intercomm, attach
from .intracomm import Comm, Intracomm
from .types import Exception

ERR_ARG = 12
_LEN = struct.Struct("!I")


def _name(value, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return value


def Open_port(info=None) -> str:
    """A new port of this process: a name another group's ``Connect`` reaches it by."""
    return CHANNEL.call("open_port", call="Open_port")[0]["port"]


def Close_port(port_name: str) -> None:
    CHANNEL.call("close_port", port=_name(port_name, "port_name"), call="Close_port")


def Publish_name(service_name: str, port_name: str, info=None) -> None:
    CHANNEL.call("publish_name", service=_name(service_name, "service_name"), port=_name(port_name, "port_name"),
                 call="Publish_name")


def Unpublish_name(service_name: str, port_name: str, info=None) -> None:
    CHANNEL.call("unpublish_name", service=_name(service_name, "service_name"), port=_name(port_name, "port_name"),
                 call="Unpublish_name")


def Lookup_name(service_name: str, info=None) -> str:
    return CHANNEL.call("lookup_name", service=_name(service_name, "service_name"), call="Lookup_name")[0]["port"]


def _connect(self, op: str, port_name, root: int) -> Intercomm:
    ctx = self._ok()
    if self._rank == int(root):  # the port matters at the root only
        _name(port_name, "port_name")
    else:
        port_name = None
    head, _ = CHANNEL.call(op, ctx=ctx, port=port_name, root=int(root), call=op.capitalize())
    return Intercomm._from_head(head)


def accept(self, port_name: str, info=None, root: int = 0) -> Intercomm:
    """``Intracomm.Accept``: collective over the communicator; waits for a group's ``Connect`` to the
    root's port."""
    return _connect(self, "accept", port_name, root)


def connect(self, port_name: str, info=None, root: int = 0) -> Intercomm:
    """``Intracomm.Connect``: collective over the communicator; the root reaches the port's owner."""
    return _connect(self, "connect", port_name, root)


def _send_all(fd: int, data: bytes) -> None:
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _recv_all(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        got = os.read(fd, n - len(out))
        if not got:
            raise Exception(ERR_ARG, "MPI_ERR_ARG: Comm.Join: the socket was closed before the peer's word came")
        out += got
    return out


def _join_key(fd: int) -> str:
    """The same string at both ends of the connected socket ``fd``: its two addresses, in order (a TCP
    socket); else two random words swapped over it."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError as e:
        raise Exception(ERR_ARG, f"MPI_ERR_ARG: Comm.Join: {fd} is not a socket ({e.strerror})") from None
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                ends = sorted([repr(sock.getsockname()), repr(sock.getpeername())])
            except OSError as e:
                raise Exception(ERR_ARG, f"MPI_ERR_ARG: Comm.Join: socket {fd} is not connected ({e.strerror})") from None
            return "tcp " + " ".join(ends)
    finally:
        sock.close()
    mine = os.urandom(16).hex().encode()
    _send_all(fd, _LEN.pack(len(mine)) + mine)
    (n,) = _LEN.unpack(_recv_all(fd, _LEN.size))
    return "words " + " ".join(sorted([mine.decode(), _recv_all(fd, n).decode()]))


def join(cls, fd: int) -> Intercomm:
    """``Comm.Join(fd)``: the intercommunicator of this process and the one at the socket's other end
    (which the emulator pairs by the socket's key: ``emu.front.mpiports.h_join``)."""
    head, _ = CHANNEL.call("join", key=_join_key(int(fd)), call="Join")
    return Intercomm._from_head(head)


attach(Intracomm, {"Accept": accept, "Connect": connect})
attach(Comm, {"Join": classmethod(join)})
