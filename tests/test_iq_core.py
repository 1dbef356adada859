"""The input-queued router's compiled allocation round (``emu._core.iq_round``, ``emu/csrc/iq.h``) and its
compiled receive of a plain data frame (``emu._core.iq_receive``, ``emu/csrc/iqrecv.h``) are the exact
twins of ``switch/iqround.py``'s and ``switch/iq.py``'s plain cases: the same runs with it and without it give the
same figures (every result and per-link counter of ``emu run --json``) and the same capture bytes
(every frame, credits included, in the same order at the same times).

Cases: BookSim2's uniform comparison (``scripts/bench_iq.py``: 4x4 mesh with 1, 2 and 8 VCs and 1-
and 4-flit packets, an 8x8 one with 8 VCs), a torus (dateline VCs: the VC byte rewritten per hop), and
random small meshes and tori over the release rules, cut-through and loads (hypothesis). Each run
asserts the core took rounds and frames (its twins were exercised), or, for a configuration it does not
cover (iSLIP, per-class weights: the round; a VC selector: the receive), that Python ran alone.
"""

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu import native
from emu.switch import iqcore
from emu.switch.iqcore import CoreRound

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, OURS  # noqa: E402
from uniform_run import uniform  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _run(tmp: Path, use_core: bool, monkeypatch, topo: str, vcs: int, flits: int, load: float, cycles: int,
         extra: dict | None = None) -> tuple[dict, bytes, list]:
    """One ``emu run`` of uniform traffic: (its results without wall time, its capture, [rounds the core ran,
    frames the core's receive took])."""
    monkeypatch.setattr(iqcore, "USE_CORE", use_core)
    calls = [0, 0]
    made = CoreRound._core_state

    def counted(self):
        cs = made(self)
        if not cs:
            return cs
        fn = cs[0]

        def call(*a):
            calls[0] += 1
            return fn(*a)
        return (call, *cs[1:])

    monkeypatch.setattr(CoreRound, "_core_state", counted)
    made_rx = CoreRound._core_receive_state

    def counted_rx(self):  # (the frames the compiled receive took: it returns a list, None when it declines)
        rx = made_rx(self)
        if not rx:
            return rx
        fn = rx[0]

        def call(*a):
            r = fn(*a)
            calls[1] += r is not None
            return r
        return (call, rx[1])

    monkeypatch.setattr(CoreRound, "_core_receive_state", counted_rx)
    sets = {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued", **(extra or {})}
    cap = tmp / f"c{int(use_core)}.pcapng"
    res = _uniform(tmp / f"r{int(use_core)}.json", topo, flits, load, cycles, sets, ["--pcap", str(cap)])
    return res, cap.read_bytes(), list(calls)  # (a copy: a later run's wrappers call this one's)


def _uniform(out: Path, topo: str, flits: int, load: float, cycles: int, sets: dict, more: list[str]) -> list:
    """One quiet ``emu run --test uniform`` of the twins; its results without wall time."""
    return uniform(out, topo, flits, load, cycles, sets, more)


def _twin(tmp: Path, monkeypatch, *args, covered: bool = True, received: bool | None = None, **kw) -> dict:
    pure, pure_cap, n0 = _run(tmp, False, monkeypatch, *args, **kw)
    comp, comp_cap, n1 = _run(tmp, True, monkeypatch, *args, **kw)
    assert n0 == [0, 0]
    assert (n1[0] > 0) == covered  # the compiled round ran (or, not covered, never did)
    assert (n1[1] > 0) == (covered if received is None else received)  # ... and the compiled receive
    assert comp == pure
    assert comp_cap == pure_cap
    assert pure[0]["hop_count"] > 0
    return pure[0]


@needs_core
@pytest.mark.parametrize("vcs", [1, 2, 8])
@pytest.mark.parametrize("flits", [1, 4])
def test_booksim_mesh_4x4_same_figures_and_frames(vcs, flits, tmp_path, monkeypatch):
    from bench_iq import SAT
    r = _twin(tmp_path, monkeypatch, "mesh:k=4,n=2", vcs, flits, SAT[(4, vcs, flits)] * 0.9, 60)
    assert r["curve"][0]["accepted"] > 0


@needs_core
def test_booksim_mesh_8x8_same_figures_and_frames(tmp_path, monkeypatch):
    from bench_iq import SAT
    _twin(tmp_path, monkeypatch, "mesh:k=8,n=2", 8, 1, SAT[(8, 8, 1)] * 0.8, 6)


@needs_core
def test_torus_dateline_same_figures_and_frames(tmp_path, monkeypatch):
    _twin(tmp_path, monkeypatch, "torus:k=4,n=2", 4, 2, 0.5, 40, received=False)  # (a VC selector: Python's receive)


@needs_core
def test_islip_stays_python(tmp_path, monkeypatch):
    _twin(tmp_path, monkeypatch, "mesh:k=3,n=2", 2, 1, 0.5, 30, covered=False, received=True,
          extra={"switch.allocator": "islip", "switch.iterations": 2})  # (the receive is the allocator's either way)


@needs_core
def test_weighted_classes_stay_python(tmp_path, monkeypatch):
    _twin(tmp_path, monkeypatch, "mesh:k=3,n=2", 2, 1, 0.5, 30, covered=False, received=True,
          extra={"queues.arbiter": "drr", "queues.weights": "1+3"})


@needs_core
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(2, 3), torus=st.booleans(), vcs=st.integers(1, 4), flits=st.integers(1, 3),
       load=st.sampled_from([0.2, 0.5, 0.9]), credit=st.sampled_from(["tail_left", "head_left", "per_flit"]),
       vc_release=st.sampled_from(["tail_granted", "tail_sent", "tail_credit"]), cut=st.booleans(),
       eject=st.booleans())
