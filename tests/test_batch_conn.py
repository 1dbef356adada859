"""Sockets connected to the peers beside the process's batch socket (emu.batch_conn): the kernel sorts
the peers' datagrams by sender, and a stranger's still reach the process's socket, counted as before."""

import select
import socket
import time

import pytest
import trio

import emu
import emu.batch
from emu.batch_conn import CONNECTED, open_connected, reuse_port
from emu.wire import MAGIC, OUTER, VERSION, LinkKind, PacketType, add_fcs, build_frame

needs_connected = pytest.mark.skipif(not CONNECTED, reason="needs Linux 5.4 or later (SO_REUSEPORT sorts by connection)")


def _udp(addr=("127.0.0.1", 0), reuse=False):
    """A socket bound to ``addr``; ``reuse``: others may join its port (set after the bind, as the
    process's batch socket has it: see ``batch_conn.reuse_port``)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(addr)
    if reuse:
        reuse_port(s)
    s.setblocking(False)
    return s


def _read_all(socks, want: int, timeout: float = 30) -> dict:
    """What each socket read (name -> [(data, sender)]) once ``want`` datagrams came (or the deadline)."""
    got = {name: [] for name in socks}
    deadline = time.monotonic() + timeout
    while sum(map(len, got.values())) < want and time.monotonic() < deadline:
        select.select(list(socks.values()), [], [], 0.5)
        for name, s in socks.items():
            while True:
                try:
                    got[name].append(s.recvfrom(100))
                except BlockingIOError:
                    break
    return got


@needs_connected
def test_the_kernel_gives_a_peer_s_datagrams_to_its_connected_socket_and_a_stranger_s_to_the_other():
    main = _udp(reuse=True)
    addr = main.getsockname()
    peer, stranger = _udp(), _udp()
    own = open_connected(addr, addr, 1 << 16, 1 << 16)
    to_peer = open_connected(addr, peer.getsockname(), 1 << 16, 1 << 16)
    try:
        main.sendto(b"self", addr)
        peer.sendto(b"peer", addr)
        stranger.sendto(b"stranger", addr)
        got = _read_all({"main": main, "own": own, "to_peer": to_peer}, 3)
        assert [d for d, _ in got["own"]] == [b"self"]
        assert [d for d, _ in got["to_peer"]] == [b"peer"]
        assert got["main"] == [(b"stranger", stranger.getsockname())]
    finally:
        for s in (main, peer, stranger, own, to_peer):
            s.close()


async def _ping_and_forge(forge: bool):
    """A ping on a star in one process; with ``forge``, a stranger's socket first sends a record for
    each link ending here, with the right cluster id, link id and next sequence number, and a NACK."""
    async with emu.Cluster("star:n=2") as net:
        b = net._local.batch
        forged = add_fcs(build_frame(0, 1, PacketType.MSG, b"\0" * 16 + b"forged payload"))
        n = 0
        if forge:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                for el in net._local.elements:
                    for inp in el.in_ports:
                        s.sendto(OUTER.pack(MAGIC, VERSION, LinkKind.DATA, net.cluster_id, inp.link_id,
                                            inp.link.expected, el.safe_time + 10**6, len(forged), 0) + forged, b.addr)
                        n += 1
                s.sendto(OUTER.pack(MAGIC, VERSION, LinkKind.DATA, net.cluster_id, 999, 0, 0, 0, 0), b.addr)
            deadline = time.monotonic() + 30
            while b.udp_received < n + 1 and time.monotonic() < deadline:
                select.select([b.sock], [], [], 0.5)
                b.drain()
        rtt = await net["h0"].ping("h1")
        stats = await net.stats()
        conn = {"own": b._own and b._own[0].getpeername(), "addr": b.addr, "connected": len(b.connected)}
        return rtt, n, sum(s["element"]["wrong_sender"] for s in stats), (await net.process_stats())[0], conn


@needs_connected
async def test_a_process_reads_what_it_sends_itself_on_its_own_connected_socket():
    rtt, _, wrong, ps, conn = await _ping_and_forge(False)
    assert conn["own"] == conn["addr"] and conn["connected"] == 1
    assert wrong == 0 and (ps["udp_sent"], ps["udp_received"]) == (4, 4)
    assert rtt > 0


@needs_connected
async def test_a_stranger_s_records_still_reach_the_process_socket_and_are_counted_and_dropped():
    """What a user sees is what the single socket showed: every forged record counted as from the
    wrong socket on its element, the datagram for no link here on the process, the figures unchanged."""
    clean, *_ = await _ping_and_forge(False)
    rtt, n, wrong, ps, _ = await _ping_and_forge(True)
    assert n == 4 and wrong == n and ps["bad_link"] == 1
    assert rtt == clean


async def test_without_connected_sockets_the_figures_are_the_same(monkeypatch):
    with_conn, *_ = await _ping_and_forge(True)
    monkeypatch.setattr(emu.batch, "CONNECTED", False)
    rtt, n, wrong, ps, conn = await _ping_and_forge(True)
    assert conn["connected"] == 0 and conn["own"] is None
    assert rtt == with_conn and wrong == n == 4 and ps["bad_link"] == 1


@needs_connected
async def test_two_processes_connect_to_each_other_s_socket():
    async with emu.Cluster("fattree:k=2,n=2", processes=2) as net:
        b = net._local.batch
        peers = {tuple(p.peer_addr) for el in net._local.elements for p in [*el.in_ports, *el.out_ports]}
        assert {peer for _, peer in b.connected} == peers and len(peers) == 2  # the worker's socket and its own
        assert all(s.getpeername() == peer for s, peer in b.connected)
        assert await net["h0"].ping("h3") > 0
        assert sum(s["element"]["wrong_sender"] for s in await net.stats()) == 0


@needs_connected
def test_what_a_stranger_sent_between_bind_and_connect_keeps_its_true_sender():
    """Between its bind and its connect a connected socket is an unconnected member of the port's
    group: the kernel may queue a stranger's datagram on it. Those are taken with their true senders
    (``open_connected``'s ``early``), never read later as the peer's."""
    from emu.batch_conn import bind_shared, connect_shared, read_connected

    main = _udp(reuse=True)
    addr = main.getsockname()
    peer = _udp()
    strangers = [_udp() for _ in range(24)]  # (the group hashes by sender: some land on ``s``)
    s = bind_shared(addr, 1 << 16, 1 << 16)
    try:
        for i, st in enumerate(strangers):
            st.sendto(b"x%d" % i, addr)
        time.sleep(0.2)
        early: list = []
        connect_shared(s, peer.getsockname(), early)
        got = _read_all({"main": main}, 24 - len(early), timeout=10)["main"]
        names = {st.getsockname() for st in strangers}
        assert early, "no stranger's datagram was queued on the second socket (the group sent all 24 to one)"
        assert all(sender in names for _, sender in early)
        assert len(early) + len(got) == 24
        peer.sendto(b"peer", addr)
        seen = []
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            select.select([s], [], [], 0.5)
            read_connected(s, peer.getsockname(), lambda d, p: seen.append((d, p)) or 0)
        assert seen == [(b"peer", peer.getsockname())]
    finally:
        for x in (main, peer, s, *strangers):
            x.close()


@needs_connected
def test_a_process_socket_never_shares_a_port_the_system_chose_with_another_reuse_port_socket():
    """Bound to port 0 with ``SO_REUSEPORT`` already set, a socket may be given a port another such
    socket of the same user holds -- the kernel then shares that port's datagrams between the two
    (seen as a rare ``bad_link`` drop at 8 processes). The process's batch socket sets it after its
    bind: its port is one nobody held, whatever other reuse-port sockets exist."""
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    n = max(100, min(3000, soft - 300))
    others = []
    try:
        for _ in range(n):  # (reuse-port sockets on ports the system chose: other processes', as they bound before)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            reuse_port(s)
            s.bind(("127.0.0.1", 0))
            others.append(s)
        held = [s.getsockname()[1] for s in others]
        if len(set(held)) == len(held):
            pytest.skip(f"this system gave {n} reuse-port sockets {n} ports of their own: nothing to tell apart")
        held = set(held)
        shared = []
        for _ in range(200):
            b = emu.batch.Batch()
            try:
                if b.addr[1] in held:
                    shared.append(b.addr[1])
            finally:
                b.close()
        assert not shared, f"batch sockets were given ports other reuse-port sockets hold: {shared}"
    finally:
        for s in others:
            s.close()
