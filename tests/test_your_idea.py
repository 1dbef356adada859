"""docs/your-idea.md as written (issue 43, item 3): its files make a package, its commands run with
that package installed (its entry points on the path, as pip would write them), and each output line
the page shows is a line of what the command prints."""

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "your-idea.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def blocks(kind):
    return [body for k, body in BLOCK.findall(DOC.read_text()) if k == kind]


def files():
    """{path: text} of the page's toml and python blocks, each named by its first line (``# path``)."""
    out = {}
    for body in blocks("toml") + blocks("python"):
        first = body.splitlines()[0]
        if first.startswith("# ") and "/" in first or first == "# pyproject.toml":
            out[first[2:]] = body
    return out


def commands():
    """[(command, [documented output lines])] of the page's console blocks."""
    out = []
    for body in blocks("console"):
        for line in body.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif line.strip():
                out[-1][1].append(line.rstrip())
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The page's package on a path of its own, with the metadata ``pip install`` would write from its
    pyproject.toml (name, version, entry points)."""
    d = tmp_path_factory.mktemp("myidea")
    fs = files()
    project = tomllib.loads(fs.pop("pyproject.toml"))["project"]
    for path, text in fs.items():
        (d / path).parent.mkdir(parents=True, exist_ok=True)
        (d / path).write_text(text)
    (d / "myidea" / "__init__.py").write_text("")
    info = d / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{n} = {m}\n" for n, m in eps.items()) + "\n"
        for group, eps in project["entry-points"].items()))
    return d


def test_the_page_has_a_file_per_plug_in_and_commands_with_outputs():
    assert set(files()) == {"pyproject.toml", "myidea/dumbbell.py", "myidea/twochoice.py", "myidea/leafswitch.py"}
    cmds = commands()
    assert len(cmds) >= 6 and all(out for _, out in cmds)
    groups = tomllib.loads(files()["pyproject.toml"])["project"]["entry-points"]
    assert set(groups) == {"emu.topologies", "emu.routing", "emu.offloads"}


@pytest.mark.parametrize("cmd", [c for c, _ in commands()], ids=lambda c: " ".join(c.split()[:4]))
def test_each_command_prints_what_the_page_shows(site, tmp_path, cmd):
    shown = dict(commands())[cmd]
    argv = shlex.split(cmd)
    assert argv[0] == "emu"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-m", "emu", *argv[1:]], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    printed = [line.rstrip() for line in p.stdout.splitlines()]
    refused = shown[0].startswith("refused:")
    assert p.returncode == (2 if refused else 0), p.stdout + p.stderr
    for line in shown:
        assert line in printed, f"{line!r} not printed by {cmd!r}:\n{p.stdout}"
