"""One socket per process, a window's records joined per destination (emu.batch)."""

import hashlib
import select
import socket
import time

import pytest
import apps
import emu
import emu.batch
from emu.batch import Batch
from emu.config import RunConfig, SwitchSpec
from emu.domain import Domain
from emu.element import Element
from emu.port import InPort, OutPort
from emu.switch.forward import SwitchEngine
from emu.wire import MAGIC, OUTER, VERSION, PacketType, add_fcs, build_frame
from emu.wire.outer import TAG_LEN, LinkKind, datagram_tag, tag_key

CID = 0x7654321
FRAME = add_fcs(build_frame(0, 1, PacketType.MSG, b"payload"))
SPEC = "fattree:k=2,n=2"
SCENARIO = {"h0": (apps.send_to, "h3", 9000, 1, 3), "h3": (apps.recv_n, 3), "h1": (apps.exchange, "h2", 3000, 2),
            "h2": (apps.exchange, "h1", 3000, 2)}


def record(link, seq, ts, frame=FRAME, kind=LinkKind.DATA):
    return OUTER.pack(MAGIC, VERSION, kind, CID, link, seq, ts, len(frame), 0) + frame


def _peer():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    return s


@pytest.fixture
def batched(request):
    """A switch element on a batch socket; its two links come from two different peer sockets."""
    key = getattr(request, "param", None)
    a, b = _peer(), _peer()
    batch = Batch("127.0.0.1", key, CID)
    dom = Domain(0, 2, RunConfig())
    dom.batch = batch
    outs = [OutPort(i, f"s0-p{i}", i, 10 + 2 * i, f"h{i}", f"h{i}-nic0", 100, 10**11, peer_domain=1,
                    peer_addr=p.getsockname()) for i, p in enumerate((a, b))]
    ins = [InPort(i, f"s0-p{i}", i, 11 + 2 * i, f"h{i}", f"h{i}-nic0", peer_addr=p.getsockname())
           for i, p in enumerate((a, b))]
    el = Element("s0", SwitchEngine("s0", 5, SwitchSpec(), [0, 1]), cluster_id=CID, domain=dom, outs=outs, ins=ins,
                 capture=False, seed=1, lookahead_ns=150, tag_key=key, batch=batch)
    dom.add(el)
    batch.index(dom.elements)
    yield el, batch, a, b
    for s in (batch.sock, a, b):
        s.close()


def _arrive(batch, src, data) -> int:
    """Send ``data`` from ``src`` to the batch socket and drain it once it is there (waiting on the
    socket, not a guessed time: a loaded machine may take long to deliver)."""
    src.sendto(data, batch.addr)
    n = batch.udp_received
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        select.select([batch.sock], [], [], 0.5)
        got = batch.drain()
        if batch.udp_received > n:
            return got
    raise AssertionError("the datagram never came")


def test_each_record_is_checked_against_the_socket_at_the_other_end_of_its_link(batched):
    el, batch, a, b = batched
    # from a: link 11's records are a's, link 13's are b's -- dropped one by one, the rest taken
    assert _arrive(batch, a, record(11, 0, 500) + record(13, 0, 500) + record(11, 1, 600)) == 2
    assert el.stats["wrong_sender"] == 1 and el.in_by_link[13].link.expected == 0
    assert el.in_by_link[11].link.expected == 2 and len(el.heap) == 2
    assert _arrive(batch, b, record(13, 0, 700) + record(11, 2, 700)) == 1
    assert el.stats["wrong_sender"] == 2 and el.in_by_link[13].link.expected == 1
    # a record for a link that ends nowhere here, and foreign bytes: counted, the socket goes on
    assert _arrive(batch, a, record(99, 0, 800) + record(11, 2, 800)) == 1
    assert _arrive(batch, a, b"GET / HTTP/1.1\r\n\r\n" * 3) == 0
    assert (batch.drops["bad_link"], batch.drops["bad_magic"], batch.udp_received) == (1, 1, 4)
    assert el.stats["bad_link"] == el.stats["bad_magic"] == el.stats["datagrams_received"] == 0  # the process's


