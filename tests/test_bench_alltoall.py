"""bench_alltoall at a tiny size: both modes give the same virtual figures, and the loopback loop
of the goal (issue 27) is measured beside them (its speed is the script's business, not a test's)."""

from load_script import load


def test_both_modes_and_the_loopback_loop(capsys):
    bench = load("bench_alltoall")
    rows = bench.main(["--topo", "star:n=4", "--messages", "1", "--loop", "50"])
    assert [r["mode"] for r in rows] == ["sockets", "direct"]
    assert rows[0]["crossings"] == rows[1]["crossings"] == 4 * 3 * 2  # every message: host -> switch -> host
    assert rows[0]["completion_ns"] == rows[1]["completion_ns"] > 0
    assert all(r["loop_per_s"] > 0 and r["loop_per_cpu_s"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert out.count("loopback loop:") == 1
    assert "sockets: best" in out and "direct: best" in out and "of the loopback loop" in out
