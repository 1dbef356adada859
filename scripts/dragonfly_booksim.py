"""Saturation throughput of minimal, Valiant and UGAL-L routing on a balanced dragonfly
(p=2, a=4, h=2, g=9: 72 hosts), uniform and worst-case traffic: emu beside BookSim2's dragonflynew.

    python scripts/dragonfly_booksim.py --booksim /path/to/booksim2/src/booksim [--load 0.9]
        [--warmup 1000 --measure 1000]

Each side is offered ``--load`` (packets per host per cycle, 1-flit packets) and the accepted
throughput is printed, beside the analytic limit (uniform: 1 for every policy on a balanced dragonfly
with minimal routing, 1/2 with Valiant; worst case: minimal 1/(a p) = 1/8, Valiant and UGAL about 1/2).

What each side assumes (set alike where both can):

* **emu**: a packet is one frame of ``--size`` bytes (256 B + headers, ``link.framing=flit``) and one
  flit (``switch.flit_bytes=512``); a cycle is that frame's time on a link (``cycle_ns``, 23 ns). Host
  links of one cycle, local links of 10, global links of 100 (BookSim's dragonflynew has these built
  in: ``DRAGON_LATENCY``), routers input-queued, virtual cut-through, route 0, VC allocation, switch
  allocation and traversal one cycle each, credits 2 cycles after the frame leaves the buffer (then
  the link's latency back), 256-flit VC buffers (room for a global link's round trip), 4 VCs in
  ``dragonfly`` classes; the hosts' own send overhead 0. Valiant's intermediate is a *group*; UGAL-L compares the output depth
  (bytes) x the hop counts of both routes, threshold 0.
* **BookSim2** (``dragonflynew``, k=2): the same pipeline (routing_delay 0, vc_alloc 1, sw_alloc 1,
  st_final 1, credit_delay 2), vc_buf_size 256, internal speedup 1, channels of 10 cycles in a group
  and 100 between groups (its source's), 1 cycle in and out of the hosts, ``bad_dragon``
  traffic for the worst case. Its UGAL picks a random intermediate *node* (its router ends the
  detour, one local hop more than emu's group) and compares ``1 x q_min <= 2 x q_non + 30`` in credits
  (hop counts fixed at 1 and 2). It has no Valiant: this script runs its UGAL with the threshold at
  -1000000 (``BS_UGAL_THRESHOLD``, read by a build with ``scripts/booksim/dragonfly_ugal_experiments.patch``;
  an unpatched build ignores it and runs UGAL), i.e. every packet whose intermediate is outside its
  own group detours. The patch's other switches (``--bs-env``): ``BS_UGAL_INTM=group`` (the detour
  ends on entering the intermediate's group, as emu's), ``BS_UGAL_HOPS=1`` (the routes' hop counts),
  ``BS_UGAL_VC=global`` (a packet's VC = the global links it has crossed, emu's ``dragonfly`` classes),
  ``BS_INJ_VC0=1`` (inject on VC 0); it prints UGAL's decisions per 1000 cycles and the packets routed
  on each group's link to the next (cycles 3000-5000) to stderr (``UGALSTATS``, ``UGALLINK``).
  It injects on a random VC and counts throughput in flits per node per cycle after 3 warm-up
  periods of 1000 cycles (``max_samples`` 5; a run past 900 s prints ``-``).

Why the figures differ (measured, see the report of issue 48): in both routers a VC passes one
packet per the pipeline cycles its head holds the VC -- BookSim's VC and switch allocation, 2
cycles (a VC carries at most 1/2 of a link: minimal worst case 0.062 = 8 hosts x 1/2 link / 8 on the
one global VC); emu's the same since ``switch.vc_release=tail_granted`` became the default (an
output VC is free again once its tail is granted, as in BookSim; 0.062 measured on both sides).
Before it, a VC was held through traversal too, 3 cycles a packet (minimal worst case 0.032, uniform
0.234). Hosts inject on VC 0 in emu, on a random VC
in BookSim (two VCs' worth of pipeline at the injection port).

The window. A Valiant detour crosses two global links of 100 cycles: its zero-load latency is about
250 cycles. With the old defaults (100 cycles of warm-up, 200 measured) the window counted the
network filling -- packets injected in the first ~50 cycles -- and Valiant read 0.034 at an offered
0.1 and 0.123 at 0.6 (the "drop" of issue 48's re-measure: a window artifact, not the router). The
defaults are now BookSim's sample period, 1000 + 1000 cycles; emu's traffic tests say so
(``warmup_note``) when the warm-up is shorter than the longest measured route. Offered 0.6, the
window 100+200 -> 1000+1000 (``python scripts/dragonfly_booksim.py --load 0.6``, CPU 7-11 min per
point on a loaded 2-core machine): minimal uniform 0.325 -> 0.390 (BookSim 0.424), Valiant uniform
0.123 -> 0.347, UGAL-L uniform 0.307 -> 0.393 (0.401), minimal worst case 0.054 -> 0.062 (0.062),
Valiant worst case 0.114 -> 0.335, UGAL-L worst case 0.104 -> 0.249 (0.110).

UGAL-L worst case, 0.249 beside 0.110 (docs/topologies.md has the tables): not the rule -- both sides
detour most of what they compare -- but BookSim's VCs by phase, which put the detours crossing a
group into the VC buffers of that group's stuck minimal traffic, its random intermediate *node* (a
local hop more), and its figure falling with time past saturation (0.147 in cycles 1000-2000, emu's
window, 0.110 in its last period). With a group intermediate and emu's VC classes BookSim reads
0.176; emu with BookSim's intermediate and queue measure (``--set switch.ugal_intermediate=router
--set switch.ugal_queue=credits``) 0.207.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

BOOKSIM_CFG = """topology = dragonflynew; k = 2; n = 1; vc_buf_size = 256; wait_for_tail_credit = 0;
vc_allocator = separable_input_first; sw_allocator = separable_input_first; alloc_iters = 1;
credit_delay = 2; routing_delay = 0; vc_alloc_delay = 1; sw_alloc_delay = 1; st_final_delay = 1;
input_speedup = 1; output_speedup = 1; internal_speedup = 1.0; warmup_periods = 3; sample_period = 1000;
sim_count = 1; packet_size = 1; injection_rate_uses_flits = 1; priority = none; sim_type = throughput;
max_samples = 5;
"""
CASES = [("minimal", "uniform"), ("valiant", "uniform"), ("ugal_l", "uniform"),
         ("minimal", "worst_case"), ("valiant", "worst_case"), ("ugal_l", "worst_case")]
LIMIT = {("minimal", "uniform"): 1.0, ("valiant", "uniform"): 0.5, ("ugal_l", "uniform"): 1.0,
         ("minimal", "worst_case"): 1 / 8, ("valiant", "worst_case"): 0.5, ("ugal_l", "worst_case"): 0.5}


def emu_point(routing: str, pattern: str, load: float, warmup: int, measure: int,
              more: tuple[str, ...] = ()) -> tuple[float, float, int]:
    """(accepted, wall seconds, cycle ns) of one emu run (``more``: further ``--set`` settings)."""
    cyc = 23  # the 256-byte packet's time on a 100 Gbit/s flit-framed link (emu run prints cycle_ns)
    sets = [f"switch.routing={routing}", "switch.flit_bytes=512", f"switch.vc_buffer_bytes={256 * 512}",
            f"link.latency_ns={cyc}", f"link.local_latency_ns={10 * cyc}", f"link.global_latency_ns={100 * cyc}", "switch.route_ns=0", f"switch.vc_alloc_ns={cyc}", f"switch.sw_alloc_ns={cyc}",
            f"switch.traversal_ns={cyc}", f"switch.credit_delay_ns={2 * cyc}", *more]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [sys.executable, "-m", "emu", "run", "--topo", "dragonfly:p=2,a=4,h=2,g=9", "--test", pattern,
               "--load", str(load), "--warmup", str(warmup), "--measure", str(measure), "--direct", "--json", out]
        for s in sets:
            cmd += ["--set", s]
        t0 = time.time()
        subprocess.run(cmd, check=True, capture_output=True)
        wall = time.time() - t0
        with open(out) as fh:
            data = json.load(fh)
    fig = _find(data, "curve")
    return fig["curve"][0]["accepted"], wall, fig["cycle_ns"]


def _find(data, key):
    if isinstance(data, dict):
        if key in data:
            return data
        for v in data.values():
            r = _find(v, key)
            if r is not None:
                return r
    if isinstance(data, list):
        for v in data:
            r = _find(v, key)
            if r is not None:
                return r
    return None


def booksim_point(exe: str, routing: str, pattern: str, load: float,
                  more_env: tuple[str, ...] = ()) -> tuple[float | None, float]:
    """(accepted flits per node per cycle, wall seconds) of one BookSim run (``more_env``: K=V for a
    build with ``scripts/booksim/dragonfly_ugal_experiments.patch``)."""
    fn = {"minimal": "min", "valiant": "ugal", "ugal_l": "ugal"}[routing]
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in more_env)
    if routing == "valiant":
        env["BS_UGAL_THRESHOLD"] = "-1000000"
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as fh:
        fh.write(BOOKSIM_CFG)
    t0 = time.time()
    try:
        r = subprocess.run([exe, fh.name, f"routing_function={fn}", f"num_vcs={2 if fn == 'min' else 3}",
                            f"traffic={'uniform' if pattern == 'uniform' else 'bad_dragon'}", f"injection_rate={load}"],
                           capture_output=True, text=True, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return None, time.time() - t0
    finally:
        os.unlink(fh.name)
    wall = time.time() - t0
    rates = re.findall(r"Accepted flit rate average\s*=\s*([0-9.]+)", r.stdout)
    return (float(rates[-1]) if rates else None), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--booksim", help="BookSim2's booksim binary (leave out: emu's column alone)")
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--measure", type=int, default=1000)
    ap.add_argument("--cases", default=",".join(f"{r}/{p}" for r, p in CASES))
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="a further emu setting")
    ap.add_argument("--bs-env", action="append", default=[], metavar="K=V",
                    help="an environment variable of the patched BookSim (BS_UGAL_INTM=group, ...)")
    a = ap.parse_args()
    bad = [kv for kv in a.set + a.bs_env if "=" not in kv]
    if bad:
        ap.error(f"{bad[0]!r} is not K=V: give e.g. --set switch.ugal_queue=credits")
    print(f"dragonfly p=2 a=4 h=2 g=9 (72 hosts), offered {a.load} packets/host/cycle, 1-flit packets")
    print(f"{'routing':8} {'traffic':11} {'limit':>6} {'emu':>7} {'emu s':>7} {'booksim':>8} {'bs s':>6}")
    for case in a.cases.split(","):
        routing, pattern = case.split("/")
        acc, wall, _cyc = emu_point(routing, pattern, a.load, a.warmup, a.measure, tuple(a.set))
        bs, bwall = booksim_point(a.booksim, routing, pattern, a.load, tuple(a.bs_env)) if a.booksim else (None, 0.0)
        print(f"{routing:8} {pattern:11} {LIMIT[(routing, pattern)]:6.3f} {acc:7.3f} {wall:7.1f} "
              f"{'-' if bs is None else f'{bs:.3f}':>8} {bwall:6.1f}", flush=True)


if __name__ == "__main__":
    main()
