#!/usr/bin/env python3
"""What one ``emu run`` command costs outside the emulated run itself (issue 45): the interpreter and
imports, the command line, the topology and the checks of the input, the plan, the elements, and the
results written after the run -- beside the run's own windows.

Two commands, each run whole in a process of its own with ``EMU_TIMELINE`` set (``emu.timeline``: each
process writes down its steps with its CPU seconds):

* ``mesh``: one load point of ``scripts/bench_iq.py`` -- BookSim2's uniform traffic on a 4x4 mesh, the
  input-queued router, 8 VCs, 1-flit packets, at 80 % of BookSim's saturation, ``--cycles`` warm-up
  and measured cycles (default 20: the fixed part, not the run, is what this measures), ``--direct``;
* ``fattree``: ``fattree:k=4,n=4 --test allreduce --algo recursive_doubling --size SIZE`` on sockets
  (default 1KiB), with 1 and 2 processes (``scripts/bench_processes.py`` has the 64 KiB run).

Printed per command and tree (the median of ``--repeat`` runs, trees alternating, so that both see
the same machine load): the main process's CPU seconds split as ``bench_processes`` splits them --
imports (with the interpreter), command line, topology and checks, plan, elements and workers, run,
teardown (the results shown and written) -- and for 2 processes the start-up's critical path
(``bench_processes.model``: with a core per process). All CPU time, not wall: the machine is shared.

Then counts that do not depend on the machine's speed or load:

* modules imported by the ``mesh`` and 1-process ``fattree`` commands (``python -X importtime``);
* Python function calls (cProfile) of one more ``mesh`` point in a process that ran one already: the
  fixed part per load point as ``bench_iq.py`` times it (imports done, everything else again);
* with ``--instructions``, the instructions of the whole ``mesh`` command under valgrind's callgrind
  (``PYTHONHASHSEED=0``; deterministic to about 1 %; slow: about a minute per tree).

Commands run with Python's default bytecode cache (``PYTHONDONTWRITEBYTECODE`` removed; an untimed
first run fills ``__pycache__``), as a user's ``python`` runs them.

    python scripts/bench_startup.py [--repeat 5] [--cycles 20] [--size 1KiB]
    python scripts/bench_startup.py --before /tmp/before57 --repeat 5       # before and after, alternating
    python scripts/bench_startup.py --before /work/main --instructions
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_processes import model, tree_env as processes_tree_env  # noqa: E402
from router_curves import FAITHFUL, FLIT, OURS  # noqa: E402

SAT_4_8_1 = 0.7682
"""BookSim2's saturation throughput on the 4x4 mesh, 8 VCs, 1-flit packets (``bench_iq.SAT``)."""


def mesh_argv(cycles: int, out: str) -> list[str]:
    """``bench_iq.py``'s 4x4, 8 VCs, 1-flit load point at 80 % of saturation, input-queued router."""
    sets = dict(OURS, **FAITHFUL, **{"switch.vcs": 8, "switch.model": "input_queued"})
    argv = ["run", "--topo", "mesh:k=4,n=2", "--test", "uniform", "--direct", "--load", f"{SAT_4_8_1 * 0.8:.4f}",
            "--warmup", str(cycles), "--measure", str(cycles), "--size", f"{FLIT - 24}B", "--to-self",
            "--drain", "measured", "--json", out]
    for key, v in sets.items():
        argv += ["--set", f"{key}={v}"]
    return argv


def fattree_argv(size: str, processes: int) -> list[str]:
    return ["run", "--topo", "fattree:k=4,n=4", "--test", "allreduce", "--algo", "recursive_doubling", "--size", size,
            "--processes", str(processes)]


