"""The README's examples run as written and print what their comments say."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def test_python_api_example_prints_what_it_says(tmp_path):
    code = blocks("python")[0]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    claimed = [m.strip() for m in re.findall(r"#\s*(\d+|\{.*\}):?", code)]
    assert out.stdout.splitlines() == claimed
    assert (tmp_path / "run.pcapng").stat().st_size > 0


def block_with(text):
    return next(b for b in blocks("python") if text in b)


def test_pytest_example_passes(tmp_path):
    (tmp_path / "test_example.py").write_text(block_with("import pytest"))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout + out.stderr


def test_cli_examples_run(tmp_path):
    cli = [line.split("#")[0].strip() for line in blocks("bash")[1].splitlines() if line.startswith("emu ")]
    assert len(cli) == 10
    emu = pathlib.Path(sys.executable).parent / "emu"
    for line in cli:
        out = subprocess.run([str(emu), *line.split()[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, line + "\n" + out.stdout + out.stderr
        assert not re.search(r"spec 0\d", out.stdout + out.stderr, re.I), line  # mechanisms by name (emu demo)
    assert (tmp_path / "r.json").exists() and (tmp_path / "mesh.pcapng").exists()
    assert (tmp_path / "ft.graphml").read_text().count("<edge ") == 32
    assert (tmp_path / "demo" / "allreduce.png").stat().st_size > 10_000  # where --out says
    assert not list(tmp_path.glob("*.png"))  # nothing written into the current folder
    bad = subprocess.run([str(emu), "topo", "fattree:k=4"], capture_output=True, text=True)
    assert bad.returncode == 2 and "fattree: missing parameter n;" in bad.stdout


def test_ci_runs_the_readme_test_command():
    lines = README.splitlines()
    i = lines.index("# install and run the tests")
    assert "pytest" in lines[i + 1]
    assert "install and run the tests" in (ROOT / ".ci" / "run").read_text()


async def test_collectives_example_runs(cluster):
    import numpy as np

    ns = {}
    exec(block_with("from emu.nodes.collectives import Comm"), ns)
    net = await cluster("star:n=4")
    members = ["h3", "h0", "h2"]
    res = await net.run({h: (ns["app"], members) for h in members})
    for h in members:
        y, cpu = res[h]
        assert (y == np.float32(0 + 1 + 2)).all() and cpu > 0


def run_block(tmp_path, marker: str, says: tuple[str, ...], lines: int | None = None) -> None:
    """Run every ``emu`` line of the README's bash block that contains ``marker``; each must succeed
    and print every one of ``says`` (an item that is a tuple: one of its words)."""
    block = next(b for b in blocks("bash") if marker in b)
    emu = pathlib.Path(sys.executable).parent / "emu"
    cmds = [ln for ln in block.splitlines() if ln.startswith("emu ")]
    assert cmds and (lines is None or len(cmds) == lines)
    for line in cmds:
        out = subprocess.run([str(emu), *line.split()[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and all(any(x in out.stdout for x in ((w,) if isinstance(w, str) else w))
                                           for w in says), line + "\n" + out.stdout + out.stderr


def test_qsnet_examples_run(tmp_path):
    run_block(tmp_path, "--test put", ("every byte right",))


def test_hardware_collectives_examples_run(tmp_path):
    run_block(tmp_path, "--offload hw --algo tree", ("algo=hw", ("result=equal", "result=every rank left")), lines=3)


def test_manager_example_runs(tmp_path):
    run_block(tmp_path, "--manager", ("link s0-s5", "out of the tables"), lines=1)


def test_in_network_allreduce_example_runs(tmp_path):
    run_block(tmp_path, "--offload switch", ("result=equal",), lines=2)


def test_qsnet_api_example_runs():
    from emu.sim import EngineNet
    from emu.topologies import build

    code = next(b for b in blocks("python") if "host.put(" in b)
    ns: dict = {}
    exec(code + "\n    return r, old, ok\n", ns)
    net = EngineNet(build("star:n=8"))
    r, old, ok = net.run({"h0": ns["app"]})["h0"]
    assert r.ok and old == 0 and ok is True
    assert net.engines["h0"].mechanism("qsnet").mem.read(0x2000, 10_000) == b"x" * 10_000


def test_open_loop_traffic_example_runs(tmp_path):
    run_block(tmp_path, "--test uniform", ("zero_load_model_ns=", "saturation="), lines=1)
