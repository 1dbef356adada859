"""The compiled core's host side of BookSim2's uniform traffic. Its ports with credit flow control inside an element's window (``emu/csrc/hostflow.h``):
Element._emit's hand-over to such a port (``OutPort.hand_over`` and its WAKE), Element._port_event's
WAKE and Flow._credit_arrived's credit to such a port, each ending in Flow._wake -- the twins of that
Python, which stays the specification. A host's port to an input-queued router is one, so BookSim2's
uniform comparison (``scripts/bench_iq.py``) runs through them for every packet. And the traffic
application's requests besides its sends: ``Host._op_sleep`` and ``Host._op_try_recv`` (``emu/csrc/host.h``).

Each case runs the same ``emu run --json`` with the compiled core and with none (pure Python): every
result and per-link counter equal; the core's counters say which twins ran.
"""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, FLIT, OURS  # noqa: E402
from uniform_run import uniform  # noqa: E402

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")
FLOW = ("flow_handed", "flow_wakes", "flow_credits", "host_sleeps", "host_try_recvs", "flow_idle")


def _run(out: Path, core, monkeypatch, topo: str, flits: int, load: float, cycles: int, sets: dict) -> tuple:
    """One quiet ``emu run --test uniform``: (its results without wall time, what the core's flow twins did)."""
    monkeypatch.setattr(native, "CORE", core)
    before = CORE.counts()
    res = uniform(out, topo, flits, load, cycles, sets)
    after = CORE.counts()
    return res, {k: after[k] - before[k] for k in FLOW}


def _twin(tmp: Path, monkeypatch, topo: str, vcs: int, flits: int, load: float, cycles: int, extra=None) -> dict:
    sets = {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued", **(extra or {})}
    pure, n0 = _run(tmp / "p.json", None, monkeypatch, topo, flits, load, cycles, sets)
    comp, n1 = _run(tmp / "c.json", CORE, monkeypatch, topo, flits, load, cycles, sets)
    assert n0 == dict.fromkeys(FLOW, 0)  # (no core: none of it ran)
    assert comp == pure
    assert comp[0]["frames_all_loads"] > 0
    return n1


@needs_core
@pytest.mark.parametrize("vcs,flits,load", [(8, 1, 0.6), (2, 1, 0.5), (1, 4, 0.4), (2, 4, 0.6)])
def test_uniform_mesh_twin(tmp_path, monkeypatch, vcs, flits, load):
    """BookSim2's comparison (the hosts' ``inject_vc=free``: a queue per VC group) at and past
    saturation: every packet handed over, woken and credited by the twins."""
    n = _twin(tmp_path, monkeypatch, "mesh:k=3,n=2", vcs, flits, load, 60)
    assert all(n[k] > 0 for k in FLOW), n


@needs_core
def test_most_credit_declines_the_hand_over(tmp_path, monkeypatch):
    """``inject_vc=most_credit`` (the receiver's groups pick the VC: CreditState.pick) is Python's
    hand-over; the wakes and credits of the same ports are still the twins'."""
    n = _twin(tmp_path, monkeypatch, "mesh:k=3,n=2", 2, 1, 0.5, 60, {"host.inject_vc": "most_credit"})
    assert n["flow_handed"] == 0 and all(n[k] > 0 for k in FLOW[1:]), n


@needs_core
def test_torus_and_pool(tmp_path, monkeypatch):
    """A torus (dateline VCs) with a shared pool in the routers' input buffers: credits to the pool."""
    n = _twin(tmp_path, monkeypatch, "torus:k=3,n=2", 4, 2, 0.5, 40, {"switch.pool_bytes": 4 * FLIT})
    assert all(n[k] > 0 for k in FLOW), n
