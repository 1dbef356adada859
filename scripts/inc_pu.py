#!/usr/bin/env python3
"""Spec 04's processing-unit experiments: the aggregation bandwidth of the full unit per data type,
against the subset size S, and per host arrival process.

    python scripts/inc_pu.py [--parts types,subset,arrivals] [--arrivals staggered] [--hosts 64]
                             [--gbps 100] [--size 1MiB] [--algo auto] [--clusters 64] [--seed 0]

The switch's processing unit (``switch/aggregate/pu.py``, PUSpec defaults: 64 clusters of 8 cores
at 1 GHz, 1 cycle per byte of data -- about 4 per float32 element --, 4 MiB of packet memory, 4 MiB
of working memory shared by 4 allreduces, hierarchical FCFS over subsets of S = 8 cores) is fed
directly by ``--hosts`` hosts, one per port, each sending ``--size`` bytes in packets of 1 KiB of
data, one packet per reduction block from each host (``switch/aggregate/arrivals.py``). A host sends
at most one packet per slot of its ``--gbps`` link (a 1 KiB payload plus the 50 bytes of headers the
emulator's INC frames carry), keeps at most ``window`` blocks in flight (as the network manager
grants it, ``model.little_window``: Little's law over the staggered spread and the block's last
handler, at most the working memory's share for one allreduce over the buffers a block takes,
1 MiB / (M x 1 KiB)), and is held back by a congestion signal, not dropped, when the packet memory
is full. Arrivals (``--arrivals``): ``staggered`` (the default: the source's staggered sending, the
hosts' starting blocks spread evenly over each group -- ``group``: the narrowest that keeps a
block's packets a handler time apart, widened to split the vector evenly --, host i of P at block
i * group / P, so a block's packets come group / P slots apart), ``rotated`` (host i starts at block
i: a block's packets one slot apart), ``lockstep`` (every host sends block j in slot j) or
``exponential`` (gaps drawn from an exponential of mean one slot, blocks in order).

Bandwidth: data bytes received and aggregated per second over all ports, from the first packet in to
the last block out (Tbit/s), and in elements per second. Model beside it
(``switch/aggregate/model.py``): min(K / tau, 1 / delta) packets per cycle with tau the algorithm's
service time (contention among min(S, cluster) cores for a block's buffer when its packets come
closer than L apart: lockstep and exponential arrivals count as bursts, delta_c = delta; rotated:
delta_c = one slot; staggered: group / P slots) and delta the slot over the hosts. Reference lines
the source quotes (reported figures, not run here): a P4 switch aggregating (SwitchML) 1.6 Tbit/s,
a fixed-function one (SHARP) 3.2 Tbit/s. Every block's result is checked against numpy. Virtual time:
exact and repeatable.

Parts: ``types`` -- int32, int16, int8, float32 at --size with the algorithm the spec's size rule
picks (``--algo auto``: single buffer above 512 KiB, 4 buffers above 256 KiB, 2 above 128 KiB, tree
below); ``subset`` -- float32, S = 1, 2, 4, 8: bandwidth and memory (peak packet memory and working
memory, the model's packets in the switch (Q + 1) K beside the first); ``arrivals`` -- float32 under
each arrival process.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

PACKET = 1024
"""Bytes of data per packet (the manager's default)."""
WIRE_EXTRA = 16 + 30 + 4
"""INC header, Ethernet + fabric header, FCS: what a packet adds on the wire (as scripts/inc_allreduce.py)."""
SWITCHML_TBPS, SHARP_TBPS = 1.6, 3.2
TYPES = ("int32", "int16", "int8", "float32")


def auto_algo(size: int) -> tuple[str, int]:
    """The spec's selection by data size: (algorithm, buffers per block)."""
    if size > 512 << 10:
        return "single", 1
    if size > 256 << 10:
        return "multi", 4
    if size > 128 << 10:
        return "multi", 2
    return "tree", 1


def run(hosts: int, size: int, dtype: str, algo: str, B: int, arrivals: str, gbps: float, settings: dict,
        seed: int) -> dict:
    from emu.config import PUSpec
    from emu.switch.aggregate import ProcessingUnit, model, service_time
    from emu.switch.aggregate.arrivals import drive, spacing
    from emu.switch.aggregate.model import block_time, little_window, switch_spacing

    spec = PUSpec(**settings)
    pu = ProcessingUnit(spec)
    dt = np.dtype(dtype)
    blocks = size // PACKET
    n = PACKET // dt.itemsize
    rng = np.random.default_rng([seed, hosts])
    base = [(rng.integers(-50, 50, n) if dt.kind == "i" else rng.standard_normal(n)).astype(dt) for _ in range(hosts)]
    slot = (PACKET + WIRE_EXTRA) * 8 / gbps
    M = B if algo == "multi" else (hosts if algo == "tree" else 1)
    share = max(1, min(blocks, spec.working_memory_bytes // spec.max_allreduces // (M * PACKET)))
    L = PACKET * spec.cycles_per_byte / spec.ghz
    S = spec.subset if spec.scheduler == "hfcfs" else spec.cores
    # the window as the network manager grants it (Little's law, capped by the memory share): the
    # staggered spread over the narrowest group that keeps a block's packets from waiting (where the
    # unit would limit otherwise), plus the block's time in the unit (results reach the hosts when the
    # block completes: no way up or down here)
    C, K, copy = spec.cores_per_cluster, spec.cores, spec.copy_cycles / spec.ghz
    gap = switch_spacing(algo, L, hosts, S, C, K, slot, B, copy)
    win = little_window(blocks, hosts, slot, gap, block_time(algo, L, hosts, S, C, K, slot, gap, B, copy), share)
    window = win.window
    r = drive(pu, hosts, blocks, lambda h, b: base[h], process=arrivals, slot_ns=slot, window=window, algo=algo,
              B=B, seed=seed, keep=True, group=win.group)
    want = np.sum(np.array(base, np.float64 if dt.kind == "f" else np.int64), axis=0).astype(dt)
    for b, got in r.results.items():
        ok = np.allclose(got, want, rtol=1e-4, atol=1e-3) if dt.kind == "f" else np.array_equal(got, want)
        assert ok, f"{dtype} {algo}: block {b} differs from numpy"
    seconds = r.span_ns * 1e-9
    data = hosts * blocks * PACKET
    L = PACKET * spec.cycles_per_byte
    delta = slot / hosts
    delta_c = max(delta, slot * spacing(arrivals, blocks, window, hosts, win.group))
    contending = min(S, spec.cores_per_cluster)
    tau = {"single": service_time("single", L, hosts, contending=contending, delta_c=delta_c),
           "multi": service_time("multi", L, hosts, contending=contending, delta_c=delta_c, B=B)}.get(
        algo, service_time("tree", L, hosts, copy=spec.copy_cycles))
    m = model(K=spec.cores, tau=tau / spec.ghz, delta=delta, delta_c=delta_c, P=hosts, S=S, B=B)
    model_tbps = m.bandwidth * PACKET * 8 / 1000
    return dict(dtype=dtype, algo=algo + (str(B) if algo == "multi" else ""), S=S, arrivals=arrivals, hosts=hosts,
                size=size, window=window, group=win.width, span_ns=r.span_ns, tbps=round(data * 8 / seconds / 1e12, 3),
                model_tbps=round(model_tbps, 3), gelems=round(data / dt.itemsize / seconds / 1e9, 1),
                model_gelems=round(model_tbps * 1e12 / 8 / dt.itemsize / 1e9, 1),
                peak_packet_memory=r.stats["peak_packet_memory"], model_packet_memory=round(m.in_switch * PACKET),
                peak_working_memory=r.stats["peak_working_memory"], busy_wait_ns=r.stats["busy_wait_ns"],
                paused=r.stats["paused"], drops=r.stats["drops"])


COLS = ("dtype", "algo", "S", "arrivals", "window", "group", "tbps", "model_tbps", "gelems", "model_gelems",
        "peak_packet_memory", "model_packet_memory", "peak_working_memory", "busy_wait_ns", "paused")


def show(r: dict) -> None:
    print(" ".join(f"{r[c]:>{max(len(c), 9)},}" if isinstance(r[c], int) else f"{r[c]!s:>{max(len(c), 9)}}"
                   for c in COLS), flush=True)


def main(argv=None) -> list[dict]:
    from emu.config import ConfigError, PUSpec
    from emu.front.checks import parse_size
    from emu.switch.aggregate.arrivals import ARRIVALS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--parts", default="types,subset,arrivals")
    ap.add_argument("--arrivals", default=ARRIVALS[0], help=f"{', '.join(ARRIVALS)} (the source's: {ARRIVALS[0]})")
    ap.add_argument("--hosts", type=int, default=64, help="hosts, one per port, each a child of every block")
    ap.add_argument("--gbps", type=float, default=100.0, help="each host's link (the source: 100 Gbit/s)")
    ap.add_argument("--size", default="1MiB", help="bytes per host (the source's scaling runs: 1 MiB)")
    ap.add_argument("--algo", default="auto", help="auto (the spec's rule by size), single, multi2, multi4, tree")
    ap.add_argument("--clusters", type=int, default=None, help="clusters of 8 cores (default: the full unit, 64)")
    ap.add_argument("--subsets", default="1,2,4,8")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    parts = a.parts.split(",")
    if any(p not in ("types", "subset", "arrivals") for p in parts):
        raise SystemExit(f"--parts {a.parts}: comma-separated of types, subset, arrivals")
    if a.arrivals not in ARRIVALS:
        raise SystemExit(f"--arrivals {a.arrivals}: one of {', '.join(ARRIVALS)}")
    try:
        size = parse_size(a.size)
    except ConfigError as e:
        raise SystemExit(f"--size: {e}") from None
    if size < PACKET or size % PACKET:
        raise SystemExit(f"--size {a.size}: a whole number of {PACKET}-byte packets")
    if a.hosts < 2 or a.gbps <= 0:
        raise SystemExit("--hosts >= 2 and --gbps > 0")
    algo, B = auto_algo(size) if a.algo == "auto" else {"single": ("single", 1), "multi2": ("multi", 2),
                                                         "multi4": ("multi", 4), "tree": ("tree", 1)}.get(a.algo, (None, 0))
    if algo is None:
        raise SystemExit(f"--algo {a.algo}: auto, single, multi2, multi4 or tree")
    settings = {} if a.clusters is None else {"clusters": a.clusters}
    try:
        spec = PUSpec(**settings)
        subsets = [int(s) for s in a.subsets.split(",")]
        for s in subsets:
            PUSpec(**settings, subset=s)
    except (ConfigError, ValueError) as e:
        raise SystemExit(f"--clusters/--subsets: {e}") from None
    print(f"processing unit: {spec.clusters} clusters x {spec.cores_per_cluster} cores = {spec.cores} cores at "
          f"{spec.ghz} GHz, {spec.cycles_per_byte} cycle/byte; {a.hosts} hosts at {a.gbps:g} Gbit/s each "
          f"({a.hosts * a.gbps / 1000:g} Tbit/s offered), {size:,} B per host in {PACKET}-byte packets; "
          f"algorithm {algo}{B if algo == 'multi' else ''} ({'the size rule' if a.algo == 'auto' else 'given'})")
    print(f"reference lines the source quotes: SwitchML (P4 switch) {SWITCHML_TBPS} Tbit/s, SHARP (fixed function) "
          f"{SHARP_TBPS} Tbit/s")
    print(" ".join(f"{c:>{max(len(c), 9)}}" for c in COLS))
    rows = []
    if "types" in parts:
        for dtype in TYPES:
            rows.append(run(a.hosts, size, dtype, algo, B, a.arrivals, a.gbps, settings, a.seed))
            show(rows[-1])
        f32 = rows[-1]
        print(f"float32 at {size:,} B: {f32['tbps']} Tbit/s = x{f32['tbps'] / SWITCHML_TBPS:.2f} SwitchML, "
              f"x{f32['tbps'] / SHARP_TBPS:.2f} SHARP (their reported figures)")
    if "subset" in parts:
        for s in subsets:
            rows.append(run(a.hosts, size, "float32", algo, B, a.arrivals, a.gbps, dict(settings, subset=s), a.seed))
            show(rows[-1])
    if "arrivals" in parts:
        for process in ARRIVALS:
            rows.append(run(a.hosts, size, "float32", algo, B, process, a.gbps, settings, a.seed))
            show(rows[-1])
    print("tbps/gelems: measured (data in over first packet to last block); model_*: min(K/tau, 1/delta). "
          "memory in bytes; model_packet_memory: (Q + 1) K packets of 1 KiB. Assumed: PUSpec defaults, the "
          "results' way back to the hosts not modelled, a full packet memory holds hosts back (no drops).")
    return rows


if __name__ == "__main__":
    main()
