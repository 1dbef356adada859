"""The compiled credit path (``emu/csrc/credits.h``: ``credit_in_c``) reads a credit frame's fields from
its bytes -- as ``CREDIT.unpack(wire, ETH_LEN)`` reads them, which ``Flow._credit_arrived`` caches in
``emu.element_flow._READ`` by the bytes -- for every credit frame it takes, seen before or not, instead of
handing the first of each to Python's ``_credit_arrived``. The same run with the compiled core and with
none (pure Python): the results equal, and with the core Python's decode never runs (every credit
frame of the run the core's: ``_READ`` stays empty)."""

import sys
from pathlib import Path

import pytest

from emu import element_flow, native
from emu.wire.credit import CREDIT
from emu.wire.fabric import ETH_LEN

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, OURS  # noqa: E402
from uniform_run import uniform  # noqa: E402

CORE = native.CORE


class Counted:
    """``CREDIT`` with its ``unpack`` calls counted (what ``Flow._credit_arrived`` decodes)."""

    def __init__(self):
        self.calls = 0

    def unpack(self, buf, offset=0):
        self.calls += 1
        return CREDIT.unpack(buf, offset)


def _run(tmp: Path, core, monkeypatch, vcs: int, flits: int) -> tuple:
    monkeypatch.setattr(native, "CORE", core)
    counted = Counted()
    monkeypatch.setattr(element_flow, "CREDIT", counted)
    element_flow._READ.clear()
    sets = {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued"}
    res = uniform(tmp / f"r{core is not None}.json", "mesh:k=3,n=2", flits, 0.5, 40, sets)
    read = dict(element_flow._READ)
    element_flow._READ.clear()
    return res, read, counted.calls


@pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")
@pytest.mark.parametrize("vcs,flits", [(8, 4), (1, 1)])
def test_first_credit_frames_decoded_in_the_core(tmp_path, monkeypatch, vcs, flits):
    pure, pure_read, pure_calls = _run(tmp_path, None, monkeypatch, vcs, flits)
    comp, comp_read, comp_calls = _run(tmp_path, CORE, monkeypatch, vcs, flits)
    assert pure[0]["frames_all_loads"] > 0 and pure_calls == len(pure_read) > 0
    assert all(f == CREDIT.unpack(w, ETH_LEN) for w, f in pure_read.items())
    assert comp_calls == 0 and not comp_read  # (every credit frame read by the core)
    assert comp == pure
