"""The compiled router keeps the copies and packets whose last reference it drops (``copy_drop``,
``pkt_drop`` and ``copies_clear`` in ``emu/csrc/iq.h``) and writes every slot of them again for its
receive's next copy and packet (``iq_receive``, ``emu/csrc/iqrecv.h``). Python holding any of them --
here every copy and packet of the queues, the requests and the lines after every other compiled
round -- sees their fixed fields (set when they were made, never written after) unchanged and their
packet still theirs; and the run's figures and capture bytes are the pure-Python run's (the objects
nobody held were kept and made again in between)."""

import sys
from pathlib import Path

import pytest

from emu import native
from emu.switch.iqpacket import Copy, Packet

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from uniform_run import mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")

_COPY = ("pkt", "out", "frame", "group", "need", "n", "ser", "lag", "rank")
_PACKET = ("port", "vc", "head", "tail", "cost")


def _fixed(o) -> tuple:
    return tuple(getattr(o, f) for f in (_COPY if type(o) is Copy else _PACKET))


def _run(tmp: Path, monkeypatch, use_core: bool, keep: list | None) -> tuple[list, bytes, int]:
    """(results, capture, compiled rounds run); ``keep``: after every other compiled round, (object, its
    fixed fields then) of each router's copies and packets in its queues, requests and lines."""
    def hold(self, n):
        if n % 2:
            objs = [c for d in (self._va, self._sa) for lst in d.values() for c in lst]
            objs += [e[4] for e in self.line if e is not None and type(e[4]) is Copy]
            objs += [p for row in (*self.q, [*self.arriving]) for dq in row for p in dq]
            objs += [c.pkt for c in objs if type(c) is Copy]
            keep.extend((o, _fixed(o)) for o in objs)
    return mesh_watching_rounds(tmp, monkeypatch, use_core, None if keep is None else hold)


@needs_core
def test_copies_and_packets_python_holds_are_never_made_again(tmp_path, monkeypatch):
    pure, pure_cap, _ = _run(tmp_path, monkeypatch, False, None)
    kept: list = []
    comp, comp_cap, n = _run(tmp_path, monkeypatch, True, kept)
    assert n > 0 and kept  # (the compiled round ran, and Python held what it left)
    kinds = {type(obj) for obj, _ in kept}
    assert kinds == {Copy, Packet}
    changed = [(obj, then) for obj, then in kept if _fixed(obj) != then]
    assert not changed
    assert all(type(obj.pkt) is Packet for obj, _ in kept if type(obj) is Copy)
    assert comp == pure
    assert comp_cap == pure_cap
    assert pure[0]["hop_count"] > 0
