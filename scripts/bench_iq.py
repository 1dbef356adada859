"""What the input-queued router costs: CPU seconds per load point beside BookSim2, and per crossing
beside the output-queued router.

For each mesh, VCs and packet length of BookSim2's uniform comparison (``scripts/router_curves.py
--booksim``: 4x4 and 8x8, 1/2/8 VCs, 1- and 4-flit packets) and each load point (by default 50 % and
80 % of BookSim's saturation, :data:`SAT`), the same open-loop uniform traffic three ways, each for
the same windows -- ``W`` cycles of warm-up, ``W`` measured, then the measured packets drained:

* BookSim2's ``iq`` router (``warmup_periods=1``, ``sample_period=W``, ``max_samples=2``: one
  warm-up period and one sample, then its drain), its CPU time from ``getrusage(RUSAGE_CHILDREN)``;
* ours with the input-queued router (``router_curves``' stage-for-stage mapping, BookSim's choices
  where they are settings), ``emu run ... --warmup W/F --measure W/F --drain global`` (its windows
  are counted in packet times, F flit cycles each for F-flit packets; ``--drain global`` is BookSim's
  drain: every source injects until every measured packet anywhere is in, counted out of band, then
  none; ``--drain measured`` here runs the older drain -- each source until the measured packets sent
  to it are in, then a count message to every host, n x n frames -- which a tree before ``global``
  has: ``--before-drain measured`` gives it to the ``--before`` tree alone);
* ours with the output-queued router on the same settings (``switch.model=output_queued``).

Ours runs in a child process per configuration (one interpreter: imports and the compiled core
loaded once, then each load point's ``emu run`` timed alone with ``time.process_time``: the
topology's build, the run and its report, with the cyclic collector as the command has it; the
start-up -- interpreter and imports, about 1-2 s of CPU -- is printed apart). All times are CPU time, not wall: the machine is shared.

    python scripts/bench_iq.py --booksim /tmp/booksim2/src/booksim                 # every configuration, W=300
    python scripts/bench_iq.py --booksim B --k 4 --vcs 8 --flits 1 --cycles 1000
    python scripts/bench_iq.py --booksim B --tree /work/main                       # another tree's code
    python scripts/bench_iq.py --booksim B --before /work/main                     # before and after, alternating
    python scripts/bench_iq.py --booksim B --before /work/main --before-drain measured   # a tree without --drain global
    python scripts/bench_iq.py --booksim B --json out.json                         # the rows, for a before/after table
    python scripts/bench_iq.py --instructions --before /work/main --at 0.8 --cycles 100   # instructions per crossing
    python scripts/bench_iq.py --floor --booksim B --k 8 --vcs 1 --flits 1          # what the router's share is

``--floor`` asks, per load point, how far the router itself can take the ratio: our CPU seconds split
into the compiled core's ``window()`` and the rest (the topology's build, the traffic's draws, the
report), the router's share of ``window()``'s instructions (callgrind: inclusive of the input-queued
router's timer rounds, its receive and the credits' handling -- the NICs' credits too, so the share
is if anything too large), and the model: the point's CPU with that share of ``window()`` taken
away, over BookSim's -- the ratio a router that cost nothing would give -- and the cut of the
router's own cost that 3x BookSim needs.

Printed per load point: our CPU seconds (input-queued), BookSim's, their ratio; the cycles each
simulated (ours: the run's end, drain included) and the frames our hosts injected (count messages
included); crossings (frames x hops) per CPU second of each of
our routers and the input-queued router's cost per crossing over the output-queued one's; and the
mean latency of each (cycles), so a tree's figures can be compared with another's.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from trees import fixed_addresses, tree_env  # noqa: E402
from router_curves import BOOKSIM, CYCLE_NS, FAITHFUL, FLIT, OURS  # noqa: E402

SAT = {(4, 1, 1): 0.3511, (4, 1, 4): 0.4806, (4, 2, 1): 0.7084, (4, 2, 4): 0.7006, (4, 8, 1): 0.7682,
       (4, 8, 4): 0.7655, (8, 1, 1): 0.1934, (8, 1, 4): 0.2626, (8, 2, 1): 0.3854, (8, 2, 4): 0.3809,
       (8, 8, 1): 0.3916, (8, 8, 4): 0.4076}
"""BookSim2's saturation throughput (accepted flits per node per cycle at an offered 1.0) per (k, VCs,
flits), as ``router_curves.py --booksim`` measured it (docs/fabric.md): where the load points sit."""
DRAINS = {"global": "BookSim's: every source until every measured packet anywhere is in, counted out of band",
          "measured": "each source until the measured packets sent to it are in, then n x n count messages"}
"""Our drains the comparison can run (``emu run --drain``), and what each is."""


def drains_of(tree: str | None) -> tuple | None:
    """The ``--drain`` choices ``tree``'s code has (None: this tree's), read from its source (None:
    not known there; the child then checks)."""
    root = tree or os.environ.get("EMU_TREE") or os.path.dirname(HERE)
    try:
        with open(os.path.join(root, "emu", "front", "traffic_checks.py")) as f:
            found = re.search(r"^DRAINS = (\(.*?\))", f.read(), re.M)
        return tuple(ast.literal_eval(found.group(1))) if found else None
    except (OSError, ValueError, SyntaxError):
        return None


def check_drain(tree: str | None, drain: str, option: str) -> None:
    """Refuse, before anything runs, a drain ``tree``'s code does not have."""
    known = drains_of(tree)
    if known is not None and drain not in known:
        raise SystemExit(f"bench_iq: {tree or 'this tree'} has no --drain {drain} (its drains: {', '.join(known)}); "
                         f"give {option} measured (the older drain: each source's own, with n x n count messages)")


