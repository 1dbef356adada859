"""``SwitchEngine.plain_table``: the answer the compiled core reads at every switch window (may it
forward a plain data frame by the table alone?), kept by the engine as what it depends on changes --
checked against its specification (``plain_table_now``, and the decision as it was computed before:
``_decision``) after every kind of change, and in runs whose switch changes mid-run (compiled core
against the pure-Python path, figure for figure)."""

import dataclasses

import pytest

import emu
from emu import native
from emu.config import SwitchSpec
from emu.switch.forward import _PLAIN_INPUTS, SwitchEngine
from emu.switch.routing.pending import Pending

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _decision(eng):
    """The per-window question as ``plain_table()`` answered it before it was kept: (routes, delay)
    or None."""
    if eng.choose is None and eng.pending is None and not eng.held and not eng.cut_through \
            and eng.min_delay_ns <= eng.spec.processing_delay_ns \
            and eng.vc_select is None and type(eng.routes) is list and type(eng).receive is SwitchEngine.receive:
        return eng.routes, eng.spec.processing_delay_ns
    return None


def _kept(eng):
    """What the core and ``Element.run_window`` make of ``plain_table``: (routes, delay) or None."""
    p = eng.plain_table
    return None if p is None or p[2] else (p[0], p[1])


def _same(a, b) -> bool:
    return a is None and b is None or a is not None and b is not None and a[0] is b[0] and a[1] == b[1]


class Routes(list):
    """A table that is not a plain list (the core reads only a list)."""


IDLE = 3  # star:n=4's port to h3, which no test traffic crosses


def _changes():
    """name -> (change the engine, put it back): every input of plain_table_now, assigned or changed in place."""
    return {
        "choose": (lambda e: setattr(e, "choose", lambda dst, port, frame, now: port), lambda e: setattr(e, "choose", None)),
        "pending": (lambda e: setattr(e, "pending", Pending(10 ** 9)), lambda e: setattr(e, "pending", None)),
        "held in place": (lambda e: e.held.add(IDLE), lambda e: e.held.discard(IDLE)),
        "held updated": (lambda e: e.held.update({IDLE}), lambda e: e.held.clear()),
        "held set.add": (lambda e: set.add(e.held, IDLE), lambda e: set.discard(e.held, IDLE)),
        "held assigned": (lambda e: setattr(e, "held", {IDLE}), lambda e: setattr(e, "held", set())),
        "cut_through": (lambda e: setattr(e, "cut_through", True), lambda e: setattr(e, "cut_through", False)),
        "min_delay_ns": (lambda e: setattr(e, "min_delay_ns", e.spec.processing_delay_ns + 1),
                         lambda e: setattr(e, "min_delay_ns", e.spec.processing_delay_ns)),
        "vc_select": (lambda e: setattr(e, "vc_select", lambda i, o, vc: vc), lambda e: setattr(e, "vc_select", None)),
        "routes not a list": (lambda e: setattr(e, "routes", Routes(e.routes)), lambda e: setattr(e, "routes", list(e.routes))),
        "routes replaced": (lambda e: setattr(e, "routes", list(e.routes)), lambda e: setattr(e, "routes", list(e.routes))),
        "spec": (lambda e: setattr(e, "spec", dataclasses.replace(e.spec, processing_delay_ns=e.spec.processing_delay_ns + 7)),
                 lambda e: setattr(e, "spec", dataclasses.replace(e.spec, processing_delay_ns=e.spec.processing_delay_ns - 7))),
        "spec lowered": (lambda e: setattr(e, "spec", dataclasses.replace(e.spec, processing_delay_ns=e.spec.processing_delay_ns - 1)),
                         lambda e: setattr(e, "spec", dataclasses.replace(e.spec, processing_delay_ns=e.spec.processing_delay_ns + 1))),
    }


def test_the_kept_answer_reads_what_its_specification_reads():
    """Every attribute ``plain_table_now`` reads of the engine is one whose assignment recomputes it
    (an input added to the specification and not to ``_PLAIN_INPUTS`` fails here)."""
    code = SwitchEngine.plain_table_now.__code__
    reads = set(code.co_names) - {"SwitchEngine", "receive", "processing_delay_ns", "list", "queues", "on"}
    # (spec.queues.on: read through the frozen spec, whose assignment recomputes it)
    assert reads - {"type"} | {"__class__"} == _PLAIN_INPUTS


