"""Flow workloads and their completion times (issue 47, item 4): ``emu run --test incast --senders 16
--size 450KB``, ``--test permutation``, ``--test alltoall_flows``, ``--test poisson --load 0.5 --cdf
websearch``, ``--test flows --flows FILE`` (the workloads: :mod:`emu.nodes.workload.flows`).

Each flow is one host message (``host.send`` of ``size`` bytes, its tag the flow's number, its
traffic class -- the frames' ``prio`` -- the flow's priority; 0 leaves the host's own class). A host sends its flows in start order, each at its start (or as
soon as its previous send returned: the host's send overhead), then receives the flows sent to it;
its NIC sends its messages in the order taken, or, under a ``host.cc``, its queue pairs (one per
peer) round robin (``nic.qp_sched``). A flow's completion
time (FCT) is the arrival of its last byte at the receiver (``Message.t_ns``) less its start; its
slowdown is FCT over the ideal FCT of the same flow alone on the idle network
(:mod:`emu.front.flow_model`), so 1 is the best a flow can do.

Figures: flows, bytes, goodput (the flows' bytes over the time from the first start to the last
completion, Gbit/s), FCT and slowdown (mean, p50, p95, p99, max), and per size bucket (``buckets``:
flows, mean FCT, p50, p95, p99 and max slowdown; the buckets are decades: up to 10 KB, 100 KB, 1 MB,
10 MB, above); up to ``PER_FLOW_MAX`` flows, each flow's own (``per_flow``). Percentiles are nearest-rank. Queue occupancy over time per port is in ``--trace``
(each port's ``queue`` counter); ``emu report`` draws it and the slowdown by size.
"""

from __future__ import annotations

import math
from typing import Any

from emu.nodes.workload.flows import Flow, all_to_all, cdf_named, incast, parse_cdf, parse_flows, permutation, poisson

from ..config import ConfigError
from ..errors import EmuError
from .check_registry import Options, register
from .flow_model import IdealFct

TESTS = ("flows", "incast", "permutation", "alltoall_flows", "poisson")
BUCKETS = (10_000, 100_000, 1_000_000, 10_000_000)
"""Upper edges (bytes, inclusive) of the size buckets; the last bucket is open."""
PER_FLOW_MAX = 64
"""Up to this many flows, a run also gives each flow's own figures (``per_flow``: source, destination,
size, start, FCT, ideal FCT, slowdown)."""
DEFAULT_SIZE = {"incast": 450_000, "permutation": 1_000_000, "alltoall_flows": 100_000}
DEFAULT_DURATION_NS = 100_000
_ZERO = bytearray(1)


def _payload(size: int) -> memoryview:
    """``size`` zero bytes, shared (the NIC makes frames from it; nobody writes it)."""
    global _ZERO
    if len(_ZERO) < size:
        _ZERO = bytearray(size)
    return memoryview(_ZERO)[:size]


async def flow_app(host, sends: list[tuple[int, str, int, int, int]], expect: int):
    """Send each flow (start_ns, destination, size, tag, priority) at its start, then receive the
    ``expect`` flows sent here. Returns (the start of the test, [(tag, arrival)])."""
    t0 = host.now
    for start, dst, size, tag, prio in sends:
        t = t0 + start
        if host.now < t:
            await host.sleep(t - host.now)
        await host.send(dst, _payload(size), tag=tag, prio=prio or None)  # (0: the host's own class)
    got = []
    for _ in range(expect):
        m = await host.recv()
        got.append((m.tag, m.t_ns))
    return t0, got


def pct(xs: list, p: float):
    """Nearest-rank percentile of sorted ``xs``."""
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)]


def bucket_name(i: int) -> str:
    def kb(b: int) -> str:
        return f"{b // 1_000_000}MB" if b >= 1_000_000 else f"{b // 1000}KB"
    return f"<={kb(BUCKETS[i])}" if i < len(BUCKETS) else f">{kb(BUCKETS[-1])}"


