"""Latency-load curves of the two router models, and what the input-queued one costs per crossing.

For each mesh, router model and number of VCs: open-loop uniform traffic (``emu run --test uniform``)
at a ladder of offered loads, with the mean latency, the accepted throughput and the zero-load model
beside each, and the saturation point. Both router models run on the same engine, topology, links,
packet size and traffic schedules (same seed): only the router differs.

* ``output_queued``: an ideal switch (a frame goes from its input into its output port's FIFO).
* ``input_queued``: per-input VC buffers (two of the largest frames each), credits per flit,
  VC and switch allocation (round robin), head-of-line blocking within a VC; the same delay per
  router (its route stage) and cut-through at flit granularity in both.

    python scripts/router_curves.py                # meshes k=4 and k=8, 1/2/8 VCs, short windows
    python scripts/router_curves.py --full         # the issue's windows (1,000 + 1,000 cycles)
    python scripts/router_curves.py --k 4 --vcs 1  # one configuration

The wall time per link crossing of each model is printed too (``frames x hops / wall s``): a
benchmark figure, not a virtual one.

Against BookSim2 (``--booksim PATH``, the ``booksim`` binary built from github.com/booksim/booksim2):
the input-queued router mapped stage for stage onto BookSim's ``iq`` router (:data:`BOOKSIM`:
``routing_delay=0`` is ``route_ns=0``, VC and switch allocation one cycle of 10 ns each, 64-byte flits
on 51.2 Gbit/s links of one cycle, 8-flit VC buffers, separable input-first round-robin allocators,
uniform traffic with self included), per mesh, VCs and packet length (1 or 4 flits): the saturation
throughput (accepted flits per node per cycle: BookSim's at an offered 1.0, ours at 1.3 times that, so
that the backlog left to drain stays small) and the mean latency at 50 % and 80 % of BookSim's
saturation, both in cycles, side by side::

    python scripts/router_curves.py --booksim /tmp/booksim2/src/booksim            # 4x4 and 8x8, 1/2/8 VCs, 1 and 4 flits
    python scripts/router_curves.py --booksim B --k 4 --vcs 2 --flits 1 --cycles 200
    python scripts/router_curves.py --booksim B --legacy    # only the settings an older tree has
    python scripts/router_curves.py --booksim B --flits 4 --booksim-set hold_switch_for_packet=1

Ours runs with BookSim's choices where they are settings (``host.inject_vc=free``,
``switch.eject_vcs``, ``switch.credit_release=per_flit``, ``--to-self``, ``--drain global`` -- BookSim's
drain -- for the latency points; ``--legacy`` leaves them out, for a tree without them); ``--set`` adds
more; ``--drain measured`` runs the latency points with the older drain (each source until the measured
packets sent to it are in, then a count message to every host), which a tree before ``global`` has.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

LOADS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
CYCLE_NS = 10
OVER = 1.3
"""Ours' saturation throughput: the accepted rate at this times BookSim's (at most 1.0), past both
saturations, so that the drain of the sources' backlog stays short (a ``>`` marks one not reached)."""
FLIT = 64
BOOKSIM = {"routing_function": "dim_order", "vc_buf_size": 8, "wait_for_tail_credit": 0,
           "vc_allocator": "separable_input_first", "sw_allocator": "separable_input_first", "alloc_iters": 1,
           "routing_delay": 0, "vc_alloc_delay": 1, "sw_alloc_delay": 1, "st_final_delay": 1, "credit_delay": 0,
           "traffic": "uniform", "injection_rate_uses_flits": 1, "warmup_periods": 3, "sample_period": 1000,
           "max_samples": 10}
"""BookSim2's settings of the comparison (the rest its defaults: iq router, round-robin arbiters)."""
OURS = {"link.bandwidth_bps": FLIT * 8 * 1_000_000_000 // CYCLE_NS, "link.latency_ns": CYCLE_NS, "switch.route_ns": 0,
        "switch.vc_alloc_ns": CYCLE_NS, "switch.sw_alloc_ns": CYCLE_NS, "switch.traversal_ns": 0,
        "switch.vc_buffer_bytes": 8 * FLIT, "switch.flit_bytes": FLIT, "host.mtu_bytes": 4 * FLIT - 24,
        "host.send_overhead_ns": 0, "host.recv_overhead_ns": 0, "host.nic_delay_ns": 0}
