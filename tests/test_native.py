"""The compiled core (``emu._core``, ``emu.native``) is the pure-Python path's exact twin.

Each of its functions is checked against the Python code it stands in for, on the same inputs, and
whole runs are compared counter for counter with the core on and off. Without a compiler the core
is not built: then these tests say so and skip, and everything runs pure Python.
"""

import heapq
import random
import zlib
from collections import deque

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import emu
from emu import native
from emu.element import CLEAN, NOFCS, POOL
from emu.port import OutPort
from emu.topologies import build
from emu.wire import build_frame
from emu.port import PRIO_OFF
from emu.wire.framing import framing

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def test_in_use_says_which_path():
    assert native.in_use() == ("compiled" if CORE is not None else "pure-python")


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000))
def test_crc32_is_zlibs(data):
    assert CORE.crc32(data) == zlib.crc32(data)


@needs_core
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50), st.integers(0, 3)), max_size=200))
def test_heap_is_laid_out_as_heapq_lays_it_out(ops):
    mine, ref, seq = [], [], 0
    for push, t, port in ops:
        if push or not ref:
            seq += 1
            item = (t, port, seq, b"x", 0)
            CORE.heappush(mine, item)
            heapq.heappush(ref, item)
        else:
            assert CORE.heappop(mine) == heapq.heappop(ref)
        assert mine == ref  # the same layout, not only the same order


def _port(**kw) -> OutPort:
    return OutPort(index=0, name="p", iface=0, link_id=0, peer="x", peer_port_name="x-p", latency_ns=100,
                   bandwidth_bps=10_000_000_000, **kw)


def _state(p: OutPort) -> tuple:
    return (p.free_at, p.busy_ns, list(p.queued), p.queued_bytes, p.peak_queue_frames, p.peak_queue_bytes,
            list(p.pending), p.overtakes)


@needs_core
@pytest.mark.parametrize("defer", [False, True])
def test_enqueue_is_the_ports(defer):
    """A random stream of frames, some of priority 1 (which the core leaves to Python when they may
    overtake): the port ends in the same state, frame for frame, as with Python's enqueue alone."""
    rng = random.Random(7)
    a, b = _port(defer_fcs=defer), _port(defer_fcs=defer)
    at = 0
    declined = 0
    for k in range(300):
        at += rng.choice([0, 0, 50, 400, 2000])
        frame = build_frame(1, 2, 1, bytes(rng.randrange(0, 1500)), prio=1 if rng.random() < 0.1 else 0)
        start = CORE.enqueue(a, frame, at)
        if start is None:
            declined += 1
            start = a.enqueue(frame, at)
        assert start == b.enqueue(frame, at)
        assert _state(a) == _state(b)
    assert 0 < declined < 100  # priority frames behind others: Python's; the rest the core's


@needs_core
@pytest.mark.parametrize("defer", [False, True])
def test_enqueue_takes_lazy_frames_as_the_port_does(defer):
    """A long message's lazy frames (made from the sender's buffer when the port sends them), some
    behind others on a priority port (their priority byte read from the source's header, as enqueue
    reads it: 0, so the core's; a priority frame Python's): the port ends as with Python's enqueue
    alone, the same placeholders (FCS asked for or not) queued."""
    from emu.nodes.nic.outgoing import Outgoing

    def state(p):
        return _state(p)[:-2] + ([(s, a, f.key, f.fcs, pool) for s, a, f, pool in p.pending], p.overtakes)

    rng = random.Random(11)
    a, b = _port(defer_fcs=defer, priority=True), _port(defer_fcs=defer, priority=True)
    head = build_frame(1, 2, 0, b"")[:14]
    at = declined = 0
    for k in range(20):
        at += rng.choice([0, 300, 5000])
        data = bytes(rng.randrange(1, 9000))
        fa = Outgoing(head, 1, 2, 0, k, 0, data, 1024).frames()
        fb = Outgoing(head, 1, 2, 0, k, 0, data, 1024).frames()
        for x, y in zip(fa, fb):
            start = CORE.enqueue(a, x, at)
            if start is None:
                declined += 1
                start = a.enqueue(x, at)
            assert start == b.enqueue(y, at)
            assert state(a) == state(b)
    assert declined == 0 and len(b.pending) > 20  # (every frame of priority 0: the core's, behind others too)

    class Urgent(Outgoing):  # a source whose frames carry priority 1 (its header's prio byte)
        def head(self, off):
            h = bytearray(super().head(off))
            h[PRIO_OFF] = 1
            return bytes(h)

    x, y = (Urgent(head, 1, 2, 0, 99, 0, bytes(3000), 1024).frames() for _ in range(2))
    assert CORE.enqueue(a, x[0], at) is None  # (behind the queue: it may overtake -- Python's)
    assert a.enqueue(x[0], at) == b.enqueue(y[0], at) and state(a) == state(b)


