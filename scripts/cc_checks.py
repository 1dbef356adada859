"""Issue 47's checks against the field: incast with trimming, DCQCN vs HPCC, PFC congestion trees.

Three experiments, each a set of ``emu run`` runs that differ only in the mechanism compared (the
same topology, workload, seed and link model), printed with the model beside the measurement:

1. **Incast** (NDP, Handley et al. SIGCOMM 2017, Fig. 11; htsim ``main_ndp.cpp``): N senders of
   450 KB each to one receiver on ``star:n=N+1`` at 10 Gbit/s, a switch with a shared buffer of
   ``--buffer`` bytes (tail drop, dynamic threshold alpha 1). The ideal is N x 450 KB at the
   receiver's line rate: N x 0.36 ms of payload (plus this network's per-frame overhead: Ethernet
   header, FCS, preamble and gap, and the fabric header -- printed as "ideal (frames)").
   Compared: NDP with trimming; NDP without trimming (losses found by the retransmission timeout,
   RFC 6298 estimate with ``host.rto_min_ns`` as floor); DCQCN's go-back-N with tail drop and no
   ECN (a RoCE NIC on a lossy fabric); the lossless reference (an unbounded buffer, no control).
2. **DCQCN vs HPCC** (Li et al. SIGCOMM 2019, Fig. 9-11): on ``twolevel:ports=4,hosts=8,spines=1``
   (two leaves of four hosts, one spine, 100 Gbit/s), an incast of three local senders and one
   remote one (1 MB each) to h0, and a flow h5 -> h1 beside it that shares the remote sender's
   leaf uplink (the victim). PFC on class 0 (lossless, as both papers run). Printed: the peak
   queue at the bottleneck (s0 -> h0), PAUSE frames, paused time, every flow's slowdown.
3. **PFC congestion tree**: the same case without congestion control: the PAUSEs spread from the
   congested leaf to the spine and the other leaf and its hosts, and the victim, whose own path
   is not congested, is slowed; with HPCC (or DCQCN) on, how much of it goes.

    python scripts/cc_checks.py                     # all three, 16 and 64 senders
    python scripts/cc_checks.py --only incast --senders 16

Virtual-time figures: exact and deterministic; the wall time of each run is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

EMU = [sys.executable, "-m", "emu", "run"]
MB = 1_000_000


def run(args: list[str]) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        t = time.perf_counter()
        p = subprocess.run(EMU + args + ["--json", out], capture_output=True, text=True, cwd=d)
        wall = time.perf_counter() - t
        if not os.path.exists(out):
            sys.exit(f"emu run {' '.join(args)} wrote no results:\n{p.stderr[-2000:]}")
        return json.load(open(out))["results"][0], wall


def links(r: dict, key: str) -> int:
    return sum(v.get(key, 0) for v in r.get("per_link", {}).values())


def incast(n: int, buffer: int) -> None:
    base = ["--topo", f"star:n={n + 1}", "--test", "incast", "--senders", str(n), "--size", "450KB",
            "--set", "link.bandwidth_bps=10e9"]
    lossy = ["--set", f"queues.buffer_bytes={buffer}"]
    cases = [("lossless (unbounded buffer, no control)", []),
             ("NDP + trimming", lossy + ["--set", "queues.trim=true", "--set", "host.cc=ndp"]),
             ("NDP, tail drop (timeout)", lossy + ["--set", "host.cc=ndp"]),
             ("DCQCN go-back-N, tail drop, no ECN", lossy + ["--set", "host.cc=dcqcn"])]
    ideal = n * 450_000 * 8 / 10e9 * 1e9
    print(f"\n## Incast: {n} senders x 450 KB -> h0, 10 Gbit/s, switch buffer {buffer:,} B (tail drop cases)")
    print(f"ideal (payload at line rate): n x 0.36 ms = {ideal / 1e6:.3f} ms")
    print(f"{'case':42} {'done ms':>9} {'x ideal':>8} {'drops':>7} {'trims':>7} {'resent':>7} "
          f"{'timeouts':>8} {'wall s':>7}")
    for name, extra in cases:
        r, wall = run(base + extra)
        cc = r.get("cc", {})
        done = r.get("last_completion_ns")
        if not r.get("ok") or done is None:
            print(f"{name:42} {'failed':>9}  {str(r.get('error', ''))[:100]}")
            continue
        print(f"{name:42} {done / 1e6:9.3f} {done / ideal:8.3f} {links(r, 'tail_drops'):7,} {links(r, 'trimmed'):7,} "
              f"{cc.get('segments_resent', 0):7,} {cc.get('timeouts', 0):8,} {wall:7.1f}")


TREE = "1 0 0 1000000 0\n2 0 0 1000000 0\n3 0 0 1000000 0\n4 0 0 1000000 0\n5 1 0 1000000 0\n"


def tree() -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(TREE)
    try:
        base = ["--topo", "twolevel:ports=4,hosts=8,spines=1", "--test", "flows", "--flows", f.name,
                "--set", "queues.pfc_classes=0", "--set", "queues.buffer_bytes=1000000"]
        cases = [("PFC only (no congestion control)", []),
                 ("PFC + DCQCN (RED 5-200 KB, 1 %)", ["--set", "host.cc=dcqcn", "--set", "queues.ecn=red"]),
                 ("PFC + HPCC (INT, U 0.95)", ["--set", "host.cc=hpcc", "--set", "queues.int_telemetry=true"])]
        print("\n## DCQCN vs HPCC, and the PFC congestion tree")
        print("twolevel:ports=4,hosts=8,spines=1 (100 Gbit/s): h1,h2,h3 (same leaf) and h4 (other leaf) send 1 MB "
              "to h0; the victim h5 -> h1 shares h4's leaf uplink. Ideal alone: 84.8 us (85.3 us across the spine);")
        print("the victim's fair share of the shared uplink bounds it at slowdown 2.")
        print(f"{'case':34} {'peak s0->h0 B':>13} {'PAUSEs':>7} {'paused us':>10} {'links paused':>12} "
              f"{'victim x':>9} {'incast max x':>12} {'wall s':>7}")
        for name, extra in cases:
            r, wall = run(base + extra)
            if not r.get("ok"):
                print(f"{name:34} failed: {str(r.get('error', ''))[:100]}")
                continue
            pl = r["per_link"]
            flows = r["per_flow"]
            victim = next(f for f in flows if f["src"] == "h5")["slowdown"]
            worst = max(f["slowdown"] for f in flows if f["dst"] == "h0")
            paused = sorted(k for k, v in pl.items() if v.get("paused_ns"))
            print(f"{name:34} {pl.get('s0-p0', {}).get('peak_queue_bytes', 0):13,} {links(r, 'pause_tx'):7,} "
                  f"{links(r, 'paused_ns') / 1e3:10.1f} {len(paused):12} {victim:9.3f} {worst:12.3f} {wall:7.1f}")
            if paused:
                print(f"{'':34} paused: {', '.join(paused)}")
    finally:
        os.unlink(f.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--only", choices=("incast", "tree"), help="one experiment (default: both)")
    ap.add_argument("--senders", type=int, nargs="+", default=[16, 64], help="incast sizes (default 16 64)")
    ap.add_argument("--buffer", type=int, default=200_000, help="switch buffer, bytes, for the tail-drop cases")
    a = ap.parse_args()
    if a.only in (None, "incast"):
        for n in a.senders:
            incast(n, a.buffer)
    if a.only in (None, "tree"):
        tree()


if __name__ == "__main__":
    main()
