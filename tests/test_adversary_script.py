"""scripts/adversary.py --quick: every attack on the emulator holds (issue 22)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "scripts", "adversary.py")


def test_every_attack_of_the_quick_adversary_holds(tmp_path):
    # run from a folder of its own: the script must work against the installed package alone
    p = subprocess.run([sys.executable, SCRIPT, "--quick", "--seed", "1"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL)
    lines = p.stdout.splitlines()
    assert len(lines) >= 5, p.stdout + p.stderr          # forged, malformed, kill, faults, bad inputs
    broke = [ln for ln in lines if not ln.startswith("HELD ")]
    assert not broke, "\n".join(broke) + "\n" + p.stderr[-2000:]
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback (most recent call last)" not in p.stdout + p.stderr  # (the report itself names the word)
