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
    """--clock cpu: a run's seconds are read from the CPU clock, once before and once after the run
    (one run as its own process runs it: --child)."""
    import json
    import time
    bench = load("bench_ns3")
    reads = []
    monkeypatch.setitem(bench.CLOCKS, "cpu", lambda: reads.append(1) or 100.0 + 0.5 * len(reads))
    job = {"spec": "star:n=4", "messages": 1, "size": 64, "clock": "cpu"}
    runs = [bench.main(["--child", json.dumps(dict(job, direct=d))]) for d in (True, False)]
    assert len(reads) == 4  # two reads per run
    # each run lasted 0.5 "CPU seconds": its crossings (the same in both modes) twice over
    assert runs[0]["per_s"] == runs[1]["per_s"] == runs[0]["crossings"] / 0.5 > 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["per_s"] == runs[1]["per_s"]
    assert bench.CLOCKS["wall"] is time.perf_counter


def test_each_run_uses_its_own_tree(tmp_path, capsys):
    """A run of another tree (--before) imports that tree's emu, in that tree's folder, whatever the
    folder the benchmark was started from (``python -m emu`` and ``sys.path[0]`` favour the latter)."""
    import pathlib
    bench = load("bench_ns3")
    here = pathlib.Path(bench.__file__).resolve().parents[1]
    other = tmp_path / "other"
    other.mkdir()
    for entry in here.iterdir():  # (a second checkout: this one's files under another folder)
        if entry.name != ".git":
            (other / entry.name).symlink_to(entry)
    r = bench.emulator_run(other, "star:n=4", 1, 64, True, "wall")
    assert r["emu"] == str(other / "emu" / "__init__.py") and r["cwd"] == str(other) and r["crossings"] > 0
    out = bench.main(["--topo", "star:n=4", "--messages", "1", "--rounds", "1", "--before", str(other)])
    assert set(out) == {"before direct", "before sockets", "direct", "sockets"}
    assert "every run ended at" in capsys.readouterr().out


def test_a_before_that_is_no_checkout_is_refused(tmp_path, capsys):
    bench = load("bench_ns3")
    with pytest.raises(SystemExit) as e:
        bench.main(["--before", str(tmp_path), "--rounds", "1"])
    assert e.value.code == 2 and "not a checkout" in capsys.readouterr().err
