"""The compiled round's in-place writes (``emu/csrc/iq.h``) touch only objects nobody else holds: a grant's
line entry written into the output's old one (``line_reuse``), the heaps' popped int keys written with
the next keys pushed (``int_drop`` / ``push_int``), va's and sa's one-copy lists kept for the next
output (``list_recycle``). Python holding any of them -- here a reference kept to every line entry,
heap key and request list after every other round -- sees its line entries and keys unchanged, and
the run's figures and capture bytes are the pure-Python run's (rounds with nothing held in between:
the in-place paths taken too)."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from uniform_run import mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _run(tmp: Path, monkeypatch, use_core: bool, keep: list | None, lists: list | None = None) -> tuple[list, bytes, int]:
    """(results, capture, compiled rounds run); ``keep``: after every other compiled round, (object, what
    it held then) of each router's line entries and heap keys appended to it (never changed after: a
    line entry is replaced, not written, as Python does it), and its request lists to ``lists`` (held:
    those go on changing while they are their output's, as Python's do)."""
    def hold(self, n):
        if n % 2:
            keep.extend((e, list(e)) for e in self.line if e is not None)
            keep.extend((k, str(k)) for k in (*self._rel, *self._rcq))
            lists.extend(lst for d in (self._va, self._sa) for lst in d.values())
    return mesh_watching_rounds(tmp, monkeypatch, use_core, None if keep is None else hold)


@needs_core
def test_what_python_holds_is_never_written_in_place(tmp_path, monkeypatch):
    pure, pure_cap, _ = _run(tmp_path, monkeypatch, False, None)
    kept: list = []
    lists: list = []
    comp, comp_cap, n = _run(tmp_path, monkeypatch, True, kept, lists)
    assert n > 0 and kept and lists  # (the compiled round ran, and Python held what it left)
    kinds = {type(obj) for obj, _ in kept}
    assert list in kinds and int in kinds
    changed = [(obj, then) for obj, then in kept if (str(obj) if type(obj) is int else list(obj)) != then]
    assert not changed
    assert comp == pure
    assert comp_cap == pure_cap
    assert pure[0]["hop_count"] > 0
