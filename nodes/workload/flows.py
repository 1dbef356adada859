"""Flow workloads as plain data (issue 47, item 4): a flow is ``size`` bytes from host ``src`` to host
``dst`` (host indices, in address order) starting at ``start_ns``, on traffic class ``priority``;
the front door (``emu.front.flow_checks``) runs each as one host message.

* :func:`incast` -- ``senders`` hosts to one receiver, all at once;
* :func:`permutation` -- every host to one other, by a seeded permutation without fixed points;
* :func:`all_to_all` -- every host to every other, all at once (n (n - 1) independent flows; not the
  ``alltoall`` collective);
* :func:`poisson` -- Poisson arrivals per host at a given load of its link, sizes from a flow-size
  CDF, destinations uniform among the other hosts: the HPCC code's ``traffic_gen.py``
  (alibaba-edu/High-Precision-Congestion-Control), seeded;
* :func:`parse_flows` -- a flow file (below); :func:`parse_cdf` -- a CDF file.

**Flow file.** One flow per line, ``src dst priority size start_ns`` (hosts by index or by name, the
priority a traffic class 0..7 -- the frames' ``prio``, as the HPCC code's ``pg`` --, the size in bytes, the start in ns); ``#`` starts a comment, blank
lines are skipped. The HPCC code's own ``flow.txt`` is read as it is: a first line holding only the
number of flows, then ``src dst priority dport size start_s`` (the destination port is ignored, the
start in seconds). A bad line is refused in one line naming the file, the line and the fix.

**CDF.** Points ``size percent`` (percent from 0 to 100, both columns strictly increasing, the first
at 0 % and the last at 100 %), sampled by linear interpolation between points and the mean by the
trapezoid rule, as the HPCC code's ``custom_rand.py``. Built in: ``websearch`` (the web search
workload of the DCTCP paper, Alizadeh et al., SIGCOMM 2010, Fig. 4) and ``hadoop`` (Facebook's Hadoop
cluster, Roy et al., SIGCOMM 2015), as the points of the HPCC code's ``WebSearch_distribution.txt`` and
``FbHdp_distribution.txt``.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from emu.config import ConfigError

WEBSEARCH = ((0, 0), (10000, 15), (20000, 20), (30000, 30), (50000, 40), (80000, 53), (200000, 60),
             (1000000, 70), (2000000, 80), (5000000, 90), (10000000, 97), (30000000, 100))
HADOOP = ((0, 0), (100, 1), (200, 2), (300, 5), (350, 15), (400, 20), (500, 30), (600, 40), (700, 50),
          (1000, 60), (2000, 67), (7000, 70), (30000, 72), (50000, 82), (80000, 87), (120000, 90),
          (300000, 95), (1000000, 97.5), (2000000, 99), (10000000, 100))
CDFS = {"websearch": WEBSEARCH, "hadoop": HADOOP}


@dataclass(frozen=True)
class Flow:
    src: int
    """Sending host's index (address order)."""
    dst: int
    """Receiving host's index."""
    priority: int
    """Traffic class: the frames' VC byte (routers map it to their VCs)."""
    size: int
    """Bytes of data (the message's; headers come on top)."""
    start_ns: int
    """When the sender hands it to its NIC, from the test's start."""


@dataclass(frozen=True)
class Cdf:
    name: str
    points: tuple[tuple[float, float], ...]

    def mean(self) -> float:
        """The mean flow size (trapezoid rule over the points, bytes)."""
        return sum((x0 + x1) / 2 * (y1 - y0) for (x0, y0), (x1, y1) in zip(self.points, self.points[1:])) / 100

    def size(self, u: float) -> int:
        """The size at percentile ``100 u`` (``u`` in [0, 1)), interpolated; at least 1 byte."""
        y = u * 100
        pts = self.points
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if y <= y1:
                return max(1, int(x0 + (x1 - x0) / (y1 - y0) * (y - y0)))
        return max(1, int(pts[-1][0]))


