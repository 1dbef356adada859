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
