#!/usr/bin/env python3
"""Wall-clock cost per link crossing of each output-queue mechanism (switch/queues, issue 47).

An incast on ``star:n=9`` (8 senders, one receiver, 100 Gbit/s, 100 ns links): every sender sends
``--messages`` messages of ``--size`` bytes to h8. The same run with every mechanism off (the
compiled core forwards the switch's frames), then with one mechanism on at a time, then all of them;
settings sized so each does its work on this load (marks, pauses, INT records, a lossless class).
Prints, per case, the link crossings, the CPU seconds of the run, the microseconds of CPU per
crossing and the ratio to the mechanisms-off case, with the virtual completion time and the
mechanism's own counters (what it did). Small by default: the machine is shared.

    python scripts/bench_queues.py [--messages 4] [--size 30000] [--repeat 3] [--direct]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import apps  # noqa: E402
import emu  # noqa: E402
from emu import native  # noqa: E402
from emu.config import parse_settings  # noqa: E402
from emu.topologies.registry import build  # noqa: E402

PFC = ["queues.pfc_classes=0", "queues.xoff_bytes=20000", "queues.xon_bytes=10000", "queues.headroom_bytes=8000"]
CASES = {
    "off": [],
    "ecn step": ["queues.ecn=step", "queues.k_bytes=20000"],
    "ecn red": ["queues.ecn=red", "queues.kmin_bytes=5000", "queues.kmax_bytes=200000", "queues.pmax=0.2"],
    "int": ["queues.int_telemetry=true"],
    "shared buffer (no drop)": ["queues.buffer_bytes=10000000"],
    "pfc": PFC,
    "all": [*PFC, "queues.buffer_bytes=10000000", "queues.ecn=red", "queues.kmin_bytes=5000",
            "queues.kmax_bytes=200000", "queues.pmax=0.2", "queues.int_telemetry=true"],
}
N = 9


async def one(sets: list[str], messages: int, size: int, direct: bool) -> tuple[float, int, int, dict]:
    t = build(f"star:n={N}", settings=parse_settings(sets))
    async with emu.Cluster(t, direct=direct) as net:
        a = {f"h{i}": (apps.send_to, f"h{N - 1}", size, 0, messages) for i in range(N - 1)}
        a[f"h{N - 1}"] = (apps.recv_count, (N - 1) * messages)
        cpu = time.process_time()
        await net.run(a)
        cpu = time.process_time() - cpu
        m = net.metrics
    did: dict[str, int] = {}
    for v in m.queues.values():
        for k, x in v.items():
            if k in ("ecn_marked", "int_stamped", "xoff_tx", "pause_rx", "tail_drops"):
                did[k] = did.get(k, 0) + x
    return cpu, sum(m.link_frames.values()), m.completion_ns, did


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--messages", type=int, default=4)
    ap.add_argument("--size", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the least CPU time is kept")
    ap.add_argument("--direct", action="store_true", help="frames within the process handed over in memory")
    a = ap.parse_args()
    print(f"star:n={N}, {N - 1} senders x {a.messages} x {a.size} B to h{N - 1}; {native.in_use()} core; "
          f"{'direct' if a.direct else 'sockets'}; best of {a.repeat}")
    print(f"{'case':26s} {'crossings':>9s} {'cpu s':>7s} {'us/crossing':>11s} {'x off':>6s} {'completion ns':>13s}  did")
    base = None
    for name, sets in CASES.items():
        runs = [trio.run(one, sets, a.messages, a.size, a.direct) for _ in range(a.repeat)]
        cpu = min(r[0] for r in runs)
        _, n, done, did = runs[0]
        per = cpu / n * 1e6
        base = base or per
        print(f"{name:26s} {n:9d} {cpu:7.3f} {per:11.2f} {per / base:6.2f} {done:13d}  "
              + ", ".join(f"{k}={v}" for k, v in did.items()))


if __name__ == "__main__":
    main()
