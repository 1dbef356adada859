"""Compare the LogGP model of ``emu replay --model loggp`` (``emu.nodes.workload.loggp``) with
LogGOPSim itself, built from spcl/LogGOPSim (``txt2bin``, ``LogGOPSim`` in one folder), on seeded
random schedules and the dissemination barrier: every rank's end time must be equal.

    python scripts/goal_vs_loggopsim.py --bin /path/to/LogGOPSim/src/LogGOPSim [--count 50]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

from emu.nodes.workload.goal import read_schedule
from emu.nodes.workload.goal_write import dissemination_barrier, random_schedule
from emu.nodes.workload.loggp import LogGP, simulate


def loggopsim(bindir: str, text: str, p: LogGP) -> list[int]:
    with tempfile.TemporaryDirectory() as tmp:
        g, b = os.path.join(tmp, "s.goal"), os.path.join(tmp, "s.bin")
        with open(g, "w") as f:
            f.write(text)
        subprocess.run([os.path.join(bindir, "txt2bin"), "-i", g, "-o", b], check=True, capture_output=True)
        out = subprocess.run([os.path.join(bindir, "LogGOPSim"), "-f", b, "-L", str(p.L), "-o", str(p.o), "-g",
                              str(p.g), "-G", str(p.G), "-O", str(p.O), "-S", str(p.S)],
                             check=True, capture_output=True, text=True).stdout
    return [int(t) for t in re.findall(r"^Host \d+: (\d+)$", out, re.M)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="folder with LogGOPSim and txt2bin")
    ap.add_argument("--count", type=int, default=50)
    a = ap.parse_args()
    cases = [("barrier16", dissemination_barrier(16), LogGP())]
    for seed in range(a.count):
        params = LogGP(L=1000 + 137 * seed, o=200 + 50 * (seed % 7), g=100 * (seed % 5), G=seed % 4, S=[65535, 4000, 100][seed % 3])
        text = random_schedule(seed, ranks=2 + seed % 9, rounds=2 + seed % 6)
        if "send" not in text:  # (LogGOPSim crashes on a schedule with no operation: its queue's top read empty)
            continue
        cases.append((f"random{seed}", text, params))
    same = 0
    for name, text, p in cases:
        ours = simulate(read_schedule(text.splitlines(True), name), p)
        theirs = loggopsim(a.bin, text, p)
        ok = ours == theirs
        same += ok
        if not ok:
            print(f"{name} {p.line()}: ours {ours} LogGOPSim {theirs}")
    print(f"{same} of {len(cases)} schedules: every rank's end time equal to LogGOPSim's")


if __name__ == "__main__":
    main()
