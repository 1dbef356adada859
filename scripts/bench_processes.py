#!/usr/bin/env python3
"""Does spreading a run over processes pay off, and where does each process spend its time?

The 256-host recursive-doubling allreduce of issue 27 (``fattree:k=4,n=4``, 64 KiB) with 1, 2, ...
processes, in both transport modes (every link a real UDP socket, emu's default, and ``--direct``).
The runs are interleaved (1, 2, 1, 2, ... processes); the wall time is the median of ``--repeat``
runs, the other figures are those of the run of median wall time.

By default each run is the whole command a user types (issue 45), start-up and teardown included:
``python -m emu run --topo fattree:k=4,n=4 --test allreduce --algo recursive_doubling --size 64KiB
--processes P [--direct]``, timed from its start to its exit, with ``EMU_TIMELINE`` set so that
each process of it writes down its steps (``emu.timeline``). For each count:

- wall: from start to exit, split into start-up (until the first window), run (the windows) and
  teardown (the last window to the exit); the speed-up against one process in the same mode, the
  issue's goal (1.6x with 2 processes); how many cores other programs kept busy meanwhile (on a
  shared machine they, not the emulator, decide most of the wall time's swings);
- CPU seconds per process, in the same three parts; for a worker, how much of its start-up was done
  before the main process had a plan for it (then it cost no wall time);
- the critical path in CPU seconds: start-up (the main process to its plan -- waiting, where worker 1
  makes the partition, for the later of its own checks and the partition asked of the worker when
  the topology was built --, then the slower of its own build and each worker's start -- from the
  moment it was launched -- and build, then the calls that start the run: the main process's CPU for
  them and the busiest worker's after it, an upper bound since they go to every process at once), the
  run window by window (the busiest process's CPU from one window's start to the next, summed), the
  teardown: the main process's, or if longer, the busiest worker's calls after the run (the check of
  its ranks' results) and the main process's last steps after them. It is what the command takes with a core per process and instant messages: its ratio to
  one process's is the speed-up to expect on a quiet machine with enough cores, and the model for
  counts beyond this machine's cores.

Every virtual-time figure must be the same in every run (the command's output, wall-clock times
aside). ``--cluster-only`` measures instead ``emu.Cluster`` in this process, the run alone (no
start-up), as before issue 45. ``--work-split`` counts instead, in one run of one process, the frames
each part of each count's partition sends and receives window by window: the per-window balance
of the work, deterministic. ``--instructions`` counts, under valgrind's callgrind, the
instructions each process executes for the second half of the data (deterministic to about 1 %).

The commands run with Python's default bytecode cache (``--bytecode cache``: an untimed first run
fills ``__pycache__``), as a user's ``python`` runs them; this sandbox sets ``PYTHONDONTWRITEBYTECODE``,
which makes every process compile every module at every start (about 0.6 CPU s each, most of the
serial start-up); ``--bytecode as-is`` keeps that.

``--tree TREE`` runs another checkout's code (default: this script's), ``--before TREE`` TREE's too,
alternating run by run (whole commands). Each command runs in an empty folder with its tree first on
the path (``python -m emu`` imports the working folder's ``emu`` first).

    python scripts/bench_processes.py [--processes 1,2] [--mode both|sockets|direct] [--repeat 1]
        [--topo SPEC] [--size 64KiB] [--bytecode cache|as-is] [--tree TREE] [--before TREE]
        [--cluster-only | --instructions | --work-split]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import trio

HOME = pathlib.Path(__file__).resolve().parents[1]
"""The checkout this script belongs to: its in-process modes import this one's ``emu``."""
sys.path.insert(0, str(HOME))
sys.path.insert(1, str(HOME / "scripts"))
from trees import tree_env  # noqa: E402

TOPO = "fattree:k=4,n=4"
GOAL = 1.6


def parse_size(text: str) -> int:
    units = {"B": 1, "KIB": 1 << 10, "MIB": 1 << 20}
    t = text.strip().upper()
    for u in sorted(units, key=len, reverse=True):
        if t.endswith(u) and t[:-len(u)].isdigit():
            return int(t[:-len(u)]) * units[u]
    if t.isdigit():
        return int(t)
    raise SystemExit(f"--size {text}: give bytes, e.g. 64KiB")


