"""scripts/bench_processes.py (issues 27 and 45: runs over several processes) at a tiny size: it runs,
prints the core count and each process's CPU split, and finds the figures the same over 1 and 2
processes -- the whole ``emu run`` command (its start-up, run and teardown, from its timeline) and
``emu.Cluster``'s run alone."""

import re

import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def test_bench_processes_runs_at_a_tiny_size():
    p = subprocess.run([sys.executable, str(SCRIPTS / "bench_processes.py"), "--topo", "star:n=4", "--size", "4KiB",
                        "--processes", "1,2", "--mode", "direct"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "cores" in p.stdout and "2 processes" in p.stdout and "CPU split" in p.stdout and "critical path" in p.stdout
    assert p.stdout.count("same figures") == 2
    # the whole command: its parts, and a worker forked as the command started (ready before its plan)
    assert "start-up" in p.stdout and "teardown" in p.stdout and "worker 1:" in p.stdout
    assert "the partition" in p.stdout  # (made by worker 1 while the main process checked the input)
    assert "the check of its ranks" in p.stdout  # (a worker checks its ranks' results: its CPU after the run)
    parts = re.search(r"wall ([0-9.]+) s = start-up ([0-9.]+) \+ run ([0-9.]+) \+ teardown ([0-9.]+)", p.stdout)
    assert parts and abs(float(parts[1]) - sum(map(float, parts.groups()[1:]))) < 0.02


def test_bench_processes_cluster_only():
    p = subprocess.run([sys.executable, str(SCRIPTS / "bench_processes.py"), "--topo", "star:n=4", "--size", "4KiB",
                        "--processes", "1,2", "--mode", "direct", "--cluster-only"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "in this process" in p.stdout and "CPU split" in p.stdout and p.stdout.count("same figures") == 2


def test_counting_instructions_without_valgrind_is_refused_in_one_line(tmp_path):
    import os

    p = subprocess.run([sys.executable, str(SCRIPTS / "bench_processes.py"), "--instructions"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PATH": str(tmp_path)})
    assert p.returncode != 0 and p.stderr.strip().splitlines() == ["--instructions needs valgrind (apt-get install valgrind)"]


def test_the_work_split_counts_every_frame_once_per_part():
    p = subprocess.run([sys.executable, str(SCRIPTS / "bench_processes.py"), "--topo", "fattree:k=2,n=2", "--size",
                        "4KiB", "--processes", "1,2", "--work-split"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    one = re.search(r"1 process: ([0-9,]+) windows; frames sent and received per part ([0-9,]+);", p.stdout)
    two = re.search(r"2 processes: ([0-9,]+) windows; frames sent and received per part ([0-9,]+), ([0-9,]+);.*"
                    r"summed ([0-9.]+)x the mean", p.stdout)
    assert one and two and one[1] == two[1], p.stdout  # the same windows
    n = lambda x: int(x.replace(",", ""))  # noqa: E731
    assert n(two[2]) + n(two[3]) == n(one[2]) > 0  # every frame in one part or the other
    assert float(two[4]) >= 1.0


def test_the_commands_run_this_checkouts_code_wherever_the_script_is_started(tmp_path):
    """``python -m emu`` imports the working folder's ``emu`` first: started inside another checkout
    (here a folder whose ``emu`` fails on import), the script still runs its own tree's commands."""
    (tmp_path / "emu").mkdir()
    (tmp_path / "emu" / "__init__.py").write_text("raise SystemExit('the wrong tree was imported')\n")
    p = subprocess.run([sys.executable, str(SCRIPTS / "bench_processes.py"), "--topo", "star:n=2", "--size", "4KiB",
                        "--processes", "1", "--mode", "direct"], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "same figures" in p.stdout and str(SCRIPTS.parent) in p.stdout
    bad = subprocess.run([sys.executable, str(SCRIPTS / "bench_processes.py"), "--before", str(tmp_path / "no")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "not a checkout" in bad.stderr


def test_the_workers_steps_are_read_in_domain_order():
    sys.path.insert(0, str(SCRIPTS))
    from bench_processes import in_domain_order

    steps = [{"worker-domain 3": (0, 0)}, {"worker-domain 1": (0, 0)}, {"worker-domain 2": (0, 0)}]
    assert [next(iter(w)) for w in in_domain_order(steps)] == ["worker-domain 1", "worker-domain 2", "worker-domain 3"]
    old = [{"worker-built": (1, 0)}, {"worker-built": (2, 0)}]  # (a tree that does not say: as they came)
    assert in_domain_order(old) == old
