"""mpi4py's own test suite, unchanged, under ``emu mpirun`` and under MPICH, module by module.

    python scripts/mpi4py_suite.py                          # every module at n = 1, 2, 4, both ways
    python scripts/mpi4py_suite.py --n 2 --only test_p2p_buf,test_datatype
    python scripts/mpi4py_suite.py --impl emu --n 1 --json emu.json
    python scripts/mpi4py_suite.py --src /path/to/mpi4py/test   # a checkout's test/ instead of the sdist's

The suite is the ``test/`` folder of the mpi4py release installed here (its sdist from PyPI, the
same version as ``mpi4py.__version__``, downloaded once into ``--cache``; or ``--src``). Each
module runs as its own job -- ``mpiexec -n N python DRIVER MODULE`` (the ``mpich`` wheel's
``mpiexec``) and ``emu mpirun -n N --topo star:n=N --compute zero DRIVER MODULE`` -- so that one
module's failure cannot end the others'. The driver is unittest's loader and runner, as mpi4py's
``runtests.py`` uses them; it records every test case's outcome on every rank as it ends (one JSON
line each), so a job that dies or hangs keeps what ran before. A case passes when it passed on
every rank, is skipped when rank 0 skipped it, and fails otherwise -- a case that never reported
(the job died or timed out first) included.

The table: per module and n, the cases MPICH passes and how many of those pass under emu; cases
skipped by one side only are counted apart. ``--json`` writes every case's outcome both ways. The
``Comm.Spawn`` cases (``test_spawn``: about 130 processes started at n = 2, minutes of wall time) run
on a topology with hosts for the children too; ``--no-spawn`` skips them under emu with
``MPI4PY_TEST_SPAWN=0``, the suite's own switch for a library without Spawn ("mpi-spawn").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

DRIVER = r'''
import importlib, json, os, sys, unittest
tests, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, tests)
sys.dont_write_bytecode = True
from mpi4py import MPI
rank = MPI.COMM_WORLD.Get_rank()
log = open(os.path.join(out, f"{name}.{rank}.jsonl"), "w", buffering=1)

class Result(unittest.TextTestResult):
    def _note(self, test, outcome, why=""):
        log.write(json.dumps({"id": test.id(), "outcome": outcome, "why": why[-2000:]}) + "\n")
    def addSuccess(self, test):
        super().addSuccess(test); self._note(test, "pass")
    def addFailure(self, test, err):
        super().addFailure(test, err); self._note(test, "fail", self._exc_info_to_string(err, test))
    def addError(self, test, err):
        super().addError(test, err); self._note(test, "error", self._exc_info_to_string(err, test))
    def addSkip(self, test, reason):
        super().addSkip(test, reason); self._note(test, "skip", str(reason))
    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err); self._note(test, "pass")
    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); self._note(test, "fail", "unexpected success")
    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "fail" if issubclass(err[0], test.failureException) else "error"
            self._note(test, kind, str(subtest) + "\n" + self._exc_info_to_string(err, test))

try:
    mod = importlib.import_module(name)
except BaseException as e:
    log.write(json.dumps({"id": name + ".<import>", "outcome": "error", "why": f"{type(e).__name__}: {e}"}) + "\n")
    raise
suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
stream = open(os.devnull, "w") if rank else sys.stderr
unittest.TextTestRunner(stream=stream, verbosity=0, resultclass=Result).run(suite)
log.write(json.dumps({"id": name + ".<end>", "outcome": "end"}) + "\n")
'''


def suite_dir(args) -> str:
    if args.src:
        if not os.path.isfile(os.path.join(args.src, "mpiunittest.py")):
            sys.exit(f"--src {args.src}: not mpi4py's test folder (no mpiunittest.py in it)")
        return os.path.abspath(args.src)
    import mpi4py

    ver = mpi4py.__version__
    dest = os.path.join(args.cache, f"mpi4py-{ver}", "test")
    if os.path.isfile(os.path.join(dest, "mpiunittest.py")):
        return dest
    os.makedirs(args.cache, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                            "-d", tmp, f"mpi4py=={ver}"], capture_output=True, text=True)
        tars = [f for f in os.listdir(tmp) if f.endswith(".tar.gz")]
        if r.returncode or not tars:
            sys.exit(f"could not download mpi4py {ver}'s sdist from PyPI ({r.stderr.strip()[-200:]}); "
                     "give a checkout's test folder with --src")
        with tarfile.open(os.path.join(tmp, tars[0])) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(f"mpi4py-{ver}/test/") and m.isfile()]
            tf.extractall(args.cache, members=members, filter="data")
    return dest


def modules(tests: str, only: list[str] | None) -> list[str]:
    names = sorted(f[:-3] for f in os.listdir(tests) if f.startswith("test_") and f.endswith(".py"))
    if only:
        unknown = [m for m in only if m not in names]
        if unknown:
            sys.exit(f"--only: no module {', '.join(unknown)} in {tests}")
        names = [m for m in names if m in only]
    return names


MEMORY_LIMIT = 4 << 30
"""Address space each process of a job may take (a case that would grow without bound fails instead
of taking the machine's memory)."""


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


SPAWN_OFF = {"MPI4PY_TEST_SPAWN": "0"}
"""The suite's own switch for a library or environment without ``Comm.Spawn`` (``mpitestutil.
disable_mpi_spawn``: its cases are skipped as "mpi-spawn"): emu's runs get it with ``--no-spawn``."""


SPAWN_MODULES = {"test_spawn", "test_util_pool"}
"""Modules whose Spawn cases run under emu (``test_util_pool``: ``mpi4py.futures``' process pool, at n = 1),
with hosts for the spawned processes too (``emu mpirun`` puts one process on a host):
``n * max(3, 2 n)`` beyond the ranks' own -- each of the ``n`` ranks at once (on ``COMM_SELF``) may spawn
two commands of ``n`` processes, or of 1 and 2. (A Spawn waits for the children of the one before to end.)"""


SPAWN_TIMEOUT = 3
"""Those modules get this many times ``--timeout`` (each child is a Python process that imports the emulated
library: about 0.5 s of CPU time each, where MPICH's imports its compiled one)."""


def run_one(impl: str, tests: str, module: str, n: int, timeout: float, driver: str, spawn: bool = True) -> dict:
    """Every case's outcome, by id: pass, skip or fail (with why)."""
    spawn = spawn and module in SPAWN_MODULES
    env = dict(os.environ, **(SPAWN_OFF if impl == "emu" and not spawn else {}))
    with tempfile.TemporaryDirectory() as out:
        if impl == "mpich":
            mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"
            cmd = [mpiexec, "-n", str(n), sys.executable, driver, tests, out, module]
        else:
            hosts = max(n, 2) + (n * max(3, 2 * n) if spawn else 0)
            cmd = [sys.executable, "-m", "emu", "mpirun", "-n", str(n), "--topo", f"star:n={hosts}",
                   "--compute", "zero", driver, tests, out, module]
        t0 = time.perf_counter()
        try:
            if spawn:
                timeout *= SPAWN_TIMEOUT
            p = subprocess.run(cmd, cwd=tests, capture_output=True, text=True, timeout=timeout, env=env,
                               start_new_session=True, preexec_fn=_limit_memory)
            tail = (p.stderr or "").strip().splitlines()[-3:]
            ended = f"exit {p.returncode}"
        except subprocess.TimeoutExpired as e:
            tail, ended = [], f"timed out after {timeout:.0f} s"
            _ = e
        wall = time.perf_counter() - t0
        per_rank = []
        for r in range(n):
            rows = {}
            path = os.path.join(out, f"{module}.{r}.jsonl")
            if os.path.exists(path):
                with open(path) as f:
                    for line in f:
                        try:
                            row = json.loads(line)
                        except ValueError:
                            continue
                        old = rows.get(row["id"])
                        if old is None or old["outcome"] == "pass":  # a failing subtest wins
                            rows[row["id"]] = row
            per_rank.append(rows)
    ids = sorted(set().union(*[set(r) for r in per_rank]) - {module + ".<end>"})
    cases = {}
    for i in ids:
        rows = [r.get(i) for r in per_rank]
        if rows[0] is not None and rows[0]["outcome"] == "skip":
            cases[i] = {"outcome": "skip", "why": rows[0]["why"]}
        elif all(row is not None and row["outcome"] == "pass" for row in rows):
            cases[i] = {"outcome": "pass"}
        else:
            bad = next((row for row in rows if row is not None and row["outcome"] not in ("pass", "skip")), None)
            why = bad["why"] if bad else "a rank never reported this case (" + ended + ")"
            cases[i] = {"outcome": "fail", "why": why}
    complete = all(module + ".<end>" in r for r in per_rank)
    return {"cases": cases, "complete": complete, "ended": ended, "tail": tail, "wall_s": round(wall, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--src", help="mpi4py's test folder (default: the installed version's sdist from PyPI)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "emu-mpi4py-suite"),
                    help="where the sdist's test folder is kept")
    ap.add_argument("--n", default="1,2,4", help="numbers of ranks (default 1,2,4)")
    ap.add_argument("--only", help="these modules (comma-separated), e.g. test_p2p_buf,test_datatype")
    ap.add_argument("--impl", choices=["both", "emu", "mpich"], default="both")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per module and n (default 300)")
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument("--fails", action="store_true", help="print each case MPICH passes and emu does not, with why")
    ap.add_argument("--no-spawn", dest="spawn", action="store_false",
                    help="skip the Comm.Spawn cases under emu (MPI4PY_TEST_SPAWN=0): they start many processes")
    args = ap.parse_args()
    tests = suite_dir(args)
    names = modules(tests, args.only.split(",") if args.only else None)
    sizes = [int(x) for x in args.n.split(",")]
    impls = ["mpich", "emu"] if args.impl == "both" else [args.impl]
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        driver = os.path.join(tmp, "emu_suite_driver.py")
        with open(driver, "w") as f:
            f.write(DRIVER)
        print(f"mpi4py {os.path.basename(os.path.dirname(tests))} test suite: {len(names)} modules, n = {args.n}")
        print(f"{'module':<24}{'n':>3} " + "".join(f"{i + ' pass/skip/fail':>24}" for i in impls)
              + ("   emu/MPICH-passed" if len(impls) == 2 else ""))
        totals = {i: [0, 0, 0] for i in impls}
        both_ok = both_base = 0
        for m in names:
            for n in sizes:
                row = {}
                for impl in impls:
                    row[impl] = run_one(impl, tests, m, n, args.timeout, driver, args.spawn)
                results.setdefault(m, {})[str(n)] = row
                cells = []
                for impl in impls:
                    c = [v["outcome"] for v in row[impl]["cases"].values()]
                    k = [c.count("pass"), c.count("skip"), c.count("fail")]
                    totals[impl] = [a + b for a, b in zip(totals[impl], k)]
                    mark = "" if row[impl]["complete"] else "*"
                    cells.append(f"{k[0]}/{k[1]}/{k[2]}{mark}")
                line = f"{m:<24}{n:>3} " + "".join(f"{c:>24}" for c in cells)
                if len(impls) == 2:
                    base = [i for i, v in row["mpich"]["cases"].items() if v["outcome"] == "pass"]
                    ok = [i for i in base if row["emu"]["cases"].get(i, {}).get("outcome") == "pass"]
                    skipped = [i for i in base if row["emu"]["cases"].get(i, {}).get("outcome") == "skip"]
                    both_ok += len(ok)
                    both_base += len(base) - len(skipped)
                    line += f"   {len(ok)}/{len(base) - len(skipped)}"
                    if args.fails:
                        for i in base:
                            v = row["emu"]["cases"].get(i, {"outcome": "fail", "why": "never ran"})
                            if v["outcome"] == "fail":
                                line += f"\n      {i}: {v['why'].strip().splitlines()[-1][:160] if v['why'] else ''}"
                print(line, flush=True)
        print("total" + " " * 23 + "".join(f"{'/'.join(map(str, totals[i])):>24}" for i in impls)
              + (f"   {both_ok}/{both_base}" if len(impls) == 2 else ""))
        print("(* the job ended before the module's end: a crash, a deadlock or the timeout; cases that "
              "never reported count as failed)")
        if "emu" in impls and not args.spawn:
            print("(--no-spawn: emu runs with MPI4PY_TEST_SPAWN=0, the suite skips its Comm.Spawn cases there, "
                  "\"mpi-spawn\")")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
