"""Issue 47 item 5, side by side: the same case on emu and on the reference simulators, built from source.

Two references (fetch, build, point this script at the result):

* **htsim** (github.com/Broadcom/csg-htsim): ``cd sim && make libhtsim.a && cd datacenter && make
  htsim_ndp`` (g++ 12 builds it as is). ``--htsim PATH`` (default ``$HTSIM_NDP``) names ``htsim_ndp``.
* **The HPCC ns-3 code** (github.com/alibaba-edu/High-Precision-Congestion-Control, ns-3.17): in
  ``simulation/``, with Python 2.7 as ``python``: ``CXXFLAGS="-O2 -w -std=c++11 -fpermissive" python waf
  configure --build-profile=optimized --enable-modules=point-to-point,applications,internet
  --disable-python --disable-examples --disable-tests && python waf build`` (g++ 12: no patch needed
  with these flags). ``--hpcc DIR`` (default ``$HPCC_SIM``) names ``simulation/``.

Cases (each prints what both sides assume, then both sides' figures):

(a) ``ndp``: NDP incast with trimming. htsim's ``main_ndp.cpp`` on its 2-tier leaf-spine
    (``-tiers 2``: K ToRs of K/2 hosts, K/2 spines, the least K with K*K/2 > N), N senders 1..N to host 0
    (a connection matrix ``i->0 start 0 size 450000``), 10 Gbit/s, 9000-byte packets, per-port
    CompositeQueue of ``-q`` packets (trimming), 1 us per link, 0 switch latency, initial window 15,
    per-packet spraying (``-strat perm``), minimum RTO 50 ms (main_ndp.cpp ``setMinRTO(50000)``). emu:
    the same leaf-spine as a topology file, the same rates, latency, MTU (payload), initial window and
    minimum RTO, ``switch.routing=spray``, one shared buffer per
    switch of q x 9000 bytes with alpha 1024 (so one congested port may take all of it, as htsim's
    per-port queue), ``queues.trim``, ``host.cc=ndp``, switch and NIC delays 0. Printed: the last
    flow's completion, the mean, retransmissions.
(b) ``hpcc``: DCQCN and HPCC on the HPCC code's own configuration (``mix/config.txt``: 100 Gbit/s,
    1 us links, ``mix/topology.txt``'s one switch with 65 hosts, 1000-byte payloads, a 32 MiB buffer,
    RED kmin 400 KB / kmax 1600 KB / pmax 0.2 at 100 G, PFC on; its DCQCN and HPCC settings as that
    file has them), on a flow file in its format read as is by both: a long flow 2 -> 1 and, 20 us
    later, an incast of ``--incast`` senders 3.. -> 1. emu: ``star:n=66`` (so host numbers are the
    same), the file's settings where emu has one (listed as they are used). DCQCN runs on ns-3 twice:
    as the file has it (``HAS_WIN 1``: a window of one BDP besides the rate) and with ``HAS_WIN 0``
    (``run.py --cc dcqcn``), the rate-only DCQCN that emu's is.

    python scripts/cc_reference.py --htsim /tmp/x/htsim/sim/datacenter/htsim_ndp --hpcc /tmp/x/hpcc/simulation
    python scripts/cc_reference.py --only ndp --senders 16 64

A reference that is not there is reported as such, with how to build it; the emu side still runs.
Virtual-time figures on both sides: deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cc_checks import links, run  # noqa: E402

MSS = 9000
FLOW = 450_000


# ---------------------------------------------------------------- (a) NDP incast, htsim

def leaf_spine(k: int, path: str) -> None:
    """htsim's 2-tier FatTreeTopology as an emu topology file: ToR t holds hosts t*k/2 .. (t+1)*k/2-1."""
    hp = k // 2
    nodes = [{"id": f"h{i}", "kind": "host"} for i in range(k * hp)]
    nodes += [{"id": f"t{t}", "kind": "switch"} for t in range(k)] + [{"id": f"a{a}", "kind": "switch"} for a in range(hp)]
    ls = [{"source": f"h{i}", "target": f"t{i // hp}"} for i in range(k * hp)]
    ls += [{"source": f"t{t}", "target": f"a{a}"} for t in range(k) for a in range(hp)]
    with open(path, "w") as f:
        json.dump({"nodes": nodes, "links": ls}, f)


