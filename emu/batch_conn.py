"""Connected sockets beside a process's batch socket (``emu.batch``): the kernel sorts datagrams by sender.

The process's socket is unconnected: it reads with ``recvfrom``, which formats every datagram's
source address (the sender check of ``Batch.on_datagram`` compares it with the socket at the other
end of each record's link). Where the system allows it, the process opens, beside it, one UDP socket
per peer socket (every other process's batch socket its links come from, and its own for what it
sends itself), bound to the same address and port (``SO_REUSEPORT``) and ``connect``-ed to that
peer. Linux then delivers a datagram from the peer to the socket connected to it (a connected
socket's match is the more exact one) and every other datagram to the unconnected one. A connected
socket is read with ``recv``: its sender is known without being formatted, and the same sender
check still runs on each record (a peer process may only send the records of its own links).

What a user sees of a stranger's datagram does not change: nobody is connected to the stranger, so
its datagrams still reach the unconnected socket and are read, counted (``wrong_sender`` on the
element, ``bad_link`` ... on the process) and logged as before -- the kernel drops nothing of ours.

Only on Linux 5.4 or later: before it, a reuse-port group chose among its sockets by a hash, so a
connected socket could be handed a stranger's datagram; there (and on other systems, and off
loopback, where the keyed tag decides) the process keeps its one socket.
"""

from __future__ import annotations

import platform
import socket
import sys


def _kernel_sorts_by_sender() -> bool:
    if sys.platform != "linux" or not hasattr(socket, "SO_REUSEPORT"):
        return False
    try:
        major, minor = (int(x) for x in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 4)


CONNECTED = _kernel_sorts_by_sender()
"""Does this system deliver a peer's datagrams to the socket connected to it, and only those?"""


def reuse_port(sock: socket.socket) -> None:
    """Let connected sockets share ``sock``'s address: set on each connected socket before it binds
    that address, and on the process's socket *after* it bound a port of the system's choosing (port
    0). Set before such a bind, the system may choose a port another reuse-port socket of the same
    user already holds -- another emulator process's, say -- and then share that port's datagrams
    between the two processes (each drops the other's as ``bad_link``). Bound without it, the port is
    one nobody holds; set afterwards, the connected sockets may still join it."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


def open_connected(addr: tuple[str, int], peer: tuple[str, int], rcvbuf: int, rcvbuf_force: int,
                   early: list | None = None) -> socket.socket:
    """A non-blocking UDP socket bound to ``addr`` (shared with the batch socket) and connected to ``peer``.

    Between its bind and its connect the socket is an unconnected member of the port's group, so the
    kernel may queue on it datagrams from anyone; those are read at once with their true senders and
    appended to ``early`` as (data, sender) (dropped when ``early`` is None), so that nothing a
    stranger sent in that moment is later read as ``peer``'s."""
    s = bind_shared(addr, rcvbuf, rcvbuf_force)
    try:
        connect_shared(s, peer, early)
    except BaseException:
        s.close()
        raise
    return s


def bind_shared(addr: tuple[str, int], rcvbuf: int, rcvbuf_force: int) -> socket.socket:
    """The first half of ``open_connected``: a UDP socket bound to ``addr`` in its reuse-port group."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        reuse_port(s)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        force = getattr(socket, "SO_RCVBUFFORCE", None)
        if force is not None:
            try:
                s.setsockopt(socket.SOL_SOCKET, force, rcvbuf_force)
            except OSError:  # not permitted: rcvbuf (capped by net.core.rmem_max)
                pass
        s.bind(addr)
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


def connect_shared(s: socket.socket, peer: tuple[str, int], early: list | None) -> None:
    """The second half of ``open_connected``: connect ``s`` to ``peer``, then take what was queued on
    it before (any sender's) into ``early`` with each datagram's true sender."""
    s.connect(peer)
    while True:
        try:
            got = s.recvfrom(65536)
        except BlockingIOError:
            return
        except ConnectionRefusedError:
            continue
        if early is not None:
            early.append(got)


def read_connected(sock: socket.socket, peer: tuple[str, int], on_datagram, into: memoryview | None = None) -> int:
    """Every datagram waiting on the connected ``sock`` into ``on_datagram(data, peer)``; the sum of
    what it returned. ``into``: a buffer of 65536 bytes each datagram is read into (``data`` the view
    of its bytes, good until the next read: see ``Batch.on_datagram``), not a bytes object of its own."""
    accepted = 0
    if into is not None:
        recv_into = sock.recv_into
        while True:
            try:
                n = recv_into(into)
            except BlockingIOError:
                return accepted
            except ConnectionRefusedError:  # ICMP from a peer that already closed (teardown)
                continue
            accepted += on_datagram(into[:n], peer)
    recv = sock.recv
    while True:
        try:
            data = recv(65536)
        except BlockingIOError:
            return accepted
        except ConnectionRefusedError:  # ICMP from a peer that already closed (teardown)
            continue
        accepted += on_datagram(data, peer)


def read_own(batch, own, core, into: memoryview | None) -> int:
    """``Batch.drain_own``'s reading (``batch``: the ``emu.batch.Batch``; ``own``: its connected socket
    to itself and that socket's peer, or None), into ``into`` (None: bytes of their own): with the
    compiled core (``core``) and no tag, the reads and their records in one call of it
    (``recv_records``), else ``on_datagram`` per datagram."""
    accepted = 0
    if into is not None and own is not None and batch._tag is None:  # (the reads and records in the core)
        fd, peer = own[0].fileno(), own[1]
        while batch._self_unread > 0:
            read, taken, state, n, off, k = core.recv_records(fd, into, batch._self_unread, batch.cluster_id,
                                                              batch.in_list, peer)
            batch.udp_received += read
            batch._self_unread -= read
            accepted += taken
            if state == 1:  # (the socket empty)
                batch._self_unread = 0
            elif state == 2:  # (a datagram the core left part of: on_datagram's rest)
                batch._self_unread -= 1
                batch.udp_received += 1
                accepted += batch._records(into[:n], peer, off, k)
        return accepted
    if into is None:
        recv = batch.sock.recvfrom if own is None else own[0].recv
    else:
        recv = batch.sock.recvfrom_into if own is None else own[0].recv_into
    while batch._self_unread > 0:
        try:
            if into is not None:
                n, sender = recv(into) if own is None else (recv(into), own[1])
                data = into[:n]
            else:
                data, sender = recv(65536) if own is None else (recv(65536), own[1])
        except BlockingIOError:
            batch._self_unread = 0
            break
        except ConnectionRefusedError:  # ICMP from a peer that already closed (teardown)
            continue
        batch._self_unread -= 1
        accepted += batch.on_datagram(data, sender)
    return accepted
