"""Issue 31, items 3 and 4: sweeps and tabular results; results that say what was run.

``emu run`` takes lists for ``--topo``, ``--set KEY=...``, ``--offload``, ``--algo`` and ``--size``
and runs their product, one row per test and point (``--csv``); every ``--json`` carries a ``run``
record and ``--replay`` checks that a run gives its figures again.
"""

import csv
import io
import json

import pytest

from emu.front.cli import main
from emu.front.sweepargs import ORDER, split_topos


def _run(tmp_path, *args, name="r"):
    out = tmp_path / f"{name}.json"
    code = main(["run", *args, "--json", str(out)])
    return code, json.loads(out.read_text())


def _figures(row):
    return {k: v for k, v in row.items() if k not in ("wall_s", "point")}


# -- item 3: sweeps -------------------------------------------------------------------------------
def test_topology_lists_split_where_a_new_spec_begins():
    assert split_topos("fattree:k=4,n=3") == ["fattree:k=4,n=3"]
    assert split_topos("star:n=4,star:n=8") == ["star:n=4", "star:n=8"]
    assert split_topos("mesh:k=2,n=2,latency_ns=50,torus:k=3,n=2") == ["mesh:k=2,n=2,latency_ns=50", "torus:k=3,n=2"]
    assert split_topos("a.graphml,star:n=2") == ["a.graphml", "star:n=2"]


def test_a_sweep_is_the_product_in_the_stated_order_and_each_row_is_the_run_of_its_point(tmp_path):
    code, doc = _run(tmp_path, "--topo", "star:n=4", "--test", "pingall+allreduce", "--size", "1KiB,4KiB",
                     "--algo", "ring,recursive_doubling")
    assert code == 0
    run, rows = doc["run"], doc["results"]
    assert run["sweep"] == {"algo": ["ring", "recursive_doubling"], "size": ["1KiB", "4KiB"]}
    assert run["sweep_order"] == ["algo", "size"] and ORDER.index("algo") < ORDER.index("size")
    # --algo varies slower than --size; each point runs every test
    assert [(r["point"]["algo"], r["point"]["size"], r["name"]) for r in rows] == [
        (a, s, t) for a in ("ring", "recursive_doubling") for s in ("1KiB", "4KiB") for t in ("pingall", "allreduce")]
    assert [r["algo"] for r in rows if r["name"] == "allreduce"] == ["ring", "ring", "recursive_doubling",
                                                                      "recursive_doubling"]
    # the same figures as the point run on its own (a fresh cluster per point)
    code, alone = _run(tmp_path, "--topo", "star:n=4", "--test", "pingall+allreduce", "--size", "4KiB",
                       "--algo", "recursive_doubling", name="alone")
    assert code == 0 and "sweep" not in alone["run"] and "point" not in alone["results"][0]
    assert [_figures(r) for r in alone["results"]] == [_figures(r) for r in rows[6:]]


def test_topologies_settings_and_offloads_sweep_together(tmp_path):
    code, doc = _run(tmp_path, "--topo", "star:n=4,star:n=8", "--test", "allreduce",
                     "--set", "switch.processing_delay_ns=50,100", "--offload", "none,nic")
    assert code == 0
    rows = doc["results"]
    assert doc["run"]["sweep_order"] == ["topo", "switch.processing_delay_ns", "offload"]
    assert [(r["topology"], r["point"]["switch.processing_delay_ns"], r["point"]["offload"]) for r in rows] == [
        (t, d, o) for t in ("star:n=4", "star:n=8") for d in ("50", "100") for o in ("none", "nic")]
    # a star: every message crosses the switch once, so 50 ns more per crossing shows in every row
    for a, b in zip(rows[0:2], rows[2:4]):
        assert b["completion_ns"] > a["completion_ns"]
    assert [r["algo"].startswith("nic") for r in rows] == [False, True] * 4
    # the resolved settings per distinct point: the default one and --set's 100 ns
    assert doc["run"]["settings"] == [{}, {"switch.processing_delay_ns": {"value": 100, "default": 50,
                                                                           "from": "--set"}}]