def test_a_gap_on_one_link_asks_it_once_and_leaves_the_others_alone(batched):
    el, batch, a, _ = batched
    got = _arrive(batch, a, record(11, 1, 500) + record(11, 2, 500) + record(11, 3, 500))
    assert got == 0 and el.stats["gaps"] == 3 and el.stats["nacks_sent"] == 1
    data, sender = a.recvfrom(65536)  # link 11's NACK, to a, from the batch socket
    assert sender == batch.addr and OUTER.struct.unpack_from(data)[2] == LinkKind.NACK
    assert OUTER.struct.unpack_from(data)[5] == 0  # go back to 0


@pytest.mark.parametrize("batched", [tag_key(bytes(32), CID)], indirect=True)
def test_off_loopback_each_datagram_is_tagged_once_and_checked_before_its_records(batched):
    el, batch, a, _ = batched
    key = tag_key(bytes(32), CID)
    body = record(11, 0, 500) + record(11, 1, 600)
    assert _arrive(batch, a, body) == 0 and _arrive(batch, a, body + bytes(TAG_LEN)) == 0
    assert batch.drops["bad_tag"] == 2 and el.stats["bad_tag"] == 0 and not el.heap
    assert _arrive(batch, a, body + datagram_tag(key, body)) == 2
    # what the element sends in a window leaves joined, with one tag for the datagram
    batch.holding = True
    el._sendto(record(10, 0, 1), a.getsockname())
    el._sendto(record(10, 1, 2), a.getsockname())
    batch.flush()
    data = a.recv(65536)
    assert data[-TAG_LEN:] == datagram_tag(key, data[:-TAG_LEN]) and data[:-TAG_LEN] == record(10, 0, 1) + record(10, 1, 2)