def busy_cpu_s() -> float | None:
    """CPU seconds every program on this machine has used since boot (Linux's /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def critical_path(before: list[float], marks: list[list[float]], after: list[float]) -> float:
    """Window by window the busiest process's CPU from one window's start to the next (the run's
    start and end included), summed. ``marks[d]``: process ``d``'s CPU at each window's start."""
    cuts = [[b, *m, a] for b, m, a in zip(before, marks, after)]
    if len({len(c) for c in cuts}) != 1:
        raise SystemExit("the processes recorded different numbers of windows: a bug")
    return sum(max(c[i + 1] - c[i] for c in cuts) for i in range(len(cuts[0]) - 1))


async def once(spec: str, size: int, processes: int, direct: bool) -> dict:
    import emu
    from emu.nodes.collectives.run import check_where_run, run_collective
    from emu.topologies import build

    count = size // 4
    # (under callgrind, --instructions, the workers take minutes to start: RunConfig.connect_timeout_s)
    wait = float(os.environ.get("BENCH_CONNECT_S", "60"))
    run = emu.RunConfig(processes=processes, direct=direct, connect_timeout_s=wait)
    async with emu.Cluster(build(spec), run=run) as net:
        before = await net.cpu_times()
        await net.window_cpu(record=True)
        w0 = net.windows
        busy0 = busy_cpu_s()
        t = time.perf_counter()
        res = await run_collective(net, "allreduce", count=count, algo="recursive_doubling", keep=True)
        wall = time.perf_counter() - t
        busy1 = busy_cpu_s()
        marks = await net.window_cpu(record=False)
        after = await net.cpu_times()
        windows = net.windows - w0
        await check_where_run(net, res, count, "float32", "sum", 0, 0)  # (each process its ranks', as emu run)
    cpu = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    crit = critical_path([b["process_s"] for b in before], marks, [a["process_s"] for a in after])
    others = None if busy0 is None else \
        min(os.cpu_count(), max(0.0, (busy1 - busy0 - sum(c["process_s"] for c in cpu)) / wall))
    return {"wall": wall, "cpu": cpu, "windows": windows, "critical_s": crit, "other_cores": others,
            "figures": (res.figures(), res.link_frames, res.link_bytes)}


def median_run(runs: list[dict]) -> dict:
    """The run of median wall time (the lower of the two middle ones: its CPU figures are shown),
    with the median wall time over every run."""
    r = dict(sorted(runs, key=lambda x: x["wall"])[(len(runs) - 1) // 2])
    r["own_wall"] = r["wall"]
    r["wall"] = statistics.median(x["wall"] for x in runs)
    r["walls"] = sorted(x["wall"] for x in runs)
    return r


def describe(mode: str, p: int, r: dict, base: dict, cores: int) -> str:
    cpu = [c["process_s"] for c in r["cpu"]]
    split = base["cpu"][0]["process_s"] / max(cpu)
    bound = base["critical_s"] / r["critical_s"]
    speed = base["wall"] / r["wall"]
    parts = ", ".join(f"{c['process_s']:.2f} (windows {c['window_s']:.2f}, datagrams {c['drain_s']:.2f})"
                      for c in r["cpu"])
    goal = "" if p == 1 else f"; goal {GOAL}x: {'met' if speed >= GOAL else 'not met'}"
    walls = "" if len(r["walls"]) == 1 else f" (runs {', '.join(f'{w:.2f}' for w in r['walls'])})"
    held = ""
    if all("runqueue_s" in c for c in r["cpu"]):  # (the rest of the run's wall time it slept: waiting for the others)
        held = "; waited for a core " + ", ".join(f"{c['runqueue_s']:.2f}" for c in r["cpu"]) + " s, asleep " + \
            ", ".join(f"{max(0.0, r['own_wall'] - c['process_s'] - c['runqueue_s']):.2f}" for c in r["cpu"]) + " s"
    if all("preempted" in c for c in r["cpu"]):
        held += ", preempted " + ", ".join(f"{c['preempted']:.0f}" for c in r["cpu"]) + " times"
    if r["other_cores"] is not None:
        held += f"; other programs kept {r['other_cores']:.1f} of {cores} cores busy"
    return (f"{mode:>7}, {p} process{'es' if p > 1 else ''}: wall {r['wall']:.2f} s{walls}, speed-up {speed:.2f}x "
            f"({speed / min(p, cores):.2f} per core{'' if p <= cores else ', more processes than cores'}{goal}); "
            f"{r['windows']:,} windows; CPU s per process: {parts}; CPU split {split:.2f}x; critical path "
            f"{r['critical_s']:.2f} CPU s, speed-up with a core per process {bound:.2f}x{held}; same figures")


def work_split(spec: str, size: int, counts: list[int]) -> list[dict]:
    """The per-window balance of the work, deterministic: one process runs the allreduce, and after
    each window the frames every element sent and received in it are added up per part of each
    count's partition (``emu.partition.partition``, as ``--processes N`` makes it). The windows are
    the same whatever the count (their bounds are virtual times), so window by window the busiest
    part's frames, summed, over the mean part's is what the per-window imbalance costs the run at
    that count with a core per process, counted in frames rather than in CPU seconds (which vary
    by a few per cent from window to window on a shared machine)."""
    import emu
    from emu import domain as dm
    from emu.nodes.collectives.run import run_collective
    from emu.partition import partition
    from emu.topologies import build

    topo = build(spec)
    owners = {p: partition(topo, p) for p in counts}
    rows: dict[int, list[list[int]]] = {p: [] for p in counts}
    window = dm.Domain._window

    def frames(dom) -> dict[str, int]:
        return {el.name: sum(p.tx_frames + el.ins[p.index].rx_frames for p in el.out_ports) for el in dom.elements}

    async def counted(self, w, t0, t1, expected, stretch=0):  # (one window at a time: no merged ones)
        before = frames(self)
        out = await window(self, w, t0, t1, expected, 0)
        after = frames(self)
        for p in counts:
            row = [0] * p
            for name, n in after.items():
                row[owners[p][name]] += n - before[name]
            rows[p].append(row)
        return out

    async def run() -> None:
        async with emu.Cluster(topo, processes=1) as net:
            await run_collective(net, "allreduce", count=size // 4, algo="recursive_doubling")

    dm.Domain._window = counted
    try:
        trio.run(run)
    finally:
        dm.Domain._window = window
    out = []
    for p in counts:
        per = rows[p]
        total = [sum(r[d] for r in per) for d in range(p)]
        crit = sum(max(r) for r in per)
        mean = sum(total) / p
        out.append({"processes": p, "windows": len(per), "frames": total, "critical": crit,
                    "loss": crit / mean, "whole": max(total) / mean})
        print(f"{p} process{'es' if p > 1 else ''}: {len(per):,} windows; frames sent and received per part "
              f"{', '.join(f'{t:,}' for t in total)}; busiest part {max(total) / mean:.3f}x the mean; window by "
              f"window the busiest part's frames summed {crit / mean:.3f}x the mean (frame speed-up with a core "
              f"per process {sum(total) / crit:.2f}x)", flush=True)
    return out


def instructions(a, counts: list[int], size: int) -> None:
    """Each process's instructions for the second half of ``size`` (a run at ``size`` less one at
    half of it), under callgrind; one process's over the busiest process's."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    code = ("import sys, trio; sys.path.insert(0, {s!r}); import bench_processes as b; "
            "trio.run(b.once, {topo!r}, {size}, {p}, {direct})")
    for mode in (["sockets", "direct"] if a.mode == "both" else [a.mode]):
        base = None
        for p in counts:
            per = {}
            for sz, sign in ((size, 1), (size // 2, -1)):
                with tempfile.TemporaryDirectory() as tmp:
                    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={tmp}/cg.%p",
                           sys.executable, "-c", code.format(s=str(pathlib.Path(__file__).parent), topo=a.topo,
                                                             size=sz, p=p, direct=mode == "direct")]
                    env = {**os.environ, "PYTHONHASHSEED": "0", "BENCH_CONNECT_S": "900"}
                    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # (as the emu command,
                        env.setdefault(k, "1")  # emu.control.one_math_thread: a BLAS pool's spinning threads are noise)
                    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    if done.returncode:
                        raise SystemExit(f"{mode}, {p} processes under callgrind failed: {done.stderr.strip()[-300:]}")
                    for f in pathlib.Path(tmp).iterdir():
                        text = f.read_text(errors="replace")
                        cmdline = re.search(r"^cmd:(.*)$", text, re.M)
                        total = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
                        if cmdline is None or total is None or "python" not in cmdline.group(1):
                            continue  # (a helper program, e.g. ldconfig)
                        worker = re.search(r"-m emu\.worker \S+ \S+ (\d+)", cmdline.group(1))
                        d = int(worker.group(1)) if worker else 0
                        per[d] = per.get(d, 0) + sign * int(total.group(1))
            counts_p = [per[d] for d in sorted(per)]
            if min(counts_p) < 1e8:  # (two start-ups differ by a few million instructions: trio's scheduling)
                raise SystemExit(f"{mode}, {p} processes: the second half of {size:,} B took under 0.1 G "
                                 f"instructions in a process, within the start-up's noise; give a larger --size")
            if base is None:
                base = counts_p[0]
            print(f"{mode:>7}, {p} process{'es' if p > 1 else ''}: instructions for the second half of the data "
                  f"per process {', '.join(f'{c / 1e9:.3f}' for c in counts_p)} G (sum {sum(counts_p) / 1e9:.3f} G); "
                  f"instruction split {base / max(counts_p):.2f}x", flush=True)


BYTECODE = {"cache": "Python's default: compiled modules cached in __pycache__ (filled by an untimed first run)",
            "as-is": "this environment's PYTHONDONTWRITEBYTECODE as it is (if set: every module compiled at every start)"}


def command_env(bytecode: str, tree: str | os.PathLike | None = None) -> dict:
    """The environment of the measured commands, running ``tree``'s code (``tree_env``): with
    ``bytecode="cache"`` Python writes and reads compiled modules as a fresh ``python`` does (a set
    ``PYTHONDONTWRITEBYTECODE`` -- this sandbox sets it -- makes every start compile every module
    again, ~0.6 CPU s per process, a cost no user with a default Python pays)."""
    env = tree_env(tree)
    if bytecode == "cache":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def whole(spec: str, size: int, processes: int, direct: bool, env0: dict | None = None) -> dict:
    """One whole ``emu run`` command in a process of its own, with its timeline, started in an
    empty folder (not inside any checkout: ``python -m emu`` imports the working folder's first)."""
    with tempfile.TemporaryDirectory() as tmp:
        tl = pathlib.Path(tmp) / "timeline"
        cmd = [sys.executable, "-m", "emu", "run", "--topo", spec, "--test", "allreduce", "--algo", "recursive_doubling",
               "--size", str(size), "--processes", str(processes), *(["--direct"] if direct else [])]
        env = {**(os.environ if env0 is None else env0), "EMU_TIMELINE": str(tl)}
        busy0 = busy_cpu_s()
        t0 = time.monotonic()
        done = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        done.stdout, done.stderr = done.communicate()
        wall = time.monotonic() - t0
        busy1 = busy_cpu_s()
        if done.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stdout.strip()[-300:]} "
                             f"{done.stderr.strip()[-300:]}")
        steps: dict[int, dict[str, tuple[float, float]]] = {}
        crit_line = before_line = wait_line = None
        for line in tl.read_text().splitlines():
            pid, mono, cpu, what = line.split(None, 3)
            if what.startswith("run-critical "):
                crit_line = [float(x) for x in what.split()[1:]]
            if what.startswith("run-before "):
                before_line = [float(x) for x in what.split()[1:]]
            if what.startswith("run-wait "):
                wait_line = what.split()[1:]
            steps.setdefault(int(pid), {})[what] = (float(mono) - t0, float(cpu))
    main_steps = steps.pop(done.pid)
    workers = in_domain_order(list(steps.values()))
    for w in workers:  # (a worker sent SIGTERM at the end, past its grace, writes no last step)
        w.setdefault("worker-done", w.get("worker-stop", max(w.values())))
        w.setdefault("worker-stop", w["worker-done"])
    if crit_line is None or len(workers) != processes - 1:
        raise SystemExit(f"{processes} processes: the timeline lacks the run's critical path or a worker's steps")
    figures = re.sub(r"wall_s=[0-9.]+", "", done.stdout)  # (the one wall-clock figure of the output)
    own = main_steps["done"][1] + sum(w["worker-done"][1] for w in workers)
    others = None if busy0 is None else min(os.cpu_count(), max(0.0, (busy1 - busy0 - own) / wall))
    return {"wall": wall, "main": main_steps, "workers": workers, "run_crit": crit_line[0], "run_cpu": crit_line[1:],
            "run_before": before_line, "run_wait": None if wait_line is None else wait_of(wait_line, processes),
            "figures": figures, "other_cores": others}


