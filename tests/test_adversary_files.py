"""scripts/adversary_files.py --quick: every hostile file and option of the quick set is refused in
one line, in bounded time and memory, writing nothing (issue 41)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "scripts", "adversary_files.py")


def test_every_case_of_the_quick_files_adversary_holds(tmp_path):
    # from a folder of its own: the script drives the installed package alone
    p = subprocess.run([sys.executable, SCRIPT, "--quick", "--timeout", "120"], capture_output=True, text=True,
                       timeout=900, cwd=tmp_path, stdin=subprocess.DEVNULL)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(("HELD", "BROKE"))]
    items = {ln.split()[1] for ln in lines}
    assert items == {"1", "2", "3", "4", "5", "6", "7"}, p.stdout + p.stderr  # each item of the issue
    broke = [ln for ln in lines if not ln.startswith("HELD ")]
    assert not broke, "\n".join(broke) + "\n" + p.stderr[-2000:]
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == f"{len(lines)} of {len(lines)} held"


def test_the_script_lists_its_cases_by_item():
    p = subprocess.run([sys.executable, SCRIPT, "--list"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    rows = [ln.split() for ln in p.stdout.splitlines()]
    assert len(rows) >= 40 and {r[0] for r in rows} == {str(i) for i in range(1, 8)}
    p = subprocess.run([sys.executable, SCRIPT, "--only", "nope"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no case named nope" in p.stderr