def test_a_window_s_groups_are_joined_per_destination_up_to_the_datagram_limit(batched):
    el, batch, a, b = batched
    big = bytes(emu.batch.MAX_DATAGRAM // 3)
    batch.holding = True
    for i in range(4):
        batch.send(big, a.getsockname())
    batch.send(b"x", b.getsockname())
    assert batch.udp_sent == 1  # the fourth would not fit: the first three left
    batch.flush()
    assert batch.udp_sent == 3 and not batch.pending and not batch.holding
    assert len(a.recv(65536)) == 3 * len(big) and a.recv(65536) == big and b.recv(65536) == b"x"
    batch.send(b"now", b.getsockname())  # outside a window (NACKs, retransmissions): at once
    assert b.recv(65536) == b"now"


def test_a_window_s_groups_leave_as_one_datagram_whether_gathered_by_the_kernel_or_joined(batched, monkeypatch):
    """The groups for one destination leave as one datagram, their bytes in order: gathered by
    sendmsg, or joined first where sendmsg cannot take them (more groups than one call takes)."""
    el, batch, a, _ = batched
    for n in (3, emu.batch.IOV_MAX + 1):
        groups = [bytes([k % 251]) * (1 + k % 7) for k in range(n)]
        batch.holding = True
        for g in groups:
            batch.send(g, a.getsockname())
        batch.flush()
        assert a.recv(65536) == b"".join(groups)
    sent = []
    monkeypatch.setattr(emu.native, "CORE", None)  # (the socket module's sendmsg: the compiled core's gathers by the fd)
    monkeypatch.setattr(batch, "sock", type("S", (), {"sendmsg": lambda *x: sent.append(("sendmsg", len(x[1]))),
                                                     "sendto": lambda *x: sent.append(("sendto", len(x[1])))})())
    for n in (3, emu.batch.IOV_MAX + 1):
        batch.holding = True
        for k in range(n):
            batch.send(b"x", ("127.0.0.1", 9))
        batch.flush()
    assert sent == [("sendmsg", 3), ("sendto", emu.batch.IOV_MAX + 1)]


async def _run(batch: bool, tmp_path, capture: bool, processes: int = 1):
    cap = tmp_path / f"b{batch}{capture}{processes}.pcapng" if capture else None
    run = RunConfig(batch=batch, processes=processes, capture=capture)
    async with emu.Cluster(SPEC, run=run, capture=cap) as net:
        res = await net.run(SCENARIO)
        stats = await net.stats()
        udp = net._local.batch.udp_sent if batch else None
        metrics = net.metrics
    return res, metrics, stats, udp, cap and hashlib.sha256(cap.read_bytes()).hexdigest()


@pytest.mark.parametrize("capture", [False, True])
async def test_batched_and_unbatched_sockets_give_the_same_figures_and_capture(tmp_path, capture):
    res, metrics, stats, udp, digest = await _run(True, tmp_path, capture)
    res0, metrics0, stats0, _, digest0 = await _run(False, tmp_path, capture)
    assert res == res0 and metrics == metrics0 and digest == digest0
    assert [s["ports"] for s in stats] == [s["ports"] for s in stats0]
    groups = sum(s["element"]["datagrams_sent"] for s in stats)
    assert groups == sum(s["element"]["datagrams_sent"] for s in stats0) > 0  # every link's group, both ways
    assert 0 < udp < groups  # ... joined into fewer datagrams
    for s in stats:
        assert s["element"]["gaps"] == s["element"]["retransmitted"] == s["element"]["wrong_sender"] == 0


async def test_two_processes_and_reading_back_early_change_nothing(tmp_path, monkeypatch):
    res0, metrics0, *_ = await _run(False, tmp_path, False)
    res, metrics, stats, *_ = await _run(True, tmp_path, False, processes=2)
    assert res == res0 and metrics == metrics0
    # frames to the process's own socket read back after every datagram (not after 1 MB)
    monkeypatch.setattr(emu.batch, "SELF_DRAIN_BYTES", 0)
    res, metrics, stats, *_ = await _run(True, tmp_path, False)
    assert res == res0 and metrics == metrics0
    assert sum(s["element"]["gaps"] for s in stats) == 0


def test_a_datagram_waits_behind_one_that_found_no_room_and_self_reads_fit_the_buffer_it_got():
    batch = Batch("127.0.0.1", None, CID)
    try:
        rcvbuf = batch.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert 0 < batch.self_drain <= rcvbuf // 4     # read back long before the kernel would drop
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        try:
            batch.unsent.append((b"first", peer.getsockname()))   # as after a sendto that found no room
            batch._send(b"second", peer.getsockname())
            assert [d for d, _a in batch.unsent] == [b"first", b"second"]   # in order, none overtakes
            peer.setblocking(False)
            with pytest.raises(BlockingIOError):
                peer.recv(100)                                      # nothing went out of order
        finally:
            peer.close()
    finally:
        batch.sock.close()


def test_a_record_stamped_before_what_was_processed_is_counted_and_dropped_not_raised(batched):
    """A buggy peer (or a record forged from its socket) stamps a record earlier than what its
    element has already run: the peer's fault, counted as ``late``, its place left open for the real
    one; a replayed datagram is a duplicate. No CausalityError: that stays for frames handed over in
    memory, where it can only be our bug."""
    el, batch, a, _ = batched
    assert _arrive(batch, a, record(11, 0, 500)) == 1
    el.safe_time = 1000  # as after a window that ran to 1000 ns
    assert _arrive(batch, a, record(11, 1, 900) + record(11, 2, 1100)) == 0
    assert el.stats["late"] == 1 and el.stats["gaps"] == 1 and el.in_by_link[11].link.expected == 1
    assert _arrive(batch, a, record(11, 0, 500)) == 0 and el.stats["duplicates"] == 1  # a replay
    assert _arrive(batch, a, record(11, 1, 1050) + record(11, 2, 1100)) == 2  # the genuine ones still come in
    assert el.stats["late"] == 1 and len(el.heap) == 3


def test_a_late_record_on_an_element_s_own_socket_is_counted_and_dropped_too():
    peer = _peer()
    dom = Domain(0, 2, RunConfig())
    outs = [OutPort(0, "s0-p0", 0, 10, "h0", "h0-nic0", 100, 10**11, peer_domain=1, peer_addr=peer.getsockname())]
    ins = [InPort(0, "s0-p0", 0, 11, "h0", "h0-nic0", peer_addr=peer.getsockname())]
    el = Element("s0", SwitchEngine("s0", 5, SwitchSpec(), [0]), cluster_id=CID, domain=dom, outs=outs, ins=ins,
                 capture=False, seed=1, lookahead_ns=150)
    try:
        dom.add(el)
        assert el.on_datagram(record(11, 0, 500), peer.getsockname()) == 1
        el.safe_time = 1000
        assert el.on_datagram(record(11, 1, 900), peer.getsockname()) == 0
        assert el.stats["late"] == 1 and el.in_by_link[11].link.expected == 1
        assert el.on_datagram(record(11, 1, 1000), peer.getsockname()) == 1
    finally:
        el.sock.close()
        peer.close()


def _open_sockets() -> int:
    import os
    return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("socket:") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}"))


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="counts the process's fds in /proc")
@pytest.mark.parametrize("batch", [True, False])
def test_a_build_that_fails_after_its_sockets_opened_leaves_none_open(monkeypatch, batch):
    """The process's batch socket is made before its elements; an element that cannot be built
    (here: its engine's factory fails on the third node) closes it and every element socket made so
    far, and the error goes on up."""
    import emu.build
    from emu.config import ConfigError
    from emu.topologies.registry import build

    made, real_batch, real_engine, calls = [], emu.build.Batch, emu.build.make_engine, [0]

    def batch_kept(*a, **kw):
        made.append(real_batch(*a, **kw))
        return made[-1]

    def engine_fails(*a, **kw):
        calls[0] += 1
        if calls[0] == 3:
            raise ConfigError("no engine for this node (a test)")
        return real_engine(*a, **kw)

    monkeypatch.setattr(emu.build, "Batch", batch_kept)
    monkeypatch.setattr(emu.build, "make_engine", engine_fails)
    plan = emu.build.Plan.make(build(SPEC), RunConfig(batch=batch), CID)
    before = _open_sockets()
    with pytest.raises(ConfigError, match="a test"):
        emu.build.build_domain(plan, 0)
    assert _open_sockets() == before
    assert len(made) == (1 if batch else 0) and all(b.sock.fileno() == -1 for b in made)