@needs_core
@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("name,head", [("flit", 0), ("flit", 64), ("qsnet", 0), ("qsnet", 256), ("ethernet", 64)])
def test_enqueue_framed_and_into_an_input_queued_router_is_the_ports(name, head, defer):
    """A port whose frames' modelled length is not their bytes (mesh flits, QsNet packets) and one into
    an input-queued router (``head_bytes``: the frame arrives with its head, the frame on the line
    recorded for segment cut-through): random frames, QsNet packets and host messages, some of
    priority 1; the core takes what it computes (not a body carried in a QsNet packet, not a frame that
    may cut in) and the port ends as with Python's enqueue alone, its ``line`` too."""
    from emu.wire.fabric import PacketType

    rng = random.Random(13)
    a, b = (_port(defer_fcs=defer, framing=framing(name), head_bytes=head, priority=True) for _ in range(2))
    at = taken = declined = 0
    for k in range(300):
        at += rng.choice([0, 0, 50, 400, 2000])
        pt = rng.choice([int(PacketType.QPKT), int(PacketType.QACK), 1])
        frame = build_frame(1, 2, pt, bytes(rng.randrange(0, 1200)), prio=1 if rng.random() < 0.1 else 0)
        start = CORE.enqueue(a, frame, at)
        if start is None:
            declined += 1
            start = a.enqueue(frame, at)
        else:
            taken += 1
        assert start == b.enqueue(frame, at)
        assert _state(a) == _state(b) and a.line == b.line
    assert taken > 100 and declined > 0


@needs_core
def test_enqueue_leaves_other_ports_to_python():
    frame = build_frame(1, 2, 1, b"abc")
    assert CORE.enqueue(_port(up=False), frame, 0) is None  # a link down: _emit's drop path
    assert CORE.enqueue(_port(framing=framing("qsnet")), frame, 0) is None  # a message carried in a QsNet packet
    assert CORE.enqueue(_port(tracer=object()), frame, 0) is None  # traced
    assert CORE.enqueue(_port(), bytearray(frame), 0) is None  # not bytes (nor a lazy frame)


@needs_core
@pytest.mark.parametrize("flags", [CLEAN, CLEAN | NOFCS])
def test_hand_over_is_the_loop_it_replaces(flags):
    rng = random.Random(3)
    pend = deque((t, t + 100, bytes(rng.randrange(60, 200)), rng.random() < 0.3) for t in range(0, 5000, 97))
    ref_pend, heap, ref_heap = deque(pend), [], []
    got = CORE.hand_over(pend, heap, 5, 0xFFFFFFF0, flags, 3000, POOL)
    n = nbytes = 0
    seq = 0xFFFFFFF0
    while ref_pend and ref_pend[0][1] < 3000:
        _, arrival, frame, pool = ref_pend.popleft()
        heapq.heappush(ref_heap, (arrival, 5, seq, frame, flags | POOL if pool else flags))
        seq = (seq + 1) & 0xFFFFFFFF
        n += 1
        nbytes += len(frame)
    assert got == (n, nbytes, seq, arrival)
    assert heap == ref_heap and pend == ref_pend and seq < 0x20  # (the sequence wrapped)


async def _run(direct: bool, pure: bool, monkeypatch, spec: str = "fattree:k=4,n=2",
               host: dict | None = None, switch: dict | None = None) -> tuple:
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    settings = {"host": host or {"send_overhead_ns": 0, "recv_overhead_ns": 0}}
    if switch:
        settings["switch"] = switch
    t = build(spec, settings=settings)

    async def alltoall(host, hosts):
        me = hosts.index(host.name)
        for k in range(3):
            for s in range(1, len(hosts)):
                await host.send(hosts[(me + s) % len(hosts)], bytes([k]) * (200 + 300 * s), tag=k)
        for k in range(3):
            for s in range(1, len(hosts)):
                msg = await host.recv(hosts[(me - s) % len(hosts)], k)
                assert msg.data == bytes([k]) * (200 + 300 * s)

    async with emu.Cluster(t, run=emu.RunConfig(direct=direct)) as net:
        await net.run({h: (alltoall, net.hosts) for h in net.hosts})
        m = net.metrics
        return (m.hop_count, m.frames, m.end_ns - m.start_ns), await net.stats(), await net.process_stats()


