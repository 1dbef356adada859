"""The compiled round keeps the one-copy request lists it takes out of ``_va`` / ``_sa`` (``list_recycle``
in ``emu/csrc/iq.h``) for its next ``dict_append``. A list is a GC-tracked object: while kept it is one of
``gc.get_objects()``, and Python may hold it from there. Such a list must never be handed out again: the
router's dicts never get a list Python holds (the pure-Python round makes a new ``[c]`` each time)."""

import gc
import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from uniform_run import mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


@needs_core
def test_a_request_list_python_found_in_gc_is_not_reused(tmp_path, monkeypatch):
    held: list = []  # (empty lists found by gc.get_objects, none a request list then)
    aliased: list = []

    def look(self, n):
        values = {id(v) for d in (self._va, self._sa) for v in d.values()}
        if held:
            aliased.extend(v for v in held if id(v) in values)
        if n in (200, 400, 800):
            held.extend(o for o in gc.get_objects() if type(o) is list and not o and id(o) not in values)

    _, _, rounds = mesh_watching_rounds(tmp_path, monkeypatch, True, look, pcap=False)
    assert rounds > 800 and held
    assert not aliased  # (a list Python holds became a router's request list)