def tree_env(tree: str | None) -> dict:
    """The environment that runs ``tree``'s code (None: this checkout's), bytecode cached. (Every
    command runs in a folder of its own: ``python -m emu`` puts the working folder first on the path.)"""
    env = processes_tree_env(tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def whole(argv: list[str], env: dict) -> dict:
    """One whole command in a process of its own: the main process's steps {what: (wall, CPU)}, the
    workers', the run's critical path and the CPU of every process (``rusage``), as
    ``bench_processes.whole`` reads them."""
    with tempfile.TemporaryDirectory() as tmp:
        tl = os.path.join(tmp, "timeline")
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "emu", *argv], capture_output=True, text=True,
                              env={**env, "EMU_TIMELINE": tl}, cwd=tmp)
        wall = time.monotonic() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            raise SystemExit(f"emu {' '.join(argv)} failed ({done.returncode}): {done.stdout.strip()[-300:]} "
                             f"{done.stderr.strip()[-300:]}")
        steps: dict[int, dict] = {}
        crit = before = None
        with open(tl) as f:
            for line in f:
                pid, mono, cpu, what = line.split(None, 3)
                what = what.strip()
                if what.startswith("run-critical "):
                    crit = [float(x) for x in what.split()[1:]]
                if what.startswith("run-before "):
                    before = [float(x) for x in what.split()[1:]]
                steps.setdefault(int(pid), {})[what] = (float(mono) - t0, float(cpu))
    main = steps.pop(next(pid for pid, st in steps.items() if "done" in st))
    workers = list(steps.values())
    for w in workers:
        w.setdefault("worker-done", w.get("worker-stop", max(w.values())))
        w.setdefault("worker-stop", w["worker-done"])
    return {"wall": wall, "main": main, "workers": workers, "run_crit": crit[0], "run_cpu": crit[1:],
            "run_before": before, "cpu_all": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
            "figures": re.sub(r"wall_s=[0-9.]+", "", done.stdout)}


PARTS = ("imports", "command line", "topology and checks", "plan", "elements", "run", "teardown")


def parts(r: dict) -> dict:
    """The main process's CPU seconds, step by step (``bench_processes.describe_whole``'s split)."""
    m = {k: v[1] for k, v in r["main"].items()}
    return {"imports": m["imported"], "command line": m["parsed"] - m["imported"],
            "topology and checks": m["prepared"] - m["parsed"], "plan": m["planned"] - m["prepared"],
            "elements": m["run-begin"] - m["planned"], "run": r["run_cpu"][0], "teardown": m["done"] - m["run-end"],
            "fixed": m["done"] - r["run_cpu"][0], "all": m["done"]}


def modules(argv: list[str], env: dict) -> int:
    """Modules the command imports (``-X importtime``'s lines: one per module, the first import)."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "emu", *argv], capture_output=True, text=True,
                              env=env, cwd=tmp)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:") and "|" in line
               and "cumulative" not in line)


def child(spec: dict) -> dict:
    """In the child: a ``mesh`` point run once, then once more under cProfile (its function calls)."""
    import cProfile
    import pstats

    from emu.front.cli import main

    def run() -> None:
        with open(os.devnull, "w") as null:
            saved, sys.stdout = sys.stdout, null
            try:
                rc = main(spec["argv"])
            finally:
                sys.stdout = saved
        if rc:
            raise SystemExit(f"bench_startup: emu {' '.join(spec['argv'])} exited {rc}")

    run()
    n = len(sys.modules)
    prof = cProfile.Profile()
    prof.enable()
    run()
    prof.disable()
    return {"calls": pstats.Stats(prof).total_calls, "modules_after_point": n}


def warm_calls(cycles: int, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "child.json")
        spec = {"argv": mesh_argv(cycles, os.path.join(d, "r.json"))}
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec), "--json", out],
                       env=env, check=True, cwd=d)
        with open(out) as f:
            return json.load(f)


def instructions(argv: list[str], env: dict) -> int:
    """The whole command's instructions under callgrind (every process it forks included)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--cache-sim=no",
                        sys.executable, "-m", "emu", *argv], env={**env, "PYTHONHASHSEED": "0"}, check=True,
                       capture_output=True, cwd=d)
        with open(out) as f:
            total = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
        return int(total.group(1)) if total else 0


