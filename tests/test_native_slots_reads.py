"""The compiled core's reads of an element's ``mac`` and ``iq`` at their slots' offsets (credits.h:
Element.__slots__, found by element_setup) and of a switch engine's ``min_delay_ns`` from its instance
dict (window.h's element window): each checked where a wrong read would show."""

import pytest

import emu
from emu import element, native

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


@needs_core
@pytest.mark.parametrize("missing", ["mac", "iq"])
def test_element_setup_declines_a_class_without_the_mac_or_iq_slot(missing):
    """A class that keeps ``mac`` or ``iq`` elsewhere is refused (element.py then disables the core)
    and the offsets of the real Element stay as they were."""
    names = tuple(n for n in element.Element.__slots__ if n != missing)
    cls = type("NoSlot", (), {"__slots__": names})
    with pytest.raises(AttributeError):
        CORE.element_setup(cls)
    CORE.element_setup(element.Element)  # (what element.py did at import: unchanged)


@needs_core
@pytest.mark.parametrize("direct", [False, True], ids=["sockets", "direct"])
async def test_credits_carry_each_element_s_own_mac_read_in_its_slot(direct, monkeypatch):
    """Input-queued routers' credits, built in the core from the element's ``mac`` slot (each element
    its own, here not the usual 02:00 prefix): the same datagrams as pure Python, the new prefix in
    them, and the credit paths taken in the core (``credits_in``: the router's ``iq`` slot read True)."""
    from test_native_window import _datagrams

    from emu.wire.fabric import node_mac

    monkeypatch.setattr(element, "node_mac", lambda i: b"\x06\xc5" + node_mac(i)[2:])
    settings = ["switch.model=input_queued", "switch.vcs=2", "switch.flit_bytes=64", "switch.vc_buffer_bytes=512",
                "switch.credit_release=per_flit", "host.inject_vc=free", "link.latency_ns=10", "host.mtu_bytes=232"]
    before = CORE.counts()
    pure = await _datagrams(True, monkeypatch, settings, direct, "mesh:k=2,n=2")
    compiled = await _datagrams(False, monkeypatch, settings, direct, "mesh:k=2,n=2")
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert compiled == pure
    assert did["credits_out"] > 0 and did["credits_in"] > 0
    if not direct:
        assert any(b"\x06\xc5" in d for d in pure[0])


def _repeater(promise, delay: int, where: str):
    class Repeater:
        kind = "repeater"

        def __init__(self, nports):
            self.nports, self.timer, self.ports, self.stats = nports, None, None, {}
            if where in ("instance", "both"):
                self.min_delay_ns = promise

        def receive(self, frame, port, now):
            return [(p, frame, now + delay) for p in range(self.nports) if p != port]

    if where == "property":
        Repeater.min_delay_ns = property(lambda self: promise)
    elif where == "class":
        Repeater.min_delay_ns = promise
    elif where == "both":  # (the instance's value hides the class's)
        Repeater.min_delay_ns = 250 - promise
    return Repeater


@needs_core
@pytest.mark.parametrize("where", ["instance", "property", "class", "both"])
@pytest.mark.parametrize("promise", [100, 150], ids=["kept", "broken"])
async def test_a_switch_engine_s_promise_is_read_as_python_reads_it(promise, where, monkeypatch):
    """An engine's ``min_delay_ns`` (an instance attribute, a property or a plain value of its class, an
    instance attribute hiding a class value -- window.h's lookup_missing, each of its ways): a frame
    emitted sooner than it is the same error with the core as without, a kept one the same run."""
    from emu.build import ENGINES, register_engine
    from emu.topologies import star

    cls = _repeater(promise, 100, where)
    monkeypatch.setitem(ENGINES, "repeater", ENGINES.get("repeater"))  # (restored after the test)
    register_engine("repeater", lambda node, t, c: cls(t.nports(node.name)), min_delay=lambda spec: 100)
    seen = []
    for pure in (True, False):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        t = star(2)
        t.nodes["s0"].info["engine"] = "repeater"
        try:
            async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
                seen.append(await net["h0"].ping("h1"))
        except Exception as e:  # (the promise broken: the element's EngineError, however it surfaces)
            seen.append(("error", "promised minimum delay of 150 ns" in repr(e) or "promised minimum" in str(e)))
    assert seen[0] == seen[1]
    assert seen[0] == ("error", True) if promise == 150 else seen[0] > 0


@needs_core
async def test_a_handler_replaced_mid_run_in_the_same_table_is_called_at_once(monkeypatch):
    """The host's request handlers, kept by the core per the table's version (host.h's handler_of):
    Send's handler replaced in the same dict while the apps run (after sends the core has taken)
    is the one every later send meets, as in pure Python."""
    from emu.nodes.host import engine as host_engine

    monkeypatch.setitem(host_engine._HANDLERS, host_engine.Send, host_engine._HANDLERS[host_engine.Send])
    send = host_engine._HANDLERS[host_engine.Send]
    calls = []

    def counted(host, proc, op):
        calls.append(host.name)
        return send(host, proc, op)

    async def app(host, hosts):
        peer = hosts[1 - hosts.index(host.name)]
        for k in range(6):
            if k == 3 and host.name == hosts[0]:
                host_engine._HANDLERS[host_engine.Send] = counted  # (the same dict: its version moves)
            await host.send(peer, bytes([k]) * 300, tag=k)
        return [(await host.recv(tag=k)).data[0] for k in range(6)]

    seen = []
    for pure in (True, False):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        host_engine._HANDLERS[host_engine.Send] = send
        calls.clear()
        async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
            res = await net.run({h: (app, net.hosts) for h in net.hosts})
            seen.append((res, list(calls), net.metrics.end_ns - net.metrics.start_ns))
    assert seen[0] == seen[1]
    assert len(seen[0][1]) >= 3  # (h0's last three sends at least, and h1's after the swap)


@needs_core
@pytest.mark.parametrize("start", [0, 300, 2 ** 40, -7], ids=["small", "in-place", "wide", "negative"])
async def test_a_nic_s_message_counts_move_by_one_per_message_from_any_start(start, monkeypatch):
    """nic.h's count_add (a NIC's frames and messages sent and received, read once and written back
    while the stats dict is unchanged): from small, shared, in-place, wide and negative starting
    values the counts end where pure Python's do, one per message."""
    keys = ("frames_sent", "messages_sent", "frames_received", "messages_received")

    async def app(host, hosts):
        peer = hosts[1 - hosts.index(host.name)]
        for k in range(5):
            await host.send(peer, bytes([k]) * 100, tag=k)
        return [(await host.recv(tag=k)).data[0] for k in range(5)]

    seen = []
    before = CORE.counts()
    for pure in (True, False):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
            engines = [net._local.by_name[h].engine for h in net.hosts]
            for eng in engines:
                for key in keys:
                    eng.stats[key] = start
            res = await net.run({h: (app, net.hosts) for h in net.hosts})
            seen.append((res, [[eng.stats[key] for key in keys] for eng in engines]))
    assert seen[0] == seen[1]
    assert seen[0][1] == [[start + 5] * 4] * 2
    did = {k: v - before[k] for k, v in CORE.counts().items()}
    assert did["nic_sent"] == 10 and did["nic_messages"] == 10  # (every message the core's, both ways)