def test_random_configurations_same_figures_and_frames(tmp_path_factory, monkeypatch, k, torus, vcs, flits, load,
                                                       credit, vc_release, cut, eject):
    if torus:
        k, vcs = max(k, 3), max(vcs, 2)  # (a torus has 3 routers a side at least; dateline: two VC groups)
    extra = {"switch.credit_release": credit, "switch.vc_release": vc_release, "switch.cut_through": str(cut).lower(),
             "switch.eject_vcs": str(eject).lower()}
    _twin(tmp_path_factory.mktemp("r"), monkeypatch, f"{'torus' if torus else 'mesh'}:k={k},n=2", vcs, flits, load, 24,
          extra=extra, received=not torus)  # (a torus's dateline VC selector: Python's receive)


def _run_uncaptured(tmp: Path, core, monkeypatch, topo: str, vcs: int, flits: int, load: float, cycles: int) -> dict:
    """``_run`` without a capture (the compiled element paths -- a window, a transmit -- run only then),
    with the whole compiled core (``core``) or none (None): its results without wall time."""
    monkeypatch.setattr(native, "CORE", core)
    sets = {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued"}
    return _uniform(tmp / f"u{int(core is not None)}.json", topo, flits, load, cycles, sets, [])


@needs_core
@pytest.mark.parametrize("vcs,flits", [(8, 1), (2, 4)])
def test_uncaptured_runs_are_the_same_with_and_without_the_core(vcs, flits, tmp_path, monkeypatch):
    """No capture: the router's compiled receive, its grants onto ports of flit framing with head flits
    (``enqueue``), the credits it sends (``Flow._credit_now``'s plain case) and those it receives (to
    ``on_credit``, whose plain case is the core's too, as is ``on_timer``: csrc/iqtimer.h) in the core's
    window, and their hand-over (``transmit_local`` with link control queued) give the same figures and per-link counters as pure Python."""
    from bench_iq import SAT
    core = native.CORE
    pure = _run_uncaptured(tmp_path, None, monkeypatch, "mesh:k=4,n=2", vcs, flits, SAT[(4, vcs, flits)] * 0.9, 60)
    before = core.counts()
    comp = _run_uncaptured(tmp_path, core, monkeypatch, "mesh:k=4,n=2", vcs, flits, SAT[(4, vcs, flits)] * 0.9, 60)
    did = {k: v - before[k] for k, v in core.counts().items()}
    assert did["iq_received"] > 0 and did["handed_over"] > 0 and did["enqueued"] > 0  # (the grants onto flit ports)
    assert did["credits_out"] > 0 and did["credits_in"] > 0  # (the credit path's plain cases in the core's window)
    assert did["iq_timers"] > 0 and did["iq_credits"] > 0  # (on_timer and on_credit's twins: csrc/iqtimer.h)
    assert did["iq_hooks"] > 0 and did["iq_frames"] > 0  # (the round's callbacks, receive's frame: csrc/iqhooks.h)
    assert did["started"] > 0  # (the hosts' ports into the routers: OutPort.start_ready's twin, csrc/flowwake.h)
    assert comp == pure
    assert pure[0]["hop_count"] > 0


@needs_core
def test_methods_set_on_the_engine_object_are_honoured(tmp_path, monkeypatch):
    """An ``on_timer``, ``on_credit`` or ``receive`` set on a router object (not its class) is the one
    called: the compiled twins in the element's window (csrc/iqtimer.h) decline for that router, and
    the figures are those of the run without the core."""
    from bench_iq import SAT

    from emu.switch.iq import InputQueuedEngine
    core = native.CORE
    load = SAT[(4, 2, 1)] * 0.9
    pure = _run_uncaptured(tmp_path, None, monkeypatch, "mesh:k=4,n=2", 2, 1, load, 40)
    calls = {"on_timer": 0, "on_credit": 0, "receive": 0}
    init = InputQueuedEngine.__init__

    def init_overriding(self, *a, **kw):
        init(self, *a, **kw)
        for name in calls:
            def wrapper(*args, _m=getattr(self, name), _n=name):
                calls[_n] += 1
                return _m(*args)
            setattr(self, name, wrapper)  # (in the object's __dict__: the class's method unchanged)

    monkeypatch.setattr(InputQueuedEngine, "__init__", init_overriding)
    before = core.counts()
    comp = _run_uncaptured(tmp_path, core, monkeypatch, "mesh:k=4,n=2", 2, 1, load, 40)
    did = {k: v - before[k] for k, v in core.counts().items()}
    assert calls["on_timer"] > 0 and calls["on_credit"] > 0 and calls["receive"] > 0
    assert did["iq_timers"] == 0 and did["iq_credits"] == 0 and did["iq_frames"] == 0  # (the objects' own ran)
    assert comp == pure


@needs_core
def test_a_round_state_holding_other_functions_is_called_as_python_does(tmp_path, monkeypatch):
    """``on_timer`` calls the round and retime its ``_cst`` tuple holds: a tuple holding other functions
    (here the core's, wrapped) has them called -- the window's compiled on_timer declines rather than
    calling the core's round itself -- with the figures of the run without the core."""
    from bench_iq import SAT
    core = native.CORE
    load = SAT[(4, 2, 1)] * 0.9
    pure = _run_uncaptured(tmp_path, None, monkeypatch, "mesh:k=4,n=2", 2, 1, load, 40)
    calls = [0, 0]
    made = CoreRound._core_state

    def wrapped(self):
        cs = made(self)
        if not cs:
            return cs

        def rnd(*a, _f=cs[0]):
            calls[0] += 1
            return _f(*a)

        def retime(*a, _f=cs[3]):
            calls[1] += 1
            return _f(*a)
        return (rnd, cs[1], cs[2], retime)

    monkeypatch.setattr(CoreRound, "_core_state", wrapped)
    before = core.counts()
    comp = _run_uncaptured(tmp_path, core, monkeypatch, "mesh:k=4,n=2", 2, 1, load, 40)
    did = {k: v - before[k] for k, v in core.counts().items()}
    assert calls[0] > 0 and calls[1] > 0
    assert did["iq_timers"] == 0  # (every on_timer Python's, calling the tuple's functions)
    assert comp == pure


@needs_core
def test_the_state_the_core_keeps_in_slots_is_what_python_reads(tmp_path, monkeypatch):
    """The timer, credit and receive state the compiled twins read and write at their slots' offsets
    (``InputQueuedEngine.__slots__``: next round, last round, timer, granted, stats, active VCs, ...)
    is, at the end of a run, what the pure-Python run leaves in every router, read as Python reads it;
    none of it in the objects' ``__dict__``."""
    from bench_iq import SAT

    from emu.switch.iq import InputQueuedEngine
    made: list = []
    init = InputQueuedEngine.__init__

    def init_kept(self, *a, **kw):
        init(self, *a, **kw)
        made.append(self)

    monkeypatch.setattr(InputQueuedEngine, "__init__", init_kept)

    def state(e) -> tuple:
        assert not set(InputQueuedEngine.__slots__) & set(vars(e))
        return (e.name, e._next, e._rnow, e.timer, e._granted, e._btimer, e.slot, dict(e.iq_stats), list(e.active),
                len(e._fresh), dict(e._tail_wait), e._up is not None)

    load, core = SAT[(4, 8, 1)] * 0.9, native.CORE
    _run_uncaptured(tmp_path, None, monkeypatch, "mesh:k=4,n=2", 8, 1, load, 40)
    pure = sorted(state(e) for e in made)
    made.clear()
    before = core.counts()
    _run_uncaptured(tmp_path, core, monkeypatch, "mesh:k=4,n=2", 8, 1, load, 40)
    did = {k: v - before[k] for k, v in core.counts().items()}
    assert did["iq_timers"] > 0 and did["iq_credits"] > 0 and did["iq_frames"] > 0
    assert all(e._cst for e in made)  # (the compiled round chosen in every router)
    comp = sorted(state(e) for e in made)
    assert len(comp) == 16 and sum(s[7]["rounds"] for s in comp) > 0
    assert comp == pure


@needs_core
def test_a_vc_selector_set_on_the_routers_mid_run_is_honoured_by_the_compiled_receive(tmp_path, monkeypatch):
    """The compiled receive keeps a router's plain-case checks (``uncharged`` False; ``choose``, ``pending``,
    ``vc_select`` None; ``cut_through`` False) while the router's instance dict and class are unchanged
    (csrc/iqrecv.h ``rx_engine``), and the window's timer the absence of an ``on_timer`` set on the object
    (csrc/iqtimer.h ``t_absent``): a VC selector and an ``on_timer`` set on every router mid-run (at the 60th
    message a host delivers) are honoured from then on -- the compiled twins decline and Python's methods
    call them, as often as in the pure-Python run, with the same figures."""
    from bench_iq import SAT

    from emu.nodes.host.engine import Host
    from emu.switch.iq import InputQueuedEngine
    made: list = []
    init = InputQueuedEngine.__init__

    def init_kept(self, *a, **kw):
        init(self, *a, **kw)
        made.append(self)

    monkeypatch.setattr(InputQueuedEngine, "__init__", init_kept)
    deliver = Host.deliver
    n, calls, timers = [0], [0], [0]

    def sel(i, o, v):  # (keeps the VC: the figures stay the plain run's)
        calls[0] += 1
        return v

    def delivered(self, msg):
        n[0] += 1
        if n[0] == 60:
            for e in made:
                e.vc_select = sel

                def on_timer(now, _m=e.on_timer):
                    timers[0] += 1
                    return _m(now)
                e.on_timer = on_timer  # (in the object's __dict__)
        return deliver(self, msg)

    monkeypatch.setattr(Host, "deliver", delivered)
    load, core = SAT[(4, 8, 1)] * 0.9, native.CORE
    pure = _run_uncaptured(tmp_path, None, monkeypatch, "mesh:k=4,n=2", 8, 1, load, 40)
    pure_calls, pure_n, pure_timers = calls[0], n[0], timers[0]
    made.clear()
    n[0] = calls[0] = timers[0] = 0
    before = core.counts()
    comp = _run_uncaptured(tmp_path, core, monkeypatch, "mesh:k=4,n=2", 8, 1, load, 40)
    did = {k: v - before[k] for k, v in core.counts().items()}
    assert pure_n > 60 and n[0] == pure_n
    assert did["iq_received"] > 0  # (the compiled receive took frames before the selector was set)
    assert pure_calls > 0 and calls[0] == pure_calls  # (and none after: every later frame met the selector)
    assert pure_timers > 0 and timers[0] == pure_timers  # (every later timer the object's own)
    assert comp == pure
