"""``emu run --test gpcnet``: GPCNeT's ``network_load_test`` (github.com/netbench/GPCNET v1.3) in
virtual time, printed in its table layout (docs/jobs.md).

As GPCNeT: the hosts are shuffled (with the run's seed), ``floor(0.8 n)`` of them run congestors, in
four groups -- all-to-all (pairwise exchange, 4 KiB a pair), two-sided incast (4 KiB sends to the
group's rank 0), one-sided incast (4 KiB puts to rank 0, each waited for: ``MPI_Put`` + flush, as
the NICs' put), one-sided broadcast (4 KiB gets from rank 0: GPCNeT's "Get Bcast") -- and the other
20 % run the victims: random-ring two-sided latency (8 B to both ring neighbours, half the time
of an exchange), random-ring two-sided bandwidth with a barrier after each exchange (8
outstanding 128 KiB messages to each neighbour; MiB/s per rank), and an 8-byte allreduce
(latency). Each victim runs isolated, then again while the congestors load the network (they start
first; the victims begin once every congestor group has finished an iteration, and the congestors
stop when the victims are done). Avg is the mean over rings and ranks of each rank's figure over
its iterations; 99% is the 99th percentile of the single iterations (the worst 1 %: the highest
latency, the lowest bandwidth), exact where GPCNeT's comes from a histogram of 100,000 buckets.
The congestion impact factor is congested / isolated (latency) or isolated / congested (bandwidth)
of the figures rounded to one decimal, as GPCNeT computes it.

GPCNeT's loop counts (10,000 x 30 rings of 200 latency exchanges...) run for minutes on a real
machine; here the counts are options (``--gpcnet rings=2,lat_iters=20,...``) with small defaults,
and each row says what it ran.
"""

from __future__ import annotations

import random
from typing import Any

from ..config import ConfigError
from ..errors import EmuError
from .check_registry import Options, register
from .sizes import parse_size

DEFAULTS = {"victims": 0.2, "rings": 2, "lat_iters": 20, "bw_iters": 2, "bw_size": 128 * 1024, "outstanding": 8,
            "ar_iters": 20, "cong_size": 4096}
"""GPCNeT: CONGESTOR_NODE_FRAC 0.8, 128 KiB (16384 doubles) x 8 outstanding, congestors 512 doubles."""
VICTIMS = ("lat", "bw", "ar")
NAMES = {"lat": "RR Two-sided Lat (8 B)", "bw": "RR Two-sided BW+Sync ({} B)", "ar": "Multiple Allreduce (8 B)"}
UNITS = {"lat": "usec", "bw": "MiB/s/rank", "ar": "usec"}
CONGESTORS = ("a2a", "incast", "put_incast", "get_bcast")
T_GO, T_STOP, T_CTL, T_LAT, T_BW, T_A2A, T_INC = (0x6E000000 + i for i in range(7))
MEM_LOCAL, MEM_REMOTE = 0x1000_0000, 0x4000_0000


def gpcnet_options(text: str | None, nhosts: int) -> dict[str, Any]:
    """``--gpcnet KEY=VALUE,...`` over the defaults, checked against the hosts; ConfigError in one line."""
    o = dict(DEFAULTS)
    for item in (text or "").split(","):
        if not item.strip():
            continue
        k, eq, v = item.partition("=")
        k = k.strip()
        if not eq or k not in DEFAULTS:
            raise ConfigError(f"--gpcnet {item!r}: give KEY=VALUE with KEY one of {', '.join(DEFAULTS)}")
        try:
            o[k] = float(v) if k == "victims" else parse_size(v) if k.endswith("size") else int(v)
        except (ValueError, ConfigError):
            raise ConfigError(f"--gpcnet {k}={v}: not a {'share' if k == 'victims' else 'size' if k.endswith('size') else 'whole number'}") from None
        if k != "victims" and o[k] < 1:
            raise ConfigError(f"--gpcnet {k}={v}: give at least 1")
    if not 0 < o["victims"] < 1:
        raise ConfigError(f"--gpcnet victims={o['victims']}: the share of hosts for the victims, within (0, 1)")
    ncong = int((1 - o["victims"]) * nhosts + 1e-9)
    if nhosts - ncong < 2 or ncong < 2 * len(CONGESTORS):
        raise ConfigError(f"gpcnet needs at least 2 victim hosts and {2 * len(CONGESTORS)} congestor hosts (2 per "
                          f"congestor); {nhosts} hosts at victims={o['victims']} give {nhosts - ncong} and {ncong}")
    return o


