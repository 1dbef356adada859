"""What an ``emu run`` command does before and after its run (issue 45): only the subcommand's
parser is made, with the same options and help as in the whole parser, and a run imports nothing it
does not use (scapy's Ethernet layer and its interface and route reading, the metadata reader
without ``--json``, the other subcommands' modules). Timing lives in ``scripts/bench_startup.py``."""

import json
import os
import subprocess
import sys

import pytest

from emu.front.cli_parser import COMMANDS, _parser, command_word

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _subcommands(ap):
    return ap._subparsers._group_actions[0].choices


def test_the_subcommands_are_those_of_the_whole_parser():
    assert tuple(_subcommands(_parser())) == COMMANDS


@pytest.mark.parametrize("argv, word", [
    (["run", "--topo", "star:n=4"], "run"), (["-v", "run"], "run"), (["-vv", "--verbose", "topo", "x"], "topo"),
    (["--version"], None), (["-h", "run"], None), (["--help"], None), (["rn", "--topo"], None), ([], None),
    (["-x", "run"], None)])
def test_the_command_word(argv, word):
    assert command_word(argv) == word


@pytest.mark.parametrize("cmd", COMMANDS)
def test_one_subcommand_parser_has_the_whole_parsers_options_and_help(cmd):
    """The help texts filled in late (the installed offloads, the operations and algorithms) too."""
    whole, one = _subcommands(_parser())[cmd], _subcommands(_parser(only=cmd))
    assert list(one) == [cmd]
    one = one[cmd]
    assert [(a.option_strings, a.dest, type(a)) for a in one._actions] == \
           [(a.option_strings, a.dest, type(a)) for a in whole._actions]
    assert one.format_help() == whole.format_help()
    assert [(a.help, a.metavar) for a in one._actions] == [(a.help, a.metavar) for a in whole._actions]


@pytest.mark.parametrize("argv", [
    ["run", "--topo", "mesh:k=4,n=2", "--test", "uniform", "--load", "0.3,0.5", "--set", "switch.vcs=8", "--direct"],
    ["-v", "run", "--topo", "fattree:k=4,n=4", "--test", "allreduce", "--algo", "recursive_doubling", "--size", "1KiB",
     "--processes", "2", "--offload", "nic"],
    ["topo", "star:n=4", "--links"], ["report", "r.json", "--out", "d"]])
def test_one_subcommand_parser_parses_as_the_whole(argv):
    a, b = _parser().parse_args(argv), _parser(only=command_word(argv)).parse_args(argv)
    assert vars(a) == vars(b)


def test_version_is_read_when_asked():
    out = subprocess.run([sys.executable, "-m", "emu", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("emu (hpc-emu) ") and "element loop:" in out.stdout


PROBE = """
import json, runpy, sys
sys.argv = ["emu", *json.loads(sys.argv[1])]
try:
    runpy.run_module("emu", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
print("MODULES", json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

NOT_NEEDED = ["scapy", "scapy.packet", "scapy.fields", "scapy.layers.l2", "scapy.arch", "scapy.sendrecv", "scapy.route", "emu.front.mpirun",
              "emu.front.replay_goal", "emu.front.schedule_cmd", "emu.front.demo",
              "emu.front.report", "rich.progress", "emu.nodes.collectives.coding", "difflib", "shlex"]
"""Modules an ``emu run`` of a mesh (stdout and stderr not a terminal) has no use for."""


def _imported(argv: list[str]) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODULES "))
    got = json.loads(line[len("MODULES "):])
    assert got["code"] == 0, out.stdout + out.stderr
    return set(got["modules"])


def test_a_run_imports_only_what_it_uses(tmp_path):
    run = ["run", "--topo", "mesh:k=2,n=2", "--test", "uniform", "--load", "0.3", "--warmup", "20", "--measure", "20",
           "--set", "switch.model=input_queued"]
    mods = _imported(run)
    assert "emu.wire.fabric" in mods and "emu.switch.iq" in mods  # (it ran)
    assert sorted(m for m in NOT_NEEDED if m in mods) == []
    assert "importlib.metadata" not in mods  # (no plug-in looked up)
    with_json = _imported([*run, "--json", str(tmp_path / "r.json")])
    assert "importlib.metadata" not in with_json  # (the run record's version read from the METADATA file)
    from importlib.metadata import version

    assert json.loads((tmp_path / "r.json").read_text())["run"]["version"] == version("hpc-emu")


@pytest.mark.parametrize("argv", [
    ["run", "--topo", "fattree:k=2,n=3", "--test", "allreduce+pingall", "--algo", "recursive_doubling", "--pcap", "{tmp}"],
    ["run", "--topo", "qsnet:nodes=8", "--test", "allreduce+bcast", "--offload", "hw", "--direct"],
    ["run", "--topo", "mesh:k=4,n=2", "--test", "mcast_all", "--algo", "nc", "--direct"]])
def test_a_run_imports_no_scapy(argv, tmp_path):
    """The wire's codecs are made from their layouts (``emu.wire.codec``): scapy's declarations, and
    scapy, only when something asks for them."""
    mods = _imported([a.replace("{tmp}", str(tmp_path / "c.pcap")) for a in argv])
    assert "emu.wire.host" in mods and sorted(m for m in mods if m.split(".")[0] == "scapy") == []


def test_the_installed_version_is_importlib_metadatas(tmp_path, monkeypatch):
    from importlib.metadata import version

    from emu.plugins import installed_version

    assert installed_version("hpc-emu") == installed_version("hpc_emu") == version("hpc-emu")
    assert installed_version("no-such-dist") is None
    info = tmp_path / "my.pkg-2.5rc1.dist-info"  # the first on the path wins, as importlib.metadata finds it
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my.pkg\nVersion: 2.5rc1\n\nVersion: 9\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("My-Pkg") == version("My-Pkg") == "2.5rc1"


def test_scapy_dissects_the_fabric_after_the_emulator_is_imported():
    """The bindings under scapy's Ether are made when scapy.layers.l2 is imported (emu.wire.l2)."""
    code = ("import emu.wire, sys; assert 'scapy.layers.l2' not in sys.modules;"
            "from scapy.layers.l2 import Ether; from emu.wire import EthernetFCS, build_credit, node_mac;"
            "from emu.wire.fabric import Fabric;"
            "p = Ether(bytes(Ether(src='02:00:00:00:00:01') / Fabric(src=1, dst=2)));"
            "c = EthernetFCS(bytes(EthernetFCS(type=0x88B6) / bytes(8)));"
            "print(p.summary(), '|', c.summary())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "/ Fabric" in out.stdout and "/ LinkCredit" in out.stdout


def test_the_coded_broadcasts_are_in_the_tables_before_their_plans_are_imported():
    """``emu.nodes.collectives.coded_algos``: the entries name and describe the coded schemes; their
    implementation (``emu.nodes.collectives.coding``) is imported when one first runs."""
    code = ("import sys; from emu.nodes.collectives.select import ALGORITHMS, GRID_ONLY;"
            "assert 'emu.nodes.collectives.coding' not in sys.modules;"
            "f = ALGORITHMS['mcast_all']['nc']; g = ALGORITHMS['mcast']['tree'];"
            "print(f.__name__, g.__name__, ('mcast', 'combine') in GRID_ONLY, f.__doc__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 3) == ["mcast_all_nc", "mcast_tree", "True",
                                         "All-to-all broadcast by the nc scheme (NIC-run plan on a mesh or torus).\n"]