@needs_core
@pytest.mark.parametrize("direct", [False, True], ids=["sockets", "direct"])
async def test_a_run_is_the_same_with_and_without_the_core(direct, monkeypatch):
    """Every figure and every counter of every element and port (switch forwarding, queues, peaks,
    busy time) the same with the compiled core as in pure Python."""
    before = CORE.counts()
    pure = await _run(direct, True, monkeypatch)
    assert CORE.counts() == before  # (pure Python: the core untouched)
    compiled = await _run(direct, False, monkeypatch)
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert compiled == pure
    # the core did the bulk of it: every switch crossing of a data frame, the hosts' enqueues
    crossings, frames, _ = compiled[0]
    assert did["forwarded"] == crossings - frames  # (a frame crosses one link more than it crosses switches)
    assert did["enqueued"] >= frames
    assert (did["handed_over"] == crossings) if direct else did["handed_over"] == 0
    # on sockets every frame became a record (its group given to the process's socket by
    # transmit_local, never by Python's loop) and was read back in the core
    assert (did["taken"], did["batched"], did["records"]) == ((0, 0, 0) if direct else (crossings,) * 3)
    if not direct:  # (the same UDP datagrams: groups reached the batch in Python's order and cuts)
        assert compiled[2][0]["udp_sent"] > 0
    assert did["element_windows"] > 0  # (the hosts' windows of frames and timers in the core's loop)
    # every one-frame message received by the core's NIC path (the longer ones reassembled in Python)
    from emu.config import HostSpec

    one_frame = sum(1 for s in range(1, 16) if 200 + 300 * s <= HostSpec().mtu_bytes)
    assert 0 < one_frame < 15 and did["nic_messages"] == 3 * 16 * one_frame
    # ... and sent by its NIC path, the first to each host too (its Ethernet header made there)
    assert did["nic_sent"] == 3 * 16 * one_frame


@needs_core
@pytest.mark.parametrize("direct", [False, True], ids=["sockets", "direct"])
@pytest.mark.parametrize("spec,switch", [("fattree:k=4,n=2,switch_delay_ns=300", {"cut_through": True}),
                                         ("qsnet:nodes=16", None)], ids=["cut-through", "qsnet"])
async def test_elements_windows_of_frames_and_timers_are_the_same_in_the_core(spec, switch, direct, monkeypatch):
    """Hosts with overheads and a NIC delay (engine timers between frames in a window) beside
    switches that are not static tables (cut-through, QsNet's adaptive routing): the core runs
    their windows' frames and timers by their engines, and every figure and counter is pure
    Python's."""
    host = {"send_overhead_ns": 150, "recv_overhead_ns": 90, "nic_delay_ns": 40}
    before = CORE.counts()
    pure = await _run(direct, True, monkeypatch, spec, host, switch)
    compiled = await _run(direct, False, monkeypatch, spec, host, switch)
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert compiled == pure
    assert did["element_windows"] > 0
    # (QsNet's hosts too: their windows with port events -- credits on the links -- run in the core's loop,
    # and the messages that are one QsNet packet reach its NIC path)
    assert did["nic_messages"] > 0


@needs_core
async def test_a_nic_with_a_transport_receives_in_python_with_the_same_figures(monkeypatch):
    """The reliable transport's acknowledgements and duplicate checks are the NIC's Python: the
    core's one-frame path declines every message, and the run is pure Python's."""
    host = {"send_overhead_ns": 0, "recv_overhead_ns": 0, "transport": "reliable"}
    before = CORE.counts()
    pure = await _run(True, True, monkeypatch, host=host)
    compiled = await _run(True, False, monkeypatch, host=host)
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert compiled == pure
    assert did["nic_messages"] == did["nic_sent"] == 0 and did["element_windows"] > 0


@needs_core
def test_take_makes_the_senders_datagrams():
    """Records cut into datagrams at the same places, the same bytes, the same retained copies and
    sequence numbers (wrapping) as LinkSender.take."""
    from emu.link import LinkSender

    rng = random.Random(11)
    pend = deque((t, t + 100, bytes(rng.randrange(0, 256) for _ in range(rng.randrange(60, 9000))), rng.random() < 0.3)
                 for t in range(0, 40_000, 211))
    a, b = LinkSender(0xC0FFEE, 7), LinkSender(0xC0FFEE, 7)
    a.seq = b.seq = 0xFFFFFFF0
    pa, pb = deque(pend), deque(pend)
    got = CORE.take(a, pa, 30_000, 0x12345)
    want = b.take(pb, 30_000, 0x12345)
    assert got == want and len(got[0]) > 3  # (several datagrams: cut at MAX_DATAGRAM)
    assert list(a.retained) == list(b.retained) and a.seq == b.seq < 0x1000 and pa == pb
    assert CORE.take(a, pa, 0, 1) == b.take(pb, 0, 1) == ([], 0, 0, 0)  # nothing due