def booksim(binary: str, k: int, vcs: int, flits: int, rate: float, cycles: int) -> dict:
    """One BookSim2 latency run of one warm-up period and one sample of ``cycles``: its CPU seconds."""
    cfg = dict(BOOKSIM, topology="mesh", k=k, n=2, num_vcs=vcs, packet_size=flits, injection_rate=rate,
               sim_type="latency", warmup_periods=1, sample_period=cycles, max_samples=2)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.cfg")
        with open(path, "w") as f:
            f.write("".join(f"{key} = {v};\n" for key, v in cfg.items()))
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([binary, path], capture_output=True, text=True).stdout  # (exits 255 when done)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    lat = re.findall(r"Packet latency average = ([0-9.]+)", out)
    took = re.findall(r"Time taken is (\d+) cycles", out)
    if not took:
        raise SystemExit(f"bench_iq: BookSim gave no 'Time taken' line for k={k} vcs={vcs} flits={flits}; "
                         f"run {binary} by hand on such a configuration to see why")
    return {"cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), "cycles": int(took[-1]),
            "latency": float(lat[-1]) if lat else None}


def res_tree(emu) -> str:
    return os.path.dirname(os.path.dirname(emu.__file__))


def child(spec: dict) -> dict:
    """In the child: each load point's ``emu run`` timed alone (after an untimed warm-up run)."""
    import gc
    import time

    t0 = time.process_time()
    from emu.front.cli import main
    import emu
    import emu.switch

    def run(model: str, load: float, cycles: int, out: str) -> None:
        sets = dict(OURS, **FAITHFUL, **{"switch.vcs": spec["vcs"], "switch.model": model})
        w = max(1, cycles // spec["flits"])  # (ours counts windows in packet times: F flit cycles each)
        argv = ["run", "--topo", f"mesh:k={spec['k']},n=2", "--test", "uniform", "--direct", "--load", f"{load:.4f}",
                "--warmup", str(w), "--measure", str(w), "--size", f"{FLIT * spec['flits'] - 24}B",
                "--to-self", "--drain", spec.get("drain", "measured"), "--json", out]
        for key, v in sets.items():
            argv += ["--set", f"{key}={v}"]
        with open(os.devnull, "w") as null:
            saved, sys.stdout = sys.stdout, null
            try:
                rc = main(argv)
            finally:
                sys.stdout = saved
        if rc:
            raise SystemExit(f"bench_iq: emu run {' '.join(argv)} exited {rc}")

    def as_command() -> None:
        """The collector as ``emu run``'s process has it at its start (``emu.__main__``, ``cli.main``):
        what exists frozen, off while the topology, the plan and the elements are built, then their
        objects frozen and it on again as the run starts (``startup_gc.back(freeze=True)``). A library
        call of ``cli.main`` leaves it on throughout (~17-20 M instructions a load point here); a tree
        without ``startup_gc.hold_until_run`` is left so."""
        try:
            from emu import sync
            from emu.front import startup_gc
        except ImportError:
            return
        if not hasattr(startup_gc, "hold_until_run") or not hasattr(sync, "_until_run"):
            return
        gc.collect()  # (untimed: the last point's garbage, as a new process has none)
        gc.unfreeze()
        sync._frozen, sync._until_run = False, False
        sync.freeze_until_run()
        startup_gc.hold_until_run(gc.isenabled())

    from emu import native
    from emu.front import traffic_checks
    in_window = [0.0]
    if spec.get("split") and native.CORE is not None:  # (--floor: the CPU inside window() apart)
        class Timed:
            def __init__(self, core):
                self._core = core

            def __getattr__(self, name):
                return getattr(self._core, name)

            def window(self, *args, _w=native.CORE.window, _t=time.process_time):
                t = _t()
                try:
                    return _w(*args)
                finally:
                    in_window[0] += _t() - t
        native.CORE = Timed(native.CORE)
    has = getattr(traffic_checks, "DRAINS", ("fixed", "measured"))
    if spec.get("drain", "measured") not in has:
        raise SystemExit(f"bench_iq: {res_tree(emu)} has no --drain {spec['drain']} (its drains: {', '.join(has)}); "
                         "give --drain measured (or --before-drain measured for the --before tree)")
    if native.CORE is None and not os.environ.get("EMU_PURE"):  # (a stale or missing core: pure Python, silently)
        raise SystemExit(f"bench_iq: {res_tree(emu)}'s compiled core is not in use "
                         f"({native.WHY or 'not built'}): build it there first, or set EMU_PURE=1 to measure pure Python")
    res = {"tree": res_tree(emu), "switch": emu.switch.__file__, "points": [], "loop": native.in_use(),
           "collector": "as emu run's" if hasattr(sys.modules.get("emu.front.startup_gc"), "hold_until_run") else "on"}
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        if not spec.get("callgrind"):  # (under callgrind only the windows count: no warm-up run)
            as_command()
            run("input_queued", 0.05, 20, out)  # (lazy imports, the core's set-up: not any load point's)
        res["startup_s"] = time.process_time() - t0
        for load in spec["loads"]:
            for model in spec["models"]:
                as_command()
                in_window[0] = 0.0
                c0 = time.process_time()
                run(model, load, spec["cycles"], out)
                cpu = time.process_time() - c0
                with open(out) as f:
                    r = json.load(f)["results"][0]
                row = r["curve"][0]
                res["points"].append({"model": model, "load": load, "cpu_s": cpu, "window_s": in_window[0],
                                      "hops": r["hop_count_all_loads"],
                                      "frames": r["frames_all_loads"], "end_ns": r["end_ns"],
                                      "latency": row["mean_ns"] / CYCLE_NS, "accepted": row["accepted"]})
    return res


def ours(tree: str | None, k: int, vcs: int, flits: int, loads, cycles: int, models, callgrind: bool = False,
         drain: str = "global", split: bool = False) -> dict:
    """A child process on ``tree``'s code (default: this one's) for one configuration; ``callgrind``:
    under valgrind, its instructions inside the compiled core's ``window()`` counted (every element
    window of the runs, start-up and the topology's build not)."""
    env = tree_env(tree or None)
    spec = {"k": k, "vcs": vcs, "flits": flits, "loads": list(loads), "cycles": cycles, "models": list(models),
            "callgrind": callgrind, "drain": drain, "split": split and not callgrind}
    with tempfile.TemporaryDirectory() as d:
        out, cg = os.path.join(d, "child.json"), os.path.join(d, "callgrind.out")
        pre = [*fixed_addresses(), "valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", "--toggle-collect=window",
               "--cache-sim=no"] if callgrind else []
        done = subprocess.run(pre + [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec), "--json", out],
                       env=dict(env, PYTHONHASHSEED="0") if callgrind else env, check=False,
                       stderr=subprocess.PIPE if callgrind else None, text=True)
        if done.returncode:
            said = [ln for ln in (done.stderr or "").splitlines() if ln.strip() and not ln.startswith("==")][-1:]
            said = said or ["its message above"]  # (valgrind's own lines start with ==pid==)
            raise SystemExit(f"bench_iq: the run of {tree or 'this tree'} failed (exit {done.returncode}): {said[0]}")
        with open(out) as f:
            res = json.load(f)
        if callgrind:
            with open(cg) as f:
                total = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
            res["instructions"] = int(total.group(1)) if total else 0
            if split:
                res["router_instructions"] = router_instructions(cg)
        return res


