"""The compiled host side of credit flow control (``emu/csrc/hostflow.h``: the hand-over, the WAKE and
the credit of a host's port to an input-queued router) reads its CreditState's fields (``hk_fields``)
at the indices where it found them: in the class's shared keys for a dict as __init__ made it
(``emu/csrc/common.h``'s ``h2_split_values``), else where it found them last in any flow's dict
(``fw_dict_values``). Here the hosts' flows differ: dicts in another key order, with a field more,
with a key not interned, of the general kind (a key not a str), of a subclass, with an instance
``admit`` set mid-run (a key new to the shared keys) -- all read in turn, each seen as Python (the
specification) sees it: the run's results those of the pure run, the admits called as often, every
hand-over the core may take taken by it."""

import sys
from pathlib import Path

import pytest

import emu.build
from emu import native
from emu.buffers import CreditState
from emu.port import OutPort

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, OURS  # noqa: E402
from uniform_run import uniform  # noqa: E402

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")
FLOW = ("flow_handed", "flow_wakes", "flow_credits")
HAND_OVER = OutPort.hand_over


class Sub(CreditState):
    pass


def _odd_flows(made: list, later: list, kinds: dict):
    """A stand-in for emu.build's CreditState: the k-th flow made so (by k mod 9), its kind in
    ``kinds`` by its id; those to get an admit later in ``later``."""

    def make(*a, **kw):
        k = len(made)
        kind = ("plain", "reversed", "more", "odd_key", "general", "plain", "admit", "sub", "reversed")[k % 9]
        fl = (Sub if kind == "sub" else CreditState)(*a, **kw)
        if kind == "reversed":  # (a combined dict: every field at another index)
            fl.__dict__ = dict(reversed(list(fl.__dict__.items())))
        elif kind == "more":  # (a field more: ``admit`` and ``by_prio`` no longer known absent by count)
            fl.held_bytes = 0
        elif kind == "odd_key":  # (``credits`` under a str equal to it, not the interned one)
            d = dict(fl.__dict__)
            d["".join(["cred", "its"])] = d.pop("credits")
            fl.__dict__ = d
        elif kind == "general":  # (a key not a str: a dict of the general kind)
            fl.__dict__[1] = 2
        elif kind == "admit":  # (an admit set on it later: ``_run``'s)
            later.append(fl)
        made.append(kind)
        kinds[id(fl)] = kind
        return fl

    return make


def _run(out: Path, core, monkeypatch) -> tuple:
    monkeypatch.setattr(native, "CORE", core)
    made, admits, kinds, python, later = [], [], {}, [], []
    monkeypatch.setattr(emu.build, "CreditState", _odd_flows(made, later, kinds))

    def admit(frame, at):  # (every frame kept: Python's hand-over, counted)
        admits.append(at)
        return frame

    def counted(p, frame, at, token):  # (Python's hand-overs: of which kind of flow)
        kind = kinds[id(p.flow)]
        python.append(kind if kind != "admit" or "admit" in p.flow.__dict__ else "admit_not_yet")
        if kind == "sub" and python.count("sub") == 10:  # (at the same virtual time in both runs)
            spare = CreditState(1, [0])  # (its attribute before its dict is made: a key the class's shared
            spare.admit = None  # keys gain, mid-run -- the indices the core found stale; the flows' dicts
            for fl in later:  # still those keys' as they gain an admit)
                fl.admit = admit
        return HAND_OVER(p, frame, at, token)

    monkeypatch.setattr(OutPort, "hand_over", counted)
    before = CORE.counts()
    sets = {**OURS, **FAITHFUL, "switch.vcs": 2, "switch.model": "input_queued"}
    res = uniform(out, "mesh:k=3,n=2", 1, 0.5, 60, sets)
    after = CORE.counts()
    return res, made, admits, python, {k: after[k] - before[k] for k in FLOW}


@needs_core
def test_flows_of_every_layout_read_with_the_same_hints(tmp_path, monkeypatch):
    # (the core's run first: the class's shared keys gain ``admit`` in it -- unless an earlier test in
    # this process gave them one, the same keys then throughout)
    comp, made1, admits1, py1, n1 = _run(tmp_path / "c.json", CORE, monkeypatch)
    pure, made0, admits0, py0, n0 = _run(tmp_path / "p.json", None, monkeypatch)
    assert made0 == made1 and {"reversed", "more", "odd_key", "general", "admit", "sub"} <= set(made1)
    assert n0 == dict.fromkeys(FLOW, 0)
    assert all(n1[k] > 0 for k in FLOW), n1  # (the twins ran, for the flows they take)
    assert admits0 and admits1 == admits0  # (an instance's admit: never taken by the core)
    assert "admit_not_yet" in py0  # (the flow was a plain one first: the core's)
    # every hand-over the core can take it took (a field read wrong: declined, or taken when not its):
    # Python's only for the flows with an admit or of a subclass, as often as in the pure run
    assert set(py1) == {"admit", "sub"} and sorted(py1) == sorted(k for k in py0 if k in ("admit", "sub"))
    assert n1["flow_handed"] == len(py0) - len(py1)
    assert comp == pure
    assert comp[0]["frames_all_loads"] > 0
