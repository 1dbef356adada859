"""Open-loop synthetic traffic (issue 29, first part): ``emu run --test uniform --load 0.1,0.5,0.9``
draws a latency-load curve in one command.

A *packet* is one message of ``--size`` bytes (default 256 B) that fits one frame; a *cycle* is the
time that frame occupies a host link (``ceil(8 (size + 50) / rate)`` ns: 25 ns for 256 B at
100 Gbit/s), so a host link carries at most one packet per cycle and a load R (packets per node per
cycle) is also the fraction of the host link's capacity offered. Each cycle every source host starts
a packet with probability R (Bernoulli; a generator per host, seeded by the run's seed, the pattern,
the load and the host: the same figures every run, over any ``--processes``).

The schedule of every host is drawn before the run and handed to its application, which sends each
packet at its time with ``host.send`` and blocks on nothing else: open loop. The packet carries its
creation time and a sequence number; its latency is its arrival time at the receiver
(``Message.t_ns``) less its creation time, source queueing included. ``emu run`` sets
``host.send_overhead_ns=0`` for these tests unless it is given: with the default 300 ns a host could
start only one packet every 12 cycles of 25 ns and would be the bottleneck (the figures then say so in
``note``). After the schedule the application receives every packet sent to it -- it knows how many
from the seeded schedules -- so the run ends when every packet has arrived (the drain).

Windows: ``--warmup`` cycles (default 1000; packets created then are not measured), ``--measure``
cycles (default 1000; packets created then are measured), then the sources keep injecting for another
``--warmup`` cycles, so that measured packets meet the same load until they arrive, and stop. With
``--drain measured`` each source keeps injecting instead until the measured packets sent *to it* have
arrived (at most ``DRAIN_FACTOR`` windows more): it receives between its packets (``emu run`` sets
``host.recv_overhead_ns=0`` then unless given), stops, and tells every host how many packets it sent
there -- n x n count messages, a burst at the end that BookSim's runs do not have: a decision of each
source of its own, not BookSim's drain. ``--drain global`` is BookSim's (``emu.front.traffic_global``):
every source injects until every measured packet anywhere has arrived, then none does, and the run
ends when every packet is in; the count is the harness's, out of band (no frames); the sources stop at
the first cycle at least ``drain_lag_ns`` (the synchroniser's lookahead) after the last measured packet
was counted -- BookSim stops the cycle after -- and it runs in one process only. Past saturation,
either way, the measured packets meet the load until they arrive.
``--to-self``: uniform draws (and hotspot's uniform part) include the source itself, as BookSim's
``uniform`` does (the packet crosses its router). ``--set host.inject_vc=free``: the VC a packet takes
into its router is picked as it starts, as BookSim's source does (``emu.config.HostSpec``).
Accepted throughput counts the packets that arrive within the measurement window.

Patterns (host index i of n, in address order): ``uniform`` (any other host, uniformly),
``transpose`` (n = m*m hosts as an m x m matrix: row r, column c sends to row c, column r; on a power
of four this swaps the high and low halves of the index bits), ``bitcomplement`` (n a power of two:
every index bit inverted, n-1-i), ``hotspot`` (10 % of packets to host 0, the rest uniform; host 0
itself sends uniformly), ``neighbor`` (i+1 mod n; on a mesh or torus the next node along dimension 0,
x+1 mod k: one hop, but on a mesh the last column's packets cross the row back -- a permutation, so no
host receives more than it could), ``worst_case`` (a dragonfly's adversarial pattern: every host of
group G sends to a host of group G+1 mod g, uniformly; minimal routing puts a group's traffic on its
one global link to the next group), and, as BookSim defines them (issue 48), ``tornado`` (halfway
round less one: i + ceil(n/2) - 1 mod n; on a mesh or torus of side k the same along every
dimension, x + ceil(k/2) - 1 mod k), ``shuffle`` (n a power of two: the index bits rotated left by one,
the perfect shuffle) and ``randperm`` (a random permutation without fixed points drawn once per run
from the seed -- every host sends to one host and receives from one). A host whose destination would
be itself (the transpose's diagonal, shuffle's 0 and n-1, tornado on 2 hosts) injects nothing;
throughput is per *source* host.

Beside the measurement, the model: the zero-load latency of each measured packet's path from the
topology (send overhead, NIC delay at both ends, serialisation plus latency of every link, the switches'
processing delays; for an input-queued router its pipeline stages, and with cut-through only its head
flit's serialisation on the link into it), averaged over the same packets. Saturation is the lowest
offered load at which the accepted throughput falls more than 5 % short of the *offered* load by more
than its noise -- the upper bound of its 99.7 % confidence interval (3 standard errors of a Bernoulli
count over the window's source-cycles, sqrt(p(1-p)/(sources x measure))) is below 95 % of the offered
load -- or the mean latency exceeds 3x that model. A window whose 3 standard errors exceed half of
that 5 % cannot resolve the shortfall: the row says so (``saturation_note``) with the ``--measure``
that would. A warm-up shorter than the zero-load latency of the longest measured route (a dragonfly's
detour over two 100-cycle global links) leaves the window counting the network's fill, not its steady
state: the result says so (``warmup_note``) with the ``--warmup`` to give.
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from emu.nodes.collectives.model import HEADERS
from emu.nodes.workload.flows import derangement

from ..config import ConfigError
from ..config.numbers import decimal_float, hint
from ..errors import EmuError
from .check_registry import Options, register
from .sizes import parse_size
from .traffic_draws import DRAW_CYCLES, HEAD, TAG, Draws, receiver
from .traffic_global import ONE_PROCESS, Ledger, global_app
from .traffic_model import PathModel, frame_bytes

PATTERNS = ("uniform", "transpose", "bitcomplement", "hotspot", "neighbor", "worst_case", "tornado", "shuffle",
            "randperm")
DEFAULT_LOADS = (0.1, 0.3, 0.5, 0.7, 0.9)
DEFAULT_SIZE = 256
"""Payload bytes of one packet: with the 50 bytes of headers and FCS, 306 B on the wire, one frame."""
DEFAULT_WARMUP = 1000
DEFAULT_MEASURE = 1000
FRAME_OVERHEAD = HEADERS
"""Ethernet 14, fabric 16, message segment 16 and the FCS around a message's data (the collectives'
model's ``HEADERS``)."""
SHORTFALL = 0.05
LATENCY_FACTOR = 3.0


