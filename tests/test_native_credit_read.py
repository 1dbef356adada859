"""The compiled credit path (``emu/csrc/credits.h``: ``cr_decode``) decodes a credit frame it has not
seen before itself -- ``CREDIT.unpack(wire, ETH_LEN)`` put in ``emu.element_flow._READ`` by its bytes,
as ``Flow._credit_arrived`` does -- and goes on in the core, instead of handing the frame to Python's
``_credit_arrived``. The same run with the compiled core and with none (pure Python): the results equal,
every ``_READ`` entry the fields ``CREDIT.unpack`` reads from its bytes, the same entries both ways,
and with the core Python's decode never runs (every credit frame of the run the core's)."""

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
    assert all(type(f) is tuple and f == CREDIT.unpack(w, ETH_LEN) for w, f in comp_read.items())
    assert comp_read == pure_read
    assert comp_calls == 0  # (every credit frame decoded by the core)
    assert comp == pure
