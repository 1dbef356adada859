"""The compiled round's ``wait_vc`` values (``emu/csrc/iq.h``: ``pair_in_place``, ``pair_new``,
``pair_keep``): a pair the dict alone holds is written in place, a deleted one nobody holds is kept
for the next new entry. What Python sees must be what its own ``wait_vc[key] = (n, b)`` would leave:
every router's ``wait_vc`` goes through the same contents as in the pure-Python run, and a pair Python
holds (here every value of every ``wait_vc`` after every other round) is never written."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent))
from uniform_run import mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _values(v: tuple) -> tuple:
    """A pair's values in objects of their own (``x + 0``: a new int, or the small-int cache's): holding
    them holds neither the pair nor its ints, so that the core may still write them in place."""
    return tuple(x + 0 for x in v)


def _record(seen: dict, eng) -> None:
    """Append ``eng``'s wait_vc (as plain values) to its router's list when it changed since the last."""
    now = sorted((k, _values(v)) for k, v in eng.wait_vc.items())
    mine = seen.setdefault(eng.name, [])
    if not mine or mine[-1] != now:
        mine.append(now)


def test_wait_vc_pairs_as_python_leaves_them(tmp_path, monkeypatch):
    from emu.switch.iq import InputQueuedEngine

    pure_seen: dict = {}
    timer = InputQueuedEngine.on_timer

    def on_timer(self, now):  # (the pure run only: the compiled round is off there anyway)
        out = timer(self, now)
        _record(pure_seen, self)
        return out

    with monkeypatch.context() as m:
        m.setattr(InputQueuedEngine, "on_timer", on_timer)
        pure, pure_cap, _ = mesh_watching_rounds(tmp_path, m, False)
    if native.CORE is None:
        pytest.skip("the compiled core is not built here (no C compiler?)")
    comp_seen: dict = {}
    held: list = []

    def after(self, n):
        _record(comp_seen, self)
        if n % 2:
            held.extend((v, _values(v)) for v in self.wait_vc.values())

    comp, comp_cap, n = mesh_watching_rounds(tmp_path, monkeypatch, True, after)
    assert n > 0 and held and any(len(s) > 2 for s in pure_seen.values())
    assert comp_seen == pure_seen
    assert [(v, then) for v, then in held if _values(v) != then] == []
    assert comp == pure and comp_cap == pure_cap


@needs_core
def test_pairs_are_the_cores(tmp_path, monkeypatch):
    """The pairs the test above compares are the compiled round's own (``pair_new``: ints of their own,
    not the small-int cache's that Python's ``(n + 1, b + c.n)`` holds), so it checks that code."""
    small = int("1")  # (the small-int cache's 1)
    own = [0]

    def after(self, n):
        own[0] += sum(1 for v in self.wait_vc.values() if v[0] == 1 and v[0] is not small)

    _, _, n = mesh_watching_rounds(tmp_path, monkeypatch, True, after, pcap=False)
    assert n > 0 and own[0] > 0