def median(runs: list[dict], key) -> float:
    return statistics.median(key(r) for r in runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--tree", help="the code tree to measure (default: the one this runs in)")
    ap.add_argument("--before", metavar="TREE", help="also measure TREE's code, alternating with --tree's")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each command and tree (the medians count)")
    ap.add_argument("--cycles", type=int, default=20, help="the mesh point's warm-up and measured cycles, each")
    ap.add_argument("--size", default="1KiB", help="the fat-tree allreduce's size per rank (default 1KiB)")
    ap.add_argument("--instructions", action="store_true", help="also the mesh command's instructions (callgrind)")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        res = child(json.loads(a.child))
        with open(a.json, "w") as f:
            json.dump(res, f)
        return 0
    if a.repeat < 1 or a.cycles < 1:
        raise SystemExit("bench_startup: --repeat and --cycles must be at least 1")
    trees = [("before", a.before), ("after", a.tree)] if a.before else [("", a.tree)]
    envs = {label: tree_env(tree) for label, tree in trees}
    tmp = tempfile.TemporaryDirectory(prefix="bench_startup_")  # (removed at exit)
    out = tmp.name
    commands = {"mesh 4x4": mesh_argv(a.cycles, os.path.join(out, "r.json")),
                "fattree, 1 process": fattree_argv(a.size, 1), "fattree, 2 processes": fattree_argv(a.size, 2)}
    print(f"{os.cpu_count()} cores; CPU seconds of the main process (medians of {a.repeat}; trees alternating)"
          + (f"; before: {a.before}, after: {a.tree or 'this tree'}" if a.before else ""), flush=True)
    for label, _t in trees:  # untimed: fills __pycache__ and the file caches
        whole(commands["mesh 4x4"], envs[label])
        whole(commands["fattree, 2 processes"], envs[label])
    res: dict = {}
    for name, argv_ in commands.items():
        runs: dict[str, list[dict]] = {label: [] for label, _t in trees}
        for _ in range(a.repeat):
            for label, _t in trees:
                runs[label].append(whole(argv_, envs[label]))
        figures = {r["figures"] for rs in runs.values() for r in rs}
        if len(figures) != 1:
            raise SystemExit(f"{name}: FIGURES DIFFER between runs or trees")
        print(f"{name}: emu {' '.join(argv_[:12])} ...")
        print(f"  {'tree':>6} | {'all':>5} {'fixed':>5} | " + " ".join(f"{p[:12]:>12}" for p in PARTS)
              + ("  | start-up critical path" if "2 processes" in name else ""))
        for label, _t in trees:
            p = {k: median(runs[label], lambda r, k=k: parts(r)[k]) for k in (*PARTS, "fixed", "all")}
            extra = ""
            if "2 processes" in name:
                extra = f"  | {median(runs[label], lambda r: model(r)['start']):.2f}"
                p["critical_start"] = median(runs[label], lambda r: model(r)["start"])
            p["cpu_all_processes"] = median(runs[label], lambda r: r["cpu_all"])
            res.setdefault(label or "this", {})[name] = p
            print(f"  {label or 'this':>6} | {p['all']:>5.2f} {p['fixed']:>5.2f} | "
                  + " ".join(f"{p[k]:>12.3f}" for k in PARTS) + extra + f"  (every process: {p['cpu_all_processes']:.2f})",
                  flush=True)
    print("counts (independent of the machine's speed):")
    for label, _t in trees:
        env = envs[label]
        c = {"modules, mesh": modules(commands["mesh 4x4"], env),
             "modules, fattree": modules(commands["fattree, 1 process"], env),
             "calls, one more mesh point": warm_calls(a.cycles, env)["calls"]}
        if a.instructions:
            c["instructions, mesh command"] = instructions(commands["mesh 4x4"], env)
        res[label or "this"]["counts"] = c
        print(f"  {label or 'this':>6}: " + ", ".join(f"{k} {v:,}" for k, v in c.items()), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
