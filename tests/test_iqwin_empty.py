"""The compiled round's empty result (``emu/csrc/iq.h``, ``iq_empty_list`` in ``iqhooks.h``): one shared empty
list only on the element window's own path (csrc/iqtimer.h's ``iq_on_timer``, whose caller only reads an empty
result's size). Called from Python -- ``InputQueuedEngine.on_timer`` calls ``_cst[0]`` -- every round returns a
list of its own, which Python may fill or keep: never the shared one."""

import pytest

from emu import native
from emu.config import LinkSpec, SwitchSpec
from emu.switch import iqcore
from emu.switch.iq import Copy, Packet, make_iq
from emu.topologies.base import Topology

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")

NOW, OUT = 10, 4


def _router():
    t = Topology("star")
    for i in range(4):
        t.add_host(f"h{i}")
    t.add_switch("s0", SwitchSpec(model="input_queued", vcs=2))
    t.add_switch("s1", SwitchSpec(model="input_queued", vcs=2))
    for i in range(4):
        t.add_link(f"h{i}", "s0", LinkSpec(), a_port=0, b_port=i)
    t.add_link("s0", "s1", LinkSpec(), a_port=4, b_port=0)
    t.routes = {"s0": list(range(4)), "s1": [0] * 4}
    return make_iq(t.nodes["s0"], t, {})


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
    eng = _router()
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