def summarise(flows: list[Flow], fct: list[int], ideal: list[int]) -> dict[str, Any]:
    """The figures of finished flows (module docstring)."""
    slow = [f / i for f, i in zip(fct, ideal)]
    first = min(f.start_ns for f in flows)
    end = max(f.start_ns + t for f, t in zip(flows, fct))
    total = sum(f.size for f in flows)
    s_sorted, f_sorted = sorted(slow), sorted(fct)
    out: dict[str, Any] = {
        "flows": len(flows), "flow_bytes": total, "last_completion_ns": end,
        "goodput_gbps": round(total * 8 / (end - first), 3) if end > first else None,
        "fct_mean_ns": round(sum(fct) / len(fct), 1), "fct_p50_ns": pct(f_sorted, 50),
        "fct_p99_ns": pct(f_sorted, 99), "fct_max_ns": f_sorted[-1],
        "slowdown_min": round(s_sorted[0], 4), "slowdown_mean": round(sum(slow) / len(slow), 4),
        "slowdown_p50": round(pct(s_sorted, 50), 4),
        "slowdown_p95": round(pct(s_sorted, 95), 4), "slowdown_p99": round(pct(s_sorted, 99), 4),
        "slowdown_max": round(s_sorted[-1], 4)}
    rows = []
    for b in range(len(BUCKETS) + 1):
        lo = BUCKETS[b - 1] if b else 0
        hi = BUCKETS[b] if b < len(BUCKETS) else None
        sel = [k for k, f in enumerate(flows) if f.size > lo and (hi is None or f.size <= hi)]
        if not sel:
            continue
        ss = sorted(slow[k] for k in sel)
        rows.append({"bucket": bucket_name(b), "flows": len(sel),
                     "fct_mean_ns": round(sum(fct[k] for k in sel) / len(sel), 1),
                     "slowdown_p50": round(pct(ss, 50), 4), "slowdown_p95": round(pct(ss, 95), 4),
                     "slowdown_p99": round(pct(ss, 99), 4), "slowdown_max": round(ss[-1], 4)})
    out["buckets"] = rows
    return out


def _size(extra: dict, name: str) -> int:
    from .sizes import parse_size

    text = extra.get("size")
    size = parse_size(text) if text else DEFAULT_SIZE[name]
    if size < 1:
        raise ConfigError(f"--size {text}: a flow carries 1 byte or more")
    return size


def workload(name: str, extra: dict, topo, seed: int) -> tuple[list[Flow], dict[str, Any]]:
    """The flows of test ``name`` and what describes them (ConfigError on bad options: the front
    door calls this before anything starts, with the files already read into ``extra``)."""
    hosts = topo.host_names()
    n = len(hosts)
    if n < 2:
        raise ConfigError(f"--test {name} needs 2 hosts or more, the topology has {n}")
    limit = topo.hosts[0].spec.max_message_bytes
    if name == "flows":
        if extra.get("flows_text") is None:
            raise ConfigError("--test flows reads its flows from a file: give --flows FILE (lines 'src dst priority "
                              "size start_ns')")
        return parse_flows(extra["flows_text"], extra["flows"], hosts, limit), {"flow_file": extra["flows"]}
    if name == "poisson":
        load = extra.get("load")
        try:
            load = float(load) if load is not None else None
        except ValueError:
            load = -1
        if load is None or not 0 < load <= 1 or not math.isfinite(load):
            raise ConfigError(f"--test poisson --load {extra.get('load')}: give one load in (0, 1], the share of "
                              "each host link's capacity its flows' bytes offer, e.g. --load 0.5")
        cdf_arg = extra.get("cdf") or "websearch"
        cdf = parse_cdf(extra["cdf_text"], cdf_arg) if extra.get("cdf_text") is not None else cdf_named(cdf_arg)
        if cdf.points[-1][0] > limit:
            raise ConfigError(f"--cdf {cdf_arg}: flows up to {cdf.points[-1][0]:g} B, over host.max_message_bytes "
                              f"({limit:,}); raise it with --set host.max_message_bytes=...")
        dur = extra.get("duration_ns") or DEFAULT_DURATION_NS
        bps = next(lk.spec.bandwidth_bps for lk in topo.links if hosts[0] in (lk.a, lk.b))
        flows = poisson(n, load, cdf, dur, bps, seed)
        if not flows:
            raise ConfigError(f"--test poisson: no flow starts within --duration {dur:,} ns at load {load}; give a "
                              "longer --duration")
        return flows, {"load": load, "cdf": cdf.name, "cdf_mean_bytes": round(cdf.mean(), 1), "duration_ns": dur}
    size = _size(extra, name)
    if size > limit:
        raise ConfigError(f"--size {size:,} B is over host.max_message_bytes ({limit:,}); use a smaller size or "
                          "--set host.max_message_bytes=...")
    if name == "incast":
        senders = extra.get("senders") or n - 1
        return incast(n, senders, size), {"senders": senders, "receiver": hosts[0], "size_bytes": size}
    if name == "permutation":
        return permutation(n, size, seed), {"size_bytes": size}
    return all_to_all(n, size), {"size_bytes": size}


