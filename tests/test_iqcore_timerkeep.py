"""The compiled ``on_timer`` (``emu/csrc/iqtimer.h``) keeps, per router, what it last found plain (its
``_cst`` tuple, its instance dict unchanged since, the ``credit_out`` there) and skips those checks while
they hold. A router changed in the middle of a run -- an ``on_timer`` set on the object, another
``credit_out``, another ``_cst`` -- must be seen at its next timer call, and an ``on_credit`` of its own
(``iq_on_credit`` reads the same entry) at every credit, as Python sees them: the new
method or function is the one called, and the figures are those of the pure-Python run."""

import sys
from pathlib import Path

import pytest

from emu import native
from emu.switch import iqcore
from emu.switch.iqcore import CoreRound

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, OURS  # noqa: E402
from uniform_run import uniform  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")

_MADE = CoreRound._core_state
AFTER = 6
"""Each router changes itself at its AFTER-th credit sent (its compiled timer has run by then)."""


def _run(tmp: Path, monkeypatch, core, calls: dict) -> list:
    """A 4x4 mesh, 2 VCs, uniform traffic, with every router changing itself mid-run (by its index
    modulo 4: an ``on_timer`` of its own, another ``credit_out``, another ``_cst``; or an ``on_credit`` of
    its own from its first timer call on); ``calls`` counts
    the new ones' calls. The run's results without wall time."""
    monkeypatch.setattr(native, "CORE", core)
    monkeypatch.setattr(iqcore, "USE_CORE", core is not None)  # (the switch's own choice of the compiled round)
    made = _MADE
    seen: list = []

    def install(self):
        cs = made(self)
        idx = len(seen)
        seen.append(self)
        first = self.credit_out
        sent = [0]

        def change():
            kind = idx % 4
            if kind == 0:
                def own_timer(now, _m=self.on_timer):
                    calls["on_timer"] += 1
                    return _m(now)
                self.on_timer = own_timer  # (in the object's __dict__)
            elif kind == 1:
                def second(*a):
                    calls["credit_out"] += 1
                    return first(*a)
                self.credit_out = second
            elif kind == 2 and self._cst:  # (the compiled round chosen: another tuple, its round wrapped)
                c = self._cst

                def rnd(*a, _f=c[0]):
                    calls["round"] += 1
                    return _f(*a)
                self._cst = (rnd, c[1], c[2], c[3])

        if idx % 4 == 3:  # (an on_credit of its own from its first timer on: its on_timer the compiled one)
            def own_credit(*a, _m=self.on_credit):
                calls["on_credit"] += 1
                return _m(*a)
            self.on_credit = own_credit

        def counting(*a):
            sent[0] += 1
            if sent[0] == AFTER:
                change()
            return first(*a)

        if first is not None:
            self.credit_out = counting
        return cs

    monkeypatch.setattr(CoreRound, "_core_state", install)
    from bench_iq import SAT
    sets = {**OURS, **FAITHFUL, "switch.vcs": 2, "switch.model": "input_queued"}
    return uniform(tmp / f"r{int(core is not None)}.json", "mesh:k=4,n=2", 1, SAT[(4, 2, 1)] * 0.9, 40, sets, [])


@needs_core
def test_a_router_changed_mid_run_is_seen_at_its_next_timer(tmp_path, monkeypatch):
    core = native.CORE
    pure_calls = {"on_timer": 0, "credit_out": 0, "round": 0, "on_credit": 0}
    pure = _run(tmp_path, monkeypatch, None, pure_calls)
    calls = {"on_timer": 0, "credit_out": 0, "round": 0, "on_credit": 0}
    before = core.counts()
    comp = _run(tmp_path, monkeypatch, core, calls)
    did = {k: v - before[k] for k, v in core.counts().items()}
    assert did["iq_timers"] > 0 and did["iq_credits"] > 0  # (the compiled on_timer and on_credit ran, for the others)
    assert calls["on_timer"] > 0 and calls["credit_out"] > 0 and calls["round"] > 0 and calls["on_credit"] > 0  # (each seen)
    assert calls["on_timer"] == pure_calls["on_timer"]  # (the object's own on_timer called as often as in Python)
    assert calls["on_credit"] == pure_calls["on_credit"]
    assert comp == pure
    assert pure[0]["hop_count"] > 0
