"""The messages between a rank process and the emulator that runs its host (both sides use this).

A message is a head and a payload: ``!IH`` (payload bytes, head bytes), the head as UTF-8 JSON (an
object of numbers, strings, lists and None), then the payload as raw bytes. Nothing is unpickled: a
pickled object a rank sends (mpi4py's lowercase calls) is payload, opaque to the emulator, and only
the rank it is for unpickles it -- as between the processes of a real MPI job.

The channel is a ``socket.socketpair`` the emulator makes for each rank before starting it and hands
on by file descriptor (``pass_fds``): it has no address, so nobody but the two processes holding its
ends can write to it. That is the authentication; no port is opened, on loopback or elsewhere.
"""

from __future__ import annotations

import json
import socket
import struct

PREFIX = struct.Struct("!IH")
MAX_HEAD = 1 << 16
MAX_PAYLOAD = 1 << 32


class ChannelClosed(EOFError):
    """The other end of the channel closed (the process ended)."""


def send(sock: socket.socket, head: dict, payload=b"") -> None:
    """One message: the head (a JSON object) and the payload (bytes-like, sent without a copy)."""
    h = json.dumps(head, separators=(",", ":")).encode()
    if len(h) >= MAX_HEAD:
        raise ValueError(f"message head of {len(h)} bytes; at most {MAX_HEAD - 1}")
    n = memoryview(payload).nbytes
    if n >= MAX_PAYLOAD:
        raise ValueError(f"message of {n} bytes; at most {MAX_PAYLOAD - 1} per call")
    if n <= 65536:
        sock.sendall(PREFIX.pack(n, len(h)) + h + bytes(payload))
    else:
        sock.sendall(PREFIX.pack(n, len(h)) + h)
        sock.sendall(payload)


def _exactly(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelClosed("the other end closed the channel")
        got += k
    return buf


def recv(sock: socket.socket) -> tuple[dict, bytearray]:
    """The next message: (head, payload). A head that is not a JSON object is refused."""
    n, hn = PREFIX.unpack(_exactly(sock, PREFIX.size))
    head = json.loads(bytes(_exactly(sock, hn)).decode()) if hn else {}
    if not isinstance(head, dict):
        raise ValueError("malformed message head (not a JSON object)")
    return head, _exactly(sock, n) if n else bytearray()
