"""The compiled core's reuse of timer entries (``emu/csrc/nic.h``: tm_keep, timers_at): a Timers
entry (t, seq, fn, arg) that left its heap and ran (``csrc/host.h`` timers_run_due) is made again
for the next timer only when nobody else holds it, its seq int written in place only when nobody
else holds that. A run with the core equals the pure-Python run (the specification) while Python
holds some of those entries -- and the Timers' own ``_seq`` now and then -- the whole run: each held
entry keeps the items it had when taken (its ints their values, its fn and arg the same objects),
and the core did make entries again in that same run (the test is not vacuous)."""

import pytest

import emu
from emu import native
from emu.domain import Domain

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _value(e: tuple) -> tuple:
    """a timer entry's items: its ints as text (an int written in place would change under a
    reference), the others themselves (compared by identity)"""
    return tuple(repr(x) if type(x) is int else x for x in e)


def _same(e: tuple, v: tuple) -> bool:
    return len(e) == len(v) and all(
        (repr(x) == y) if type(x) is int else (x is y) for x, y in zip(e, v))


async def _run(pure: bool, direct: bool, monkeypatch, held: list | None) -> tuple:
    from emu.config import parse_settings
    from emu.topologies import build

    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    if held is not None:  # every other window: the engines' timer entries held (and every 4th, their _seq)
        run, seen = Domain._run, [0]

        async def spy(self, w, t0, t1, sent):
            seen[0] += 1
            if seen[0] % 2:
                for el in self.elements:
                    timers = getattr(el.engine, "timers", None)
                    if timers is not None:
                        held.extend(("entry", e, _value(e)) for e in timers._heap)
                        if seen[0] % 4 == 1:
                            held.append(("seq", timers._seq, repr(timers._seq)))
            return await run(self, w, t0, t1, sent)
        monkeypatch.setattr(Domain, "_run", spy)

    async def ping(host, hosts):
        me = hosts.index(host.name)
        for s in range(1, len(hosts)):
            await host.send(hosts[(me + s) % len(hosts)], bytes([s]) * 700 * s, tag=1)
        for s in range(1, len(hosts)):
            await host.recv(hosts[(me - s) % len(hosts)], 1)
            await host.sleep(40 * s)  # (a resume's timer, (proc, value) its arg)
        for k in range(300):  # (past 256 timers a host: seq ints of their own, written in place when nobody holds them)
            await host.sleep(30 + k % 7)

    t = build("fattree:k=2,n=3", settings=parse_settings(["switch.model=output_queued"]))
    async with emu.Cluster(t, run=emu.RunConfig(seed=5, direct=direct)) as net:
        await net.run({h: (ping, net.hosts) for h in net.hosts})
        return net.metrics.as_dict(), await net.stats()


@needs_core
@pytest.mark.parametrize("direct", [True, False])
async def test_held_timer_entries_are_never_made_again(monkeypatch, direct):
    held: list = []
    before = CORE.counts()["timers_reused"]
    core = await _run(False, direct, monkeypatch, held)
    did = CORE.counts()["timers_reused"] - before
    monkeypatch.undo()
    pure = await _run(True, direct, monkeypatch, None)
    assert core == pure
    assert core[0]["hop_count"] > 0
    entries = [(e, v) for kind, e, v in held if kind == "entry"]
    assert len(entries) > 10 and any(kind == "seq" for kind, _, _ in held)  # (held while the core ran)
    for e, v in entries:
        assert _same(e, v), (e, v)  # (held: never made again, nor an int of it written)
    for kind, s, v in held:
        if kind == "seq":
            assert repr(s) == v
    assert did > 0  # (the others were, in this run)


@needs_core
def test_counts_report_the_timers_reused():
    assert type(CORE.counts()["timers_reused"]) is int


@needs_core
async def test_a_deliver_resumes_an_app_that_is_not_a_native_coroutine_as_python_does(monkeypatch):
    """A deliver's taker is resumed by the core without a (proc, value) tuple (csrc/host.h
    host_resume_with); an application the core does not step itself -- a generator-based coroutine,
    not a native one -- goes to Python's resume with the tuple made for it: the same run."""
    import types

    from emu.topologies import build

    @types.coroutine
    def gen_app(host, hosts):  # (the first host waits in its receives as the others' messages come in)
        me = hosts.index(host.name)
        if me:
            yield from host.sleep(200 * me).__await__()
            yield from host.send(hosts[0], bytes([me]) * 300 * me, tag=2).__await__()
            return host.now
        got = []
        for s in range(1, len(hosts)):
            m = yield from host.recv(hosts[s], 2).__await__()
            got.append((m.src, len(m.data), m.t_ns, host.now))
        return got

    async def run(pure):
        monkeypatch.setattr(native, "CORE", None if pure else CORE)
        async with emu.Cluster(build("star:n=4"), run=emu.RunConfig(direct=True)) as net:
            res = await net.run({h: (gen_app, net.hosts) for h in net.hosts})
            return res, net.metrics.as_dict(), await net.stats()

    core = await run(False)
    assert core == await run(True)
    assert len(core[0]["h0"]) == 3