DRAINS = ("fixed", "measured", "global")
RECEIVING_DRAINS = ("measured", "global")
"""The drains whose sources receive between their packets (``emu run`` and a job set
``host.recv_overhead_ns=0`` for them unless given: a look at what arrived takes no time)."""
DRAIN_FACTOR = 10
"""``--drain measured`` and ``global``: a source injects at most this many windows (warm-up + measurement) past the window."""
TAG_END = 30
"""The tag of a source's last word to each host (``--drain measured``): how many packets it sent there."""
_COUNT = struct.Struct("<q")  # (a TAG_END message's count)


@dataclass(frozen=True)
class TrafficOptions:
    loads: tuple[float, ...]
    size: int
    warmup: int
    measure: int
    drain: str = "fixed"
    to_self: bool = False


def _loads(text) -> tuple[float, ...]:
    if text is None:
        return DEFAULT_LOADS
    items = text if isinstance(text, (list, tuple)) else str(text).split(",")
    out = []
    for item in items:
        try:
            r = float(item) if isinstance(item, (int, float)) else decimal_float(item)  # (text: decimal, emu.config.numbers)
        except ValueError:
            raise ConfigError(f"--load {text}: {item!r} is not a number; give loads in (0, 1], e.g. --load 0.1,0.5,0.9"
                              f"{hint(item)}") from None
        if not (math.isfinite(r) and 0 < r <= 1):
            raise ConfigError(f"--load {text}: {item} is not within (0, 1] (packets per node per cycle, the fraction "
                              "of a host link's capacity)")
        out.append(r)
    if not out:
        raise ConfigError("--load names no load; give e.g. --load 0.1,0.5,0.9")
    if len(set(out)) != len(out):
        raise ConfigError(f"--load {text} names a load twice")
    return tuple(sorted(out))


