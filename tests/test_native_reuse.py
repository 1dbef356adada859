"""The compiled core's reuse of heap records and domain heap entries (``emu/csrc/heap.h``: hp_keep,
hp_record, hp_dom_entry): a record (arrival, index, seq, frame, flags) popped from an element's heap,
or a domain's (time, index) entry popped by ``due``, is made again for the next one only when nobody
else holds it. A run with the core equals the pure-Python run (the specification) while Python holds
some of those tuples the whole run: each held tuple -- and each int in it -- keeps the value it had
when taken, and the core did make tuples again in that same run (the test is not vacuous)."""

import pytest

import emu
from emu import native
from emu.domain import Domain

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _value(t: tuple) -> tuple:
    """``t``'s value, copied: its ints as text (an int written in place would change under a
    reference), its bytes copied"""
    return tuple(bytes(bytearray(x)) if isinstance(x, bytes) else repr(x) for x in t)


async def _run(pure: bool, direct: bool, monkeypatch, held: list | None, spec: str = "fattree:k=2,n=3") -> tuple:
    from emu.config import parse_settings
    from emu.topologies import build

    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    if held is not None:  # every other window: the domain's entries and the elements' records held
        run, seen = Domain._run, [0]

        async def spy(self, w, t0, t1, sent):
            seen[0] += 1
            if seen[0] % 2:
                held.extend(("entry", e, _value(e)) for e in self._heap)
                for el in self.elements:
                    held.extend(("record", r, _value(r)) for r in el.heap)
                    for p in el.outs:  # (an output port's queued entries: (done, bytes))
                        held.extend(("queued", q, _value(q)) for q in p.queued)
                        # (a link's retained datagrams on sockets: (window, first, last, datagram))
                        held.extend(("retained", r, _value(r)) for r in getattr(p.link, "retained", ()) or ())
            return await run(self, w, t0, t1, sent)
        monkeypatch.setattr(Domain, "_run", spy)

    async def ping(host, hosts):
        me = hosts.index(host.name)
        for s in range(1, len(hosts)):
            await host.send(hosts[(me + s) % len(hosts)], bytes([s]) * 1500 * s, tag=1)
        for s in range(1, len(hosts)):
            await host.recv(hosts[(me - s) % len(hosts)], 1)

    t = build(spec, settings=parse_settings(["switch.model=output_queued"]))  # (fattree:k=2,n=3: 8 hosts, 20 switches)
    async with emu.Cluster(t, run=emu.RunConfig(seed=3, direct=direct)) as net:
        await net.run({h: (ping, net.hosts) for h in net.hosts})
        return net.metrics.as_dict(), await net.stats()


@needs_core
@pytest.mark.parametrize("direct", [True, False])
async def test_held_records_and_entries_are_never_made_again(monkeypatch, direct):
    held: list = []
    before = CORE.counts()
    core = await _run(False, direct, monkeypatch, held)
    did = {k: CORE.counts()[k] - before[k] for k in ("records_reused", "entries_reused", "queued_reused")}
    monkeypatch.undo()
    pure = await _run(True, direct, monkeypatch, None)
    assert core == pure
    assert core[0]["hop_count"] > 0
    kinds = {"entry", "record", "queued"} | (set() if direct else {"retained"})
    assert {kind for kind, _, _ in held} == kinds  # (some of each held while the core ran)
    for _, t, v in held:
        assert _value(t) == v  # (held: never made again, nor an int of it written)
    assert all(v > 0 for v in did.values()), did  # (the others were, in this run)


@needs_core
def test_counts_report_the_reuse():
    c = CORE.counts()
    assert all(type(c[k]) is int for k in ("records_reused", "entries_reused", "queued_reused"))


