"""bench_instructions: refused in one line without valgrind or with a bad count; the figure it
prints is read from callgrind's output (the run itself needs valgrind: tried where it is)."""

import shutil

import pytest
from load_script import load

from emu import native


def test_without_valgrind_it_is_refused_in_one_line(monkeypatch, capsys):
    bench = load("bench_instructions")
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit) as e:
        bench.main([])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "valgrind is not installed" in err and "apt-get install valgrind" in err


def test_a_bad_message_count_is_refused(capsys):
    bench = load("bench_instructions")
    with pytest.raises(SystemExit) as e:
        bench.main(["--messages", "0"])
    assert e.value.code == 2 and "--messages must be at least 1" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("valgrind") is None or native.CORE is None, reason="needs valgrind and the core")
def test_it_counts_a_run_whose_figures_are_the_models(monkeypatch):
    bench = load("bench_instructions")
    monkeypatch.setattr(bench, "RUN", bench.RUN.replace("bench_ns3.TOPO", "'star:n=3'"))
    r = bench.count(1, True)
    assert r["crossings"] == 3 * 2 * 2 and r["instructions"] > 0  # (6 messages, each host link then the switch's)


def test_whole_is_the_difference_of_two_runs_per_crossing(monkeypatch, capsys):
    """--whole: the process counted at --messages and twice as many; start-up cancels."""
    bench = load("bench_instructions")
    monkeypatch.setattr(bench.shutil, "which", lambda name: "/usr/bin/valgrind")
    seen = []

    def fake(messages, direct, whole=False):
        seen.append((messages, direct, whole))
        return {"instructions": 1_000_000 + 300 * 100 * messages, "crossings": 100 * messages,
                "completion_ns": 7 * messages, "loop": "compiled"}

    monkeypatch.setattr(bench, "count", fake)
    r = bench.main(["--whole", "--messages", "2", "--mode", "sockets"])
    assert seen == [(2, False, True), (4, False, True)]
    assert r["crossings"] == 200 and r["per_crossing"] == 300
    assert "(300 per crossing)" in capsys.readouterr().out


def test_whole_repeated_takes_each_sizes_fewest_and_refuses_a_negative_difference(monkeypatch, capsys):
    """--repeat N: a loaded machine only adds the event loop's polls, so each size's fewest counts;
    a larger run that counted fewer instructions is refused in one line, not printed as a figure."""
    bench = load("bench_instructions")
    monkeypatch.setattr(bench.shutil, "which", lambda name: "/usr/bin/valgrind")
    extra = iter([900_000_000, 0, 0, 5_000])  # (the first run of 2 messages polled 0.9 G more)

    def fake(messages, direct, whole=False):
        return {"instructions": 1_000_000 + 300 * 100 * messages + next(extra), "crossings": 100 * messages,
                "completion_ns": 7 * messages, "loop": "compiled"}

    monkeypatch.setattr(bench, "count", fake)
    r = bench.main(["--whole", "--messages", "2", "--repeat", "2"])
    assert r["per_crossing"] == 300
    assert "2 messages: 2 runs, 900,000,000 instructions apart" in capsys.readouterr().out
    monkeypatch.setattr(bench, "count", lambda m, d, whole=False: {
        "instructions": 5_000_000 - m, "crossings": 100 * m, "completion_ns": 1, "loop": "compiled"})
    with pytest.raises(SystemExit, match="counted 2 instructions fewer.*--repeat 3"):
        bench.main(["--whole", "--messages", "2"])