def traffic_options(extra: dict[str, Any], topo=None) -> TrafficOptions:
    """The traffic tests' options from ``Options.extra`` (ConfigError when out of range); with the
    topology, the packet must also fit one frame of its hosts."""
    size = parse_size(extra.get("size") or str(DEFAULT_SIZE))
    mtu = topo.hosts[0].spec.mtu_bytes if topo is not None else None
    if size < HEAD.size or (mtu is not None and size > mtu):
        raise ConfigError(f"--size {extra.get('size')}: a traffic packet is one frame of {HEAD.size}.."
                          f"{mtu if mtu is not None else 'host.mtu_bytes'} B (it carries its creation time and "
                          "sequence number); give e.g. --size 256B")
    counts = {}
    for key, default in (("warmup", DEFAULT_WARMUP), ("measure", DEFAULT_MEASURE)):
        v = extra.get(key)
        v = default if v is None else v
        if not isinstance(v, int) or not (0 if key == "warmup" else 1) <= v <= 10_000_000:
            raise ConfigError(f"--{key} {v}: cycles within {0 if key == 'warmup' else 1}..10,000,000")
        counts[key] = v
    drain = extra.get("drain") or "fixed"
    if drain not in DRAINS:
        raise ConfigError(f"--drain {drain}: one of {', '.join(DRAINS)}")
    return TrafficOptions(_loads(extra.get("load")), size, counts["warmup"], counts["measure"], drain,
                          bool(extra.get("to_self")))


def check_pattern(pattern: str, n: int) -> None:
    """Refuse a host count the pattern is not defined on (ConfigError: before anything starts)."""
    if n < 2:
        raise ConfigError(f"{pattern} needs at least 2 hosts, the topology has {n}")
    if pattern == "transpose" and math.isqrt(n) ** 2 != n:
        raise ConfigError(f"transpose needs a square host count (m x m; a power of four for the index bits), "
                          f"the topology has {n}")
    if pattern in ("bitcomplement", "shuffle") and n & (n - 1):
        raise ConfigError(f"{pattern} needs a power-of-two host count, the topology has {n}")