def check_cdf(name: str, points) -> Cdf:
    """A :class:`Cdf` of ``points`` (ConfigError naming ``name`` unless they make one)."""
    pts = tuple((float(x), float(y)) for x, y in points)
    if len(pts) < 2 or pts[0][1] != 0 or pts[-1][1] != 100:
        raise ConfigError(f"{name}: a CDF runs from 0 % to 100 % over two points or more (lines 'size percent'); "
                          f"it has {len(pts)} point(s){f' from {pts[0][1]:g} % to {pts[-1][1]:g} %' if pts else ''}")
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if not (x1 > x0 and y1 > y0):
            raise ConfigError(f"{name}: the point {x1:g} {y1:g} does not follow {x0:g} {y0:g}; sizes and percents "
                              "must both increase from line to line")
    if pts[0][0] < 0:
        raise ConfigError(f"{name}: a flow size of {pts[0][0]:g} bytes; sizes are >= 0")
    return Cdf(name, pts)


def _fields(text: str):
    """(line number, fields) of each line that is not blank or a comment."""
    for no, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            yield no, line.split()


def parse_cdf(text: str, name: str) -> Cdf:
    """A CDF file's text (``name``: the file, for messages)."""
    pts = []
    for no, f in _fields(text):
        try:
            if len(f) != 2 or not all(_SECONDS.match(t) for t in f):
                raise ValueError
            x, y = float(f[0]), float(f[1])
            if not (math.isfinite(x) and math.isfinite(y)):
                raise ValueError
        except ValueError:
            raise ConfigError(f"{name}:{no}: {' '.join(f)!r} is not 'size percent' (two numbers: bytes, and the "
                              "percent of flows up to that size, 0..100); fix or remove the line") from None
        pts.append((x, y))
    return check_cdf(name, pts)


def cdf_named(name: str) -> Cdf:
    return check_cdf(name, CDFS[name])


