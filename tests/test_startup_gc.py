"""The ``emu`` command's imports run with the cyclic collector off (``emu.__main__.main``): it is on
again (as the caller had it) when the command starts, and ``emu run`` has frozen the start-up first."""

import subprocess
import sys

import pytest

PROBE = """
import gc, sys
if sys.argv[1] == "off":
    gc.disable()
import emu.front.cli as cli
seen = []
cli.main = lambda argv=None: seen.append((gc.isenabled(), gc.get_freeze_count() > 0)) or 0
sys.argv = ["emu", *sys.argv[2:]]
from emu.__main__ import main
assert main() == 0
print(*seen[0], gc.isenabled())
"""


@pytest.mark.parametrize("gc_state, argv, expected", [
    ("on", ["run", "--topo", "star:n=2"], "True True True"),
    ("on", ["topo", "star:n=2"], "True False True"),
    ("off", ["run", "--topo", "star:n=2"], "False True False"),
])
def test_collector_back_as_it_was_and_run_frozen(gc_state, argv, expected):
    out = subprocess.run([sys.executable, "-c", PROBE, gc_state, *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == expected.split()
