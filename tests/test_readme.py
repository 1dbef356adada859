"""The README's Python example runs as written and prints what its comments say."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_readme_python_example_runs_and_prints_what_it_says(tmp_path):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python example"
    code = blocks[0]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    claimed = [m.strip() for m in re.findall(r"#\s*(\d+|\{.*\}):?", code)]
    lines = out.stdout.splitlines()
    assert lines[0] == claimed[0]
    assert lines[1] == claimed[1]
    assert (tmp_path / "run.pcapng").stat().st_size > 0


def test_ci_runs_the_readme_test_command():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    i = lines.index("# install and run the tests")
    assert "pytest" in lines[i + 1]
    assert "install and run the tests" in (ROOT / ".ci" / "run").read_text()