def split(hosts: list[str], seed: int, o: dict) -> tuple[list[str], list[list[str]]]:
    """(victims, four congestor groups): the hosts shuffled with the seed, the first floor((1-v) n) the
    congestors (in four near-equal blocks), the rest the victims."""
    order = list(hosts)
    random.Random(f"{seed}/gpcnet").shuffle(order)
    ncong = int((1 - o["victims"]) * len(hosts) + 1e-9)
    cong, victims = order[:ncong], order[ncong:]
    k = len(CONGESTORS)
    return victims, [cong[i * ncong // k:(i + 1) * ncong // k] for i in range(k)]


# -- the victims ------------------------------------------------------------------------------------
def _ring(victims: list[str], seed: int, r: int, me: str) -> tuple[str, str]:
    order = list(victims)
    random.Random(f"{seed}/gpcnet/ring/{r}").shuffle(order)
    i = order.index(me)
    return order[i - 1], order[(i + 1) % len(order)]


async def victim_app(host, kind: str, victims: list[str], o: dict, seed: int, leaders: list[str], stop: list[str]):
    """One victim rank: its test (after every congestor group's GO, when there are congestors), then
    STOP to the congestors. Returns [(rank figure, [iteration samples])] per ring/measurement."""
    import numpy as np

    from emu.nodes.collectives.comm import Comm

    comm = Comm(host, victims)
    me = host.name
    if leaders:
        if me == victims[0]:
            for g in leaders:
                await host.recv(g, T_GO)
        await comm.barrier()
    out = []
    if kind == "ar":
        x = np.array([1.0])
        await comm.allreduce(x)  # (GPCNeT's one warm-up iteration)
        samples, t0 = [], host.now
        for _ in range(o["ar_iters"]):
            t = host.now
            await comm.allreduce(x)
            samples.append((host.now - t) / 1e3)
        out.append(((host.now - t0) / 1e3 / o["ar_iters"], samples))
    else:
        for r in range(o["rings"]):
            left, right = _ring(victims, seed, r, me)
            await comm.barrier()
            out.append(await (_lat(host, left, right, o["lat_iters"]) if kind == "lat"
                              else _bw(host, comm, left, right, o)))
    await comm.barrier()
    if me == victims[0]:
        for h in stop:
            await host.send(h, b"\0" * 8, T_STOP)
    return out


async def _lat(host, left: str, right: str, iters: int):
    buf = b"\0" * 8
    samples, t0 = [], 0
    for i in range(-2, iters):  # (GPCNeT warms up with 200 exchanges; 2 here)
        if i == 0:
            t0 = host.now
        t = host.now
        a = await host.isend(left, buf, T_LAT + 2)
        b = await host.isend(right, buf, T_LAT + 1)
        await host.recv(left, T_LAT + 1)
        await host.recv(right, T_LAT + 2)
        await host.wait(a, b)
        if i >= 0:
            samples.append(0.5 * (host.now - t) / 1e3)  # usec, "for the 2 sends"
    return (host.now - t0) / 1e3 / (2 * iters), samples


async def _bw(host, comm, left: str, right: str, o: dict):
    size, k, iters = o["bw_size"], o["outstanding"], o["bw_iters"]
    buf = bytes(size)
    moved = size * 2 * k / (1 << 20)  # MiB per exchange, both neighbours
    samples, t0 = [], 0
    for i in range(-1, iters):
        if i == 0:
            t0 = host.now
        t = host.now
        reqs = []
        for _ in range(k):
            reqs.append(await host.isend(left, buf, T_BW + 2))
            reqs.append(await host.isend(right, buf, T_BW + 1))
        for _ in range(k):
            await host.recv(left, T_BW + 1)
            await host.recv(right, T_BW + 2)
        await host.wait(*reqs)
        await comm.barrier()  # "BW+Sync"
        if i >= 0:
            samples.append(moved / ((host.now - t) / 1e9))
    return moved * iters / ((host.now - t0) / 1e9), samples


# -- the congestors ---------------------------------------------------------------------------------
async def congestor_app(host, kind: str, group: list[str], size: int, victim0: str):
    """One congestor rank: iterations of its pattern until the victims' STOP; two-sided groups stop
    together (rank 0 tells the others after each iteration); rank 1 (one-sided: its first put or get;
    two-sided: rank 0) tells the victims the group is loading the network after the first."""
    me, n = host.name, len(group)
    rank = group.index(me)
    buf = bytes(size)
    two_sided = kind in ("a2a", "incast")
    it = 0
    if not two_sided and rank == 0:  # the target of the puts, the source of the gets: passive
        await host.recv(victim0, T_STOP)
        return it
    if not two_sided:
        host.mem_write(MEM_LOCAL, buf)
    root = host.address(group[0])
    while True:
        if kind == "a2a":
            pof2 = n & (n - 1) == 0
            reqs = []
            for i in range(1, n):
                dst, src = (rank ^ i, rank ^ i) if pof2 else ((rank + i) % n, (rank - i) % n)
                reqs.append(await host.isend(group[dst], buf, T_A2A))
                await host.recv(group[src], T_A2A)
            await host.wait(*reqs)
        elif kind == "incast":
            if rank == 0:
                for _ in range(n - 1):
                    await host.recv(None, T_INC)
            else:
                await host.send(group[0], buf, T_INC)
        elif kind == "put_incast":
            r = await host.put(root, MEM_LOCAL, MEM_REMOTE + rank * size, size)
            if not r.ok:
                raise EmuError(f"gpcnet put incast: {r.error}")
        else:
            r = await host.get(root, MEM_REMOTE, MEM_LOCAL, size)
            if not r.ok:
                raise EmuError(f"gpcnet get bcast: {r.error}")
        it += 1
        if it == 1 and rank == (0 if two_sided else 1):
            await host.send(victim0, b"\0" * 8, T_GO)
        if two_sided:
            if rank == 0:
                done = await host.try_recv(victim0, T_STOP) is not None
                for h in group[1:]:
                    await host.send(h, b"\1" if done else b"\0", T_CTL)
            else:
                done = (await host.recv(group[0], T_CTL)).data == b"\1"
        else:
            done = await host.try_recv(victim0, T_STOP) is not None
        if done:
            return it


# -- the test ---------------------------------------------------------------------------------------
def summarise(kind: str, per_rank: list) -> dict[str, float]:
    """GPCNeT's avg (per measurement, the ranks' mean; then the mean over measurements) and 99%."""
    figs = [[m[0] for m in rank] for rank in per_rank]
    avg = sum(sum(col) / len(col) for col in zip(*figs)) / len(figs[0])
    hires = sorted(s for rank in per_rank for m in rank for s in m[1])
    if kind == "bw":
        hires.reverse()  # the worst 1 %: the lowest bandwidth
    p99 = hires[max(int(0.99 * len(hires)), 1) - 1]
    return {"avg": avg, "p99": p99}


@register("gpcnet")
async def gpcnet(net, options: Options) -> dict[str, Any]:
    """GPCNeT's network_load_test: victims (random-ring latency, random-ring bandwidth+sync, 8-byte allreduce)
    isolated and beside congestors (all-to-all, incast, put incast, get broadcast) on 80 % of the hosts;
    options: --gpcnet victims=,rings=,lat_iters=,bw_iters=,bw_size=,ar_iters=,cong_size=."""
    o = gpcnet_options(options.extra.get("gpcnet"), len(net.hosts))
    victims, groups = split(net.hosts, options.seed, o)
    leaders = [g[0] if k in ("a2a", "incast") else g[1] for k, g in zip(CONGESTORS, groups)]
    stop = [g[0] for k, g in zip(CONGESTORS, groups) if k in ("a2a", "incast")] + \
        [h for k, g in zip(CONGESTORS, groups) if k not in ("a2a", "incast") for h in g]
    rows, end = [], 0
    for kind in VICTIMS:
        row = {"test": NAMES[kind].format(o["bw_size"]), "units": UNITS[kind]}
        for phase in ("isolated", "congested"):
            apps = {h: (victim_app, kind, victims, o, options.seed, [] if phase == "isolated" else leaders,
                        [] if phase == "isolated" else stop) for h in victims}
            if phase == "congested":
                for k, g in zip(CONGESTORS, groups):
                    apps.update({h: (congestor_app, k, g, o["cong_size"], victims[0]) for h in g})
            t0 = net.now
            out = await net.run(apps)
            end += net.now - t0
            s = summarise(kind, [out[h] for h in victims])
            row[f"{phase}_avg"], row[f"{phase}_99"] = round(s["avg"], 3), round(s["p99"], 3)
            if phase == "congested":
                row["congestor_iterations"] = "/".join(str(sum(out[h] for h in g)) for g in groups)
        lat = kind != "bw"
        for f, col in (("avg", "impact_avg"), ("99", "impact_99")):
            a, b = round(row[f"isolated_{f}"], 1), round(row[f"congested_{f}"], 1)
            row[col] = round((b / a if lat else a / b) if min(a, b) > 0 else float("nan"), 1)
        rows.append(row)
    return {"completion_ns": end, "hosts": len(net.hosts), "victims": len(victims),
            "congestors": sum(len(g) for g in groups), **{f"gpcnet_{k}": v for k, v in o.items()},
            "rows": rows, "gpcnet_table": table(rows, len(net.hosts), len(victims), [len(g) for g in groups])}


def table(rows: list[dict], nodes: int, nvictims: int, groups: list[int]) -> str:
    """GPCNeT's printout (non-verbose, 80 columns): the isolated table, the congested one, the key results."""
    outer = "+" + "-" * 78 + "+"
    inner = "+" + "-" * 33 + "+" + ("-" * 14 + "+") * 3
    lines = ["NetworkLoad Tests v1.3", f"  Test with {nodes} MPI ranks ({nodes} nodes)",
             f"  {nvictims} nodes running Network Tests",
             f"  {sum(groups)} nodes running Congestion Tests (min {min(groups)} nodes per congestor)", "",
             "  Legend", "   RR = random ring communication pattern", "   Lat = latency", "   BW = bandwidth",
             "   BW+Sync = bandwidth with barrier"]
    for phase, head in (("isolated", f"| {'':27.27s}{'Isolated Network Tests':22.22s}{'':27.27s} |"),
                        ("congested", f"| {'':16.16s}{'Network Tests running with Congestion Tests':43.43s}{'':17.17s} |")):
        lines += [outer, head, inner, f"| {'Name':>31.31s} | {'Avg':>12.12s} | {'99%':>12.12s} | {'Units':>12.12s} |", inner]
        for r in rows:
            lines += [f"| {r['test']:>31.31s} | {r[phase + '_avg']:12.1f} | {r[phase + '_99']:12.1f} | {r['units']:>12.12s} |",
                      inner]
        lines.append("")
    bar = "+" + "-" * 33 + "+" + "-" * 22 + "+" + "-" * 21 + "+"
    lines += [outer, f"| {'':9.9s}{'Network Tests running with Congestion Tests - Key Results':57.57s}{'':10.10s} |",
              "+" + "-" * 33 + "+" + "-" * 44 + "+", f"| {'Name':>31.31s} | {'Congestion Impact Factor':>42.42s} |", bar,
              f"| {'':>31.31s} | {'Avg':>20.20s} | {'99%':>19.19s} |", bar]
    for r in rows:
        lines += [f"| {r['test']:>31.31s} | {r['impact_avg']:19.1f}X | {r['impact_99']:18.1f}X |", bar]
    return "\n".join(lines)