"""Ours, stage for stage: a cycle is 10 ns and a 64-byte flit's time on a link; a packet of F flits is
a message of 64 F - 24 bytes (16 of message header, 8 of head-flit header: ``link.framing=flit``)."""
FAITHFUL = {"host.inject_vc": "free", "switch.eject_vcs": "true", "switch.credit_release": "per_flit"}
"""BookSim's choices that are settings here (``--legacy`` leaves them out)."""


def booksim(binary: str, k: int, vcs: int, flits: int, rate: float, sim: str, extra: dict | None = None) -> dict:
    """One BookSim2 run: its average packet latency and accepted flit rate (per node per cycle)."""
    import re

    cfg = dict(BOOKSIM, topology="mesh", k=k, n=2, num_vcs=vcs, packet_size=flits, injection_rate=rate, sim_type=sim,
               **(extra or {}))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.cfg")
        with open(path, "w") as f:
            f.write("".join(f"{key} = {v};\n" for key, v in cfg.items()))
        out = subprocess.run([binary, path], capture_output=True, text=True).stdout  # (exits 255 when unstable)
    lat = re.findall(r"Packet latency average = ([0-9.]+)", out)
    acc = re.findall(r"Accepted flit rate average = ([0-9.]+)", out)
    return {"latency": float(lat[-1]) if lat else None, "accepted": float(acc[-1]) if acc else None,
            "unstable": "unstable" in out or "Aborting" in out}