ROUTER = ("iq_on_timer", "iq_receive", "credit_in_c", "credit_out_c")
"""The compiled core's functions that are the input-queued router's, counted inclusively for
``--floor`` (``emu/csrc/iqtimer.h``, ``iqrecv.h``, ``credits.h``; none calls another of them)."""


def router_instructions(cg: str) -> dict:
    """Instructions under each of :data:`ROUTER`, inclusive, from a callgrind file."""
    if shutil.which("callgrind_annotate") is None:
        raise SystemExit("bench_iq: --floor needs callgrind_annotate (valgrind's; apt-get install valgrind)")
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", cg], capture_output=True,
                          text=True, check=True).stdout
    found = {}
    for name in ROUTER:
        counts = [int(m.group(1).replace(",", "")) for m in
                  re.finditer(rf"^\s*([\d,]+) \([^)]*\)\s+\S*:{name}(?:\.[\w.]+)? \[", text, re.M)]
        if not counts:
            raise SystemExit(f"bench_iq: no {name} in callgrind's count of window(): is the compiled core this "
                             "script knows in use? (ROUTER names the router's functions)")
        found[name] = max(counts)
    return found


def instructions(a, models) -> int:
    """``--instructions``: each model's instructions per crossing at each load point, on each tree."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_iq: --instructions needs valgrind (apt-get install valgrind)")
    trees = [("before", a.before), ("after", a.tree)] if a.before else [("", a.tree)]
    print(f"instructions in the compiled core's window() (every element window; callgrind, PYTHONHASHSEED=0), "
          f"{a.cycles} + {a.cycles} cycles then the drain ({drain_text(a)})")
    print(f"{'mesh':>5} {'vcs':>3} {'fl':>2} {'load':>6} {'model':>13} {'tree':>6} | {'instructions':>14} "
          f"{'crossings':>9} {'per crossing':>12}")
    for k, v, fl, load in load_points(a, 4, 8, 1):
        for m in models:
            for label, tree in trees:
                r = ours(tree, k, v, fl, [load], a.cycles, [m], callgrind=True, drain=a.drains[label])
                hops = r["points"][0]["hops"]
                print(f"{k:>3}x{k:<1} {v:>3} {fl:>2} {load:>6.4f} {m:>13} {label:>6} | "
                      f"{r['instructions']:>14,} {hops:>9,} {r['instructions'] / hops:>12,.0f}", flush=True)
    return 0


def load_points(a, k: int, vcs: int, flits: int):
    """(k, VCs, flits, load) of each point ``--k``, ``--vcs``, ``--flits`` and ``--at`` ask for (the
    one configuration given here when they leave it out)."""
    for k in a.k or [k]:
        for v in a.vcs or [vcs]:
            for fl in a.flits or [flits]:
                for load in [round(SAT[(k, v, fl)] * x, 4) for x in a.at_list] if (k, v, fl) in SAT else a.at_list:
                    yield k, v, fl, load


def floor(a) -> int:
    """``--floor``: per load point, our CPU split and the router's share, beside BookSim's CPU."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_iq: --floor needs valgrind (apt-get install valgrind)")
    print(f"uniform traffic, {a.cycles} + {a.cycles} cycles then the drain ({drain_text(a)}); CPU seconds; "
          f"BookSim's the least of 3 runs; the router's share of window() by callgrind's instructions")
    print("model: without the router = our CPU - window() CPU x the router's share; 'cut for 3x' = how much "
          "of the router's own cost must go for 3x BookSim (over 100 %: not by the router alone)")
    print(f"{'mesh':>5} {'vcs':>3} {'fl':>2} {'load':>6} | {'emu s':>6} {'window':>6} {'router':>6} | "
          f"{'BS s':>6} {'ratio':>5} | {'w/o router':>10} {'ratio':>5} {'cut for 3x':>10}")
    for k, v, fl, load in load_points(a, 8, 1, 1):
        cpu = ours(a.tree, k, v, fl, [load], a.cycles, ["input_queued"], drain=a.drain, split=True)
        cg = ours(a.tree, k, v, fl, [load], a.cycles, ["input_queued"], callgrind=True, drain=a.drain,
                  split=True)
        p = cpu["points"][0]
        share = sum(cg["router_instructions"].values()) / cg["instructions"]
        router_s = p["window_s"] * share
        bs = min(booksim(a.booksim, k, v, fl, load, a.cycles)["cpu_s"] for _ in range(3))
        rest = p["cpu_s"] - router_s
        cut = 1 - (3 * bs - rest) / router_s if router_s > 0 else 0.0
        print(f"{k:>3}x{k:<1} {v:>3} {fl:>2} {load:>6.4f} | {p['cpu_s']:>6.3f} {p['window_s']:>6.3f} "
              f"{share:>6.1%} | {bs:>6.3f} {p['cpu_s'] / bs:>5.2f} | {rest:>10.3f} {rest / bs:>5.2f} "
              f"{max(cut, 0):>10.0%}", flush=True)
    return 0


