"""The ``emu`` command's start-up with the cyclic collector off (``emu.__main__``,
``emu.front.startup_gc``): any command but ``emu run`` has it back (as the caller had it) when it
starts; ``emu run`` freezes its modules and keeps it off until its first run starts -- a worker
forked meanwhile has it on -- or the command ends."""

import subprocess
import sys

import pytest

PROBE = """
import gc, sys
if sys.argv[1] == "off":
    gc.disable()
import emu.front.cli as cli
from emu.front import startup_gc
seen = []
cli.main = lambda argv=None: seen.append((gc.isenabled(), gc.get_freeze_count() > 0, startup_gc._off)) or 0
sys.argv = ["emu", *sys.argv[2:]]
from emu.__main__ import main
assert main() == 0
startup_gc.back()
print(*seen[0], gc.isenabled())
"""


@pytest.mark.parametrize("gc_state, argv, expected", [
    ("on", ["run", "--topo", "star:n=2"], "False True True True"),
    ("on", ["topo", "star:n=2"], "True False False True"),
    ("off", ["run", "--topo", "star:n=2"], "False True False False"),
    ("off", ["topo", "star:n=2"], "False False False False"),
])
def test_collector_held_for_run_else_back_as_it_was(gc_state, argv, expected):
    out = subprocess.run([sys.executable, "-c", PROBE, gc_state, *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == expected.split()


RUN = """
import gc, os, runpy, sys
import emu.forked, emu.sync
seen = []
until = emu.sync.Synchroniser.run_until_quiet
async def run_until_quiet(self):
    seen.append(f"run:{gc.isenabled()}")
    return await until(self)
emu.sync.Synchroniser.run_until_quiet = run_until_quiet
forked = emu.forked.run_forked
def run_forked(*a, **k):
    print(f"worker:{gc.isenabled()}", flush=True)
    return forked(*a, **k)
emu.forked.run_forked = run_forked
sys.argv = ["emu", "run", "--topo", "star:n=4", "--test", "pingall", *sys.argv[1:]]
try:
    runpy.run_module("emu", run_name="__main__", alter_sys=True)
except SystemExit as e:
    assert not e.code, e.code
print(*seen, f"end:{gc.isenabled()}", flush=True)
"""


@pytest.mark.parametrize("processes", ["1", "2"])
def test_run_has_the_collector_when_it_runs_and_workers_have_it(processes, tmp_path):
    out = subprocess.run([sys.executable, "-c", RUN, "--processes", processes], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[-2:] == ["run:True", "end:True"]
    assert words.count("worker:True") == int(processes) - 1 and "worker:False" not in words