def in_domain_order(workers: list[dict]) -> list[dict]:
    """The workers' steps in domain order, by their own ``worker-domain D`` step (their lines come in
    the order they started writing; a tree without that step: as they came)."""
    return sorted(workers, key=lambda w: min((int(k.split()[1]) for k in w if k.startswith("worker-domain ")),
                                             default=0))


def wait_of(fields: list[str], processes: int) -> dict:
    """The timeline's ``run-wait`` line (``emu.timeline.waits``): windows, each process's wait for the
    busiest one in the model, in how many windows each was the busiest."""
    return {"windows": int(fields[0]), "waited": [float(x) for x in fields[1:1 + processes]],
            "slowest": [int(x) for x in fields[1 + processes:1 + 2 * processes]]}


def _waiting(w: dict) -> tuple[float, float]:
    """(wall, CPU) at which a worker was ready for its plan: imports done, and the partition if asked."""
    return max(w["worker-preloaded"], w.get("worker-partitioned", w["worker-preloaded"]))


def model(r: dict) -> dict:
    """The parts of a whole run (wall and CPU) and its critical path in CPU seconds (the docstring)."""
    m = r["main"]
    cpu = lambda what: m[what][1]  # noqa: E731
    start_wall, end_wall = m["run-begin"][0], r["wall"] - m["run-end"][0]
    teardown = cpu("done") - cpu("run-end")
    after = after_run(r)
    if after:  # a worker's part after the run (the check of its ranks' results), then our last steps
        teardown = max(teardown, max(after) + cpu("done") - cpu("cluster-exit"))
    if not r["workers"]:
        start = cpu("run-begin")
    else:
        planned = cpu("cluster-enter")
        w1 = r["workers"][0]
        launched = [cpu("workers-launched")] * len(r["workers"])  # (our CPU as each worker was forked:
        if "worker-1-launched" in m:  # worker 1 before the others, which wait for the engines' imports here)
            launched[0] = cpu("worker-1-launched")
        if "partition-asked" in m and "worker-partitioned" in w1:  # (worker 1 made the partition meanwhile)
            began = w1.get("worker-asked", w1["worker-preloaded"])[1]  # (its CPU as it took the ask)
            answer = max(cpu("partition-asked"), launched[0] + began) + w1["worker-partitioned"][1] - began
            planned = max(cpu("prepared"), answer) + cpu("cluster-enter") - cpu("prepared")
        built_at = "local-built"
        local = cpu(built_at) - (cpu("workers-in") if m["local-built"][0] > m["workers-in"][0] else planned)
        ready = planned + local
        for w, at in zip(r["workers"], launched):
            build = w["worker-built"][1] - w["worker-plan"][1]
            ready = max(ready, max(at + _waiting(w)[1], planned) + build)
        start = ready + (cpu("run-begin") - cpu("workers-built"))
        if r.get("run_before"):  # the workers' part of the calls before the run (addresses, apps): at once, each
            start += max(b - w["worker-built"][1] for b, w in zip(r["run_before"][1:], r["workers"]))  # (after ours)
    return {"start_wall": start_wall, "run_wall": m["run-end"][0] - m["run-begin"][0], "end_wall": end_wall,
            "start": start, "run": r["run_crit"], "end": teardown, "crit": start + r["run_crit"] + teardown}


