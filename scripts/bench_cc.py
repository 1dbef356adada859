#!/usr/bin/env python3
"""Wall-clock cost of the congestion controls at the NIC (``host.cc``, issue #47): an incast of N
senders to one host on ``star:n=N+1`` (engines driven in memory by ``emu.sim.EngineNet``, no sockets),
each sending one message of SIZE bytes, under every ``host.cc``.

Prints per algorithm the wall time of the run, the segments sent, the wall microseconds per segment
(the cost of one segment's crossing: the sender's pacing and bookkeeping, the receiver's ordering,
the acknowledgement and its handling, the control frames), the virtual completion time and the
control frames. ``none`` is the baseline: all frames of a message to the port at once, no
acknowledgements. The figures are virtual and the same at every run; the wall times are this
machine's.

    python scripts/bench_cc.py [--senders 4] [--size 256KiB] [--mtu 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import apps  # noqa: E402  (the tests' applications: send_to, recv_count)
from emu.config import HostSpec  # noqa: E402
from emu.config.numbers import with_unit  # noqa: E402
from emu.sim import EngineNet  # noqa: E402
from emu.topologies import star  # noqa: E402

CCS = ("none", "dcqcn", "hpcc", "swift", "ndp")


def once(cc: str, senders: int, size: int, mtu: int) -> dict:
    net = EngineNet(star(senders + 1, host=HostSpec(cc=cc, mtu_bytes=mtu)))
    dst = f"h{senders}"
    plan = {f"h{i}": (apps.send_to, dst, size, i) for i in range(senders)}
    plan[dst] = (apps.recv_count, senders)
    wall = time.perf_counter()
    res = net.run(plan)
    wall = time.perf_counter() - wall
    total, t_done = res[dst]
    assert total == senders * size
    stats = [e.extra_stats().get("transport", {}) for e in net.engines.values() if hasattr(e, "extra_stats")]
    segs = sum(s.get("segments_sent", 0) for s in stats) or senders * -(-size // mtu)
    ctrl = sum(s.get(k, 0) for s in stats for k in ("acks_sent", "cnps_sent", "pulls_sent", "nacks_sent"))
    return {"wall_s": wall, "segments": segs, "completion_ns": t_done, "control_frames": ctrl}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--size", default="256KiB")
    ap.add_argument("--mtu", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    size = int(with_unit("size_bytes", a.size) or int(a.size))
    print(f"incast {a.senders} -> 1, {size} bytes each, mtu {a.mtu}, best of {a.repeat} (EngineNet, in memory)")
    print(f"{'host.cc':8} {'wall_ms':>9} {'segments':>9} {'us/segment':>11} {'completion_ns':>14} {'control':>8}")
    base = None
    for cc in CCS:
        runs = [once(cc, a.senders, size, a.mtu) for _ in range(a.repeat)]
        r = min(runs, key=lambda x: x["wall_s"])
        per = r["wall_s"] * 1e6 / r["segments"]
        base = per if cc == "none" else base
        print(f"{cc:8} {r['wall_s'] * 1e3:9.1f} {r['segments']:9d} {per:11.2f} {r['completion_ns']:14d} "
              f"{r['control_frames']:8d}" + (f"  ({per / base:.1f}x none)" if cc != "none" else ""))


if __name__ == "__main__":
    main()