def ours(k: int, vcs: int, flits: int, loads, cycles: int, legacy: bool, drain: str | None, extra: list) -> list[dict]:
    """Our uniform curve at ``loads`` (flits per node per cycle) on the BookSim mapping; latencies in cycles."""
    sets = dict(OURS, **{"switch.vcs": vcs})
    if not legacy:
        sets.update(FAITHFUL)
    sets.update(x.split("=", 1) for x in extra)  # (a setting given twice is refused: the last one wins here)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [sys.executable, "-m", "emu", "run", "--topo", f"mesh:k={k},n=2", "--test", "uniform", "--direct",
               "--load", ",".join(f"{x:.4f}" for x in loads), "--warmup", str(cycles), "--measure", str(cycles),
               "--size", f"{FLIT * flits - 24}B", "--json", out]
        for key, v in sets.items():
            cmd += ["--set", f"{key}={v}"]
        if not legacy:
            cmd += ["--to-self"] + (["--drain", drain] if drain else [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = json.load(f)["results"][0]["curve"]
    return [{"offered": r["offered"], "accepted": r["accepted"], "latency": r["mean_ns"] / CYCLE_NS} for r in rows]


def compare(a) -> int:
    """The BookSim2 comparison (``--booksim``)."""
    ks, vcs, flits = a.k or [4, 8], a.vcs or [1, 2, 8], a.flits or [1, 4]
    cyc = a.cycles or 300
    print(f"BookSim2 ({a.booksim}) against ours ({'legacy settings' if a.legacy else 'BookSim-faithful settings'}"
          f"{', ' + ' '.join(a.set) if a.set else ''}): uniform traffic, self included{'' if not a.legacy else ' in BookSim only'}; "
          f"ours {cyc} + {cyc} cycles of warm-up and measurement"
          f"{'' if a.legacy else f' then --drain {a.drain}'}, BookSim 3 x 1,000 + up to 10 x 1,000 then its drain; "
          "rates in flits per node per cycle, latency in cycles")
    print(f"{'mesh':>5} {'vcs':>3} {'flits':>5} | {'sat BS':>7} {'sat ours':>8} {'ratio':>6} | "
          f"{'@50% BS':>7} {'ours':>7} | {'@80% BS':>7} {'ours':>7}")
    for k in ks:
        for v in vcs:
            for f in flits:
                bs = dict(x.split("=", 1) for x in a.booksim_set or [])
                sat_bs = booksim(a.booksim, k, v, f, 1.0, "throughput", bs)["accepted"]
                pts = [round(sat_bs * x, 4) for x in (0.5, 0.8)]
                lat_bs = [booksim(a.booksim, k, v, f, r, "latency", bs) for r in pts]
                over = round(min(1.0, OVER * sat_bs), 4)  # (past both saturations: little backlog to drain)
                sat = ours(k, v, f, [over], cyc, a.legacy, None, a.set or [])[0]["accepted"]
                lat = ours(k, v, f, pts, cyc, a.legacy, a.drain, a.set or [])
                mark = ">" if sat > (1 - 0.05) * over else " "  # (not saturated at the load offered)
                print(f"{k:>3}x{k:<1} {v:>3} {f:>5} | {sat_bs:>7.4f} {mark}{sat:>7.4f} {sat / sat_bs:>6.3f} | "
                      f"{lat_bs[0]['latency']:>7.2f} {lat[0]['latency']:>7.2f} | "
                      f"{lat_bs[1]['latency']:>7.2f} {lat[1]['latency']:>7.2f}", flush=True)
    return 0


def run(k: int, model: str, vcs: int, loads, warmup: int, measure: int, size: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [sys.executable, "-m", "emu", "run", "--topo", f"mesh:k={k},n=2", "--test", "uniform",
               "--load", ",".join(map(str, loads)), "--warmup", str(warmup), "--measure", str(measure),
               "--size", str(size), "--set", f"switch.model={model}", "--set", f"switch.vcs={vcs}",
               "--set", "switch.cut_through=true", "--json", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["results"][0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--k", type=int, action="append", help="mesh side (repeat; default 4 and 8)")
    ap.add_argument("--vcs", type=int, action="append", help="VCs (repeat; default 1, 2, 8)")
    ap.add_argument("--size", type=int, default=256, help="packet payload bytes (default 256)")
    ap.add_argument("--full", action="store_true", help="1,000-cycle warm-up and measurement windows")
    ap.add_argument("--loads", default=",".join(map(str, LOADS)), help="offered loads, comma-separated")
    ap.add_argument("--cycles", type=int, help="warm-up and measurement cycles (default 300; 1,000 with --full)")
    ap.add_argument("--booksim", metavar="PATH", help="compare with BookSim2's iq router: its booksim binary")
    ap.add_argument("--flits", type=int, action="append", help="--booksim: packet flits (repeat; default 1 and 4)")
    ap.add_argument("--legacy", action="store_true", help="--booksim: only the settings a tree before them has")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE", help="--booksim: more settings of ours")
    ap.add_argument("--drain", choices=("global", "measured"), default="global",
                    help="--booksim: our latency points' drain: global, BookSim's (the default), or measured, the "
                         "older one (each source's own, n x n count messages), for a tree without global")
    ap.add_argument("--booksim-set", action="append", metavar="KEY=VALUE",
                    help="--booksim: more settings of BookSim's, e.g. hold_switch_for_packet=1 (a packet's flits "
                         "cross the switch together, as our frames do)")
    a = ap.parse_args(argv)
    if a.booksim:
        return compare(a)
    ks, vcs = a.k or [4, 8], a.vcs or [1, 2, 8]
    loads = tuple(float(x) for x in a.loads.split(","))
    warm = meas = a.cycles or (1000 if a.full else 300)
    print(f"uniform traffic, {a.size}-byte packets, warm-up {warm} and measurement {meas} cycles, "
          f"loads {', '.join(map(str, loads))}; cores: {os.cpu_count()}")
    summary = []
    for k in ks:
        for v in vcs:
            for model in ("output_queued", "input_queued"):
                r = run(k, model, v, loads, warm, meas, a.size)
                print(f"\nmesh:k={k},n=2  {model}  vcs={v}  zero-load model {r['zero_load_model_ns']} ns  "
                      f"saturation: {r['saturation']}")
                print(f"{'offered':>8} {'accepted':>9} {'mean_ns':>10} {'p99_ns':>9} {'model_ns':>9}")
                for row in r["curve"]:
                    print(f"{row['offered']:>8} {row['accepted']:>9} {row['mean_ns']:>10,} {row['p99_ns']:>9,} "
                          f"{row['model_ns']:>9}")
                cross = r["hop_count_all_loads"]
                summary.append((k, v, model, r["saturation_load"], cross / r["wall_s"] if r["wall_s"] else 0))
    print("\nsaturation (lowest load whose accepted throughput falls 5 % short, or latency > 3x the model)")
    print(f"{'mesh':>6} {'vcs':>4} {'model':>14} {'saturation':>11} {'crossings/s':>12}")
    for k, v, model, sat, cps in summary:
        print(f"{'k=' + str(k):>6} {v:>4} {model:>14} {str(sat or '> ' + str(loads[-1])):>11} {cps:>12,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
