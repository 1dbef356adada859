"""A router's compiled receive makes the next hop's frame out of the received frame itself (its hop count
written in place: emu/csrc/iqrecv.h, ``rx_spare_refs``) only when nobody but the element window holds it (its
variable, and the record it popped from the heap: csrc/window.h). Python holding a frame on the router's heap
-- here every one there at every grant -- sees its bytes unchanged after the router took it (and a record it holds, unchanged after the
element let it go), and the run's
figures are the pure-Python run's."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent))
from uniform_run import at_every_grant, mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _spying(monkeypatch, held: list, records: list) -> None:
    """At every grant (``at_every_grant``, inside the compiled window): hold every frame then on the
    router's element's heap, with a copy of its bytes."""

    def look(eng):
        el = eng.credit_out.__self__  # (Element._credit_later, bound: the router's element)
        recs = [r for r in el.heap if type(r) is tuple and len(r) == 5]
        held.extend((r[3], bytearray(r[3])) for r in recs if type(r[3]) is bytes)
        records.extend((r, list(r)) for r in recs)  # (and the records: kept by the core only when nobody holds
        # them -- credit_in_c's and window.h's hp_rec_keep)
    at_every_grant(monkeypatch, look)


@needs_core
def test_frames_python_holds_are_never_the_next_hops(tmp_path, monkeypatch):
    held: list = []
    records: list = []
    _spying(monkeypatch, held, records)
    before = native.CORE.counts()
    comp, _, _ = mesh_watching_rounds(tmp_path, monkeypatch, True, None, pcap=False)  # (no capture: compiled windows)
    after = native.CORE.counts()
    pure, _, _ = mesh_watching_rounds(tmp_path, monkeypatch, False, None, pcap=False)
    assert after["iq_frames"] > before["iq_frames"] and after["iq_timers"] > before["iq_timers"]  # (the core's)
    assert len(held) > 1000  # (Python held frames the router then received)
    assert [b for b, then in held if bytearray(b) != then] == []
    assert len(records) > 1000 and [r for r, then in records if None in r or list(r) != then] == []
    assert comp == pure