_SECONDS = re.compile(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?\Z")


def _uint(tok: str) -> bool:
    """A whole number in ASCII digits (``str.isdigit`` also takes '²' and other scripts' digits)."""
    return tok.isascii() and tok.isdigit()


def _host(tok: str, hosts: list[str], index: dict[str, int]) -> int | None:
    if tok in index:
        return index[tok]
    if _uint(tok) and int(tok) < len(hosts):
        return int(tok)
    return None


def parse_flows(text: str, name: str, hosts: list[str], max_bytes: int = 1 << 32) -> list[Flow]:
    """A flow file's text (module docstring) over ``hosts`` (names in address order); flows in the
    file's order. ``max_bytes``: the largest message a host accepts."""
    index = {h: i for i, h in enumerate(hosts)}
    lines = list(_fields(text))
    hpcc = bool(lines) and len(lines[0][1]) == 1
    if hpcc:
        no, (count,) = lines.pop(0)
        if not _uint(count):
            raise ConfigError(f"{name}:{no}: {count!r} is not a number of flows (an HPCC flow file starts with the "
                              "count alone); give the count, or leave the line out of a 'src dst priority size "
                              "start_ns' file")
        if int(count) != len(lines):
            raise ConfigError(f"{name}:{no}: the file says {count} flows and holds {len(lines)}; correct the count")
    want = ("src dst priority dport size start_s" if hpcc else "src dst priority size start_ns")
    flows = []
    for no, f in lines:
        def bad(what: str, fix: str):
            return ConfigError(f"{name}:{no}: {what}; {fix}")
        if len(f) != len(want.split()):
            raise bad(f"{len(f)} fields, not the {len(want.split())} of '{want}'", f"write the line as '{want}'")
        src, dst = _host(f[0], hosts, index), _host(f[1], hosts, index)
        for tok, h in ((f[0], src), (f[1], dst)):
            if h is None:
                raise bad(f"no host {tok!r}", f"give a host index 0..{len(hosts) - 1} or a name ({hosts[0]}...)")
        if src == dst:
            raise bad(f"a flow from {hosts[src]} to itself", "give another destination")
        size_tok, start_tok = (f[4], f[5]) if hpcc else (f[3], f[4])
        if not _uint(f[2]) or int(f[2]) > 7:
            raise bad(f"priority {f[2]!r} is not a traffic class", "give 0..7")
        if not _uint(size_tok) or not 1 <= int(size_tok) <= max_bytes:
            raise bad(f"size {size_tok!r} is not a byte count", f"give 1..{max_bytes} (host.max_message_bytes)")
        try:
            if not (_SECONDS.match(start_tok) if hpcc else _uint(start_tok)):
                raise ValueError
            start = float(start_tok) * 1e9 if hpcc else int(start_tok)
            if not math.isfinite(start) or start >= 2**62:
                raise ValueError
        except ValueError:
            unit = "seconds, e.g. 2.000001" if hpcc else "whole ns, e.g. 1500"
            raise bad(f"start {start_tok!r} is not a time", f"give a start >= 0 in {unit}") from None
        flows.append(Flow(src, dst, int(f[2]), int(size_tok), round(start)))
    if not flows:
        raise ConfigError(f"{name}: no flows; write one per line as '{want}'")
    if hpcc:  # HPCC's files start at 2 s (traffic_gen's base_t): measure from the first flow
        t0 = min(fl.start_ns for fl in flows)
        flows = [Flow(fl.src, fl.dst, fl.priority, fl.size, fl.start_ns - t0) for fl in flows]
    return flows


def derangement(n: int, seed: int) -> list[int]:
    """A permutation of range(n) without fixed points, drawn from ``seed`` (shuffles until one has
    none: about e tries)."""
    rng = random.Random(f"{seed}:randperm:{n}")
    p = list(range(n))
    while True:
        rng.shuffle(p)
        if all(d != i for i, d in enumerate(p)):
            return p


def incast(n: int, senders: int, size: int, receiver: int = 0, priority: int = 0) -> list[Flow]:
    """``senders`` hosts (those after the receiver in address order, wrapping) to ``receiver``, all at 0."""
    if not 1 <= senders <= n - 1:
        raise ConfigError(f"--senders {senders}: an incast on {n} hosts has 1..{n - 1} senders")
    return [Flow((receiver + 1 + i) % n, receiver, priority, size, 0) for i in range(senders)]


def permutation(n: int, size: int, seed: int, priority: int = 0) -> list[Flow]:
    return [Flow(i, d, priority, size, 0) for i, d in enumerate(derangement(n, seed))]


def all_to_all(n: int, size: int, priority: int = 0) -> list[Flow]:
    """Host i sends to i+1, i+2, ... (mod n) in that order, every flow at 0."""
    return [Flow(i, (i + k) % n, priority, size, 0) for i in range(n) for k in range(1, n)]


def poisson(n: int, load: float, cdf: Cdf, duration_ns: int, link_bps: int, seed: int,
            priority: int = 0) -> list[Flow]:
    """Each host starts flows at exponential intervals of mean ``8 mean_size / (link_bps load)`` (so
    that its flows' bytes offer ``load`` of its link) until ``duration_ns``, each to a uniform other
    host with a size drawn from ``cdf``; a generator per host seeded by ``seed``. Sorted by start."""
    gap = cdf.mean() * 8e9 / (link_bps * load)
    out = []
    for i in range(n):
        rng = random.Random(f"{seed}:poisson:{i}")
        t = 0.0
        while True:
            t += -math.log(1 - rng.random()) * gap
            if t > duration_ns:
                break
            d = rng.randrange(n - 1)
            d += d >= i
            out.append(Flow(i, d, priority, cdf.size(rng.random()), int(t)))
    out.sort(key=lambda f: (f.start_ns, f.src))
    return out


__all__ = ["CDFS", "Cdf", "Flow", "all_to_all", "cdf_named", "check_cdf", "derangement", "incast", "parse_cdf",
           "parse_flows", "permutation", "poisson"]
