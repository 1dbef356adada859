"""The compiled core's host path (emu/csrc/host.h: NicEngine.on_timer, Timers.run_due, Host.resume,
Host.deliver, the send and receive requests) is the twin of the Python it stands in for: every
request an application can make, every figure, every counter and every error text the same with
the core as in pure Python."""

import pytest

import emu
import emu.native as native
from emu.topologies import build
from emu.errors import AppError
from emu.nodes.host.api import Op

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")


class Unknown(Op):
    """A request no handler takes: the host refuses it (its handler path's failure)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Unknown()"


async def busy_app(host, hosts):
    """Every host request: sends with tags and traffic classes, receives filtered by source and tag
    (messages wait in the inbox while the app computes), try_recv, sleep, compute, ping, isend and
    wait -- the app's own timings are its result."""
    me = hosts.index(host.name)
    right, left = hosts[(me + 1) % len(hosts)], hosts[(me - 1) % len(hosts)]
    out = []
    for k in range(3):
        await host.send(right, bytes([k, me]) * (40 + 30 * k), tag=k, vc=k % 2)
    await host.compute(700)  # (the messages from the left arrive meanwhile: the inbox)
    for k in (2, 0, 1):  # (out of order: a receive picks its tag out of the inbox)
        m = await host.recv(left, k)
        out.append((m.src, m.tag, len(m.data), m.t_ns, host.now))
    out.append(await host.try_recv() is None)
    req = await host.isend(right, b"z" * 3000, tag=9)
    await host.wait(req)
    m = await host.recv(tag=9)
    out.append((m.src, len(m.data), host.now))
    await host.sleep(123)
    if me % 2 == 0:
        out.append(await host.ping(right))
    await host.send(left, b"late", tag=5)
    m = await host.recv(src=right)
    out.append((m.src, m.data, host.now, host.cpu_ns))
    return out


async def _run(pure: bool, monkeypatch, app, spec: str = "fattree:k=2,n=3", host: dict | None = None,
               direct: bool = True):
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    t = build(spec, settings={"host": host or {}})
    async with emu.Cluster(t, run=emu.RunConfig(direct=direct)) as net:
        try:
            res = await net.run({h: (app, net.hosts) for h in net.hosts})
        except AppError as e:
            res = ("failed", str(e), e.summary, e.failures)
        m = net.metrics
        return res, (m.hop_count, m.frames, m.end_ns - m.start_ns), await net.stats()


@needs_core
@pytest.mark.parametrize("host", [{"send_overhead_ns": 0, "recv_overhead_ns": 0},
                                  {"send_overhead_ns": 150, "recv_overhead_ns": 90, "nic_delay_ns": 40},
                                  {"noise": "periodic", "noise_interval_ns": 1000, "noise_duration_ns": 100},
                                  {"transport": "reliable"}],
                         ids=["no-overheads", "overheads", "noise", "transport"])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sockets"])
async def test_every_host_request_is_the_same_in_the_core(host, direct, monkeypatch):
    before = CORE.counts()
    pure = await _run(True, monkeypatch, busy_app, host=host, direct=direct)
    mid = CORE.counts()
    compiled = await _run(False, monkeypatch, busy_app, host=host, direct=direct)
    did = {k: v - mid[k] for k, v in CORE.counts().items()}
    assert mid == before  # (pure Python: the core untouched)
    assert compiled == pure
    assert all(len(r) >= 6 for r in pure[0].values())  # (every app ran to its end)
    assert did["host_steps"] > 0  # the applications stepped by the core (its resume)


async def failing_app(host, hosts):
    me = hosts.index(host.name)
    await host.send(hosts[(me + 1) % len(hosts)], b"x" * 10)
    await host.recv()
    if me == 1:
        raise ValueError(f"rank {me} gives up")  # the app's own error: its traceback
    if me == 2:
        await Unknown()  # a request no handler takes: refused, one line
    if me == 3:
        def deeper():
            return {}["missing"]
        deeper()
    return me


