"""Leak check of the input-queued router's compiled paths: one uniform-traffic point on a 4x4 mesh
(2 VCs, 1-flit packets, 90 % of BookSim's saturation, no capture, in memory: the core's window with
on_timer / on_credit / receive's twins, the round's hooks and the hosts' start_ready) run N times in
one interpreter. After each run and a full collection it prints the interpreter's allocated blocks
(``sys.getallocatedblocks``: every object, ints and bytes included), the collector's objects, RSS
and, with ``--trace``, tracemalloc's current bytes; a reference the core kept per event would grow
them by thousands per run (a run makes ~12,800 compiled on_timer calls).

    python scripts/leak_iq.py 12            # 12 runs
    python scripts/leak_iq.py 8 --trace     # with tracemalloc
    CYC=200 python scripts/leak_iq.py 6     # longer runs (default 60 cycles per window)
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_iq import SAT  # noqa: E402
from router_curves import FAITHFUL, FLIT, OURS  # noqa: E402

from emu import native  # noqa: E402
from emu.front.cli import main  # noqa: E402


def _rss_kib() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def run(reps: int, trace: bool, cycles: int) -> None:
    vcs, flits = 2, 1
    sets = {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued"}
    if trace:
        tracemalloc.start()
    core = native.CORE
    c0 = core.counts() if core is not None else {}
    first = None
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        w = max(1, cycles // flits)
        argv = ["run", "--topo", "mesh:k=4,n=2", "--test", "uniform", "--direct", "--load",
                f"{SAT[(4, vcs, flits)] * 0.9:.4f}", "--warmup", str(w), "--measure", str(w), "--size",
                f"{FLIT * flits - 24}B", "--to-self", "--drain", "measured", "--json", str(out)]
        for k, v in sets.items():
            argv += ["--set", f"{k}={v}"]
        for i in range(reps):
            with open(os.devnull, "w") as null:
                saved, sys.stdout = sys.stdout, null
                try:
                    assert main(argv) == 0
                finally:
                    sys.stdout = saved
            res = json.loads(out.read_text())["results"][0]
            res.pop("wall_s", None)
            first = first or res
            assert res == first, "the figures differ between runs"
            gc.collect()
            tm = tracemalloc.get_traced_memory()[0] if trace else -1
            print(f"run {i:2d} blocks {sys.getallocatedblocks():8d} gc_objects {len(gc.get_objects()):7d} "
                  f"rss_kib {_rss_kib():7d} traced_b {tm:9d}", flush=True)
    if core is not None:
        c1 = core.counts()
        names = ("iq_timers", "iq_credits", "iq_hooks", "iq_frames", "started", "iq_received")
        print("compiled calls over the runs:", {k: c1[k] - c0[k] for k in names})


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 10, "--trace" in sys.argv, int(os.environ.get("CYC", "60")))
