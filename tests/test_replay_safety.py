"""Issue 41, item 1: files from others are data, never commands.

``emu run --replay RESULTS.json`` rebuilds the recorded run from its record as data
(``emu.front.replay``): only options that say what is run, written in full, as strings; the options
that say where output goes come from the user's own command line only; no file the record names is
read or written; anything else is refused in one line. And no parser of the project takes an
abbreviation of an option (``--js`` for ``--json``).
"""

import argparse
import ast
import copy
import json
import pathlib

import pytest

from emu.front.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A genuine small run's results document."""
    out = tmp_path_factory.mktemp("rec") / "r.json"
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _with_argv(doc, tmp_path, argv, name="edited.json"):
    d = copy.deepcopy(doc)
    d["run"]["argv"] = argv
    path = tmp_path / name
    path.write_text(json.dumps(d))
    return path


def _refused(capsys, path) -> str:
    """Replay ``path``; it must be refused in exactly one line on stdout, nothing on stderr, exit 2."""
    capsys.readouterr()
    assert main(["run", "--replay", str(path)]) == 2
    out = capsys.readouterr()
    assert out.err == "" and out.out.count("\n") == 1 and out.out.startswith("refused: "), out
    return out.out


def _files(tmp_path):
    return sorted(p.name for p in tmp_path.rglob("*"))


# -- no abbreviations ------------------------------------------------------------------------------
def _parsers(p, name="emu"):
    yield name, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for n, sp in a.choices.items():
                yield from _parsers(sp, f"{name} {n}")


def test_no_parser_of_emu_takes_an_abbreviation():
    from emu.front.cli_parser import _parser, run_parser_refusing

    found = dict(_parsers(_parser()))
    assert {"emu run", "emu mpirun", "emu topo", "emu report"} <= set(found)
    assert [n for n, p in found.items() if p.allow_abbrev] == []
    assert run_parser_refusing().allow_abbrev is False


