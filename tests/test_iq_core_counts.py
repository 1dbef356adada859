"""The compiled router's counters (``emu/csrc/iq.h``'s ``iqr_count_add``: ``iq_stats``, a switch's
``stats['forwarded']``; ``emu/csrc/iqhooks.h``: an element's ``_pseq``) are written in place only while
their dict holds the only reference to them, small counts too (an int of their own, not the small-int
cache's). Python holding any of them -- here every counter's int kept after every other compiled round
-- sees it unchanged, the small-int cache's ints keep their values, and the run's figures, counters
and capture bytes are the pure-Python run's."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
sys.path.insert(0, str(Path(__file__).parent))
from uniform_run import mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _counters(router) -> list:
    el = router.credit_out.__self__ if hasattr(router.credit_out, "__self__") else None
    found = [(f"iq_stats[{k}]", v) for k, v in router.iq_stats.items()]
    found += [(f"stats[{k}]", v) for k, v in router.stats.items() if type(v) is int]
    if el is not None and "_pseq" in vars(el):
        found.append(("_pseq", vars(el)["_pseq"]))
    return found


def _run(tmp: Path, monkeypatch, use_core: bool, keep: list | None, last: dict):
    def hold(self, n):
        last[self.name] = self
        if n % 2:
            keep.extend((what, v, int(str(v))) for what, v in _counters(self))
    return mesh_watching_rounds(tmp, monkeypatch, use_core, None if keep is None else hold)


@needs_core
def test_counters_python_holds_are_never_written_in_place(tmp_path, monkeypatch):
    pure_last: dict = {}
    pure, pure_cap, _ = _run(tmp_path, monkeypatch, False, None, pure_last)
    kept: list = []
    last: dict = {}
    comp, comp_cap, n = _run(tmp_path, monkeypatch, True, kept, last)
    assert n > 0 and kept and last
    assert any(what.startswith("iq_stats[va_grants]") and v > 0 for what, v, _ in kept)
    changed = [(what, then, v) for what, v, then in kept if v != then]
    assert not changed
    assert [x for x in range(-5, 257)] == [int(str(x)) for x in range(-5, 257)]  # (the small ints untouched)
    assert comp == pure
    assert comp_cap == pure_cap
    assert pure[0]["hop_count"] > 0


@needs_core
def test_counters_match_pure_python(tmp_path, monkeypatch):
    """Every router's counters after a run, compiled and pure (the counts equal, ints all)."""
    from emu.switch.iq import InputQueuedEngine

    seen: dict = {False: [], True: []}
    init = InputQueuedEngine.__init__

    for use_core in (False, True):
        def watch(self, *a, _u=use_core, **kw):
            init(self, *a, **kw)
            seen[_u].append(self)
        monkeypatch.setattr(InputQueuedEngine, "__init__", watch)
        mesh_watching_rounds(tmp_path, monkeypatch, use_core, None, pcap=False)
    assert seen[False] and len(seen[False]) == len(seen[True])

    def counts(engines):
        return sorted((e.name, tuple(sorted(e.iq_stats.items())), e.stats.get("forwarded")) for e in engines)
    assert counts(seen[True]) == counts(seen[False])
    assert all(type(v) is int for e in seen[True] for v in e.iq_stats.values())
    assert sum(e.iq_stats["rounds"] for e in seen[True]) > 0