async def test_the_process_counts_its_datagrams_and_what_belongs_to_no_element():
    """A ping on a star in one process: four crossings (h0-s0, s0-h1 and back), each in a window of
    its own, so four datagrams from the process's socket to itself. Then one datagram of each kind
    of input that names no element here: counted on the process, exactly, not on an element."""
    async with emu.Cluster("star:n=2") as net:
        assert await net.process_stats() == [{"process": 0, "elements": 3, "socket": "batch", "udp_sent": 0,
                                              "udp_received": 0, "bad_tag": 0, "truncated": 0, "bad_magic": 0,
                                              "foreign_cluster": 0, "bad_link": 0}]
        await net["h0"].ping("h1")
        assert net.metrics.hop_count == 4
        (ps,) = await net.process_stats()
        assert (ps["udp_sent"], ps["udp_received"]) == (4, 4)
        assert sum(s["element"]["datagrams_sent"] for s in await net.stats()) == 4  # one record group each
        batch = net._local.batch
        cid = net.cluster_id
        bad = [b"", OUTER.pack(MAGIC, VERSION, LinkKind.DATA, cid, 0, 0, 0, 0, 0)[:20],          # truncated x2
               b"\x12\x34" + bytes(40),                                                        # bad magic
               OUTER.pack(MAGIC, VERSION, LinkKind.DATA, cid ^ 1, 0, 0, 0, 0, 0),               # foreign cluster
               OUTER.pack(MAGIC, VERSION, LinkKind.DATA, cid, 999, 0, 0, 0, 0),                 # bad link
               OUTER.pack(MAGIC, VERSION, LinkKind.NACK, cid, 999, 0, 0, 0, 0),                 # bad link
               OUTER.pack(MAGIC, VERSION, 9, cid, 0, 0, 0, 0, 0)]                               # bad magic (kind)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for d in bad:
                s.sendto(d, batch.addr)
        deadline = time.monotonic() + 30  # waits on the datagrams; the deadline only ends a lost one
        while batch.udp_received < 4 + len(bad) and time.monotonic() < deadline:
            select.select([batch.sock], [], [], 0.5)
            batch.drain()
        (ps,) = await net.process_stats()
        assert ps == {"process": 0, "elements": 3, "socket": "batch", "udp_sent": 4, "udp_received": 11, "bad_tag": 0,
                      "truncated": 2, "bad_magic": 2, "foreign_cluster": 1, "bad_link": 2}
        for st in await net.stats():
            assert all(st["element"][k] == 0 for k in ("truncated", "bad_magic", "foreign_cluster", "bad_link",
                                                       "datagrams_received")), st["name"]
        assert await net["h0"].ping("h1") > 0  # and the run goes on