def htsim_ndp(binary: str, n: int, k: int, q: int, d: str) -> dict:
    tm = os.path.join(d, "incast.cm")
    with open(tm, "w") as f:
        f.write(f"Nodes {k * k // 2}\nConnections {n}\n")
        f.writelines(f"{i}->0 id {i} start 0 size {FLOW}\n" for i in range(1, n + 1))
    end_us = int(n * FLOW * 8 / 10e9 * 1e6 * 3) + 2000
    cmd = [binary, "-o", os.path.join(d, "logout"), "-nodes", str(k * k // 2), "-tiers", "2", "-strat", "perm",
           "-linkspeed", "10000", "-q", str(q), "-cwnd", "15", "-mtu", str(MSS), "-end", str(end_us), "-tm", tm]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=d)
    done = [float(x) for x in re.findall(r"finished at ([0-9.]+)", p.stdout)]
    m = re.search(r"New: (\d+) Rtx: (\d+) Bounced: (\d+)", p.stdout)
    if len(done) != n:
        return {"error": f"{len(done)} of {n} flows finished (rc {p.returncode}): {p.stdout[-300:]}{p.stderr[-300:]}"}
    return {"last_us": max(done), "mean_us": sum(done) / n, "new": int(m[1]) if m else None,
            "rtx": int(m[2]) if m else None, "cmd": " ".join(cmd[:1] + [os.path.basename(c) if c.startswith(d) else c
                                                                        for c in cmd[1:]])}


def ndp_case(binary: str | None, n: int, q: int) -> None:
    k = 2
    while k * k // 2 < n + 1:
        k += 2
    ideal = n * FLOW * 8 / 10e9 * 1e6
    print(f"\n## (a) NDP incast with trimming: {n} x 450 KB -> host 0")
    print(f"both: 2-tier leaf-spine K={k} ({k} ToRs x {k // 2} hosts, {k // 2} spines), 10 Gbit/s, 1 us per link, "
          f"{MSS}-byte packets, initial window 15, per-packet spraying; ideal n x 0.36 ms = {ideal / 1e3:.3f} ms")
    print(f"htsim: per-port CompositeQueue of {q} packets ({q * MSS:,} B) with trimming, header queue apart; "
          f"flow done when the sender gets the last ack; packet = 9000 B on the wire")
    print(f"emu:   one shared buffer of {q * MSS:,} B per switch, alpha 1024, trimming to class 7; flow done when "
          f"its last frame is at the receiver; 9000 B payload + 70 B framing (fabric+Ethernet+FCS+preamble+gap)")
    print(f"{'':6} {'last ms':>9} {'x ideal':>8} {'mean ms':>9} {'resent':>7} {'trimmed':>8} {'timeouts':>8}")
    if binary and os.access(binary, os.X_OK):
        with tempfile.TemporaryDirectory() as d:
            h = htsim_ndp(binary, n, k, q, d)
        if "error" in h:
            print(f"{'htsim':6} failed: {h['error']}")
        else:
            print(f"{'htsim':6} {h['last_us'] / 1e3:9.3f} {h['last_us'] / ideal:8.3f} {h['mean_us'] / 1e3:9.3f} "
                  f"{h['rtx']:7,} {'-':>8} {'-':>8}   ({h['cmd']})")
    else:
        print(f"{'htsim':6} not built ({binary!r}); see this script's docstring")
    with tempfile.TemporaryDirectory() as d:
        topo = os.path.join(d, f"ls{k}.json")
        leaf_spine(k, topo)
        r, wall = run(["--topo", topo, "--test", "incast", "--senders", str(n), "--size", str(FLOW), "--direct",
                       "--set", "link.bandwidth_bps=10e9", "--set", "link.latency_ns=1000",
                       "--set", f"host.mtu_bytes={MSS}", "--set", "switch.routing=spray",
                       "--set", "switch.processing_delay_ns=0", "--set", "host.nic_delay_ns=0",
                       "--set", f"queues.buffer_bytes={q * MSS}", "--set", "queues.alpha=1024",
                       "--set", "queues.trim=true", "--set", "host.cc=ndp", "--set", "host.ndp_iw_segments=15",
                       "--set", "host.rto_min_ns=50000000", "--set", "host.rto_ns=50000000"])
    if not r.get("ok"):
        print(f"{'emu':6} failed: {str(r.get('error', ''))[:200]}")
        return
    cc = r.get("cc", {})
    last, mean = r["last_completion_ns"] / 1e3, r["fct_mean_ns"] / 1e3
    print(f"{'emu':6} {last / 1e3:9.3f} {last / ideal:8.3f} {mean / 1e3:9.3f} {cc.get('segments_resent', 0):7,} "
          f"{links(r, 'trimmed'):8,} {cc.get('timeouts', 0):8,}   (wall {wall:.0f} s)")