@needs_core
async def test_an_applications_error_reads_the_same_in_the_core(monkeypatch):
    """An app that raises, one that awaits a request no handler takes: the same failures, the same
    texts (the traceback from the app's own frames, not the host's), the other apps' results."""
    pure = await _run(True, monkeypatch, failing_app, spec="star:n=4")
    compiled = await _run(False, monkeypatch, failing_app, spec="star:n=4")
    assert compiled == pure
    status, text, summary, failures = compiled[0]
    assert status == "failed" and len(failures) == 3
    errors = {host: err for host, _, err in failures}
    assert errors["h1"].startswith("Traceback (most recent call last):") and "failing_app" in errors["h1"]
    assert "in resume" not in errors["h1"] and errors["h1"].endswith("ValueError: rank 1 gives up\n")
    assert "in deeper" in errors["h3"] and "KeyError: 'missing'" in errors["h3"]
    assert errors["h2"].startswith("TypeError: an application on h2 awaited")


@needs_core
async def test_a_replaced_method_is_called_with_the_core(monkeypatch):
    """A method the core stands in for, replaced on its class (as a test or a plug-in may): the
    core calls the replacement, as Python would."""
    from emu.nodes.host.engine import Host
    from emu.nodes.timers import Timers

    calls = {"deliver": 0, "run_due": 0}
    deliver, run_due = Host.deliver, Timers.run_due

    def counting_deliver(self, msg):
        calls["deliver"] += 1
        return deliver(self, msg)

    def counting_run_due(self, now):
        calls["run_due"] += 1
        return run_due(self, now)

    pure = await _run(True, monkeypatch, busy_app, spec="star:n=4")
    monkeypatch.setattr(Host, "deliver", counting_deliver)
    monkeypatch.setattr(Timers, "run_due", counting_run_due)
    compiled = await _run(False, monkeypatch, busy_app, spec="star:n=4")
    assert compiled == pure
    assert calls["deliver"] == 4 * 5 and calls["run_due"] > calls["deliver"]


async def chatter(host, hosts, n):
    peer = hosts[1 - hosts.index(host.name)]
    for k in range(n):
        await host.send(peer, b"c" * 100, tag=k)
        await host.recv()
    return host.now


