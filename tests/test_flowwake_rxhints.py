"""The compiled receive reads an entry of the router's ``_ins`` and ``_lines`` caches, once its dict has
changed since it last read it, at the index where it found the entry (``emu/csrc/iqrecv.h``'s
``rx_cached``), checking the key there: a router whose caches have their entries taken out and put back
in the reverse order after every compiled round (the same entries at other indices: nothing a lookup
by key sees) runs as the pure-Python run does -- the same figures and capture bytes."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent))
from uniform_run import mesh_watching_rounds  # noqa: E402


def _reverse(d: dict) -> None:
    items = list(d.items())
    d.clear()
    for k, v in reversed(items):
        d[k] = v


def test_entries_moved_are_read_by_their_key(tmp_path, monkeypatch):
    pure, pure_cap, _ = mesh_watching_rounds(tmp_path, monkeypatch, False)
    if native.CORE is None:
        pytest.skip("the compiled core is not built here (no C compiler?)")
    moved = [0]

    def after_round(router, n):
        if len(router._ins) > 1 or len(router._lines) > 1:
            moved[0] += 1
        _reverse(router._ins)
        _reverse(router._lines)

    comp, comp_cap, n = mesh_watching_rounds(tmp_path, monkeypatch, True, after_round)
    assert n > 0 and moved[0] > 0
    assert comp == pure and comp_cap == pure_cap
