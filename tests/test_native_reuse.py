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


async def _run(pure: bool, direct: bool, monkeypatch, held: list | None) -> tuple:
    from emu.config import parse_settings
    from emu.topologies import build

    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    if held is not None:  # every other window: the domain's entries and the elements' records held
        run, seen = Domain._run, [0]

        async def spy(self, w, t0, t1, sent):
            seen[0] += 1
            if seen[0] % 2:
                held.extend((e, _value(e)) for e in self._heap)
                for el in self.elements:
                    held.extend((r, _value(r)) for r in el.heap)
            return await run(self, w, t0, t1, sent)
        monkeypatch.setattr(Domain, "_run", spy)

    async def ping(host, hosts):
        me = hosts.index(host.name)
        for s in range(1, len(hosts)):
            await host.send(hosts[(me + s) % len(hosts)], bytes([s]) * 1500 * s, tag=1)
        for s in range(1, len(hosts)):
            await host.recv(hosts[(me - s) % len(hosts)], 1)

    t = build("mesh:k=2,n=2", settings=parse_settings(["switch.model=output_queued"]))
    async with emu.Cluster(t, run=emu.RunConfig(seed=3, direct=direct)) as net:
        await net.run({h: (ping, net.hosts) for h in net.hosts})
        return net.metrics.as_dict(), await net.stats()


@needs_core
@pytest.mark.parametrize("direct", [True, False])
async def test_held_records_and_entries_are_never_made_again(monkeypatch, direct):
    held: list = []
    before = CORE.counts()
    core = await _run(False, direct, monkeypatch, held)
    did = {k: CORE.counts()[k] - before[k] for k in ("records_reused", "entries_reused")}
    monkeypatch.undo()
    pure = await _run(True, direct, monkeypatch, None)
    assert core == pure
    assert core[0]["hop_count"] > 0
    records = [(t, v) for t, v in held if len(t) == 5]
    entries = [(t, v) for t, v in held if len(t) == 2]
    assert records and entries  # (some of each held while the core ran)
    for t, v in held:
        assert _value(t) == v  # (held: never made again, nor an int of it written)
    assert did["records_reused"] > 0 and did["entries_reused"] > 0  # (the others were, in this run)


@needs_core
def test_counts_report_the_reuse():
    c = CORE.counts()
    assert type(c["records_reused"]) is int and type(c["entries_reused"]) is int
