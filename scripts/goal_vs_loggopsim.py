"""Compare the LogGP model of ``emu replay --model loggp`` (``emu.nodes.workload.loggp``) with
LogGOPSim itself, built from spcl/LogGOPSim (``txt2bin``, ``LogGOPSim`` in one folder), on seeded
random schedules and the dissemination barrier: every rank's end time must be equal.

    python scripts/goal_vs_loggopsim.py --bin /path/to/LogGOPSim/src/LogGOPSim [--count 50] [--emu]

``--emu``: also replay each schedule on the emulated fabric in the configuration of docs/replay.md
(a star, L=2500, o=1500, g=0, G=0, eager up to 16000 bytes, messages of one frame) and compare its
end times with LogGOPSim's run with those parameters; a schedule where a rank's CPU had to choose
between a ready operation and a waiting message (``races``) is counted apart.
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
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--bin", required=True, help="folder with LogGOPSim and txt2bin")
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--emu", action="store_true", help="also compare the emulator's replay with LogGOPSim")
    a = ap.parse_args()
    if a.emu:
        return emu_vs_loggopsim(a)
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


def emu_vs_loggopsim(a) -> None:
    from emu.config import RunConfig
    from emu.front.replay_goal import run_schedule
    from emu.topologies.registry import build

    settings = {"host": {"send_overhead_ns": 1500, "recv_overhead_ns": 1500, "nic_delay_ns": 0,
                         "eager_limit_bytes": 16000, "mtu_bytes": 16000},
                "switch": {"processing_delay_ns": 0}, "link": {"latency_ns": 1249, "bandwidth_bps": 10**16}}
    p = LogGP(L=2500, o=1500, g=0, G=0, S=16000)
    counts = {"equal": 0, "differ": 0, "equal with races": 0, "differ with races": 0}
    for seed in range(a.count):
        text = dissemination_barrier(16) if seed == 0 else random_schedule(seed, ranks=2 + seed % 14,
                                                                           rounds=1 + seed % 7, max_size=15000)
        if "send" not in text:
            continue
        s = read_schedule(text.splitlines(True), f"random{seed}")
        t = build(f"star:n={max(2, s.num_ranks)}", settings=settings)
        res, _ = run_schedule(t, s, t.host_names()[:s.num_ranks], RunConfig(direct=True))
        ours, theirs = [r["end_ns"] for r in res], loggopsim(a.bin, text, p)
        key = ("equal" if ours == theirs else "differ") + (" with races" if sum(r["races"] for r in res) else "")
        counts[key] += 1
        if key == "differ":
            print(f"seed {seed}: emu {ours} LogGOPSim {theirs}")
    print(f"emulator vs LogGOPSim ({p.line()}) on {sum(counts.values())} schedules: {counts}")


if __name__ == "__main__":
    main()