@needs_core
def test_crc32_by_table_too():
    """Without carry-less multiplication (an older CPU, or EMU_NO_CLMUL=1) the table path alone."""
    import os
    import subprocess
    import sys

    code = ("import os, zlib, emu.element, emu.native as n\n"
            "for k in [0, 1, 7, 8, 63, 64, 65, 1074, 9000]:\n"
            "    b = os.urandom(k)\n"
            "    assert n.CORE.crc32(b) == zlib.crc32(b), k\n"
            "print(n.in_use())\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "EMU_NO_CLMUL": "1"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "compiled", out.stderr


@needs_core
@pytest.mark.parametrize("env", [{}, {"EMU_NO_CLMUL8": "1"}])
def test_crc32_folds_of_eight_and_of_four(env):
    """Eight blocks folded at a time (AVX, the default where there is one) and four (EMU_NO_CLMUL8=1),
    at every length about their edges (64, 128, 192 bytes and the 16-byte tails), from odd offsets."""
    import os
    import subprocess
    import sys

    code = ("import os, zlib, emu.element, emu.native as n\n"
            "for k in [*range(48, 272), 1074, 1102, 9000]:\n"
            "    b = os.urandom(k + 3)\n"
            "    for v in (b[:k], memoryview(b)[3:]):\n"
            "        assert n.CORE.crc32(v) == zlib.crc32(v), k\n"
            "print(n.in_use())\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "compiled", out.stderr


@needs_core
@pytest.mark.parametrize("length", range(14, 32))
def test_enqueue_short_frames_as_python(length):
    """A frame too short to hold a fabric header: Python reads its priority byte on the frame as it
    goes on the wire (an FCS byte, for the shortest), so such frames are Python's; either way the
    port ends as Python's alone would leave it."""
    a, b = _port(), _port()
    for p in (a, b):
        p.enqueue(bytes(200), 0)
        p.enqueue(bytes(200), 0)
    for k in range(256):  # (a frame whose byte at the priority offset, FCS included, is set)
        frame = bytes([k]) * length
        start = CORE.enqueue(a, frame, 10)
        if start is None:
            start = a.enqueue(frame, 10)
        assert start == b.enqueue(frame, 10)
        assert _state(a) == _state(b)


@needs_core
def test_take_takes_bytes_like_frames_as_join_does():
    from emu.link import LinkSender

    pend = deque([(0, 10, bytearray(b"\x01" * 70), False), (0, 20, memoryview(b"\x02" * 80), True)])
    a, b = LinkSender(1, 2), LinkSender(1, 2)
    assert CORE.take(a, deque(pend), 100, 3) == b.take(deque(pend), 100, 3)
    assert list(a.retained) == list(b.retained)


def test_a_core_of_another_interface_is_not_used(monkeypatch, tmp_path):
    """A compiled core built from other sources (its API number, a function missing) is refused."""
    import types

    fake = types.ModuleType("emu._core")
    fake.API = native.API + 1
    fake.__file__ = str(tmp_path / "_core.so")  # (built after its sources)
    (tmp_path / "_core.so").write_bytes(b"")
    monkeypatch.setitem(__import__("sys").modules, "emu._core", fake)
    monkeypatch.setattr(emu, "_core", fake, raising=False)
    monkeypatch.delenv("EMU_PURE", raising=False)
    assert native._load() is None
    fake.API = native.API
    assert native._load() is None  # (its functions missing)
    for f in native.FUNCTIONS:
        setattr(fake, f, None)
    assert native._load() is fake


@needs_core
def test_forget_drops_what_python_drops():
    from emu.link import LinkSender

    ports = [_port(link=LinkSender(1, k)) for k in range(4)]
    twins = [_port(link=LinkSender(1, k)) for k in range(4)]
    for ps in (ports, twins):
        for k, p in enumerate(ps):
            for w in range(k, 9, 2):
                p.link.retained.append((w, w, w, b"d%d" % w))
    CORE.forget(ports, 5)
    for p in twins:
        p.link.forget(5)
    assert [list(p.link.retained) for p in ports] == [list(p.link.retained) for p in twins]
    assert [len(p.link.retained) for p in ports] == [2, 1, 2, 1]


@needs_core
def test_forget_elements_forgets_each_elements_ports_or_calls_its_method():
    """Domain._window's ``el.forget(w)`` for every element of a window two back: an Element's output
    ports in the core (as its method does), anything else by its own method."""
    from emu.element import Element
    from emu.link import LinkSender

    class Other:
        def __init__(self):
            self.calls = []

        def forget(self, w):
            self.calls.append(w)

    el = Element.__new__(Element)  # (only its output ports matter here)
    el.out_ports = [_port(link=LinkSender(1, k)) for k in range(3)]
    twins = [_port(link=LinkSender(1, k)) for k in range(3)]
    for ps in (el.out_ports, twins):
        for k, p in enumerate(ps):
            for w in range(k, 9, 2):
                p.link.retained.append((w, w, w, b"d%d" % w))
    other = Other()
    CORE.forget_elements([el, other], 4)
    for p in twins:
        p.link.forget(4)
    assert [list(p.link.retained) for p in el.out_ports] == [list(p.link.retained) for p in twins]
    assert [len(p.link.retained) for p in el.out_ports] == [2, 2, 2]  # (windows 5..8 of 0..8 kept)
    assert other.calls == [4]
    with pytest.raises(TypeError):
        CORE.forget_elements([el], "4")


@needs_core
def test_forget_elements_holds_the_ports_it_goes_through():
    """An element's output ports stay the core's while a retained queue runs Python code that
    rebinds them (review: a freed list was read): every port is forgotten, as Python's loop does."""
    from emu.element import Element
    from emu.link import LinkSender

    el = Element.__new__(Element)
    calls = []

    class Meddling(list):
        def popleft(self):
            calls.append(1)
            el.out_ports = None
            return self.pop(0)

    el.out_ports = [_port(link=LinkSender(1, k)) for k in range(3)]
    ports = list(el.out_ports)
    for p in ports:
        p.link.retained = Meddling([(0, 0, 0, b"x")])
    CORE.forget_elements([el], 4)
    assert len(calls) == 3 and all(not p.link.retained for p in ports)


async def test_an_engine_without_on_timer_runs_as_in_pure_python(monkeypatch):
    """An engine whose timer is always None need not have on_timer: the core asks for it only when
    a timer fires, as Element._fire_timer does (review: it was asked at every window)."""
    from emu.build import ENGINES, register_engine
    from emu.topologies import star

    class Repeater:
        kind = "repeater"

        def __init__(self, nports):
            self.nports, self.min_delay_ns, self.timer, self.ports, self.stats = nports, 100, None, None, {}

        def receive(self, frame, port, now):
            return [(p, frame, now + 100) for p in range(self.nports) if p != port]

    monkeypatch.setitem(ENGINES, "repeater", ENGINES.get("repeater"))  # (restored after the test)
    register_engine("repeater", lambda node, t, c: Repeater(t.nports(node.name)), min_delay=lambda spec: 100)
    rtts = []
    for pure in (True, False):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        t = star(2)
        t.nodes["s0"].info["engine"] = "repeater"
        async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
            rtts.append(await net["h0"].ping("h1"))
    assert rtts[0] == rtts[1] > 0


@needs_core
async def test_the_domains_loop_in_the_core_waits_for_unsent_datagrams(monkeypatch):
    """An element whose datagrams found no room in its socket (its own socket: no batch) is flushed
    and scheduled by Python between two calls of the core's loop; the run is the same as pure
    Python's, and the core ran the switches' windows whole."""
    from emu.element_links import Links

    send = Links._sendto
    count = [0]

    def sometimes_full(self, data, addr, lossy=True):  # as a BlockingIOError leaves it: for flush_unsent
        count[0] += 1
        if count[0] % 3 == 0 and self.batch is None:
            self.stats["datagrams_sent"] += 1
            self.unsent.append((data, addr))
            return
        send(self, data, addr, lossy)

    monkeypatch.setattr(Links, "_sendto", sometimes_full)

    async def run(pure: bool):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        count[0] = 0
        t = build("fattree:k=4,n=2", settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0}})

        async def shift(host, hosts):
            me = hosts.index(host.name)
            for s in range(1, len(hosts)):
                await host.send(hosts[(me + s) % len(hosts)], bytes([s]) * 700)
            for s in range(1, len(hosts)):
                assert (await host.recv(hosts[(me - s) % len(hosts)])).data == bytes([s]) * 700

        async with emu.Cluster(t, run=emu.RunConfig(direct=False, batch=False)) as net:
            await net.run({h: (shift, net.hosts) for h in net.hosts})
            m = net.metrics
            return (m.hop_count, m.frames, m.end_ns - m.start_ns), await net.stats(), count[0]

    pure = await run(True)
    before = CORE.counts()
    compiled = await run(False)
    assert compiled == pure and pure[2] >= 3  # (some datagrams waited)
    assert CORE.counts()["windows"] > before["windows"]
