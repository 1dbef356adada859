"""The four-item tuples the compiled core keeps when it lets go of their last reference (``iw_t4_keep`` /
``iw_t4_new``, emu/csrc/common.h): a router's credit events on its element's ``pevents`` (made by
csrc/iqhooks.h's ``iq_credit_out_c``, taken by csrc/credits.h's ``credit_out_c``) and the credits' entries on
their ports' link control (``ctl``: made by ``credit_out_c``, taken by csrc/transmit.h's ``hand_over_ctl``).
Python holding any of them -- here every one there after every other compiled round -- sees it unchanged,
and the run's figures are the pure-Python run's."""

import sys
from pathlib import Path

import pytest

from emu import native

sys.path.insert(0, str(Path(__file__).parent))
from uniform_run import at_every_grant, mesh_watching_rounds  # noqa: E402

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _spying(monkeypatch, kept: list) -> None:
    """At every grant (``at_every_grant``, inside the compiled timer): hold every four-item tuple then on
    the router's element's port events and its ports' link control, with its items then."""

    def look(eng):
        el = eng.credit_out.__self__  # (Element._credit_later, bound: the router's element)
        tuples = [e for e in el.pevents if type(e) is tuple and len(e) == 4]
        tuples += [e for p in el.outs if p is not None for e in p.ctl if type(e) is tuple and len(e) == 4]
        kept.extend((e, list(e)) for e in tuples)  # (its items then: tuple(e) would be e itself)
    at_every_grant(monkeypatch, look)


@needs_core
def test_credit_tuples_python_holds_stay_as_they_were(tmp_path, monkeypatch):
    kept: list = []
    _spying(monkeypatch, kept)
    before = native.CORE.counts()
    comp, _, _ = mesh_watching_rounds(tmp_path, monkeypatch, True, None, pcap=False)  # (no capture: compiled windows)
    after = native.CORE.counts()
    pure, _, _ = mesh_watching_rounds(tmp_path, monkeypatch, False, None, pcap=False)
    assert all(after[k] > before[k] for k in ("iq_timers", "iq_hooks", "credits_out", "handed_over"))  # (the core's)
    assert len(kept) > 1000  # (Python held what the core made)
    assert [e for e, then in kept if len(e) != 4 or None in e or list(e) != then] == []
    assert comp == pure