def test_record_kind_3_once_data_nofcs_is_refused_as_malformed(batched):
    """Kind 3 (a frame without its FCS, retired: frames on sockets keep it) is an unknown kind now:
    a datagram of it is counted as malformed, its record not read as a frame."""
    el, batch, a, _ = batched
    assert _arrive(batch, a, record(11, 0, 500, FRAME[:-4], kind=3)) == 0
    assert batch.drops["bad_magic"] == 1 and el.in_by_link[11].link.expected == 0 and not el.heap
    peer = _peer()
    own = Element("s1", SwitchEngine("s1", 5, SwitchSpec(), [0]), cluster_id=CID, domain=Domain(0, 2, RunConfig()),
                  outs=[None], ins=[InPort(0, "s1-p0", 0, 11, "h0", "h0-nic0", peer_addr=peer.getsockname())],
                  capture=False, seed=1, lookahead_ns=150)
    try:
        assert own.on_datagram(record(11, 0, 500, FRAME[:-4], kind=3), peer.getsockname()) == 0
        assert own.stats["bad_magic"] == 1 and own.in_by_link[11].link.expected == 0
    finally:
        own.sock.close()
        peer.close()


@pytest.mark.parametrize("direct", [True, False])
async def test_only_ports_handed_over_in_memory_leave_the_fcs_off(direct):
    """A frame leaves without its FCS only into an element of the same process in memory
    (``OutPort.defer_fcs``): on a socket every frame keeps it, so no record needs a kind for that."""
    async with emu.Cluster(SPEC, run=RunConfig(direct=direct, processes=2)) as net:
        ports = [p for el in net._local.elements for p in el.out_ports]
        assert all(p.local is not None for p in ports if p.defer_fcs)
        assert any(p.defer_fcs for p in ports) == direct and any(p.local is None for p in ports)
        res = await net.run(SCENARIO)
    assert res["h3"] is not None


def test_a_process_alone_reads_back_what_it_sent_itself_and_no_more():
    """``drain_own`` reads as many datagrams as the process sent itself, without a read that finds
    the socket empty; a stranger's datagram read in the place of one of them leaves that one to the
    next full ``drain``, and one lost ends the reading early (the domain's recovery takes over)."""
    batch = Batch("127.0.0.1", None, CID)
    got = []
    batch.on_datagram = lambda data, sender: got.append(bytes(data)) or 1
    stranger = _peer()
    try:
        batch._send(b"one", batch.addr)
        batch._send(b"two", batch.addr)
        assert batch.drain_own() == 2 and got == [b"one", b"two"]
        assert batch.drain_own() == 0  # nothing more expected: no read at all
        stranger.sendto(b"odd", batch.addr)
        batch._send(b"three", batch.addr)
        assert batch.drain_own() == 1 and got[2:] == [b"odd"]
        assert batch.drain() == 1 and got[3:] == [b"three"]
        batch._send(b"four", batch.addr)
        batch._self_unread += 1  # one the kernel dropped
        assert batch.drain_own() == 1 and batch._self_unread == 0
    finally:
        batch.close()
        stranger.close()


@pytest.mark.parametrize("python_reads", [False, True])
def test_frames_read_from_the_process_s_buffer_are_their_own_bytes(batched, python_reads):
    """With the compiled core every datagram is read into one buffer of the process's (``Batch.drain``),
    the next datagram read over it: each frame taken -- by the core's ``records``, or by Python's
    loop (``python_reads``: the core given no links to look up, so every record is Python's) --
    must be bytes of its own, unchanged by what is read after it."""
    el, batch, a, b = batched
    if python_reads:
        batch.in_list = []
    other = add_fcs(build_frame(1, 0, PacketType.MSG, b"another payload, longer than the first"))
    assert _arrive(batch, a, record(11, 0, 500) + record(11, 1, 510)) == 2
    assert _arrive(batch, b, record(13, 0, 520, other) + record(13, 1, 530, other)) == 2
    frames = sorted((e[0], e[3]) for e in el.heap)
    assert [f for _, f in frames] == [FRAME, FRAME, other, other]
    assert all(type(f) is bytes for _, f in frames)


