"""The compiled core's ``due`` (``emu/csrc/window.h``): Domain._run's first loop -- the domain heap's
entries before ``t1`` popped, each element's ``at`` set to INF, the elements in the order of their
first entry, each once -- the twin of the pure-Python loop (``emu.domain.Domain._run``'s
specification), on random heaps with stale and repeated entries."""

import heapq
import random

import pytest

import emu
from emu import native
from emu.element import INF

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _pure(heap: list, t1, at: list, elements: list) -> list:
    """Domain._run's loop as the pure-Python path runs it."""
    active = {}
    while heap and heap[0][0] < t1:
        i = heapq.heappop(heap)[1]
        at[i] = INF
        active[elements[i]] = None
    return list(active)


def _case(rng: random.Random, n: int, floats: bool):
    elements = [object() for _ in range(n)]
    at = [INF] * n
    heap: list = []
    for _ in range(rng.randrange(0, 4 * n + 1)):
        i = rng.randrange(n)
        t = rng.randrange(0, 50)
        if floats and rng.random() < 0.2:
            t = t + 0.5  # (a time that is not a plain int: compared as Python compares it)
        heapq.heappush(heap, (t, i))
        at[i] = min(at[i], t)
    return heap, at, elements


@needs_core
@pytest.mark.parametrize("seed", range(40))
def test_due_equals_the_python_loop(seed):
    rng = random.Random(seed)
    n = rng.choice([1, 3, 17, 300])  # (300: past the core's small table of seen elements)
    heap, at, elements = _case(rng, n, floats=seed % 2 == 1)
    t1 = rng.choice([0, 1, 10, 25, 49, 50, 100, INF, 25.5])
    h1, a1 = list(heap), list(at)
    want = _pure(h1, t1, a1, elements)
    h2, a2 = list(heap), list(at)
    got = CORE.due(h2, t1, a2, elements)
    assert [elements.index(e) for e in got] == [elements.index(e) for e in want]
    assert h2 == h1  # (heapq's layout: the same list, entry for entry)
    assert a2 == a1


@needs_core
def test_due_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="due"):
        CORE.due([(1, 0)], 5, [INF], "not a list")
    with pytest.raises(TypeError, match="differ"):
        CORE.due([(1, 0)], 5, [INF, INF], [object()])
    with pytest.raises(TypeError, match="not \\(time, index\\)"):
        CORE.due([(1, 0, 2)], 5, [INF], [object()])
    with pytest.raises(TypeError, match="index"):
        CORE.due([(1, 7)], 5, [INF], [object()])
    heap = [(9, 0)]
    assert CORE.due(heap, 5, [INF], [object()]) == [] and heap == [(9, 0)]  # (nothing due: nothing popped)


async def _run(pure: bool, monkeypatch, model: str) -> tuple:
    from emu.config import parse_settings
    from emu.topologies import build

    monkeypatch.setattr(native, "CORE", None if pure else CORE)

    async def ping(host, hosts):
        me = hosts.index(host.name)
        for s in range(1, len(hosts)):
            await host.send(hosts[(me + s) % len(hosts)], bytes([s]) * 3000 * s, tag=1)
        for s in range(1, len(hosts)):
            await host.recv(hosts[(me - s) % len(hosts)], 1)

    t = build("mesh:k=2,n=2", settings=parse_settings([f"switch.model={model}"]))
    async with emu.Cluster(t, run=emu.RunConfig(seed=3, direct=True)) as net:
        await net.run({h: (ping, net.hosts) for h in net.hosts})
        return net.metrics.as_dict(), await net.stats(), await net.process_stats()


@needs_core
@pytest.mark.parametrize("model", ["output_queued", "input_queued"])
async def test_a_run_is_the_same_with_and_without_the_core(monkeypatch, model):
    """A whole run's figures and counters (the domain's windows through ``due`` and ``window``, the
    routers' counts through the core's dict_add -- small ones in ints of their own, written in place
    -- or all of it Python's): equal, and every count a plain int."""
    core, pure = await _run(False, monkeypatch, model), await _run(True, monkeypatch, model)
    assert core[:2] == pure[:2]
    assert core[0]["hop_count"] > 0

    def ints(o):
        if isinstance(o, dict):
            return [x for v in o.values() for x in ints(v)]
        if isinstance(o, (list, tuple)):
            return [x for v in o for x in ints(v)]
        return [o] if isinstance(o, int) and not isinstance(o, bool) else []
    assert all(type(x) is int for x in ints(core[1]))


@needs_core
@pytest.mark.parametrize("seed", range(20))
def test_the_heap_of_pairs_is_laid_out_as_heapq_lays_it_out(seed):
    """The core's heap on (time, index) pairs -- compared on their ints in place where those decide
    (heap.h, entry_lt_fast) -- against heapq, entry for entry: equal pairs, ties on the time, times
    past 64 bits and floats (compared as Python compares them)."""
    rng = random.Random(seed)
    mine: list = []
    ref: list = []
    for _ in range(300):
        if rng.random() < 0.6 or not ref:
            t = rng.choice([rng.randrange(8), rng.randrange(8) + 0.5, 2 ** 70 + rng.randrange(3), INF])
            item = (t, rng.randrange(4)) if rng.random() < 0.9 else (t, rng.randrange(4), rng.randrange(2))
            CORE.heappush(mine, item)
            heapq.heappush(ref, item)
        else:
            assert CORE.heappop(mine) == heapq.heappop(ref)
        assert mine == ref
