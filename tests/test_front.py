"""The front door fits people's habits (issue 9): the ways people expect to call ``emu``."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_license_file_matches_the_package_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = (ROOT / "LICENSE").read_text()
    assert meta["license"]["text"] == "MIT" and text.startswith("MIT License\n")
    assert "Copyright (c) 2026 hpc-emu contributors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


async def test_cluster_repr_says_topology_hosts_processes_and_virtual_time():
    from emu import Cluster

    net = Cluster("fattree:k=2,n=2", processes=2)
    assert repr(net) == ("<Cluster fattree:k=2,n=2: 4 hosts, 4 switches, 2 processes, virtual time 0 ns, "
                         "not started>")
    async with net:
        rtt = await net["h0"].ping("h3")
        assert repr(net) == (f"<Cluster fattree:k=2,n=2: 4 hosts, 4 switches, 2 processes, "
                             f"virtual time {net.now:,} ns, running>") and net.now >= rtt > 0
    assert repr(net).endswith(f"virtual time {net.now:,} ns, closed>")
    assert repr(Cluster("star:n=3")).startswith("<Cluster star:n=3: 3 hosts, 1 switch, 1 process,")


def emu_cmd(*args, module=False, **kw):
    import subprocess
    import sys

    exe = [sys.executable, "-m", "emu"] if module else [str(pathlib.Path(sys.executable).parent / "emu")]
    return subprocess.run([*exe, *args], capture_output=True, text=True, timeout=120, **kw)


def test_version_comes_from_the_installed_metadata():
    from importlib.metadata import version

    for module in (False, True):
        out = emu_cmd("--version", module=module)
        assert (out.returncode, out.stdout) == (0, f"emu (hpc-emu) {version('hpc-emu')}\n")


def test_python_dash_m_emu_works_like_emu():
    a, b = emu_cmd("topo", "star:n=5"), emu_cmd("topo", "star:n=5", module=True)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and "hosts" in a.stdout
    bad = emu_cmd("topo", "fattree:k=4", module=True)
    assert bad.returncode == 2 and "fattree: missing parameter n;" in bad.stdout


def run_json(capsys, *args):
    """``emu run ... --json -``: the exit code, the rows parsed from stdout (which must be pure JSON)
    and what went to stderr."""
    import json

    from emu.cli import main

    code = main(["run", *args, "--json", "-"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_json_dash_writes_pure_json_to_stdout_and_the_table_to_stderr(capsys):
    code, rows, err = run_json(capsys, "--topo", "star:n=3", "--test", "pingall")
    assert code == 0 and [(r["name"], r["ok"], r["pairs"]) for r in rows] == [("pingall", True, 6)]
    assert "completion (ns)" in err and "pingall" in err


def test_test_option_repeats_and_joins_in_order(capsys):
    code, rows, _ = run_json(capsys, "--topo", "star:n=4", "--test", "barrier+bcast", "--test", "allgather",
                             "--size", "64B")
    assert code == 0 and [r["name"] for r in rows] == ["barrier", "bcast", "allgather"]
    assert all(r["ok"] for r in rows)


def refusal(capsys, *args):
    from emu.cli import main

    assert main(["run", "--topo", "star:n=4", *args]) == 2
    return capsys.readouterr().out.replace("\n", " ")


def test_a_test_named_twice_is_refused(capsys):
    assert "--test names allreduce more than once" in refusal(capsys, "--test", "allreduce", "--test",
                                                              "barrier+allreduce")


def test_offload_none_is_the_software_path(capsys):
    code, [none], _ = run_json(capsys, "--topo", "star:n=4", "--test", "allreduce", "--offload", "none",
                               "--size", "48B", "--dtype", "float64")
    code2, [default], _ = run_json(capsys, "--topo", "star:n=4", "--test", "allreduce", "--size", "48B",
                                   "--dtype", "float64")
    assert code == code2 == 0 and none["algo"] == default["algo"] == "recursive_doubling"
    assert none["completion_ns"] == default["completion_ns"] and none["frames"] == default["frames"]
    assert "--branch is the offload tree's degree" in refusal(capsys, "--test", "allreduce", "--offload", "none",
                                                              "--branch", "4")


def test_offloads_not_built_yet_are_refused_by_name(capsys):
    for where in ("switch", "hw"):
        assert f"--offload {where} is not built yet; choose none (host software) or nic" in refusal(
            capsys, "--test", "allreduce", "--offload", where)


def test_run_help_lists_every_test_with_a_summary(capsys):
    import pytest

    from emu.checks import CHECKS
    from emu.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--offload {none,nic,switch,hw}" in out
    listed = out.split("tests (--test NAME", 1)[1].splitlines()[1:]
    assert [line.split()[0] for line in listed if line.startswith("  ")] == list(CHECKS)
    assert "  pingall         Every host pings every other host" in out
    assert "  allreduce       Every rank gets the reduction of all ranks' data" in out
