"""bench_ns3 at a tiny size without ns-3: both emulator modes end at the same virtual time and are
reported; a missing ns-3 Python is refused in one line before anything runs."""

import pytest
from load_script import load


def test_the_emulator_side_at_a_tiny_size(capsys):
    bench = load("bench_ns3")
    out = bench.main(["--topo", "star:n=4", "--messages", "1", "--rounds", "1"])
    assert set(out) == {"direct", "sockets"} and all(v["median"] > 0 for v in out.values())
    text = capsys.readouterr().out
    assert "ns-3: not run" in text and "every run ended at" in text


def test_a_missing_ns3_python_is_refused(tmp_path, capsys):
    bench = load("bench_ns3")
    with pytest.raises(SystemExit) as e:
        bench.main(["--ns3-python", str(tmp_path / "nope"), "--rounds", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no such file" in err and "pip install ns3" in err


def test_cpu_seconds_are_the_run_s_own(capsys, monkeypatch):
    """--clock cpu: a run's seconds are read from the CPU clock, once before and once after the run."""
    import time
    bench = load("bench_ns3")
    reads = []
    monkeypatch.setitem(bench.CLOCKS, "cpu", lambda: reads.append(1) or 100.0 + 0.5 * len(reads))
    out = bench.main(["--topo", "star:n=4", "--messages", "1", "--rounds", "1", "--clock", "cpu"])
    assert len(reads) == 4  # two reads per run, both modes
    assert all(v["median"] == v["best"] for v in out.values())
    # each run lasted 0.5 "CPU seconds": its crossings (the same in both modes) twice over
    assert out["sockets"]["median"] == out["direct"]["median"] and (out["direct"]["median"] * 0.5).is_integer()
    assert "per cpu second" in capsys.readouterr().out
    assert bench.CLOCKS["wall"] is time.perf_counter
