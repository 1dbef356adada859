"""``emu run --format nccl-tests|osu`` (issue 49, item 4): the collectives in those benchmarks' layouts,
with the columns their readers count on and figures equal to the JSON rows'."""

import json

import pytest

from emu.front.cli import main
from emu.front.units import nccl_bandwidth


def _run(tmp_path, capsys, fmt, tests, sizes="1KiB,64KiB", topo="fattree:k=2,n=2"):
    out = tmp_path / "r.json"
    code = main(["run", "--topo", topo, "--test", tests, "--size", sizes, "--format", fmt, "--json", str(out)])
    return code, capsys.readouterr().out, json.loads(out.read_text())["results"]


def test_nccl_tests_layout_columns_and_figures(tmp_path, capsys):
    code, text, rows = _run(tmp_path, capsys, "nccl-tests", "allreduce+allgather+bcast")
    assert code == 0
    lines = text.splitlines()
    heads = [ln for ln in lines if ln.startswith("#") and "size" in ln and "count" in ln]
    assert len(heads) == 3 and all(ln.split()[1:] == ["size", "count", "type", "redop", "root", "time", "algbw",
                                                      "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]
                                   for ln in heads)
    data = [ln.split() for ln in lines if ln and not ln.startswith("#")]
    assert len(data) == 6 and all(len(d) == 13 for d in data)  # what nccl-tests' parsers split on
    order = {"allreduce": 0, "allgather": 1, "bcast": 2}
    for d, row in zip(data, sorted(rows, key=lambda r: (order[r["name"]], r["size_bytes"]))):  # a block per collective
        n, size = row["ranks"], row["size_bytes"]
        total = size * (n if row["name"] == "allgather" else 1)
        assert int(d[0]) == total and int(d[1]) == total // 4 and d[2] == "float"
        assert d[3] == ("sum" if row["name"] == "allreduce" else "none")
        assert d[4] == ("0" if row["name"] == "bcast" else "-1")
        algbw, busbw = nccl_bandwidth(row)
        assert float(d[5]) == pytest.approx(row["completion_ns"] / 1000, abs=0.006)
        assert float(d[6]) == pytest.approx(algbw, abs=0.006) and float(d[7]) == pytest.approx(busbw, abs=0.006)
        assert d[8] == "0" and d[5:9] == d[9:13]
    assert text.count("# Out of bounds values : 0 OK") == 3
    assert "# Collective test concluded: all_reduce_perf" in text


def test_osu_layout(tmp_path, capsys):
    code, text, rows = _run(tmp_path, capsys, "osu", "allreduce+barrier", sizes="8,1KiB")
    assert code == 0
    lines = text.splitlines()
    assert "# OSU MPI Allreduce Latency Test" in text and "# OSU MPI Barrier Latency Test" in text
    assert "# Size       Avg Latency(us)" in lines  # %-10s%18s
    data = [ln for ln in lines if ln and not ln.startswith("#")]
    rows = sorted(rows, key=lambda r: (r["name"] != "allreduce", r.get("size_bytes", 0)))
    assert len(data) == 4
    assert data[0] == "%-10d%18.2f" % (8, rows[0]["completion_ns"] / 1000)
    assert data[1] == "%-10d%18.2f" % (1024, rows[1]["completion_ns"] / 1000)
    assert data[2] == "%17.2f" % (rows[2]["completion_ns"] / 1000)  # a barrier: no size column
    assert data[3] == "%17.2f" % (rows[3]["completion_ns"] / 1000)


def test_a_test_the_layout_has_no_place_for_is_refused(capsys):
    assert main(["run", "--topo", "star:n=4", "--test", "pingall+allreduce", "--format", "nccl-tests"]) == 2
    assert capsys.readouterr().out.strip() == (
        "refused: --format nccl-tests prints the collectives allreduce, allgather, reduce_scatter, alltoall, bcast, "
        "reduce; pingall is not one of them (leave --format out for the table)")
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--format", "osu", "--json", "-"]) == 2
    assert "send them to a file" in capsys.readouterr().err  # (refusals go where the data does not)