def test_every_script_parser_matches_options_in_full():
    calls = []
    for f in sorted((ROOT / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ArgumentParser":
                kw = {k.arg: k.value for k in node.keywords}
                calls.append((f.name, isinstance(kw.get("allow_abbrev"), ast.Constant) and kw["allow_abbrev"].value is False))
    assert len(calls) > 20 and [f for f, ok in calls if not ok] == []


@pytest.mark.parametrize("abbrev", ["--js", "--pca", "--cs", "--tr"])
def test_an_abbreviation_on_the_command_line_is_refused(abbrev, tmp_path, capsys):
    target = tmp_path / "out.file"
    with pytest.raises(SystemExit) as e:
        main(["run", "--topo", "star:n=2", "--test", "pingall", abbrev, str(target)])
    assert e.value.code == 2 and f"unrecognized arguments: {abbrev}" in capsys.readouterr().err
    assert not target.exists()


# -- a record's command line is data ---------------------------------------------------------------
@pytest.mark.parametrize("item", ["--js", "--pca", "--cs", "--tr", "--trace-l", "--ind", "--js=X", "--se", "--topo-x"])
def test_an_abbreviation_in_a_record_is_refused_and_nothing_is_written(item, recorded, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    target = str(out / "written")
    tail = [item.replace("X", target)] if "=" in item else [item, target]
    path = _with_argv(recorded, tmp_path, ["run", "--topo", "star:n=4", "--test", "allreduce", *tail])
    line = _refused(capsys, path)
    assert f"holds {item.split('=')[0]}, not an option of emu run" in line and "write the file again" in line
    assert _files(out) == []


def test_output_options_in_a_record_are_left_out(recorded, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    argv = ["run", "--topo", "star:n=4", "--test", "allreduce", "--json", str(out / "a.json"), f"--csv={out / 'a.csv'}",
            "--pcap", str(out / "a.pcap"), "--trace", str(out / "a.trace"), "--trace-limit", "1MiB", "--trace-bin",
            "500", "--indent", "2", "--bind", "0.0.0.0"]  # a wildcard --bind would be refused: left out too
    path = _with_argv(recorded, tmp_path, argv)
    capsys.readouterr()
    assert main(["run", "--replay", str(path)]) == 0
    assert "the figures of its 1 row(s) match" in capsys.readouterr().out
    assert _files(out) == []


@pytest.mark.parametrize("item,shown", [(5, "int 5"), (None, "null"), (True, "bool True"), (["--json", "x"], "a list"),
                                        ({"--json": "x"}, "an object"), (1.5, "float 1.5")])
def test_a_non_string_item_is_refused_in_one_line(item, shown, recorded, tmp_path, capsys):
    path = _with_argv(recorded, tmp_path, ["run", "--topo", "star:n=4", "--test", item])
    assert f"item 4 of its command line (run.argv) is {shown}, not a string" in _refused(capsys, path)
    path = _with_argv(recorded, tmp_path, [item, "--topo", "star:n=4"])
    assert "item 0 of its command line" in _refused(capsys, path)


@pytest.mark.parametrize("argv,says", [
    (["run", "--topo", "star:n=4", "--frobnicate", "x"], "holds --frobnicate, not an option of emu run"),
    (["run", "--topo", "star:n=4", "--replay", "x.json"], "holds --replay, an option a replay does not take"),
    (["run", "--topo", "star:n=4", "--help"], "holds --help, an option a replay does not take"),
    (["run", "--topo", "star:n=4", "-h"], "holds -h, an option a replay does not take"),
    (["run", "--topo", "star:n=4", "-x"], "holds -x, not an option of emu run; a replay"),
    (["run", "star:n=4"], "holds 'star:n=4' where an option belongs"),
    (["run", "--topo", "star:n=4", "--", "--json", "x"], "holds --, not an option of emu run; a replay"),
    (["run", "--topo", "star:n=4", "-", "x"], "holds '-' where an option belongs"),
    (["run", "--topo", "star:n=4", "--direct=yes"], "gives --direct a value ('--direct=yes'); --direct takes none"),
    (["run", "--topo", "star:n=4", "--test"], "--test in its command line has no value"),
    (["run", "--topo", "--json", "x"], "--topo in its command line has no value"),
    (["run", "--topo", "star:n=4", "--test", "allreduce\n--json"], "its --test 'allreduce\\n--json' holds a control"),
    (["run", "--topo", "star:n=4", "--seed", "abc"], "its command line: argument --seed: 'abc' is not an integer"),
    (["run", "--topo", "star:n=4", "--seed", "0", "--seed", "0"], "its command line: --seed is given more than once"),
    (["run", "--topo", "star:n=4", "--direct", "--wire"], "its command line: argument --wire: not allowed with"),
    (["mpirun", "-n", "2", "--topo", "star:n=4", "p.py"], "has no emu run command line (argv)"),
    ([], "has no emu run command line (argv)"),
    (["run", "--topo", "star:n=8"], "its topology field and its command line's --topo disagree"),
    (["run", "--topo", "star:n=4", "--seed", "1"], "its seed field (int 0) and its command line's --seed (1) disagree"),
])
def test_a_record_a_replay_does_not_take_is_refused_in_one_line(argv, says, recorded, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    path = _with_argv(recorded, tmp_path, [a.replace("x", str(out / "x")) if a.startswith("x") else a for a in argv])
    assert says in _refused(capsys, path)
    assert _files(out) == []


def test_argv_that_is_not_a_list_is_refused(recorded, tmp_path, capsys):
    path = _with_argv(recorded, tmp_path, "run --topo star:n=4 --json /tmp/x")
    assert "has no emu run command line (argv)" in _refused(capsys, path)


def test_every_option_of_emu_run_is_classified():
    """A new option of emu run is refused in a record until it is put in one of the lists."""
    from emu.front.cli_parser import run_parser_refusing
    from emu.front.replay import FLAGS, OWN, WHAT

    options = {o for a in run_parser_refusing()._actions for o in a.option_strings}
    lists = [set(WHAT), set(FLAGS), set(OWN), {"-h", "--help", "--replay"}]
    assert set().union(*lists) == options and sum(map(len, lists)) == len(options)


# -- what a replay runs and writes -----------------------------------------------------------------
def test_a_genuine_replay_matches_and_writes_only_where_its_user_says(recorded, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(recorded))
    capsys.readouterr()
    assert main(["run", "--replay", str(path), "--json", str(tmp_path / "again.json")]) == 0
    assert "the figures of its 1 row(s) match" in capsys.readouterr().out
    again = json.loads((tmp_path / "again.json").read_text())
    strip = [{k: v for k, v in r.items() if k != "wall_s"} for r in again["results"]]
    assert strip == [{k: v for k, v in r.items() if k != "wall_s"} for r in recorded["results"]]
    assert again["run"]["argv"] == ["run", "--topo=star:n=4", "--test=allreduce", "--json", str(tmp_path / "again.json")]
    assert main(["run", "--replay", str(tmp_path / "again.json")]) == 0  # a replay's record replays too
    assert _files(tmp_path) == ["again.json", "r.json"]
    path = _with_argv(recorded, tmp_path, ["-v", "run", "--topo", "star:n=4", "--test=allreduce"], name="v.json")
    assert main(["run", "--replay", str(path)]) == 0  # emu -v run ...: verbosity is not what is run


def test_the_user_may_not_give_what_the_record_says(recorded, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(recorded))
    for argv, says in [(["--test", "pingall"], "leave out --test"), (["--topo", "star:n=4"], "leave out --topo (it goes")]:
        capsys.readouterr()
        assert main(["run", "--replay", str(path), *argv]) == 2
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and says in out


def test_a_config_file_is_not_read_its_recorded_settings_are(tmp_path, capsys):
    """The file set host.transport back to its default (which --fault would change) and a latency;
    the replay, with the file gone and another in its place, runs with the recorded settings."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[link]\nlatency_ns = 123\n[host]\ntransport = "none"\n')
    run = ["run", "--topo", "star:n=4", "--test", "allreduce", "--fault", "at=1ms,link=h0-s0,down", "--config", str(cfg)]
    assert main([*run, "--json", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["run"]["settings"]["link.latency_ns"]["from"] == f"--config {cfg}" and "host.transport" not in doc["run"]["settings"]
    cfg.write_text('[link]\nlatency_ns = 999\n')  # a replay would differ if it read the file
    capsys.readouterr()
    assert main(["run", "--replay", str(tmp_path / "r.json")]) == 0
    assert "the figures of its 1 row(s) match" in capsys.readouterr().out
    cfg.unlink()
    assert main(["run", "--replay", str(tmp_path / "r.json")]) == 0
    doc["run"]["settings"]["link.latency_ns"]["value"] = "fast"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert "its settings from --config: link.latency_ns must be an integer, got 'fast'" in _refused(capsys, tmp_path / "bad.json")


def test_a_topology_file_is_read_only_when_the_user_names_it(tmp_path, capsys):
    from emu.topologies.files import dumps
    from emu.topologies.registry import build

    topo = tmp_path / "t.json"
    topo.write_text(dumps(build("star:n=4"), "json"))
    assert main(["run", "--topo", str(topo), "--test", "allreduce", "--json", str(tmp_path / "r.json")]) == 0
    line = _refused(capsys, tmp_path / "r.json")
    assert f"its topology is the file '{topo}', and a replay reads no file a record names; name it yourself" in line
    assert main(["run", "--replay", str(tmp_path / "r.json"), "--topo", str(topo)]) == 0
    assert "the figures of its 1 row(s) match" in capsys.readouterr().out
