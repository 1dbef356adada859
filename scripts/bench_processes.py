#!/usr/bin/env python3
"""Does spreading a run over processes pay off, and where does each process spend its time?

The 256-host recursive-doubling allreduce of issue 27 (``fattree:k=4,n=4``, 64 KiB, ``emu run
--test allreduce --algo recursive_doubling``) with 1, 2, ... processes, in both transport modes
(every link a real UDP socket, emu's default, and ``--direct``). The runs are interleaved (1, 2, 1,
2, ... processes); the wall time is the median of ``--repeat`` runs, the other figures are those of
the run of median wall time. For each count:

- the wall time of the run (the cluster's start-up excluded) and the speed-up against one process
  in the same mode, per core too -- what this machine gave, with everything else it ran;
- each process's CPU seconds during the run -- in windows, reading datagrams between them, the rest
  (the synchroniser, the control connection) -- from ``Cluster.cpu_times``; "CPU split": one
  process's CPU over the busiest process's;
- the critical path in CPU time (``Cluster.window_cpu``): window by window, the CPU of the process
  that took longest from that window's start to the next, summed -- what the run would take with a
  core per process and instant messages; one process's CPU over it is the speed-up the spread allows;
- what held the processes up: the seconds each waited, ready to run, for a core, the seconds it slept
  (waiting for the other processes' windows or messages), the times it was preempted, and how many
  cores other programs kept busy meanwhile. On a shared machine these, not
  the emulator, decide most of the wall time's swings.

Every virtual-time figure must be the same in every run. ``--instructions`` counts instead, under
valgrind's callgrind, the instructions each process executes (a deterministic figure: it does not
depend on what else the machine runs, to about 1 %): a run at ``--size`` less one at half of it, so
that start-up cancels out (the default size takes some minutes); the instruction split is one
process's count over the busiest process's.

    python scripts/bench_processes.py [--processes 1,2] [--mode both|sockets|direct] [--repeat 1]
        [--topo SPEC] [--size 64KiB] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import emu  # noqa: E402
from emu.nodes.collectives.run import check_results, run_collective  # noqa: E402
from emu.topologies import build  # noqa: E402

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
    count = size // 4
    async with emu.Cluster(build(spec), processes=processes, direct=direct) as net:
        before = await net.cpu_times()
        await net.window_cpu(record=True)
        w0 = net.windows
        busy0 = busy_cpu_s()
        t = time.perf_counter()
        res = await run_collective(net, "allreduce", count=count, algo="recursive_doubling")
        wall = time.perf_counter() - t
        busy1 = busy_cpu_s()
        marks = await net.window_cpu(record=False)
        after = await net.cpu_times()
        windows = net.windows - w0
    check_results(res, count, "float32", "sum", 0, 0)
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


def instructions(a, counts: list[int], size: int) -> None:
    """Each process's instructions for the second half of ``size`` (a run at ``size`` less one at
    half of it), under callgrind; one process's over the busiest process's."""
    import re
    import shutil
    import subprocess
    import tempfile

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
                    env = {**os.environ, "PYTHONHASHSEED": "0"}
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


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--processes", default="1,2", help="process counts, comma-separated (1 first: the base)")
    ap.add_argument("--mode", choices=["both", "sockets", "direct"], default="both")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs of each count (the medians count)")
    ap.add_argument("--topo", default=TOPO)
    ap.add_argument("--size", default="64KiB")
    ap.add_argument("--instructions", action="store_true",
                    help="count each process's instructions under callgrind instead (slow: minutes)")
    a = ap.parse_args(argv)
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
    print(f"{cores} cores; recursive-doubling allreduce of {size:,} B on {a.topo}; goal {GOAL}x with 2 processes",
          flush=True)
    if a.instructions:
        instructions(a, counts, size)
        return []
    rows = []
    for mode in (["sockets", "direct"] if a.mode == "both" else [a.mode]):
        runs: dict[int, list[dict]] = {p: [] for p in counts}
        for _ in range(a.repeat):
            for p in counts:
                runs[p].append(trio.run(once, a.topo, size, p, mode == "direct"))
        base = median_run(runs[1])
        for p in counts:
            r = median_run(runs[p])
            if any(x["figures"] != base["figures"] for x in runs[p]):
                raise SystemExit(f"{mode}, {p} processes: FIGURES DIFFER from one process's")
            print(describe(mode, p, r, base, cores), flush=True)
            cpu = [c["process_s"] for c in r["cpu"]]
            rows.append({"mode": mode, "processes": p, **r, "speedup": base["wall"] / r["wall"],
                         "cpu_split": base["cpu"][0]["process_s"] / max(cpu),
                         "bound": base["critical_s"] / r["critical_s"]})
    return rows


if __name__ == "__main__":
    main()
