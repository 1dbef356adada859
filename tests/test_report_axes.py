"""emu report: a sweep's axes by name, log scales where values span decades, nccl-tests' units,
open-loop traffic as latency-load curves (issue 42, item 2)."""

import json

import pytest

from emu.config import ConfigError
from emu.front.cli import main
from emu.front.report import report
from emu.front.report_sweep import metric, sweep_lines
from emu.front.units import nccl_bandwidth


def test_nccl_tests_bandwidths():
    # allreduce of 1 MiB on 8 ranks in 1 ms: algbw 1.048576 GB/s, busbw x 2*7/8
    row = {"name": "allreduce", "size_bytes": 1 << 20, "ranks": 8, "completion_ns": 10**6}
    assert nccl_bandwidth(row) == (1.048576, 1.048576 * 14 / 8)
    # allgather's size is the output: n x the per-rank part; factor (n-1)/n
    ag = nccl_bandwidth({**row, "name": "allgather"})
    assert ag == (8 * 1.048576, 8 * 1.048576 * 7 / 8)
    assert nccl_bandwidth({**row, "name": "bcast"}) == (1.048576, 1.048576)
    assert nccl_bandwidth({**row, "name": "barrier"}) is None
    assert nccl_bandwidth({**row, "completion_ns": 0}) is None
    assert metric(row, "busbw") == 1.048576 * 14 / 8 and metric(row, "completion") == 1000.0
    assert metric(row, "ranks") == 8.0 and metric(row, "nope") is None


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    out = d / "s.json"
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--size", "1KiB,64KiB",
                 "--algo", "ring,recursive_doubling", "--json", str(out)]) == 0
    return out


def test_a_sweep_is_drawn_against_the_axis_and_figure_named(sweep, tmp_path):
    doc = json.loads(sweep.read_text())
    run, rows = doc["run"], doc["results"]
    by_algo = sweep_lines(run, rows, x="algo", y="busbw")["allreduce"]
    assert set(by_algo) == {"size=1KiB", "size=64KiB"}
    row = next(r for r in rows if r["point"] == {"algo": "ring", "size": "64KiB"})
    assert ("ring", nccl_bandwidth(row)[1]) in by_algo["size=64KiB"]
    files = report(str(sweep), None, str(tmp_path / "p"), x="algo", y="busbw", log="y")
    assert {f.rsplit("/", 1)[1] for f in files} >= {"sweep.png", "topology.png"}


@pytest.mark.parametrize("kw, word", [({"x": "seed"}, "--x 'seed': not a swept parameter"),
                                      ({"y": "nope"}, "--y 'nope': no row has this figure"),
                                      ({"log": "z"}, "--log 'z'")])
def test_axes_that_do_not_exist_are_refused_in_one_line(sweep, tmp_path, kw, word):
    with pytest.raises(ConfigError, match=word):
        report(str(sweep), None, str(tmp_path / "p"), **kw)
    assert not (tmp_path / "p").exists()


def test_auto_log_axes_where_values_span_decades(sweep, tmp_path, monkeypatch):
    import matplotlib.axes

    scales = []
    real = matplotlib.axes.Axes.set_yscale
    monkeypatch.setattr(matplotlib.axes.Axes, "set_yscale", lambda ax, v, **k: (scales.append(v), real(ax, v, **k)))
    report(str(sweep), None, str(tmp_path / "a"))          # completion 1 KiB .. 64 KiB spans a decade
    assert scales == ["log"]
    scales.clear()
    report(str(sweep), None, str(tmp_path / "b"), log="none")
    assert scales == []


def test_open_loop_traffic_is_drawn_as_latency_load_curves(tmp_path):
    out = tmp_path / "u.json"
    assert main(["run", "--topo", "star:n=4", "--test", "uniform", "--load", "0.1,0.5", "--warmup", "50",
                 "--measure", "200", "--json", str(out)]) == 0
    files = report(str(out), None, str(tmp_path / "p"))
    assert {f.rsplit("/", 1)[1] for f in files} == {"curves.png", "curves.svg", "topology.png", "topology.svg"}


def test_trees_are_drawn_hosts_under_their_leaf_and_faults_marked(tmp_path):
    from emu.front.report import failed_links, positions
    from emu.topologies.registry import build

    t = build("fattree:k=4,n=2")
    pos = positions(t)
    for link in t.links:  # each host right under its leaf's span: hosts sorted by leaf, leaves by x
        a, b = (link.a, link.b) if t.nodes[link.a].kind == "host" else (link.b, link.a)
        if t.nodes[a].kind == "host":
            assert pos[a][1] < pos[b][1]
    leaf_of = {lk.a if t.nodes[lk.b].kind == "switch" and t.nodes[lk.a].kind == "host" else lk.b: lk
               for lk in t.links if "host" in (t.nodes[lk.a].kind, t.nodes[lk.b].kind)}
    hosts = sorted((h.name for h in t.hosts), key=lambda h: pos[h][0])
    leaves = [next(x for x in (leaf_of[h].a, leaf_of[h].b) if x != h) for h in hosts]
    assert [pos[x][0] for x in leaves] == sorted(pos[x][0] for x in leaves)  # no crossing host links
    run = {"argv": ["run", "--fault", "at=1us,link=s0-s4,down", "--fault=at=2us,switch=s5,down",
                    "--fault", "at=3us,link=s1-s4,up", "--fault", "garbage"]}
    assert failed_links(run) == ({frozenset(("s0", "s4"))}, {"s5"})
