"""The compiled NIC's counters (emu/csrc/nic.h: count_add, dict_pair, dict_lacks) are the twin of
NicEngine's ``stats[...] += 1``: a count stays right across the small-int cache's end (ints of their
own, written in place), a value someone holds is never written, and a stats dict or a dict of
mechanisms changed from Python between runs is read again (the core's reads are kept per dict
version)."""

import pytest

import emu
import emu.native as native
from emu.wire import PacketType
from test_native_host import chatter  # (two hosts sending to each other in turn)

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")
KEYS = ("frames_sent", "messages_sent", "frames_received", "messages_received")


async def _counts(pure: bool, monkeypatch):
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        stats = net._local.by_name["h0"].engine.stats
        seen = []
        await net.run({h: (chatter, net.hosts, 40) for h in net.hosts})
        held = {k: stats[k] for k in KEYS}  # (held here: never written by the core)
        copies = {k: int(str(v)) for k, v in held.items()}
        seen.append(copies)
        stats["messages_received"] = 1000  # (the dict changed: its new value read, not the one kept)
        stats["frames_sent"] += 5
        await net.run({h: (chatter, net.hosts, 10) for h in net.hosts})
        assert {k: int(str(v)) for k, v in held.items()} == copies
        seen.append({k: stats[k] for k in KEYS})
        del stats["messages_sent"]  # (a count gone: NicEngine's KeyError, in both)
        stats["messages_sent"] = 2
        await net.run({h: (chatter, net.hosts, 250) for h in net.hosts})  # (past 256)
        seen.append({k: stats[k] for k in KEYS})
        return seen


@needs_core
async def test_the_nics_counts_are_pythons(monkeypatch):
    before = CORE.counts()
    pure = await _counts(True, monkeypatch)
    mid = CORE.counts()
    compiled = await _counts(False, monkeypatch)
    after = CORE.counts()
    assert mid == before
    assert after["nic_sent"] - mid["nic_sent"] > 500 and after["nic_messages"] - mid["nic_messages"] > 500
    assert compiled == pure
    assert pure[1]["messages_received"] == 1010 and pure[1]["frames_sent"] == pure[0]["frames_sent"] + 15
    assert pure[2]["messages_sent"] == 252 and pure[2]["messages_received"] == 1260


@needs_core
async def test_a_mechanism_set_for_messages_between_runs_takes_them(monkeypatch):
    """A packet type's mechanism put in a NIC's _anywhere between runs: the core sees the dict
    changed and leaves the message frames to Python's receive, which hands them to it."""
    monkeypatch.setattr(native, "CORE", CORE)
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        eng = net._local.by_name["h1"].engine
        await net.run({h: (chatter, net.hosts, 5) for h in net.hosts})
        got = []

        def taker(frame, src, port, now):
            got.append((len(frame), src))

        ptype = int(PacketType.MSG)
        eng._anywhere[ptype] = taker
        before = CORE.counts()["nic_messages"]
        try:
            await net.run({"h0": (sender, ["h1"])})
        finally:
            del eng._anywhere[ptype]
        assert [src for _, src in got] == [0] and got[0][0] > 50 and CORE.counts()["nic_messages"] == before


async def sender(host, peers):
    await host.send(peers[0], b"x" * 50, tag=1)
    await host.sleep(5000)



def _holder(engines, seen):
    """h0's message reaches h1's NIC at ~101 us, h2's at ~161 us (every NIC delays a message 100 us
    out and 100 us in), h1's first delivery at ~201 us: h0 holds h1's output list between the two
    receives, and looks at 185 us -- no timer of h1's ran between."""
    async def app(host, hosts):
        if host.name == "h1":
            for _ in range(2):
                await host.recv()
            return host.now
        if host.name == "h2":
            await host.sleep(60_000)
            await host.send("h1", b"b" * 50, tag=2)
            return host.now
        eng = engines["h1"]
        await host.send("h1", b"a" * 50, tag=1)
        await host.sleep(130_000 - host.now)
        held = eng._out
        got = eng.stats["messages_received"]
        await host.sleep(185_000 - host.now)
        seen.append((eng._out is held, held, got, eng.stats["messages_received"]))
        return host.now
    return app


@needs_core
@pytest.mark.parametrize("pure", [True, False], ids=["python", "core"])
async def test_a_held_output_list_is_not_the_next_receives(pure, monkeypatch):
    """NicEngine.receive makes a new output list (self._out = out = []); the core keeps the old one
    only when it is empty and nobody else holds it: one held from Python is not the next receive's."""
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    from emu.topologies import build
    t = build("star:n=3", settings={"host": {"nic_delay_ns": 100_000}})
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        engines = {h: net._local.by_name[h].engine for h in net.hosts}
        seen = []
        before = CORE.counts()["nic_messages"]
        await net.run({h: (_holder(engines, seen), net.hosts) for h in net.hosts})
        assert seen == [(False, [], 1, 2)]
        assert (CORE.counts()["nic_messages"] - before == 2) != pure


async def _grabber(host, hosts, engines, held):
    """h0 sends and holds the output entries its NIC has just made ((port, frame, at), before they
    are queued), with their values then; h1 receives."""
    if host.name == "h1":
        for _ in range(12):
            await host.recv()
        return host.now
    eng = engines["h0"]
    for k in range(12):
        await host.send("h1", bytes([k]) * (60 + k), tag=k)
        if k % 3 == 0:
            held.extend((e, tuple(e)) for e in list(eng._out) if isinstance(e, tuple))
        await host.sleep(50)
    return host.now


@needs_core
@pytest.mark.parametrize("pure", [True, False], ids=["python", "core"])
async def test_an_output_entry_someone_holds_stays_what_it_was(pure, monkeypatch):
    """An engine's output entry (port, frame, at) the emit queued is made again for the NIC's next
    send only when nobody else holds it: one held from Python keeps its values."""
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    from emu.topologies import build
    t = build("star:n=2", settings={"host": {"send_overhead_ns": 0}})  # (the app goes on before the emit)
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        engines = {h: net._local.by_name[h].engine for h in net.hosts}
        held = []
        before = CORE.counts()["nic_sent"]
        await net.run({h: (_grabber, net.hosts, engines, held) for h in net.hosts})
        assert len(held) == 4 and all(e == then for e, then in held)
        assert sorted(then[1][-1] for _, then in held) == [0, 3, 6, 9]
        assert (CORE.counts()["nic_sent"] - before == 12) != pure
