"""Smoke tests of spec 03's experiment scripts on their smallest configurations (the full runs are
in scripts/, not in the test suite)."""

import sys

from load_script import SCRIPTS
from load_script import load as _load


def test_barrier_script_equals_the_model_on_a_star_and_beats_software(tmp_path):
    rows = _load("qsnet_barrier").main(["--topos", "star:n=8;fattree:k=2,n=3", "--skew", "0,3000", "--seeds", "2",
                                        "--out", str(tmp_path)])
    for r in rows:
        if r["topology"].startswith("star") and r["algo"] != "sw dissemination":
            assert r["model_ns"] == r["latency_ns"], r
    by = {(r["topology"], r["skew_ns"], r["algo"]): r for r in rows}
    for (topo, skew, algo), r in by.items():
        if algo == "hw tree":
            assert r["latency_ns"] < by[(topo, skew, "sw dissemination")]["latency_ns"]
            assert r["cpu_ns"] < by[(topo, skew, "sw dissemination")]["cpu_ns"]
    assert (tmp_path / "barrier.csv").stat().st_size > 0 and (tmp_path / "barrier.png").stat().st_size > 0


def test_bcast_script_load_equals_the_tree_model(tmp_path):
    rows = _load("qsnet_bcast").main(["--topos", "fattree:k=2,n=3", "--sizes", "64,4KiB", "--out", str(tmp_path)])
    for r in rows:
        assert r["hw_crossings"] == r["model_crossings"] and r["hw_one_ns"] < r["hw_all_ns"] < r["sw_ns"]
    assert (tmp_path / "bcast.png").stat().st_size > 0


def test_threshold_script_sweeps_thresholds_and_picks(tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    table = _load("qsnet_threshold").main(["--topo", "fattree:k=2,n=2", "--thresholds", "0,4", "--picks",
                                           "first_free,random", "--patterns", "permutation", "--seeds", "2",
                                           "--jobs", "1", "--out", str(tmp_path)])
    keys = {(r["routing"], r["threshold"]) for r in table}
    assert keys == {("static", None)} | {(f"qsnet/{p}", th) for p in ("first_free", "random") for th in (0, 4)}
    assert all(0 < r["avg"] <= r["model"] + 1 for r in table)
    assert (tmp_path / "threshold.png").stat().st_size > 0