def test_csv_has_a_column_per_swept_parameter_and_per_figure(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--size", "1KiB,2KiB", "--algo", "ring",
                 "--json", str(out), "--csv", "-"]) == 0
    text = capsys.readouterr().out
    first, rest = text.split("\n", 1)
    assert first.startswith("# run: ")
    assert json.loads(first[len("# run: "):]) == json.loads(out.read_text())["run"]
    rows = list(csv.DictReader(io.StringIO(rest)))
    assert list(rows[0])[:1] == ["size"]  # the swept parameter first (--algo is one value: not swept)
    doc = json.loads(out.read_text())["results"]
    assert [r["size"] for r in rows] == ["1KiB", "2KiB"]
    for got, want in zip(rows, doc):
        for k in ("completion_ns", "frames", "bytes", "hop_count", "dropped", "fcs_errors", "lost_in_flight",
                  "size_bytes"):
            assert int(got[k]) == want[k], k


def test_a_figure_named_as_a_swept_parameter_gets_its_own_column(tmp_path, capsys):
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--algo", "ring,recursive_doubling",
                 "--csv", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out.split("\n", 1)[1])))
    assert [(r["algo"], r["algo_result"]) for r in rows] == [("ring", "ring"),
                                                             ("recursive_doubling", "recursive_doubling")]


@pytest.mark.parametrize("argv,words", [
    (["--topo", "star:n=4", "--topo", "star:n=8"], "--topo is given more than once; to sweep it"),
    (["--topo", "star:n=4", "--seed", "1", "--seed", "2"], "--seed is given more than once; it takes one value"),
    (["--topo", "star:n=4", "--size", "1KiB", "--size", "2KiB", "--test", "allreduce"], "--size is given more"),
    (["--topo", "star:n=4", "--set", "switch.vcs=1", "--set", "switch.vcs=2"], "--set switch.vcs is given twice"),
    (["--topo", "star:n=4", "--size", "1KiB,,2KiB", "--test", "allreduce"], "has an empty item"),
    (["--topo", "star:n=4", "--algo", "ring,ring", "--test", "allreduce"], "names ring twice"),
    (["--topo", "star:n=4", "--offload", "none,gpu", "--test", "allreduce"], "--offload gpu: not a place"),
    (["--topo", "star:n=4", "--size", "1KiB,2KiB", "--test", "allreduce", "--pcap", "x.pcapng"],
     "this sweep has 2 points"),
    (["--topo", "star:n=4,star:n=0", "--test", "pingall"], "star"),  # the second point's bad spec: before any runs
    (["--test", "pingall"], "emu run needs --topo SPEC (or --replay RESULT.json)"),
])
def test_bad_sweeps_and_repeated_options_are_refused_in_one_line(argv, words, capsys):
    assert main(["run", *argv]) == 2
    out = capsys.readouterr().out
    assert out.startswith("refused:") and words in out and out.count("\n") == 1
    assert "completion" not in out  # nothing ran


def test_the_open_loop_load_list_still_works(tmp_path):
    code, doc = _run(tmp_path, "--topo", "star:n=4", "--test", "uniform", "--load", "0.2,0.4", "--warmup", "50",
                     "--measure", "50")
    assert code == 0 and [p["offered"] for p in doc["results"][0]["curve"]] == [0.2, 0.4]