@pytest.mark.parametrize("name", list(_changes()))
def test_after_each_change_the_kept_answer_is_the_specifications(name):
    change, undo = _changes()[name]
    eng = SwitchEngine("s0", 5, SwitchSpec(), [0, 1, 2, 3])
    assert _same(_kept(eng), _decision(eng)) and _decision(eng) is not None
    for step in (change, undo, change, undo):
        step(eng)
        assert _same(_kept(eng), _decision(eng)), name
        p = eng.plain_table
        assert p is None or (p[0] is eng.routes and p[2] is eng.held and p[1] == eng.spec.processing_delay_ns)
    expect_off = name not in ("routes replaced", "spec")
    change(eng)
    assert (_decision(eng) is None) == expect_off


def test_a_subclass_with_its_own_receive_is_never_plain():
    class Own(SwitchEngine):
        def receive(self, frame, port, now):
            return super().receive(frame, port, now)

    eng = Own("s0", 5, SwitchSpec(), [0, 1])
    assert eng.plain_table is None and _decision(eng) is None
    eng.routes = [1, 0]
    assert eng.plain_table is None
    from emu.switch.iq import InputQueuedEngine

    assert InputQueuedEngine.__setattr__ is object.__setattr__  # (its stores stay plain: nothing to keep)
    plain = SwitchEngine("s1", 6, SwitchSpec(), [0, 1])
    assert plain.plain_table is not None
    plain.__class__ = Own  # (type(self) is an input too)
    assert plain.plain_table is None and _decision(plain) is None


async def _run(name: str, pure: bool, monkeypatch) -> tuple:
    """star:n=4 (h3 idle), h0 <-> h1 <-> h2 round trips in three phases; between them h0's
    application changes the switch (``name``) and then puts it back. Returns the figures and, per
    phase, the data frames the switch's Python ``receive`` was handed."""
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    change, undo = _changes()[name]
    async with emu.Cluster("star:n=4", run=emu.RunConfig(direct=True, seed=3)) as net:
        sw = next(el for el in net._local.elements if el.name == "s0")
        eng = sw.engine
        handed = [0]
        receive = eng.receive

        def counting(frame, port, now):
            handed[0] += 1
            return receive(frame, port, now)

        eng.receive = counting  # (an instance attribute: the class's own receive is still SwitchEngine's)
        phases = []

        async def rounds(host, k):
            t0 = host.now
            for i in range(k):
                for peer in ("h1", "h2"):
                    await host.send(peer, bytes([i]) * (100 + 700 * i))
                    await host.recv(src=peer)
            return host.now - t0

        async def lead(host):
            times = []
            for step in (change, undo, None):
                before = handed[0]
                times.append(await rounds(host, 3))
                phases.append(handed[0] - before)
                if step is not None:
                    step(eng)
            return times

        async def echo(host):
            for _ in range(9):
                m = await host.recv()
                await host.send(m.src, m.data)

        res = await net.run({"h0": lead, "h1": echo, "h2": echo})
        m = net.metrics
        return (res, m.hop_count, m.frames, m.end_ns - m.start_ns, await net.stats()), phases


@pytest.mark.parametrize("name", [n for n in _changes() if n not in ("held updated", "held set.add", "spec lowered", "min_delay_ns")])
async def test_a_switch_changed_mid_run_forwards_as_the_pure_path_and_by_table_only_while_plain(name, monkeypatch):
    """(A promise above the processing delay -- ``min_delay_ns`` raised, ``spec`` lowered -- is
    refused in a run: the engine emits sooner than it promised. Those are checked above.)"""
    pure, pure_phases = await _run(name, True, monkeypatch)
    compiled, phases = await _run(name, False, monkeypatch)
    assert compiled == pure
    assert pure_phases[0] == pure_phases[1] == pure_phases[2] > 0  # (the pure path: every frame through receive)
    if CORE is None:
        return
    off = name not in ("routes replaced", "spec")
    # the core forwards the data frames itself while plain_table says so (phases 1 and 3), and hands
    # every one to receive after a change that turns it off (phase 2, after the change)
    assert phases == [0, pure_phases[1] if off else 0, 0], phases