@needs_core
async def test_an_engine_s_attributes_set_mid_run_are_read_again(monkeypatch):
    """The window's reads of an engine's instance attributes (``plain_table``, ``cut_through``,
    ``min_delay_ns``: csrc/window.h lookup_missing) are kept per instance dict and its version: a VC
    selector set on every switch mid-run (its ``plain_table`` None: each frame by Python's receive,
    which calls it) and taken away later (the table again: the core's switch windows again) is
    honoured at once -- the selector called as often as in the pure-Python run, the same figures."""
    from emu.nodes.host.engine import Host
    from emu.switch.forward import SwitchEngine

    made: list = []
    post = SwitchEngine.__post_init__

    def post_kept(self):
        post(self)
        made.append(self)

    monkeypatch.setattr(SwitchEngine, "__post_init__", post_kept)
    deliver = Host.deliver
    n, calls, at_reset = [0], [0], [None]

    def sel(i, o, v):  # (keeps the VC: the figures stay the plain run's)
        calls[0] += 1
        return v

    def delivered(self, msg):
        n[0] += 1
        if n[0] in (10, 30):
            for e in made:
                e.vc_select = sel if n[0] == 10 else None
            if n[0] == 30 and native.CORE is not None:
                at_reset[0] = CORE.counts()["windows"]
        return deliver(self, msg)

    monkeypatch.setattr(Host, "deliver", delivered)
    comp = await _run(False, True, monkeypatch, None)
    comp_calls, comp_n, windows = calls[0], n[0], CORE.counts()["windows"]
    made.clear()
    n[0] = calls[0] = 0
    pure = await _run(True, True, monkeypatch, None)
    assert comp_n > 30 and comp_n == n[0]
    assert calls[0] > 0 and comp_calls == calls[0]  # (every frame between the two sets met the selector)
    assert windows > at_reset[0]  # (the core's switch windows again after it went)
    assert comp == pure


@needs_core
@pytest.mark.parametrize("direct", [True, False])
async def test_a_switch_with_more_busy_ports_than_the_core_keeps_in_place(monkeypatch, direct):
    """An element's busy ports are held in place by the core's transmit (csrc/transmit.h, up to 16)
    and in an array of their own past that: a star of 20 hosts (its switch's 20 ports busy at once
    in an all-to-all) runs as the pure-Python one does."""
    before = CORE.counts()["windows"]
    core = await _run(False, direct, monkeypatch, None, "star:n=20")
    assert CORE.counts()["windows"] > before  # (the switch's windows in the core)
    monkeypatch.undo()
    assert core == await _run(True, direct, monkeypatch, None, "star:n=20")


@needs_core
async def test_a_timer_set_on_the_switches_mid_run_fires_as_in_python(monkeypatch):
    """A switch keeps ``timer`` in its instance dict (a dataclass field): the window reads it by
    the dict and its version (csrc/window.h engine_timer, lookup_missing), so a timer set on every
    switch mid-run (100 us after the 10th message a host delivers) fires there -- in each switch that
    runs again after it (the domain learns an element's next time when it runs) -- the switches'
    ``on_timer`` called as often as in the pure-Python run, the same figures."""
    from emu.nodes.host.engine import Host
    from emu.switch.forward import SwitchEngine

    made: list = []
    post, on_timer = SwitchEngine.__post_init__, SwitchEngine.on_timer
    n, fired = [0], [0]

    def post_kept(self):
        post(self)
        made.append(self)

    def counted(self, now):
        fired[0] += 1
        return on_timer(self, now)

    deliver = Host.deliver

    def delivered(self, msg):
        n[0] += 1
        if n[0] == 10:
            for e in made:
                e.timer = self.now + 100_000
        return deliver(self, msg)

    monkeypatch.setattr(SwitchEngine, "__post_init__", post_kept)
    monkeypatch.setattr(SwitchEngine, "on_timer", counted)
    monkeypatch.setattr(Host, "deliver", delivered)
    comp, comp_fired = await _run(False, True, monkeypatch, None), fired[0]
    made.clear()
    n[0] = fired[0] = 0
    pure = await _run(True, True, monkeypatch, None)
    assert fired[0] > 0 and comp_fired == fired[0]  # (each switch that ran again after: its timer, once)
    assert comp == pure