def test_emu_report_plots_a_sweep_as_lines_per_swept_parameter(tmp_path, capsys):
    from emu.front.report import load_run, sweep_lines

    code, _ = _run(tmp_path, "--topo", "star:n=4", "--test", "allreduce", "--size", "1KiB,4KiB",
                   "--algo", "ring,recursive_doubling")
    assert code == 0
    run, rows = load_run(str(tmp_path / "r.json"))
    lines = sweep_lines(run, rows)
    assert list(lines) == ["allreduce"] and list(lines["allreduce"]) == ["algo=ring", "algo=recursive_doubling"]
    assert [x for x, _ in lines["allreduce"]["algo=ring"]] == ["1KiB", "4KiB"]
    assert main(["report", str(tmp_path / "r.json"), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "plots" / "topology.png").exists()


# -- item 4: results that say what was run --------------------------------------------------------
def test_the_run_record_says_what_was_run(tmp_path):
    from emu.front.runrecord import version

    argv = ["--topo", "mesh:k=2,n=2,latency_ns=80", "--test", "pingall", "--seed", "7", "--processes", "2",
            "--partition", "order", "--set", "host.recv_overhead_ns=200", "--fault", "at=0,link=h0-s0,ber=1e-9"]
    code, doc = _run(tmp_path, *argv)
    assert code == 0
    run = doc["run"]
    assert run["version"] == version() and run["argv"][:len(argv) + 1] == ["run", *argv]
    assert run["command"].startswith("emu run --topo mesh:k=2,n=2,latency_ns=80 --test pingall")
    assert (run["topology"], run["offload"], run["seed"], run["processes"]) == ("mesh:k=2,n=2,latency_ns=80",
                                                                                "none", 7, 2)
    assert run["partition"] == "order"
    s = run["settings"]
    assert s["switch.model"] == {"value": "input_queued", "default": "output_queued", "from": "family mesh"}
    assert s["link.latency_ns"] == {"value": 80, "default": 100, "from": "topology spec mesh:k=2,n=2,latency_ns=80"}
    assert s["host.recv_overhead_ns"] == {"value": 200, "default": 300, "from": "--set"}
    assert s["host.transport"]["value"] == "reliable" and "with --fault or --manager" in s["host.transport"]["from"]
    assert "host.send_overhead_ns" not in s  # only what differs from its default


def test_the_partition_says_when_metis_falls_back(monkeypatch):
    from emu import partition as part
    from emu.topologies.registry import build

    t = build("fattree:k=2,n=2")
    monkeypatch.setattr(part, "_metis", lambda *a: None)  # as without pymetis
    owner, used = part.partition_used(t, 2, "metis")
    assert len(set(owner.values())) == 2 and used == "kernighan-lin bisection (metis asked; pymetis is not installed)"
    owner, used = part.partition_used(t, 3, "metis")
    assert used.startswith("order (metis asked; pymetis is not installed")
    assert part.partition_used(t, 1, "metis")[1] == "none (one process)"


def test_replay_runs_again_and_checks_the_figures(tmp_path, capsys):
    code, doc = _run(tmp_path, "--topo", "star:n=4", "--test", "pingall+allreduce", "--size", "1KiB,2KiB")
    assert code == 0
    capsys.readouterr()
    assert main(["run", "--replay", str(tmp_path / "r.json")]) == 0
    assert "the figures of its 4 row(s) match" in capsys.readouterr().out
    doc["results"][3]["completion_ns"] += 1
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert main(["run", "--replay", str(tmp_path / "bad.json")]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    want = doc["results"][3]["completion_ns"]
    assert last.startswith(f"replay of {tmp_path / 'bad.json'}: 1 figure(s) differ") and \
        f"allreduce size=2KiB: completion_ns {want} -> {want - 1}" in last
    assert main(["run", "--replay", str(tmp_path / "r.json"), "--seed", "3"]) == 2
    assert "leave out --seed" in capsys.readouterr().out
    (tmp_path / "old.json").write_text("[]")
    assert main(["run", "--replay", str(tmp_path / "old.json")]) == 2
    assert "no run record" in capsys.readouterr().out


def test_rows_carry_the_loss_figures_and_per_link_names_its_links(tmp_path):
    from emu.topologies.registry import build

    code, doc = _run(tmp_path, "--topo", "fattree:k=2,n=2", "--test", "pingall",
                     "--fault", "at=0,link=s0-s2,down", "--manager", "none")  # the bare network: frames lost
    [r] = doc["results"]
    for k in ("dropped", "corrupted", "fcs_errors", "lost_in_flight"):
        assert isinstance(r[k], int), k
    assert r["dropped"] > 0 and r["dropped"] == sum(v["drops"] for v in r["per_link"].values())
    t = build("fattree:k=2,n=2")
    names = {f"{lk.a}-{lk.b}" for lk in t.links}
    for port, v in r["per_link"].items():
        assert v["link"] in names and port.startswith(v["from"] + "-") and v["to_port"].startswith(v["to"] + "-")
        assert {v["from"], v["to"]} == set(v["link"].split("-"))
    assert any(v["link"] == "s0-s2" and v["drops"] for v in r["per_link"].values())
    assert sum(v["frames"] for v in r["per_link"].values()) == r["hop_count"]


def test_times_count_from_the_test_start_and_name_their_origin(tmp_path):
    code, doc = _run(tmp_path, "--topo", "star:n=4", "--test", "pingall+allreduce")
    a, b = doc["results"]
    assert code == 0 and a["start_ns"] == 0
    for r in (a, b):
        assert r["end_ns"] - r["start_ns"] == r["completion_ns"]
    assert b["start_ns"] >= a["end_ns"]
    assert "completion_ns counts from the test's start" in doc["run"]["times"]


def test_json_is_compact_unless_indent_is_given(tmp_path):
    assert main(["run", "--topo", "star:n=3", "--test", "pingall", "--json", str(tmp_path / "c.json")]) == 0
    assert main(["run", "--topo", "star:n=3", "--test", "pingall", "--json", str(tmp_path / "i.json"),
                 "--indent", "2"]) == 0
    compact, indented = (tmp_path / "c.json").read_text(), (tmp_path / "i.json").read_text()
    assert compact.count("\n") == 1 and indented.count("\n") > 50
    strip = [{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(compact)["results"]]
    assert strip == [{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(indented)["results"]]


def test_emu_mpirun_json_carries_the_run_record(tmp_path):
    from emu.front.mpirun import run_program

    prog = tmp_path / "p.py"
    prog.write_text("from mpi4py import MPI\nc = MPI.COMM_WORLD\nprint(c.allreduce(c.Get_rank()))\n")
    res = run_program(str(prog), n=2, topo="mesh:k=2,n=1", settings=["host.recv_overhead_ns=200"])
    assert res.returncode == 0, res.stderr
    run = res.figures["run"]
    assert run["argv"][0] == "mpirun" and run["topology"] == "mesh:k=2,n=1" and run["ranks"] == 2
    assert run["settings"]["host.recv_overhead_ns"]["from"] == "--set"
    assert run["settings"]["switch.model"]["from"] == "family mesh"
    assert (run["seed"], run["processes"], run["offload"]) == (0, 1, "none")


def test_the_readme_sweep_example_runs_and_replays(tmp_path):
    import pathlib
    import re
    import subprocess
    import sys

    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "--replay sweep.json" in b)
    emu = pathlib.Path(sys.executable).parent / "emu"
    outs = []
    for line in (ln.split("#")[0].split() for ln in block.splitlines() if ln.startswith("emu ")):
        p = subprocess.run([str(emu), *line[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, " ".join(line) + "\n" + p.stdout + p.stderr
        outs.append(p.stdout)
    rows = list(csv.DictReader(io.StringIO(outs[0][outs[0].index("algo,size"):])))
    assert [(r["algo"], r["size"]) for r in rows] == [(a, s) for a in ("ring", "recursive_doubling")
                                                      for s in ("1KiB", "16KiB", "256KiB")]
    assert (tmp_path / "plots" / "sweep.png").exists()
    assert "the figures of its 6 row(s) match" in outs[-1]


@pytest.mark.parametrize("argv,opt", [(["topo", "star:n=4", "--json", "-", "--json", "x.json"], "--json"),
                                      (["mpirun", "-n", "2", "-n", "3", "--topo", "star:n=4", "p.py"], "-n"),
                                      (["report", "r.json", "--out", "a", "--out", "b"], "--out")])
def test_every_command_refuses_a_repeated_single_valued_option(argv, opt, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().out == f"refused: {opt} is given more than once; it takes one value\n"