@needs_core
async def test_a_counter_someone_holds_keeps_its_value(monkeypatch):
    """The core writes a counter's new value into its int in place only when nobody else holds that
    int (int_in_place): a value read before a run stays what it was, the counter goes on."""
    monkeypatch.setattr(native, "CORE", CORE)
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        h0 = net._local.by_name["h0"]
        port, stats = h0.out_ports[0], h0.engine.stats
        await net.run({h: (chatter, net.hosts, 300) for h in net.hosts})  # (over 256: ints of their own)
        held = (port.tx_frames, port.tx_bytes, stats["frames_sent"], stats["messages_received"])
        copies = tuple(int(str(v)) for v in held)
        assert min(copies) > 256
        await net.run({h: (chatter, net.hosts, 10) for h in net.hosts})
        assert held == copies  # (the ints held here were not written)
        now = (port.tx_frames, port.tx_bytes, stats["frames_sent"], stats["messages_received"])
        assert now == (copies[0] + 10, copies[1] + 10 * (copies[1] // copies[0]), copies[2] + 10, copies[3] + 10)


@needs_core
async def test_the_headers_the_core_makes_are_the_wires(monkeypatch):
    """The first message to a host makes its Ethernet header in the core (NicEngine._route's, kept
    in _heads): byte for byte what emu.wire makes."""
    from emu.wire import ETH_LEN, build_frame

    monkeypatch.setattr(native, "CORE", CORE)
    before = CORE.counts()["nic_sent"]
    async with emu.Cluster("star:n=3", run=emu.RunConfig(direct=True)) as net:
        await net.run({h: (chatter, ["h0", "h1"], 5) for h in ("h0", "h1")})
        engines = [net._local.by_name[h].engine for h in ("h0", "h1")]
    assert CORE.counts()["nic_sent"] - before == 10
    for eng in engines:
        assert list(eng._heads) == [1 - eng.node_id]
        assert eng._heads[1 - eng.node_id] == build_frame(eng.node_id, 1 - eng.node_id, 0, b"")[:ETH_LEN]


class _PyOp:
    """An Op awaited by Python's own generator (Op.__await__ as written in emu.nodes.nic.interface)."""

    def __await__(self):
        return (yield self)


@needs_core
@pytest.mark.parametrize("make", [Unknown, _PyOp], ids=["core", "python"])
def test_awaiting_a_request_yields_it_once_and_returns_the_answer(make):
    """Op.__await__ in the core (OpWait) does what the generator does: the request yielded to the
    driver once, the value sent back returned by the await; close and throw reach the app."""
    assert type(Unknown.__await__).__name__ == "method_descriptor"  # (the core's, set at import)

    async def app(log):
        op = make()
        got = await op
        log.append(got)
        try:
            await make()
        except KeyError as e:
            log.append(("caught", e.args))
        got = await make()
        return ("end", got)

    log = []
    coro = app(log)
    first = coro.send(None)
    assert isinstance(first, make)
    second = coro.send("answer")
    assert isinstance(second, make) and second is not first and log == ["answer"]
    third = coro.throw(KeyError("k"))
    assert isinstance(third, make) and log == ["answer", ("caught", ("k",))]
    with pytest.raises(StopIteration) as stop:
        coro.send(42)
    assert stop.value.value == ("end", 42)
    closed = app([])
    closed.send(None)
    closed.close()  # (GeneratorExit into the app where it waits)
    with pytest.raises(RuntimeError):
        closed.send(None)
    it = make().__await__()
    with pytest.raises(TypeError, match="just-started"):
        it.send(1)
    assert next(it) is not None
    with pytest.raises(StopIteration) as stop:
        it.send(7)
    assert stop.value.value == 7
    with pytest.raises(StopIteration) as stop:  # (ended: no value any more)
        it.send(8)
    assert stop.value.value is None
    it = make().__await__()
    next(it)
    with pytest.raises(KeyError):
        it.throw(KeyError("t"))
    with pytest.raises(StopIteration):
        next(it)


class _BadTag:
    """A receive's tag whose comparison raises (the app's own object)."""

    def __eq__(self, other):
        raise ValueError("tag compare refused")

    __hash__ = object.__hash__


class _Ns(int):
    """An int subclass as an overhead (HostSpec takes it)."""


async def odd_app(host, hosts):
    me = hosts.index(host.name)
    await host.send(hosts[(me + 1) % len(hosts)], b"x", tag=1)
    await host.sleep(100_000)  # (the message from the left waits in the inbox)
    if me == 0:
        return await host.recv(tag=_BadTag())  # Recv.matches raises: the app fails, the run goes on
    if me == 1:
        return await _Listed()  # a handler that answers with a list: unpacked as Python does
    if me == 2:
        return await _Forgot()  # a handler that returns nothing: the app fails with Python's words
    m = await host.recv()
    return m.tag, host.now, host.cpu_ns


class _Listed(Op):
    __slots__ = ()

    def __repr__(self) -> str:
        return "_Listed()"


class _Forgot(Op):
    __slots__ = ()

    def __repr__(self) -> str:
        return "_Forgot()"


@needs_core
async def test_odd_requests_and_settings_are_pythons_in_the_core(monkeypatch):
    """Review findings: a receive whose tag compares by the app's own code, handlers answering with
    a list or nothing, overheads given as an int subclass -- the same failures and figures."""
    from emu.nodes.host import engine as host_engine

    monkeypatch.setitem(host_engine._HANDLERS, _Listed, lambda host, proc, op: [True, "list answer"])
    monkeypatch.setitem(host_engine._HANDLERS, _Forgot, lambda host, proc, op: None)
    host = {"recv_overhead_ns": _Ns(50), "send_overhead_ns": _Ns(70)}
    pure = await _run(True, monkeypatch, odd_app, spec="star:n=4", host=host)
    compiled = await _run(False, monkeypatch, odd_app, spec="star:n=4", host=host)
    assert compiled == pure
    failures = {h: err for h, _, err in pure[0][3]}
    assert failures == {"h0": "ValueError: tag compare refused",
                        "h2": "TypeError: cannot unpack non-iterable NoneType object"}


@needs_core
async def test_a_method_replaced_on_a_class_or_a_nic_is_called_with_the_core(monkeypatch):
    """Timers.at, Host._busy and NicEngine._route replaced on their classes, a NIC's on_timer set on
    that one NIC, the host module's handler table rebound: the core calls each as Python does."""
    import collections

    from emu.nodes.host import engine as host_engine
    from emu.nodes.host.engine import Host
    from emu.nodes.nic.engine import NicEngine
    from emu.nodes.timers import Timers

    calls = collections.Counter()

    def counting(cls, name):
        orig = getattr(cls, name)

        def wrapper(self, *a, **k):
            calls[name] += 1
            return orig(self, *a, **k)
        monkeypatch.setattr(cls, name, wrapper)

    async def run(pure):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        calls.clear()
        t = build("star:n=2", settings={"host": {"send_overhead_ns": 100, "recv_overhead_ns": 50}})
        async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
            eng = net._local.by_name["h0"].engine
            orig = eng.on_timer

            def spy(now):
                calls["h0.on_timer"] += 1
                return orig(now)
            eng.on_timer = spy  # (on this NIC only: its __dict__)
            res = await net.run({h: (chatter, net.hosts, 3) for h in net.hosts})
        return res, dict(calls)

    for cls, name in ((Timers, "at"), (Host, "_busy"), (NicEngine, "_route")):
        counting(cls, name)
    handlers = dict(host_engine._HANDLERS)
    send = handlers[host_engine.Send]
    handlers[host_engine.Send] = lambda host, proc, op: (calls.update(["handler"]), send(host, proc, op))[1]
    monkeypatch.setattr(host_engine, "_HANDLERS", handlers)
    pure, compiled = await run(True), await run(False)
    assert compiled == pure
    assert set(pure[1]) == {"at", "_busy", "_route", "h0.on_timer", "handler"} and pure[1]["handler"] == 6


async def long_messages(host, hosts):
    """Messages of many frames both ways (one over 1 MiB: handed over as its buffer), interleaved."""
    me = hosts.index(host.name)
    peer = hosts[1 - me]
    sizes = (9000, 1 << 21, 20000)
    for k, size in enumerate(sizes):
        await host.send(peer, bytes((i * 7 + k + me) & 0xFF for i in range(256)) * (size // 256), tag=k)
    got = []
    for k in (2, 0, 1):
        m = await host.recv(tag=k)
        want = bytes((i * 7 + k + 1 - me) & 0xFF for i in range(256)) * (sizes[k] // 256)
        got.append((k, len(m.data), type(m.data).__name__, m.data == want, m.t_ns, m.hops))
    return got


@needs_core
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sockets"])
async def test_long_messages_are_reassembled_in_the_core_as_in_python(direct, monkeypatch):
    """The later frames of a long message go into its reassembly buffer in the core (the first one
    makes it in Python): the same messages, times, counters; one over 1 MiB handed over as its buffer."""
    host = {"send_overhead_ns": 40, "recv_overhead_ns": 30}
    before = CORE.counts()
    pure = await _run(True, monkeypatch, long_messages, spec="star:n=2", host=host, direct=direct)
    mid = CORE.counts()
    compiled = await _run(False, monkeypatch, long_messages, spec="star:n=2", host=host, direct=direct)
    did = {k: v - mid[k] for k, v in CORE.counts().items()}
    assert mid == before and compiled == pure
    for res in pure[0].values():
        assert [r[:4] for r in res] == [(2, 19968, "bytes", True), (0, 8960, "bytes", True),
                                        (1, 1 << 21, "bytearray", True)]
    from emu.config import HostSpec

    mtu = HostSpec().mtu_bytes
    frames = sum(-(-n // mtu) for n in (8960, 1 << 21, 19968))
    assert did["nic_segments"] == 2 * (frames - 3)  # (every frame but each message's first)
