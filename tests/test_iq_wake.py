"""The input-queued router's credit wakes (``Rounds._credit_wakes``, compiled ``iq_credit_wakes`` in
``emu/csrc/iqtimer.h``): a credit wakes a round at its instant only when that round could grant or
change something -- a head's route computation over, an output's VC allocator to ask, or a copy
holding a VC that may go now (stages over, input and output free, credit, not asked yet at the
instant). Before, every credit woke one: on BookSim's 8x8 mesh point a third of the on_timer calls
were such rounds, granting nothing and changing nothing.

The checks: on a loaded 4x4 mesh no round a credit woke is empty (pure Python, where the rounds are
watched one by one); rounds per switch grant stay under two (one VC allocation round and one switch
allocation round per hop: the skipped wakes took it to 2.47); and the compiled on_credit takes the
same decisions as Python's -- every figure and the diagnostic round counters equal, compiled and
pure, for several VC counts, packet lengths and VC release rules (``tail_credit`` keeps every wake).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from emu import native
from emu.switch import iqcore
from emu.switch.iq import InputQueuedEngine

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from bench_iq import SAT  # noqa: E402
from router_curves import FAITHFUL, OURS  # noqa: E402
from uniform_run import uniform  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _run(tmp: Path, monkeypatch, use_core: bool, vcs: int = 1, flits: int = 1, at: float = 0.8, **more):
    """A 4x4 mesh at ``at`` of BookSim's saturation for 100 cycles each way: (results, summed
    router counters, the routers)."""
    monkeypatch.setattr(iqcore, "USE_CORE", use_core)
    engs = []
    setup = InputQueuedEngine.setup

    def keep(self, *a):
        engs.append(self)
        return setup(self, *a)
    monkeypatch.setattr(InputQueuedEngine, "setup", keep)
    sets = {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued", **more}
    res = uniform(tmp / f"r{int(use_core)}.json", "mesh:k=4,n=2", flits, SAT[(4, min(vcs, 8), flits)] * at, 100, sets)
    sums = {k: sum(e.iq_stats[k] for e in engs) for k in ("rounds", "repeats", "sa_grants", "va_grants")}
    return res, sums, engs


def test_no_round_a_credit_wakes_is_empty(tmp_path, monkeypatch):
    woken, empty, credits = set(), [0], [0]
    on_credit, on_timer = InputQueuedEngine.on_credit, InputQueuedEngine.on_timer

    def credit(self, *a, **k):
        before = self._next
        on_credit(self, *a, **k)
        credits[0] += 1
        if self._next < before:
            woken.add(id(self))

    def timer(self, now):
        if id(self) not in woken:
            return on_timer(self, now)
        woken.discard(id(self))
        st = self.iq_stats
        va, rc = st["va_grants"], len(self._rcq)
        out = on_timer(self, now)
        if not out and st["va_grants"] == va and len(self._rcq) == rc:
            empty[0] += 1  # (no switch grant, no VC given, no head's route computation seen over)
        return out
    monkeypatch.setattr(InputQueuedEngine, "on_credit", credit)
    monkeypatch.setattr(InputQueuedEngine, "on_timer", timer)
    _res, sums, _engs = _run(tmp_path, monkeypatch, False)
    assert sums["sa_grants"] > 1000 and credits[0] > 1000  # (loaded: credits came)
    assert empty[0] == 0


@pytest.mark.parametrize("use_core", [False, pytest.param(True, marks=needs_core)])
def test_rounds_per_grant_stay_under_two(use_core, tmp_path, monkeypatch):
    did = native.CORE.counts() if use_core else None
    _res, sums, engs = _run(tmp_path, monkeypatch, use_core)
    if use_core:
        assert all(e._cst for e in engs)  # (the compiled round and on_credit were chosen)
        assert native.CORE.counts()["iq_credits"] > did["iq_credits"]
    assert (sums["rounds"] + sums["repeats"]) / sums["sa_grants"] < 2.0, sums


@needs_core
@pytest.mark.parametrize("vcs, flits, more", [(1, 1, {}), (2, 1, {}), (8, 4, {}),
                                              (2, 4, {"switch.vc_release": "tail_sent"}),
                                              (2, 1, {"switch.vc_release": "tail_credit"}),
                                              (2, 4, {"switch.credit_release": "tail_left"})])
def test_compiled_credit_wakes_as_python_does(vcs, flits, more, tmp_path, monkeypatch):
    res_p, sums_p, _ = _run(tmp_path, monkeypatch, False, vcs, flits, **more)
    did = native.CORE.counts()
    res_c, sums_c, engs = _run(tmp_path, monkeypatch, True, vcs, flits, **more)
    assert all(e._cst for e in engs)
    if more.get("switch.vc_release") != "tail_credit":  # (there a VC waits for its tail's credit: Python's on_credit)
        assert native.CORE.counts()["iq_credits"] > did["iq_credits"]
    assert res_c == res_p
    assert sums_c == sums_p  # (rounds and repeats too: the same wakes skipped)
