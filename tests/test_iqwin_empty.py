"""The compiled round's empty result (``emu/csrc/iq.h``, ``iq_empty_list`` in ``iqhooks.h``): one shared empty
list only on the element window's own path (csrc/iqtimer.h's ``iq_on_timer``, whose caller only reads an empty
result's size). Called from Python -- ``InputQueuedEngine.on_timer`` calls ``_cst[0]`` -- every round returns a
list of its own, which Python may fill or keep: never the shared one."""

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


def _waiting_on_a_busy_output(eng):
    """One copy waiting for switch allocation at output 4, which is busy: the round grants nothing."""
    pkt = Packet(0, 0, 0, 0, 64)
    c = Copy(pkt, OUT, b"", 0, 64, 0, 64)
    pkt.copies.append(c)
    eng._sa[OUT] = [c]
    eng.out_ready[OUT] = NOW + 5
    eng.active.append(0)


@needs_core
@pytest.mark.parametrize("waiting", [False, True])
def test_a_round_called_from_python_returns_a_list_of_its_own(waiting, monkeypatch):
    monkeypatch.setattr(iqcore, "USE_CORE", True)
    eng = lone_router()
    if waiting:
        _waiting_on_a_busy_output(eng)
    cs = eng._core_state()
    assert cs, "the compiled round is not chosen for this router"
    def round_(k):
        return cs[0](cs[1], cs[2], eng._fresh, NOW + k, False, eng._up, eng.credit_out)

    held = [round_(k) for k in range(3)]
    assert held == [[], [], []]
    assert len({id(r) for r in held}) == 3  # (a new list each round, none shared between them)
    for k, r in enumerate(held):
        r.append(("kept by Python", k))  # (Python may fill what it was given ...)
    assert round_(3) == [] and [len(r) for r in held] == [1, 1, 1]  # (... and no later round's list is one of those)
    assert (eng._sa.get(OUT) is not None) == waiting  # (the copy still waits: nothing granted)