# ------------------------------------------------------- (b) DCQCN and HPCC, the HPCC ns-3 code

START_S = 2.0                     # the HPCC code's flows start at 2 s (its monitors are set for that)
KMIN, KMAX, PMAX = 400, 1600, 0.2  # mix/config.txt's maps at 100 Gbit/s (KB, KB, probability)
BUFFER = 32 * 1024 * 1024         # BUFFER_SIZE 32 (MiB: third.cc multiplies by 1024 * 1024)
HDRM = int(100e9 * 1e-6 / 8 * 3)  # third.cc: headroom = rate x link delay x 3, per port
XOFF = (BUFFER - 65 * HDRM - 65 * 4096) >> 3  # switch-mmu.cc GetPfcThreshold at an empty buffer (shift 3)

CC = {  # name: (CC_MODE, emu settings equal to mix/config.txt's, ns-3 variants: (label, config overrides))
    "dcqcn": (1, ["host.cc=dcqcn", "host.dcqcn_g=0.00390625", "host.dcqcn_alpha_timer_ns=1000",
                  "host.dcqcn_rate_timer_ns=900000", "host.dcqcn_f=1", "host.dcqcn_rai_mbps=50",
                  "host.dcqcn_rhai_mbps=100", "host.dcqcn_min_rate_mbps=100", "host.dcqcn_byte_counter_bytes=0",
                  "host.dcqcn_cnp_interval_ns=4000"],
              [("ns-3 config.txt (HAS_WIN 1: a BDP window too)", {}),
               ("ns-3 HAS_WIN 0 (run.py --cc dcqcn)", {"HAS_WIN": "0", "VAR_WIN": "0"})]),
    "hpcc": (3, ["host.cc=hpcc", "queues.int_telemetry=true", "host.hpcc_u_target=0.95", "host.hpcc_max_stage=0",
                 "host.hpcc_rai_mbps=50", "host.hpcc_int_hops=5"], [("ns-3 config.txt", {})]),
}


def flow_file(path: str, long_bytes: int, incast: int, size: int) -> None:
    """The HPCC code's flow.txt format: the count, then ``src dst pg dport size start_s``."""
    rows = [f"2 1 3 100 {long_bytes} {START_S:.9f}"]
    rows += [f"{3 + i} 1 3 100 {size} {START_S + 20e-6:.9f}" for i in range(incast)]
    with open(path, "w") as f:
        f.write(f"{len(rows)}\n" + "\n".join(rows) + "\n")


def ip_node(ip: str) -> int:
    v = int(ip, 16) - 0x0B000001            # third.cc node_id_to_ip: 0x0b000001 + (id/256)<<16 + (id%256)<<8
    return (v >> 16) * 256 + ((v >> 8) & 0xFF)