def _read_own(monkeypatch, core):
    """A switch whose link 11 comes from its own process (a loop on the process's socket): datagrams
    it sent itself -- records in sequence, a gap, an empty datagram, the missing record -- read back
    by ``drain_own``, by the compiled core (``core``: ``recv_records``) or by Python; what it read."""
    from emu import native
    from emu.batch_conn import CONNECTED

    if not CONNECTED:
        pytest.skip("no sockets connected to peers here (Linux 5.4 or later)")
    monkeypatch.setattr(native, "CORE", core)
    batch = Batch("127.0.0.1", None, CID)
    dom = Domain(0, 1, RunConfig())
    dom.batch = batch
    outs = [OutPort(0, "s0-p0", 0, 10, "h0", "h0-nic0", 100, 10**11, peer_domain=0, peer_addr=batch.addr)]
    ins = [InPort(0, "s0-p0", 0, 11, "h0", "h0-nic0", peer_addr=batch.addr)]
    el = Element("s0", SwitchEngine("s0", 5, SwitchSpec(), [0]), cluster_id=CID, domain=dom, outs=outs, ins=ins,
                 capture=False, seed=1, lookahead_ns=150, batch=batch)
    dom.add(el)
    batch.index(dom.elements)
    batch.connect_peers()
    try:
        assert batch._own is not None
        reads = []
        for dgrams in ([record(11, 0, 500) + record(11, 1, 510), record(11, 3, 520) + record(11, 4, 530), b""],
                       [record(11, 2, 540), record(11, 3, 550) + record(11, 4, 560)]):
            for d in dgrams:
                batch._send(d, batch.addr)
            deadline = time.monotonic() + 30
            n = batch.udp_received + len(dgrams)
            got = 0
            while batch.udp_received < n and time.monotonic() < deadline:
                select.select([batch._own[0]], [], [], 0.5)
                batch._self_unread = n - batch.udp_received
                got += batch.drain_own()
            reads.append(got)
        got += batch.drain()  # (the NACK the gap sent, to this process: its link ends nowhere here)
        return (reads, sorted(el.heap), {k: el.stats[k] for k in ("gaps", "duplicates", "nacks_sent")},
                dict(batch.drops), batch.udp_received, batch._self_unread, el.in_by_link[11].link.expected,
                el.ins[0].rx_frames, el.ins[0].rx_bytes)
    finally:
        batch.close()


def test_what_a_process_reads_back_from_itself_the_core_reads_as_python_does(monkeypatch):
    """``drain_own`` with the compiled core reads the datagrams and their records in one call
    (``recv_records``) and leaves Python only what the core does not take -- here a gap (counted, a
    NACK sent) and an empty datagram (dropped as truncated): the same frames, counts and drops as
    Python's own reading of the same datagrams."""
    from emu import native

    if native.CORE is None:
        pytest.skip("the compiled core is not built here")
    core = _read_own(monkeypatch, native.CORE)
    pure = _read_own(monkeypatch, None)
    assert core == pure
    reads, heap, stats, drops, received, unread, expected, frames, nbytes = core
    assert reads == [2, 3] and len(heap) == 5 and stats["gaps"] == 2 and drops["truncated"] == 1
    assert expected == 5 and frames == 5 and unread == 0


def test_a_drain_inside_a_drain_reads_into_a_buffer_of_its_own(batched):
    """A drain while a datagram read into the process's buffer is being read (a retransmission to the
    process itself that fills its socket calls one) must not read over that datagram."""
    el, batch, a, b = batched
    outer = []
    read = batch.on_datagram

    def on_datagram(data, sender):
        if not outer:  # (the first datagram: another one comes, read by a drain inside this one)
            outer.append(bytes(data))
            b.sendto(record(13, 0, 600), batch.addr)
            select.select([batch.sock], [], [], 30)
            batch.drain()
            assert bytes(data) == outer[0]
        return read(data, sender)

    batch.on_datagram = on_datagram
    assert _arrive(batch, a, record(11, 0, 500) + record(11, 1, 510)) == 2
    assert el.in_by_link[11].link.expected == 2 and el.in_by_link[13].link.expected == 1 and len(el.heap) == 3
