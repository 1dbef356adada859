"""The element's fast paths give the golden figures too.

``tests/test_golden.py`` captures every run (``--pcap``), and a run that captures takes the element's
general paths; the fast paths (frames-only windows, frames handed straight into a peer's heap) are
taken only when nothing is captured. Here the pinned runs go again without a capture, every link on
UDP (the default) and in memory (``--direct``), with the compiled core (``emu.native``, when built)
and in pure Python: every pinned figure must come out the same.
"""

import json
from pathlib import Path

import pytest

from emu import native
from emu.front.cli import main

from test_golden import GOLDEN, RUNS, _pinned_part

NAMES = ["software", "nic_4KiB", "qsnet_hw", "switch", "coding_torus", "manager_fault"]


@pytest.mark.parametrize("core", ["compiled", "pure"])
@pytest.mark.parametrize("mode", ["sockets", "direct"])
@pytest.mark.parametrize("name", NAMES)
def test_uncaptured_runs_give_the_pinned_figures(name, mode, core, tmp_path, monkeypatch):
    if core == "pure":
        monkeypatch.setattr(native, "CORE", None)
    out = tmp_path / f"{name}.json"
    assert main(["run", *RUNS[name], "--json", str(out), *(["--direct"] if mode == "direct" else [])]) == 0
    rows = json.loads(out.read_text())["results"]
    for row in rows:
        row.pop("wall_s", None)
    want = json.loads(GOLDEN.read_text())[name]["results"]
    assert len(rows) == len(want)
    for got, w in zip(rows, want):
        assert _pinned_part(got, w) == w