def _check(name: str):
    async def check(net, options: Options) -> dict[str, Any]:
        topo = net.topology
        hosts = net.hosts
        flows, about = workload(name, options.extra, topo, options.seed)
        sends: dict[str, list] = {h: [] for h in hosts}
        expect = dict.fromkeys(hosts, 0)
        for k, f in enumerate(flows):
            sends[hosts[f.src]].append((f.start_ns, hosts[f.dst], f.size, k, f.priority))
            expect[hosts[f.dst]] += 1
        for s in sends.values():
            s.sort(key=lambda x: (x[0], x[3]))
        res = await net.run({h: (flow_app, sends[h], expect[h]) for h in hosts})
        t0 = {h: res[h][0] for h in hosts}
        fct = [None] * len(flows)
        for h in hosts:
            for tag, t in res[h][1]:
                f = flows[tag]
                fct[tag] = t - (t0[hosts[f.src]] + f.start_ns)
        if None in fct:
            raise EmuError(f"{fct.count(None)} of {len(flows)} flows did not arrive")
        model = IdealFct(topo)
        ideal = [model(hosts[f.src], hosts[f.dst], f.size) for f in flows]
        out = {**about, **summarise(flows, fct, ideal)}
        if len(flows) <= PER_FLOW_MAX:  # a crafted case: each flow's own figures (a victim beside an incast)
            out["per_flow"] = [{"flow": k, "src": hosts[f.src], "dst": hosts[f.dst], "size": f.size,
                                "start_ns": f.start_ns, "fct_ns": fct[k], "ideal_ns": ideal[k],
                                "slowdown": round(fct[k] / ideal[k], 4)} for k, f in enumerate(flows)]
        if any(getattr(s.spec, "input_queued", False) for s in topo.switches):
            out["ideal_note"] = ("the ideal FCT models output-queued store-and-forward switches; these input-queued "
                                 "routers cut through and hold frames for credit, so a lone flow may beat it or "
                                 "fall short of it (docs/flows.md)")
        return out
    check.__doc__ = {
        "flows": "Flows from a file (--flows FILE: 'src dst priority size start_ns' per line, or the HPCC code's "
                 "flow.txt): FCT and slowdown against the flow alone, by size bucket; goodput.",
        "incast": "Incast: --senders N hosts (default all but one) send --size bytes (default 450KB) to h0 at once; "
                  "FCT and slowdown, goodput.",
        "permutation": "Every host sends --size bytes (default 1MB) to one other (a seeded permutation without "
                       "fixed points); FCT and slowdown, goodput.",
        "alltoall_flows": "Every host sends --size bytes (default 100KB) to every other at once, as independent flows "
                      "(not the alltoall collective); FCT and slowdown, goodput.",
        "poisson": "Poisson flow arrivals per host at --load (one value) of its link for --duration (default 100us), "
                   "sizes from --cdf websearch|hadoop|FILE, destinations uniform; FCT slowdown by size bucket."}[name]
    return check


for _name in TESTS:
    register(_name)(_check(_name))