def ns3_run(sim: str, mode: int, flows: str, d: str, over: dict) -> dict:
    with open(os.path.join(sim, "mix", "config.txt")) as f:
        conf = f.read()
    out = {k: os.path.join(d, v) for k, v in (("TRACE_OUTPUT_FILE", "mix.tr"), ("FCT_OUTPUT_FILE", "fct.txt"),
                                               ("PFC_OUTPUT_FILE", "pfc.txt"), ("QLEN_MON_FILE", "qlen.txt"))}
    sets = dict(out, FLOW_FILE=flows, TOPOLOGY_FILE=os.path.join(sim, "mix", "topology.txt"),
                TRACE_FILE=os.path.join(sim, "mix", "trace.txt"), CC_MODE=str(mode), ENABLE_TRACE="0",
                QLEN_MON_START="2000000000", QLEN_MON_END="2100000000", SIMULATOR_STOP_TIME="2.2", **over)
    for key, val in sets.items():
        conf = re.sub(rf"^{key} .*$", f"{key} {val}", conf, flags=re.M)
    cfg = os.path.join(d, "config.txt")
    with open(cfg, "w") as f:
        f.write(conf)
    exe = next((os.path.join(sim, "build", "scratch", n) for n in ("third", "ns3.17-third-optimized", "ns3.17-third-debug")
                if os.path.exists(os.path.join(sim, "build", "scratch", n))), None)
    if exe is None:
        return {"error": f"no build/scratch/third under {sim}; see this script's docstring"}
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(sim, "build"))
    p = subprocess.run([exe, cfg], capture_output=True, text=True, cwd=sim, env=env)
    m = re.search(r"maxRtt=(\d+)", p.stdout)
    fct = {}
    for line in open(out["FCT_OUTPUT_FILE"]) if os.path.exists(out["FCT_OUTPUT_FILE"]) else ():
        sip, dip, _sp, _dp, size, start, t, alone = line.split()
        fct[ip_node(sip)] = (int(t), int(alone))
    peak, pauses = 0, 0
    if os.path.exists(out["QLEN_MON_FILE"]):   # "sw port cnt_0KB cnt_1KB ...": the top non-empty KB bucket
        for line in open(out["QLEN_MON_FILE"]):
            v = line.split()
            if len(v) > 2 and not line.startswith("time") and int(v[1]) == 1:
                peak = max(peak, max(i for i, c in enumerate(map(int, v[2:])) if c))
    if os.path.exists(out["PFC_OUTPUT_FILE"]):
        pauses = sum(1 for line in open(out["PFC_OUTPUT_FILE"]) if line.split()[-1:] == ["1"])
    if not fct:
        return {"error": f"no flow finished (rc {p.returncode}): {p.stdout[-300:]}{p.stderr[-300:]}"}
    return {"fct": fct, "peak_kb": peak, "pauses": pauses, "max_rtt": int(m[1]) if m else 0}