def drain_text(a) -> str:
    """What each side's drain is, for the header."""
    if a.before and a.drains["before"] != a.drains["after"]:
        return "; ".join(f"{label} {a.drains[label]} ({DRAINS[a.drains[label]]})" for label in ("before", "after"))
    return f"{a.drain} ({DRAINS[a.drain]})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--booksim", metavar="PATH", help="BookSim2's booksim binary (leave out: ours only)")
    ap.add_argument("--k", type=int, action="append", help="mesh side (repeat; default 4 and 8)")
    ap.add_argument("--vcs", type=int, action="append", help="VCs (repeat; default 1, 2, 8)")
    ap.add_argument("--flits", type=int, action="append", help="packet flits (repeat; default 1 and 4)")
    ap.add_argument("--at", default="0.5,0.8", help="load points as fractions of BookSim's saturation (default 0.5,0.8)")
    ap.add_argument("--cycles", type=int, default=300, help="warm-up and measured cycles, each (default 300)")
    ap.add_argument("--tree", help="the code tree to measure (default: the one this runs in), e.g. /work/main")
    ap.add_argument("--before", metavar="TREE", help="also measure TREE's code (e.g. /work/main), alternating with --tree's "
                    "per configuration, so both see the same machine load")
    ap.add_argument("--no-oq", action="store_true", help="leave out the output-queued router")
    ap.add_argument("--drain", choices=tuple(DRAINS), default="global",
                    help="our drain (emu run --drain): global, BookSim's (the default), or measured, the older one "
                         "with n x n count messages (a tree before global has only it)")
    ap.add_argument("--before-drain", choices=tuple(DRAINS),
                    help="the --before tree's drain (default --drain's): measured for a tree without global")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under valgrind's callgrind instead (deterministic; default 4x4, 8 VCs, "
                         "1 flit; slow: about 100x)")
    ap.add_argument("--floor", action="store_true",
                    help="per load point, the router's share of our CPU and the ratio to BookSim without it (needs "
                         "--booksim and valgrind; default 8x8, 1 VC, 1 flit)")
    ap.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        res = child(json.loads(a.child))
        with open(a.json, "w") as f:
            json.dump(res, f)
        return 0
    if a.booksim and not os.access(a.booksim, os.X_OK):
        raise SystemExit(f"bench_iq: {a.booksim} is not an executable; build BookSim2 (make in its src/) and give "
                         "--booksim PATH/src/booksim")
    try:
        at = [float(x) for x in a.at.split(",")]
    except ValueError:
        raise SystemExit(f"bench_iq: --at {a.at!r} is not a comma-separated list of numbers, e.g. --at 0.5,0.8")
    models = ("input_queued",) if a.no_oq else ("input_queued", "output_queued")
    a.at_list = at
    if a.before_drain and not a.before:
        raise SystemExit("bench_iq: --before-drain is the --before tree's drain: give --before TREE too")
    a.drains = {"before": a.before_drain or a.drain, "after": a.drain, "": a.drain}
    check_drain(a.tree, a.drain, "--drain")
    if a.before:
        check_drain(a.before, a.drains["before"], "--before-drain")
    if a.instructions:
        return instructions(a, models)
    if a.floor:
        if not a.booksim:
            raise SystemExit("bench_iq: --floor compares with BookSim: give --booksim PATH/src/booksim")
        return floor(a)
    trees = [("before", a.before), ("after", a.tree)] if a.before else [("", a.tree)]
    rows = []
    print(f"uniform traffic, {a.cycles} + {a.cycles} cycles (warm-up, measured) then the measured packets drained, "
          f"both simulators; CPU seconds (process time, not wall); cores: {os.cpu_count()}"
          + (f"; 'before' is {a.before}, 'after' {a.tree or 'this tree'}, run alternately" if a.before else ""))
    print(f"our drain: {drain_text(a)}; BookSim's: every source until no measured packet is outstanding, then none")
    print(f"{'mesh':>5} {'vcs':>3} {'fl':>2} {'load':>6} {'tree':>6} | {'emu s':>6} {'BS s':>5} {'ratio':>5} | {'cyc':>5} "
          f"{'BS cyc':>6} {'frames':>6} | {'IQ cr/s':>7} {'OQ cr/s':>7} {'IQ/OQ':>5} | {'lat IQ':>6} {'OQ':>6} {'BS':>6}")
    for k in a.k or [4, 8]:
        for v in a.vcs or [1, 2, 8]:
            for fl in a.flits or [1, 4]:
                loads = [round(SAT[(k, v, fl)] * x, 4) for x in at] if (k, v, fl) in SAT else at
                res = {label: ours(tree, k, v, fl, loads, a.cycles, models, drain=a.drains[label]) for label, tree in trees}
                for load in loads:
                    bs = booksim(a.booksim, k, v, fl, load, a.cycles) if a.booksim else None
                    for label, _tree in trees:
                        r = res[label]
                        p = {m: next(x for x in r["points"] if x["model"] == m and x["load"] == load) for m in models}
                        iq, oq = p["input_queued"], p.get("output_queued")
                        cps = {m: x["hops"] / x["cpu_s"] for m, x in p.items()}
                        rows.append({"k": k, "vcs": v, "flits": fl, "load": load, "tree": label or r["tree"],
                                     "drain": a.drains[label], "startup_s": r["startup_s"], "iq": iq, "oq": oq,
                                     "booksim": bs})
                        ratio = f"{iq['cpu_s'] / bs['cpu_s']:>5.1f}" if bs and bs["cpu_s"] > 0 else f"{'-':>5}"
                        print(f"{k:>3}x{k:<1} {v:>3} {fl:>2} {load:>6.4f} {label:>6} | {iq['cpu_s']:>6.2f} "
                              f"{bs['cpu_s'] if bs else float('nan'):>5.2f} {ratio} | {iq['end_ns'] // CYCLE_NS:>5} "
                              f"{bs['cycles'] if bs else '-':>6} {iq['frames']:>6} | {cps['input_queued']:>7,.0f} "
                              f"{cps.get('output_queued', 0):>7,.0f} "
                              f"{cps['output_queued'] / cps['input_queued'] if oq else 0:>5.2f} | "
                              f"{iq['latency']:>6.2f} {oq['latency'] if oq else 0:>6.2f} "
                              f"{bs['latency'] if bs and bs['latency'] else 0:>6.2f}", flush=True)
                print("      (start-up of each child, interpreter and imports: "
                      + ", ".join(f"{label or res[label]['tree']} {res[label]['startup_s']:.2f} s" for label, _t in trees)
                      + "; the collector in each point: "
                      + ", ".join(f"{label or 'this'} {res[label].get('collector', 'on')}" for label, _t in trees)
                      + ")", flush=True)
    for label, _tree in trees:
        sel = [r for r in rows if r["tree"] == (label or r["tree"])]
        tot = {key: sum(r[key]["cpu_s"] for r in sel if r[key]) for key in ("iq", "oq", "booksim")}
        hops = {key: sum(r[key]["hops"] for r in sel if r[key]) for key in ("iq", "oq")}
        if sel:
            frames = sum(r["iq"]["frames"] for r in sel)
            print(f"{label or 'total'} (--drain {a.drains[label]}, input-queued frames {frames:,}): CPU s emu "
                  f"input-queued {tot['iq']:.2f}, output-queued {tot['oq']:.2f}, BookSim "
                  f"{tot['booksim']:.2f} (IQ {tot['iq'] / tot['booksim'] if tot['booksim'] else 0:.1f}x BookSim); "
                  f"crossings/s IQ {hops['iq'] / tot['iq']:,.0f}"
                  + (f", OQ {hops['oq'] / tot['oq']:,.0f}: IQ's cost per crossing "
                     f"{hops['oq'] / tot['oq'] / (hops['iq'] / tot['iq']):.2f}x OQ's" if tot["oq"] else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
