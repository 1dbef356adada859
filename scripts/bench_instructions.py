#!/usr/bin/env python3
"""Instructions the element loop executes for bench_ns3's all-to-all: a deterministic speed figure.

Wall-clock figures move +-20-30 % on a shared machine; the number of instructions a run executes
does not (to about 1 %, with the hash seed fixed). This runs one all-to-all of
``scripts/bench_ns3.py`` (``--messages`` per pair, 1,024 B, the peers' fat tree) under valgrind's
callgrind, counting only inside the compiled core's ``window()`` -- every element window of the run,
the hosts' Python included, not the start-up -- and prints the count, the link crossings, the
virtual completion (the same in every build: the model did not change) and instructions per
crossing. Compare two builds by running it in each checkout. Needs valgrind
(``apt-get install valgrind``) and the compiled core (``pure-python`` has no ``window()``).

``--whole`` counts the whole process instead, twice -- ``--messages`` and twice as many -- and
divides the difference by the difference in crossings: start-up cancels, and what runs outside
``window()`` is in (on sockets the receiving side: reading the socket, the records into the heaps,
the links forgetting what every receiver has -- about a quarter of that path). It moves more from
run to run (about 2 %: the event loop's polls and the sockets' timing are in it; on a loaded machine
a run can poll a billion instructions more): ``--repeat N`` counts each size N times and takes each
one's fewest (load only adds polls), and prints the spread.

    python scripts/bench_instructions.py [--messages 3] [--mode direct|sockets] [--whole [--repeat 3]]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from trees import fixed_addresses  # noqa: E402
RUN = """
import sys, trio
sys.path.insert(0, {scripts!r})
import bench_ns3
from emu import native
r = trio.run(bench_ns3.emulator, bench_ns3.TOPO, {messages}, 1024, {direct})
print("RESULT", r["crossings"], r["completion_ns"], native.in_use())
"""


def count(messages: int, direct: bool, whole: bool = False) -> dict:
    """One run under callgrind: {instructions, crossings, completion_ns, loop} (``whole``: every
    instruction of the process, start-up included; else only inside ``window()``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "callgrind.out"
        code = RUN.format(scripts=str(ROOT / "scripts"), messages=messages, direct=direct)
        toggle = [] if whole else ["--toggle-collect=window"]
        proc = subprocess.run([*fixed_addresses(), "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *toggle,
                               "--cache-sim=no", sys.executable, "-c", code],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        m = re.search(r"RESULT (\d+) (\d+) (\S+)", proc.stdout)
        if proc.returncode or m is None:
            raise SystemExit(f"the run under valgrind failed: {proc.stderr.strip().splitlines()[-1:]}")
        total = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        return {"instructions": int(total.group(1)) if total else 0, "crossings": int(m.group(1)),
                "completion_ns": int(m.group(2)), "loop": m.group(3)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--messages", type=int, default=3)
    ap.add_argument("--mode", choices=("direct", "sockets"), default="direct")
    ap.add_argument("--whole", action="store_true",
                    help="the whole process, --messages and twice as many: the difference per crossing")
    ap.add_argument("--repeat", type=int, default=1,
                    help="--whole: count each size this many times and take its fewest instructions (default 1)")
    a = ap.parse_args(argv)
    if a.messages < 1:
        ap.error("--messages must be at least 1")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if shutil.which("valgrind") is None:
        ap.error("valgrind is not installed (apt-get install valgrind): it counts the instructions")
    if a.whole:
        return whole(a.messages, a.mode, a.repeat)
    r = count(a.messages, a.mode == "direct")
    if r["loop"] != "compiled" or not r["instructions"]:
        raise SystemExit(f"the element loop ran {r['loop']}: build the compiled core (pip install -e .) to count its window()")
    print(f"{a.mode}, {a.messages} messages per pair: {r['instructions']:,} instructions in window() for "
          f"{r['crossings']:,} link crossings ({r['instructions'] / r['crossings']:,.0f} per crossing); "
          f"virtual completion {r['completion_ns']:,} ns")
    return r


def whole(messages: int, mode: str, repeat: int = 1) -> dict:
    """``--whole``: the whole process at two sizes (each ``repeat`` times, its fewest instructions
    kept), their difference per crossing."""
    runs = {m: [count(m, mode == "direct", whole=True) for _ in range(repeat)] for m in (messages, 2 * messages)}
    a, b = (min(runs[m], key=lambda r: r["instructions"]) for m in (messages, 2 * messages))
    if a["loop"] != "compiled" or b["crossings"] <= a["crossings"]:
        raise SystemExit(f"the element loop ran {a['loop']}: build the compiled core (pip install -e .)")
    n, d = b["crossings"] - a["crossings"], b["instructions"] - a["instructions"]
    if d <= 0:
        raise SystemExit(f"{mode}: the run with {2 * messages} messages per pair counted {-d:,} instructions fewer than "
                         f"the one with {messages}: the event loop's polls on a loaded machine outweigh the work; "
                         f"run it again with --repeat 3 (or on a quieter machine)")
    spread = "".join(f"; {m} messages: {len(rs)} runs, {max(r['instructions'] for r in rs) - min(r['instructions'] for r in rs):,} "
                     f"instructions apart" for m, rs in runs.items() if len(rs) > 1)
    print(f"{mode}, whole process, {messages} -> {2 * messages} messages per pair: {d:,} instructions more for "
          f"{n:,} crossings more ({d / n:,.0f} per crossing); virtual completion {a['completion_ns']:,} -> "
          f"{b['completion_ns']:,} ns{spread}")
    return {"instructions": d, "crossings": n, "per_crossing": d / n, "runs": (a, b)}


if __name__ == "__main__":
    main()