def after_run(r: dict) -> list[float]:
    """Each worker's CPU seconds from the run's end until it was told to stop (the calls after the
    run: figures, and the check of its ranks' results, ``check_where_run``); [] if not recorded."""
    if not r["workers"] or not r.get("run_before"):
        return []
    return [w["worker-stop"][1] - (b + c) for w, b, c in zip(r["workers"], r["run_before"][1:], r["run_cpu"][1:])]


def describe_whole(mode: str, p: int, r: dict, base: dict, cores: int) -> str:
    x, b = model(r), model(base)
    m = r["main"]
    speed = base["wall"] / r["wall"]
    goal = "" if p == 1 else f"; goal {GOAL}x: {'met' if speed >= GOAL else 'not met'}"
    walls = "" if len(r["walls"]) == 1 else f" (runs {', '.join(f'{w:.2f}' for w in r['walls'])})"
    busy = "" if r["other_cores"] is None else f"; other programs kept {r['other_cores']:.1f} of {cores} cores busy"
    lines = [f"{mode:>7}, {p} process{'es' if p > 1 else ''}: wall {r['wall']:.2f} s{walls} = start-up "
             f"{x['start_wall']:.2f} + run {x['run_wall']:.2f} + teardown {x['end_wall']:.2f}; speed-up {speed:.2f}x"
             f"{'' if p <= cores else ' (more processes than cores)'}{goal}{busy}"]
    main_cpu = m["done"][1]
    lines.append(f"    CPU s, main process: {main_cpu:.2f} = start-up {m['run-begin'][1]:.2f} (imports "
                 f"{m['imported'][1]:.2f}, command line {m['parsed'][1] - m['imported'][1]:.2f}, topology and "
                 f"checks {m['prepared'][1] - m['parsed'][1]:.2f}, plan {m['planned'][1] - m['prepared'][1]:.2f}, "
                 f"elements and workers {m['run-begin'][1] - m['planned'][1]:.2f}) + run {r['run_cpu'][0]:.2f} + "
                 f"teardown {m['done'][1] - m['run-end'][1]:.2f}")
    after = after_run(r) or [0.0] * len(r["workers"])
    for i, w in enumerate(r["workers"], 1):
        waited = max(0.0, m["cluster-enter"][0] - _waiting(w)[0])
        made = 0.0 if "worker-partitioned" not in w else \
            w["worker-partitioned"][1] - w.get("worker-asked", w["worker-preloaded"])[1]
        part = f", the partition {made:.2f}" if "worker-partitioned" in w else ""
        early = w.get("worker-partitioned", (0, 1e9))[1] < w["worker-preloaded"][1]  # (answered before its imports)
        imports = w["worker-preloaded"][1] - (made if early else 0.0)
        lines.append(f"    CPU s, worker {i}: {w['worker-done'][1]:.2f} = start-up {w['worker-built'][1]:.2f} (Python and "
                     f"imports {imports:.2f}{part}, ready {waited:.2f} s before the plan; its elements "
                     f"{w['worker-built'][1] - w['worker-plan'][1]:.2f}) + run {r['run_cpu'][i]:.2f} + after it (figures, "
                     f"the check of its ranks) {after[i - 1]:.2f} + teardown {w['worker-done'][1] - w['worker-stop'][1]:.2f}")
    split = r["run_cpu"] and base["run_cpu"][0] / max(r["run_cpu"])
    wait = r.get("run_wait")
    if wait and p > 1:  # (what the per-window imbalance costs: each process's CPU idle in the model)
        names = ["main process", *(f"worker {i}" for i in range(1, p))]
        lines.append(f"    the run's {wait['windows']:,} windows in the model: waited for the busiest process " +
                     ", ".join(f"{n} {w:.2f} s" for n, w in zip(names, wait["waited"])) + "; the busiest in " +
                     ", ".join(f"{s:,}" for s in wait["slowest"]) + " windows; CPU over the run " +
                     ", ".join(f"{c:.2f}" for c in r["run_cpu"]) + f" s (sum {sum(r['run_cpu']):.2f}, one process "
                     f"{base['run_cpu'][0]:.2f})")
    lines.append(f"    critical path {x['crit']:.2f} CPU s = start-up {x['start']:.2f} + run {x['run']:.2f} + teardown "
                 f"{x['end']:.2f}; CPU split of the run {split:.2f}x; speed-up with a core per process "
                 f"{b['crit'] / x['crit']:.2f}x (start-up {b['start'] / x['start']:.2f}x, run {b['run'] / x['run']:.2f}x); "
                 f"same figures")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--processes", default="1,2", help="process counts, comma-separated (1 first: the base)")
    ap.add_argument("--mode", choices=["both", "sockets", "direct"], default="both")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs of each count (the medians count)")
    ap.add_argument("--topo", default=TOPO)
    ap.add_argument("--size", default="64KiB")
    ap.add_argument("--cluster-only", action="store_true",
                    help="time emu.Cluster's run in this process, start-up excluded, instead of the whole command")
    ap.add_argument("--work-split", action="store_true",
                    help="count each part's frames window by window in a one-process run instead (deterministic)")
    ap.add_argument("--instructions", action="store_true",
                    help="count each process's instructions under callgrind instead (slow: minutes)")
    ap.add_argument("--bytecode", choices=sorted(BYTECODE), default="cache",
                    help="cache (default): compiled modules cached as by a default python; as-is: this "
                         "environment's PYTHONDONTWRITEBYTECODE kept")
    ap.add_argument("--tree", default=str(HOME), help="the checkout whose code the commands run (default: this one)")
    ap.add_argument("--before", metavar="TREE", help="also TREE's code, alternating with --tree's, run by run")
    a = ap.parse_args(argv)
    trees = {"before": a.before, "after": a.tree} if a.before else {"": a.tree}
    if not all(os.path.isfile(os.path.join(t, "emu", "__init__.py")) for t in trees.values()):
        raise SystemExit(f"--tree/--before: {' or '.join(trees.values())} is not a checkout of hpc-emu (no emu/)")
    if (a.cluster_only or a.work_split or a.instructions) and (a.before or os.path.abspath(a.tree) != str(HOME)):
        raise SystemExit("--cluster-only, --work-split and --instructions run this checkout's code in this process: "
                         "run the other tree's own scripts/bench_processes.py instead of --tree/--before")
    try:
        counts = [int(x) for x in a.processes.split(",")]
    except ValueError:
        raise SystemExit(f"--processes {a.processes}: give counts, e.g. 1,2") from None
    if a.repeat < 1 or any(c < 1 for c in counts):
        raise SystemExit("--repeat and --processes must be at least 1")
    if counts[0] != 1:
        counts.insert(0, 1)
    size = parse_size(a.size)
    cores = os.cpu_count()
    what = ("one process's run, its frames counted per part of each count's partition" if a.work_split else
            "emu.Cluster's run alone, in this process" if a.cluster_only or a.instructions else
            "the whole emu run command, start-up and teardown included")
    print(f"{cores} cores; recursive-doubling allreduce of {size:,} B on {a.topo}: {what}; goal {GOAL}x with 2 "
          "processes", flush=True)
    if a.instructions:
        instructions(a, counts, size)
        return []
    if a.work_split:
        return work_split(a.topo, size, counts)
    envs = {label: command_env(a.bytecode, t) for label, t in trees.items()}
    print(f"bytecode: {BYTECODE[a.bytecode]}; " + "; ".join(f"{label or 'code'}: {t}" for label, t in trees.items()),
          flush=True)
    if not a.cluster_only:
        for env0 in envs.values():  # untimed: fills the caches (files, bytecode)
            whole(a.topo, size, max(counts), a.mode == "direct", env0)
    rows = []
    for mode in (["sockets", "direct"] if a.mode == "both" else [a.mode]):
        runs: dict[tuple[str, int], list[dict]] = {(label, p): [] for label in trees for p in counts}
        for _ in range(a.repeat):
            for p in counts:
                for label in trees:
                    runs[label, p].append(trio.run(once, a.topo, size, p, mode == "direct") if a.cluster_only
                                          else whole(a.topo, size, p, mode == "direct", envs[label]))
        mine = [row for label in trees for row in _report(a, mode, label, {p: runs[label, p] for p in counts}, cores)]
        if any(row["figures"] != mine[0]["figures"] for row in mine):
            raise SystemExit(f"{mode}: FIGURES DIFFER between the trees")
        rows += mine
        if a.before:
            got = {r["tree"]: r["speedup"] for r in mine if r["processes"] == max(counts)}
            print(f"{mode}, {max(counts)} processes against 1: speed-up before {got['before']:.2f}x, after "
                  f"{got['after']:.2f}x (the same runs' medians as above)", flush=True)
    return rows


