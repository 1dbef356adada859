"""Smoke test of scripts/qsnet_linetime.py at a tiny size: its instruments read the run and change nothing."""

import pytest
import trio
from load_script import load


def test_the_link_time_breakdown_adds_up_and_leaves_the_run_s_figures_as_they_were():
    lt = load("qsnet_linetime")
    r = lt.main(["--topo", "qsnet:nodes=32", "--peers", "2", "--routing", "qsnet"])
    q = load("qsnet_alltoall")
    job = q.Job("qsnet:nodes=32,bandwidth_gbps=20", "qsnet", "bisection", False, 4096, 1, peers=2)
    row = trio.run(q._run, job)
    assert round(r["avg_gbps"], 3) == row["avg_gbps"] and round(r["worst_gbps"], 3) == row["worst_gbps"]
    assert set(r["port_busy"]) == {"0->1", "1->2", "2->1", "1->0"}  # hosts, lower and upper routers
    for lev, shares in r["states"].items():
        assert shares and sum(shares.values()) == pytest.approx(1.0), lev
        assert 0 < shares["busy"] <= 1 and abs(shares["busy"] - r["port_busy"][lev]) < 0.01  # the two clocks agree
    assert 0 < r["outstanding"] <= 32 and 0 <= r["window_full"] <= 1
    assert r["resent"] == 0 and 0 < r["ack_mean_ns"] <= r["ack_max_ns"] < r["retransmit_ns"]


def test_bad_options_are_refused_in_one_line(capsys):
    lt = load("qsnet_linetime")
    with pytest.raises(SystemExit):
        lt.main(["--vcs", "0x"])
    with pytest.raises(SystemExit):
        lt.main(["--set", "switch.nonsense=1"])
    assert "error" in capsys.readouterr().err