def destinations(pattern: str, n: int, grid=None, seed: int = 0):
    """The destination rule: ``fixed`` (a list: host i's only destination, None for none), or None
    for the patterns that draw a destination per packet (``seed``: randperm's permutation)."""
    if pattern == "tornado":
        if grid is not None and grid.size == n:
            k, out = grid.k, []
            for i in range(n):
                d, mul = 0, 1
                for _ in range(grid.n):
                    d += ((i // mul) % k + (k + 1) // 2 - 1) % k * mul
                    mul *= k
                out.append(d)
        else:
            out = [(i + (n + 1) // 2 - 1) % n for i in range(n)]
        return [None if d == i else d for i, d in enumerate(out)]
    if pattern == "shuffle":
        bits = n.bit_length() - 1
        out = [((i << 1) & (n - 1)) | (i >> (bits - 1)) & 1 for i in range(n)]
        return [None if d == i else d for i, d in enumerate(out)]
    if pattern == "randperm":
        return derangement(n, seed)
    if pattern == "transpose":
        m = math.isqrt(n)
        return [None if (i % m) * m + i // m == i else (i % m) * m + i // m for i in range(n)]
    if pattern == "bitcomplement":
        return [n - 1 - i for i in range(n)]
    if pattern == "neighbor":
        if grid is not None and grid.size == n:
            out = []
            for i in range(n):
                x = i % grid.k
                out.append(i - x + (x + 1) % grid.k)
            return out
        return [(i + 1) % n for i in range(n)]
    return None


def schedule(pattern: str, n: int, i: int, load: float, cycles: int, seed: int, grid=None,
             to_self: bool = False, groups=None) -> tuple[list, list]:
    """Host i's injections: (cycles, destination indices), Bernoulli at ``load`` per cycle; ``to_self``:
    the uniform draws take any host, i itself included (BookSim's uniform); ``groups``: each host's
    dragonfly group, for ``worst_case``. (All at once: ``Draws`` draws them a part at a time.)"""
    return Draws(pattern, n, i, load, cycles, seed, destinations(pattern, n, grid, seed), to_self, groups).upto(cycles)


async def traffic_app(host, cycle_ns: int, when: list, dst: list, size: int, expect: int, window: tuple[int, int],
                      measured: int | None = None, names: list[str] | None = None, more: Draws | None = None):
    """Send each packet at its cycle (open loop), then receive the ``expect`` packets sent here.
    Returns (latencies and sources of the packets created in the window, packets that arrived in
    the window, packets received, packets that arrived after a later one of the same source). ``measured`` (``--drain measured``): past the window, inject only
    while fewer than that many packets created in the window have arrived here, then tell every
    host how many packets went to it (tag ``TAG_END``) and receive until each one's count is in.
    ``names``: the hosts the destinations index (default every host; a job's own, ``emu run --job``);
    ``more``: the schedule's draws past ``when`` (drawn as they are reached, ``DRAW_CYCLES`` at a time).

    Per packet, the same requests in the same order as ever (what the figures depend on), with as
    little Python around them as it takes: the calls, tags and bounds in locals, and ``more``'s parts
    walked by a loop of their own rather than through a generator (a resumption per packet)."""
    t0 = host.now
    pad = bytes(size - HEAD.size)
    names = host.hosts if names is None else names
    w0, w1 = t0 + window[0] * cycle_ns, t0 + window[1] * cycle_ns
    lat, src, state = [], [], [0, 0, -1]  # (arrived in the window, late, newest: ``receiver``)
    take = receiver(w0, w1, lat, src, state)
    got = 0
    tag_data = TAG

    sent = [0] * len(names)
    # (per packet: the head and its zero padding packed at once, the calls looked up once, ``now`` read once)
    pack = struct.Struct(f"<qI{size - HEAD.size}x").pack if size >= HEAD.size else lambda t, s: HEAD.pack(t, s) + pad
    send, sleep, arrived_ns, try_recv = host.send, host.sleep, host.arrived_ns, host.try_recv
    wend = window[1]
    seq = 0
    part = (when, dst)
    stop = False
    while True:
        for c, d in zip(*part):
            t = t0 + c * cycle_ns
            now = host.now
            if now < t:
                await sleep(t - now)
            if measured is not None and c >= wend:
                while arrived_ns(tag_data) is not None:  # what has arrived so far: are the measured packets sent here all in?
                    # (a look first, which takes no time: try_recv's None, without its await)
                    m = await try_recv(tag=tag_data)
                    if m is None:
                        break
                    take(m)
                    got += 1
                if len(lat) >= measured:
                    stop = True
                    break
            await send(names[d], pack(t, seq), tag_data)
            sent[d] += 1
            seq += 1
        if stop or more is None or more.done:
            break
        part = more.upto(more.next + DRAW_CYCLES)
    if measured is not None:
        count = _COUNT.pack
        for d, name in enumerate(names):
            await send(name, count(sent[d]), TAG_END)
        expect, ends = 0, 0
        unpack_count = _COUNT.unpack_from
        recv = host.recv
        while ends < len(names) or got < expect:
            m = await recv()
            if m[1] == TAG_END:  # (m.tag)
                ends += 1
                expect += unpack_count(m[2])[0]  # (m.data)
            else:
                take(m)
                got += 1
        return lat, src, state[0], state[1]
    for _ in range(expect):
        take(await host.recv(tag=tag_data))
    return lat, src, state[0], state[1]


def _pct(xs: list[int], p: float) -> int:
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)]


UGAL_COUNTS = ("ugal_minimal", "ugal_detour", "ugal_no_detour")
"""The switches' counters of UGAL's source decisions (``switch.routing.nonminimal``): the minimal route
by the rule, the detour by the rule, and the minimal route with no comparison (the intermediate drawn
is where the frame is or goes)."""


NO_UGAL = frozenset({"static", "minimal", "valiant", "adaptive", "dispersive", "qsnet", "ecmp", "spray"})
"""The built-in routing policies that count no UGAL decision: a network whose switches all route by
one of them has none to read (the traffic tests then skip the two reads of every element's stats)."""


async def _ugal_counts(net) -> dict[str, int]:
    """The network's UGAL decision counters so far (none unless a switch routes by UGAL)."""
    out: dict[str, int] = {}
    if all(getattr(sw.spec, "routing", None) in NO_UGAL for sw in net.topology.switches):
        return out
    for st in await net.stats():
        for k, v in st.get("engine", {}).items():
            if k in UGAL_COUNTS:
                out[k] = out.get(k, 0) + v
    return out


def _check(pattern: str):
    async def check(net, options: Options) -> dict[str, Any]:
        from emu.topologies.grid import grid_of

        hosts = net.hosts
        n = len(hosts)
        check_pattern(pattern, n)
        topo = net.topology
        o = traffic_options(options.extra, topo)
        link = next(lk.spec for lk in topo.links if hosts[0] in (lk.a, lk.b))
        cycle = link.serialization_ns(frame_bytes(link, o.size))
        wire_ns = frame_bytes(link, o.size) * 8e9 / link.bandwidth_bps  # the frame's exact time on the link
        grid = grid_of(topo)
        groups = None
        if pattern == "worst_case":
            groups = [h.info.get("group") for h in topo.hosts]
            if None in groups or max(groups) < 1:
                raise ConfigError(f"worst_case needs a dragonfly of two groups or more (each host's group); "
                                  f"{topo.name} has none: use e.g. --topo dragonfly:p=2")
        model = PathModel(topo, o.size)
        window = (o.warmup, o.warmup + o.measure)
        total = o.warmup * 2 + o.measure
        if o.drain != "fixed":
            total = window[1] + DRAIN_FACTOR * window[1]
        lag = None
        if o.drain == "global":
            if net.run_config.processes > 1:
                raise ConfigError(ONE_PROCESS)
            lag = net.lookahead_ns  # (the synchroniser's window: what a host may not see yet of another's count)
        fixed = destinations(pattern, n, grid, options.seed)
        sources = n if fixed is None else sum(d is not None for d in fixed)
        rows, saturation = [], None
        longest = 0  # the longest zero-load model latency of a measured packet (ns)
        short_window: tuple[float, float, int] | None = None  # (load, its 3 SE, the --measure that resolves it)
        frames = hops = 0
        ugal = await _ugal_counts(net)
        for load in o.loads:
            drain = o.drain != "fixed"
            draws = [Draws(pattern, n, i, load, total, options.seed, fixed, o.to_self, groups) for i in range(n)]
            # (--drain measured and global: the window's injections now, for its counts; the rest as each source
            # reaches them)
            scheds = [dr.upto(window[1] if drain else total) for dr in draws]
            expect = [0] * n
            measured = [0] * n
            injected = 0
            if lag is not None:  # (--drain global: the window's count alone; each schedule's cycles increase)
                for when, _ in scheds:
                    injected += bisect_left(when, window[1]) - bisect_left(when, window[0])
            else:
                for when, dst in scheds:
                    for c, d in zip(when, dst):
                        expect[d] += 1
                        inside = window[0] <= c < window[1]
                        injected += inside
                        measured[d] += inside
            names = None if n == len(topo.hosts) else hosts
            if lag is not None:
                ledger = Ledger(injected, n, lag)
                res = await net.run({h: (global_app, cycle, scheds[i][0], scheds[i][1], o.size, window, names, draws[i],
                                         ledger) for i, h in enumerate(hosts)})
            else:
                res = await net.run({h: (traffic_app, cycle, scheds[i][0], scheds[i][1], o.size, expect[i], window,
                                         measured[i] if drain else None, names, draws[i] if drain else None)
                                     for i, h in enumerate(hosts)})
            lat, arrived, late, newest = [], 0, 0, -1
            for h in hosts:
                ls, _, a, ooo, *last = res[h]
                newest = max([newest, *last])
                lat.extend(ls)
                arrived += a
                late += ooo
            mod, top = model.totals([(h, res[h][1]) for h in hosts])  # (the measured packets' sources per host)
            longest = max(longest, top)
            frames += net.metrics.frames
            hops += net.metrics.hop_count
            if len(lat) != injected:
                raise EmuError(f"load {load}: {injected} packets created in the window, {len(lat)} arrived")
            lat.sort()
            per = sources * o.measure
            row: dict[str, Any] = {"offered": load, "injected": round(injected / per, 4),
                                   "accepted": round(arrived / per, 4),
                                   "capacity": round(arrived / per * wire_ns / cycle, 4),
                                   "packets": len(lat), "out_of_order": late}
            if lag is not None:  # when the last measured packet was counted, when injection stopped, what was sent
                t0 = ledger.t0
                row.update(measured_in_cy=round((ledger.last - t0) / cycle, 2),
                           inject_stop_cy=math.ceil((ledger.last + lag - t0) / cycle), packets_sent=sum(ledger.sent),
                           last_created_cy=(newest - t0) // cycle if newest >= 0 else None)
            now_ugal = await _ugal_counts(net)
            if now_ugal != ugal:  # UGAL's source decisions over this load's run (warm-up, window, drain)
                row.update({k: now_ugal.get(k, 0) - ugal.get(k, 0) for k in UGAL_COUNTS})
                ugal = now_ugal
            if lat:
                mean = sum(lat) / len(lat)
                zero = mod / len(lat)
                row.update(mean_ns=round(mean, 1), p50_ns=_pct(lat, 50), p99_ns=_pct(lat, 99), max_ns=lat[-1],
                           mean_cy=round(mean / cycle, 2), p50_cy=round(_pct(lat, 50) / cycle, 2),
                           p99_cy=round(_pct(lat, 99) / cycle, 2), max_cy=round(lat[-1] / cycle, 2),
                           model_ns=round(zero, 1))
                err = 3 * math.sqrt(load * (1 - load) / per) if 0 < load < 1 else 0.0  # 3 standard errors
                row["accepted_3se"] = round(err, 4)
                short = arrived / per + err < (1 - SHORTFALL) * load
                if saturation is None and (short or mean > LATENCY_FACTOR * zero):
                    saturation = load
                if err > SHORTFALL * load / 2 and not short and short_window is None:
                    # 3 SE <= SHORTFALL*p/2  <=>  measure >= 36 (1-p) / (sources p SHORTFALL^2)
                    short_window = (load, err, math.ceil(36 * (1 - load) / (sources * load * SHORTFALL ** 2)))
            rows.append(row)
        first = rows[0]
        out: dict[str, Any] = {
            "pattern": pattern, "hosts": n, "sources": sources, "size_bytes": o.size, "cycle_ns": cycle,
            "warmup_cycles": o.warmup, "measure_cycles": o.measure, "drain": o.drain,
            **({"drain_lag_ns": lag} if lag is not None else {}), "to_self": o.to_self,
            "zero_load_model_ns": first.get("model_ns"), "lowest_load_mean_ns": first.get("mean_ns"),
            "saturation": (f"at offered {saturation} (accepted > {SHORTFALL:.0%} short of offered beyond 3 standard "
                           f"errors, or mean latency > {LATENCY_FACTOR:g}x the zero-load model)") if saturation is not None
            else f"not reached up to {o.loads[-1]}",
            "saturation_load": saturation, "frames_all_loads": frames, "hop_count_all_loads": hops}
        if short_window is not None and (saturation is None or short_window[0] < saturation):
            out["saturation_note"] = (f"the window of {o.measure} cycles is too short to resolve a {SHORTFALL:.0%} "
                                      f"shortfall at offered {short_window[0]} (3 standard errors "
                                      f"{short_window[1]:.4f}); --measure {short_window[2]} would")
        if o.warmup * cycle < longest:
            out["warmup_note"] = (f"the warm-up of {o.warmup} cycles is shorter than the zero-load latency of the "
                                  f"longest measured route ({math.ceil(longest / cycle)} cycles): the window counts "
                                  "the network filling, and accepted throughput reads low: give --warmup "
                                  f"{max(1000, 4 * math.ceil(longest / cycle))} or more")
        o_ns = topo.hosts[0].spec.send_overhead_ns
        if o_ns > cycle:
            out["note"] = (f"host.send_overhead_ns={o_ns} > cycle {cycle} ns: a host starts at most one packet every "
                           f"{math.ceil(o_ns / cycle)} cycles (the host is the source queue); --set "
                           "host.send_overhead_ns=0 for the network alone")
        out["curve"] = rows
        return out
    check.__doc__ = (f"Open-loop {pattern} traffic: latency (mean, p50, p99, max) and accepted throughput per "
                     "offered load, the saturation point. Options: load, size, warmup, measure.")
    return check


for _name in PATTERNS:
    register(_name)(_check(_name))