def _report(a, mode: str, label: str, runs: dict[int, list[dict]], cores: int) -> list[dict]:
    """Print one mode's figures of one tree (each count against its 1 process) and return its rows."""
    rows, base = [], median_run(runs[1])
    if label:
        print(f"-- {label}: {a.before if label == 'before' else a.tree}", flush=True)
    for p in runs:
        r = median_run(runs[p])
        if any(x["figures"] != base["figures"] for x in runs[p]):
            raise SystemExit(f"{mode}, {p} processes: FIGURES DIFFER from one process's")
        if a.cluster_only:
            print(describe(mode, p, r, base, cores), flush=True)
            cpu = [c["process_s"] for c in r["cpu"]]
            rows.append({"mode": mode, "processes": p, **r, "speedup": base["wall"] / r["wall"],
                         "cpu_split": base["cpu"][0]["process_s"] / max(cpu),
                         "bound": base["critical_s"] / r["critical_s"]})
        else:
            print(describe_whole(mode, p, r, base, cores), flush=True)
            rows.append({"mode": mode, "processes": p, **r, "speedup": base["wall"] / r["wall"],
                         "model": model(r), "bound": model(base)["crit"] / model(r)["crit"]})
    return [{**row, "tree": label} for row in rows]


if __name__ == "__main__":
    main()
