"""Output that behaves: no wrapped lines and no colour off a terminal, the demo's plot where --out
says, help text for every option and every settable field, size warnings that hold, and the
manager's settings as the README states them."""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import pytest

from emu.config import SECTIONS, settable_fields
from emu.front.cli import _parser, main
from emu.front.demo import plot_file as demo_plot_path

EMU = [sys.executable, "-m", "emu"]


def _options(parser, path=("emu",)):
    """(command path, option or subcommand, help) of every option and subcommand, all the way down."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            for name, sub in a.choices.items():
                yield path, name, helps.get(name)
                yield from _options(sub, path + (name,))
        elif a.help is not argparse.SUPPRESS:
            yield path, "/".join(a.option_strings) or a.dest, a.help


def test_every_option_and_subcommand_has_help():
    items = list(_options(_parser()))
    assert len(items) > 60 and ("emu", "run") in {p for p, *_ in items}
    empty = [f"{' '.join(p)} {name}" for p, name, text in items if not (text or "").strip()]
    assert not empty, empty


def test_every_settable_field_has_a_whole_sentence_of_help():
    rows = settable_fields()
    assert {r[0].split(".")[0] for r in rows} == set(SECTIONS)
    for name, _kind, _default, doc in rows:
        assert len(doc) > 15 and doc.endswith("."), (name, doc)
        assert doc.count("(") == doc.count(")"), (name, doc)  # not cut inside a parenthesis ("i.e.")
        assert not re.search(r"\b(e\.g|i\.e)\.$", doc), (name, doc)
    docs = {name: doc for name, _, _, doc in rows}
    assert "512 cores" in docs["pu.clusters"] and docs["pu.cores_per_cluster"]


def test_config_and_algo_help_name_what_they_take():
    run = _parser()._subparsers._group_actions[0].choices["run"]
    helps = {a.dest: a.help for a in run._actions}
    assert all(f"[{s}]" in helps["config"] for s in SECTIONS)  # [pu] and [manager] too
    from emu.nodes.collectives.select import ALGORITHMS

    for op, algos in ALGORITHMS.items():
        assert all(a in helps["algo"] for a in algos), op
    assert "seed" in helps["seed"] and "default 0" in helps["seed"]


def _piped(*args, columns: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=columns)
    env.pop("FORCE_COLOR", None)
    return subprocess.run([*EMU, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("columns", ["40", "300"])
def test_piped_output_is_never_wrapped_nor_coloured(columns):
    out = _piped("run", "--topo", "fattree:k=4,n=2", "--test", "allreduce", "--size", "64KiB", "--offload", "hw",
                 "--direct", columns=columns)
    assert out.returncode == 0, out.stdout + out.stderr
    [summary] = [line for line in out.stdout.splitlines() if line.startswith("allreduce:")]
    for key in ("algo=", "ranks=", "size_bytes=", "result=", "max_queue_frames=", "wall_s="):
        assert key in summary, summary  # one line, however long
    assert len(summary) > 150 and "\x1b[" not in out.stdout + out.stderr
    long_name = "host.no_such_field_" + "x" * 150
    bad = _piped("run", "--topo", "star:n=2", "--set", f"{long_name}=1", columns=columns)
    assert bad.returncode == 2 and bad.stdout.count("\n") == 1 and bad.stdout.startswith("refused: ")
    assert "x" * 150 in bad.stdout and "\x1b[" not in bad.stdout


def test_the_demo_plot_goes_where_out_says_never_into_the_current_folder(tmp_path):
    assert demo_plot_path(str(tmp_path / "a" / "b"), "allreduce.png") == str(tmp_path / "a" / "b" / "allreduce.png")
    assert (tmp_path / "a" / "b").is_dir()
    assert demo_plot_path(str(tmp_path), "") is None
    default = demo_plot_path(None, "allreduce.png")  # a new folder of its own, named in the output
    folder = os.path.dirname(default)
    try:
        assert os.path.isdir(folder) and os.path.commonpath([folder, tempfile.gettempdir()]) == tempfile.gettempdir()
        assert os.path.basename(folder).startswith("emu-demo-") and not os.listdir(folder)
    finally:
        os.rmdir(folder)
    (tmp_path / "file").write_text("")
    from emu.config import ConfigError

    with pytest.raises(ConfigError, match="--out"):
        demo_plot_path(str(tmp_path / "file"), "allreduce.png")


def test_a_polled_barrier_estimate_is_a_lower_bound_within_2x(monkeypatch, capsys):
    import json

    import emu.front.estimate

    monkeypatch.setattr(emu.front.estimate, "LARGE_RUN_FRAMES", 0)
    assert main(["run", "--topo", "fattree:k=4,n=2", "--test", "barrier", "--offload", "hw", "--algo", "polled",
                 "--direct", "--json", "-"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    [row] = doc["results"] if isinstance(doc, dict) else doc
    said = int(re.search(r"at least ([\d,]+) frames", out.err).group(1).replace(",", ""))
    assert said <= row["frames"] <= 2 * said


def test_manager_settings_need_a_manager_and_the_switch_offload_has_one(tmp_path, capsys):
    cfg = tmp_path / "m.toml"
    cfg.write_text("[manager]\nbringup = true\n")
    assert main(["run", "--topo", "fattree:k=4,n=2", "--test", "pingall", "--config", str(cfg), "--direct"]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "[manager] in --config" in out and "give --manager" in out
    # --offload switch attaches the manager: its [manager] settings hold, bring-up included
    assert main(["run", "--topo", "fattree:k=4,n=2", "--test", "allreduce", "--offload", "switch",
                 "--config", str(cfg), "--direct"]) == 0
    assert "manager: link bring-up over at" in capsys.readouterr().out