def hpcc_case(sim: str | None, incast: int, long_bytes: int, size: int) -> None:
    print(f"\n## (b) DCQCN and HPCC: a long flow 2 -> 1 ({long_bytes:,} B) at 2 s, then {incast} x {size:,} B "
          f"from 3..{2 + incast} -> 1 at 2 s + 20 us")
    print(f"both: mix/config.txt and mix/topology.txt (one switch, 100 Gbit/s, 1 us links), 1000-byte payloads, "
          f"buffer {BUFFER:,} B, RED {KMIN}-{KMAX} KB pmax {PMAX}, PFC on class 3 (flows' pg 3)")
    print(f"ns-3:  marks on dequeue (switch-node.cc), dynamic PFC threshold (free buffer >> 3 = {XOFF:,} B at an "
          f"empty buffer), one ack per packet (L2_ACK_INTERVAL 1), FCT at the sender's last ack")
    print(f"emu:   star:n=66, marks on arrival, static PFC xoff {XOFF:,} B / headroom {HDRM:,} B, switch and NIC "
          f"delays 0; FCT at the receiver's last frame")
    ok = sim and os.path.exists(os.path.join(sim, "mix", "config.txt"))
    with tempfile.TemporaryDirectory() as d:
        flows = os.path.join(d, "flow.txt")
        flow_file(flows, long_bytes, incast, size)
        for name, (mode, sets, variants) in CC.items():
            print(f"\n{name}: ns-3 CC_MODE {mode}; emu --set " + " ".join(sets))
            print(f"{'':46} {'long fct us':>11} {'incast last us':>14} {'incast mean us':>14} {'peak q KB':>9} "
                  f"{'PAUSEs':>7}")
            rtt = 0
            for label, over in variants if ok else ():
                n = ns3_run(sim, mode, flows, d, over)
                if "error" in n:
                    print(f"{label:46} failed: {n['error']}")
                    continue
                rtt = n["max_rtt"]
                inc = [n["fct"][h][0] for h in range(3, 3 + incast) if h in n["fct"]]
                print(f"{label:46} {n['fct'].get(2, (0,))[0] / 1e3:11.1f} {max(inc) / 1e3:14.1f} "
                      f"{sum(inc) / len(inc) / 1e3:14.1f} {n['peak_kb']:9,} {n['pauses']:7}   (maxRtt {rtt} ns; "
                      f"{len(n['fct'])} of {incast + 1} flows done)")
            if not ok:
                print(f"{'ns-3':46} not built ({sim!r}); see this script's docstring")
            extra = sets + ([f"host.hpcc_base_rtt_ns={rtt}"] if name == "hpcc" and rtt else [])
            r, wall = run(["--topo", "star:n=66", "--test", "flows", "--flows", flows, "--direct",
                           *[a for s in [
                               "link.bandwidth_bps=100e9", "link.latency_ns=1000", "host.mtu_bytes=1000",
                               "switch.processing_delay_ns=0", "host.nic_delay_ns=0",
                               f"queues.buffer_bytes={BUFFER}", "queues.ecn=red", f"queues.kmin_bytes={KMIN * 1000}",
                               f"queues.kmax_bytes={KMAX * 1000}", f"queues.pmax={PMAX}", "queues.pfc_classes=3",
                               f"queues.xoff_bytes={XOFF}", f"queues.xon_bytes={XOFF - 3 * 1024}",
                               f"queues.headroom_bytes={HDRM}", *extra] for a in ("--set", s)]])
            if not r.get("ok"):
                print(f"{'emu':46} failed: {str(r.get('error', ''))[:200]}")
                continue
            pf = r["per_flow"]
            inc = [f["fct_ns"] for f in pf if f["src"] != "h2"]
            lng = next(f["fct_ns"] for f in pf if f["src"] == "h2")
            print(f"{'emu':46} {lng / 1e3:11.1f} {max(inc) / 1e3:14.1f} {sum(inc) / len(inc) / 1e3:14.1f} "
                  f"{r['per_link'].get('s0-p1', {}).get('peak_queue_bytes', 0) // 1000:9,} {links(r, 'pause_tx'):7}   "
                  f"(wall {wall:.0f} s{'; T = ns-3 maxRtt' if name == 'hpcc' and rtt else ''})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--only", choices=("ndp", "hpcc"), help="one case (default: both)")
    ap.add_argument("--htsim", default=os.environ.get("HTSIM_NDP"), help="htsim's htsim_ndp binary")
    ap.add_argument("--hpcc", default=os.environ.get("HPCC_SIM"), help="the HPCC code's simulation/ directory, built")
    ap.add_argument("--senders", type=int, nargs="+", default=[16, 64], help="(a) incast sizes (default 16 64)")
    ap.add_argument("--queue", type=int, default=8, help="(a) packets per port (htsim -q; NDP's paper: 8)")
    ap.add_argument("--incast", type=int, default=8, help="(b) incast senders (default 8)")
    ap.add_argument("--long", type=int, default=2_000_000, help="(b) long flow bytes (default 2 MB)")
    ap.add_argument("--size", type=int, default=250_000, help="(b) incast flow bytes (default 250 KB)")
    a = ap.parse_args()
    if a.only in (None, "ndp"):
        for n in a.senders:
            ndp_case(a.htsim, n, a.queue)
    if a.only in (None, "hpcc"):
        hpcc_case(a.hpcc, a.incast, a.long, a.size)


if __name__ == "__main__":
    main()
