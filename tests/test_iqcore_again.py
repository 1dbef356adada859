"""A second allocation round at the same instant (``again``: a credit or a frame woke the router after
its round): only the copies that did not ask for a VC in the first ask now. The compiled round
(``emu/csrc/iq.h``'s ``iq_va_one``, which makes no list when none or one copy asks) must leave what
Python's ``Rounds._round`` leaves: the same VCs given, the same waiting lists in the same order."""

import sys
from pathlib import Path

import pytest

from emu import native
from emu.switch import iqcore
from emu.switch.iq import Copy, Packet

sys.path.insert(0, str(Path(__file__).parent))
from iq_router import lone_router  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")

NOW, OUT = 10, 4


def _state(eng, tried: list[bool], free: int):
    """Output 4's VC requests, one copy per input (``tried[p]``: it asked at NOW already), ``free`` of its
    VCs free, the output busy (no switch allocation this round)."""
    waiting = []
    for p, t in enumerate(tried):
        pkt = Packet(p, 0, 0, 0, 64)
        c = Copy(pkt, OUT, b"", 0, 64, 0, 64)
        pkt.copies.append(c)
        c.va_try = NOW if t else NOW - 1
        waiting.append(c)
    eng._va[OUT] = list(waiting)
    eng._va_chk[OUT] = 0
    hold = eng.vc_hold[OUT]
    for w in range(len(hold)):
        hold[w] = None if w < free else object()
    eng.out_ready[OUT] = NOW + 5
    eng.active.append(0)
    eng._rnow = NOW  # (its first round at NOW has run)
    return waiting


def _seen(eng, waiting) -> tuple:
    return ([(c.ovc, c.sa_at, c.va_try) for c in waiting], [waiting.index(c) for c in eng._va.get(OUT, [])],
            [waiting.index(c) for c in eng._sa.get(OUT, [])], dict(eng.wait_vc), list(eng.va_ptr[0]),
            eng._va_chk[OUT], dict(eng.iq_stats))


@needs_core
@pytest.mark.parametrize("tried,free", [([True], 2), ([False], 2), ([True, False], 1), ([False, True, False], 1),
                                        ([False, False, False], 2), ([True, True], 2), ([False, False], 1)])
def test_a_second_round_at_an_instant_gives_vcs_as_python_does(tried, free, monkeypatch):
    monkeypatch.setattr(iqcore, "USE_CORE", True)
    py = lone_router()
    pw = _state(py, tried, free)
    py._round(NOW)
    c = lone_router()
    cw = _state(c, tried, free)
    cs = c._core_state()
    assert cs, "the compiled round is not chosen for this router"
    c.iq_stats["repeats"] += 1  # (as on_timer counts it before the round)
    out = cs[0](cs[1], cs[2], c._fresh, NOW, True, c._up, c.credit_out)
    assert out == []
    assert _seen(c, cw) == _seen(py, pw)
    assert sum(cw[i].ovc >= 0 for i in range(len(tried))) == min(free, tried.count(False))  # (who asked got one)
