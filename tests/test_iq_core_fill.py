"""The compiled receive (``emu/csrc/iqrecv.h``: ``rx_ins_fill``, ``rx_lines_fill``) makes the entries of
the router's caches ``_ins`` and ``_lines`` it lacks as ``InputQueuedEngine.receive`` and ``_copy``
make them, instead of handing the frame to Python's receive: every router ends the run with the same
entries as in the pure-Python run, Python's ``_ser_in`` (its only maker of ``_ins`` entries) never runs,
and the figures and capture bytes are the pure run's."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent))
from uniform_run import mesh_watching_rounds  # noqa: E402


def test_caches_made_as_python_makes_them(tmp_path, monkeypatch):
    from emu.switch.iq import InputQueuedEngine

    def run(use_core: bool):
        routers: dict = {}
        made = [0]
        timer, ser_in = InputQueuedEngine.on_timer, InputQueuedEngine._ser_in

        def counted(self, p, n):
            made[0] += 1
            return ser_in(self, p, n)

        with monkeypatch.context() as m:
            m.setattr(InputQueuedEngine, "_ser_in", counted)
            if use_core:
                res, cap, n = mesh_watching_rounds(tmp_path, m, True, lambda self, n: routers.setdefault(self.name, self))
            else:
                def on_timer(self, now):  # (the pure run only: its rounds are Python's anyway)
                    routers.setdefault(self.name, self)
                    return timer(self, now)
                m.setattr(InputQueuedEngine, "on_timer", on_timer)
                res, cap, n = mesh_watching_rounds(tmp_path, m, False)
        caches = {name: (dict(e._ins), dict(e._lines)) for name, e in routers.items()}
        return res, cap, n, caches, made[0]

    pure, pure_cap, _, pure_caches, pure_made = run(False)
    if native.CORE is None:
        pytest.skip("the compiled core is not built here (no C compiler?)")
    comp, comp_cap, n, comp_caches, comp_made = run(True)
    assert n > 0 and pure_made > 0 and len(pure_caches) == 16
    assert all(ins and lines for ins, lines in pure_caches.values())
    assert comp_caches == pure_caches
    assert comp_made == 0  # (every entry the compiled receive's)
    assert comp == pure and comp_cap == pure_cap
