"""How big a topology will be, from its parameters alone, before anything is built.

Closed forms per family (hosts, switches, links, routing-table entries: one per switch and
destination host), and the limits a spec must stay within on this machine. The estimate of a spec
that builds equals the built topology's counts exactly (``tests/test_config.py``); a spec past a
limit is refused at once, with the estimate and the limit, instead of running for minutes or
dying of a MemoryError.

Limits (override them for bigger machines with the environment variables named):

* ``EMU_MAX_ELEMENTS`` (default: the open-file hard limit less 512, at most 50,000): every
  element owns a UDP socket;
* ``EMU_MAX_ROUTE_ENTRIES`` (default 5e7: about 400 MB of tables, a few seconds to build);
* memory: the estimate (``BYTES_PER_ENTRY`` per table entry, ``BYTES_PER_ELEMENT`` per element)
  must stay within half of the memory available (``MemAvailable`` in ``/proc/meminfo``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from emu.config import ConfigError
from emu.config.numbers import decimal_float, hint

BYTES_PER_ENTRY = 9
"""A routing-table entry: a pointer in a list of small ints (measured: 8.4 B with list overhead)."""
BYTES_PER_ELEMENT = 40_000
"""An element at run time: its engine, ports, socket and buffers (measured on fattree:k=4,n=5)."""


@dataclass(frozen=True)
class Estimate:
    hosts: int
    switches: int
    links: int
    route_entries: int

    @property
    def elements(self) -> int:
        return self.hosts + self.switches

    @property
    def bytes(self) -> int:
        return self.route_entries * BYTES_PER_ENTRY + self.elements * BYTES_PER_ELEMENT


def _tree(k: int, n: int, halves: int) -> Estimate:
    nh = halves * k ** n
    sw = (halves * (n - 1) + 1) * k ** (n - 1)
    links = nh + (n - 1) * halves * k ** n
    return Estimate(nh, sw, links, sw * nh)


def estimate(family: str, p: dict) -> Estimate | None:
    """The counts of ``family`` with parameters ``p``; None where the family's own checks will refuse
    the parameters anyway, with a message of their own (or for a family without a closed form)."""
    try:
        if family == "star":
            n = p["n"]
            return Estimate(n, 1, n, n) if 2 <= n <= 4096 else None
        if family == "fattree":
            k, n = p["k"], p["n"]
            if not (2 <= k <= 64 and 1 <= n <= 8) or k ** n > 65536:
                return None
            return _tree(k, n, 1)
        if family == "clos":
            r, s, nodes = p["radix"], p["stages"], p.get("nodes")
            if not (4 <= r <= 128 and r % 2 == 0 and 1 <= s <= 5):
                return None
            m = r // 2
            if nodes is None:
                return None if r * m ** (s - 1) > 65536 else _tree(m, s, 2)
            ns = -(-nodes // m)
            return Estimate(nodes, ns + m, nodes + ns * m, (ns + m) * nodes)
        if family == "twolevel":
            ports, h = p["ports"], p["hosts"]
            sp = p.get("spines") or ports
            leaves = -(-h // ports)
            if leaves == 1:
                return Estimate(h, 1, h, h)
            return Estimate(h, leaves + sp, h + leaves * sp, (leaves + sp) * h)
        if family == "qsnet":
            from .qsnet import MAX_NODES, figures

            nodes, bis, rails, links = p["nodes"], p.get("bisection", 1.0), p.get("rails", 1), p.get("links", 1)
            if not (1 <= rails <= 8 and 1 <= links <= 8) or not 2 <= nodes <= MAX_NODES // links \
                    or bis not in (1.0, 0.5):
                return None
            f = figures(nodes, bis, rails, links)
            return Estimate(nodes, f["switches"], f["links"], f["switches"] * nodes)
        if family in ("mesh", "torus"):
            k, n = p["k"], p["n"]
            if not (2 <= k <= 256 and 1 <= n <= 4) or k ** n > 65536:
                return None
            size = k ** n
            inner = n * k ** n if family == "torus" else n * (k - 1) * k ** (n - 1)
            return Estimate(size, size, size * p.get("ports", 1) + inner, size * size)
        if family == "dragonfly":
            pp = p["p"]
            a = p.get("a") or 2 * pp
            h = p.get("h") or pp
            g = p.get("g") or a * h + 1
            if not (1 <= pp <= 64 and 1 <= a <= 128 and 1 <= h <= 64 and 2 <= g <= a * h + 1) or g * a * pp > 65536:
                return None
            hosts, routers = g * a * pp, g * a
            return Estimate(hosts, routers, hosts + g * a * (a - 1) // 2 + g * a * h // 2, routers * hosts)
        if family == "hyperx":
            S, L, K, T = p["S"], p["L"], p.get("K", 1), p.get("T", 1)
            if not (2 <= S <= 64 and 1 <= L <= 4 and 1 <= K <= 8 and 1 <= T <= 64) or S ** L * T > 65536:
                return None
            n = S ** L
            return Estimate(n * T, n, n * T + L * S ** (L - 1) * S * (S - 1) // 2 * K, n * n * T)
        if family == "slimfly":
            q = p["q"]
            if not 3 <= q <= 29 or q % 4 not in (1, 3):
                return None
            k = (3 * q - (1 if q % 4 == 1 else -1)) // 2
            pp = p.get("p") or -(-k // 2)
            n = 2 * q * q
            return Estimate(n * pp, n, n * pp + n * k // 2, n * n * pp)
    except (KeyError, TypeError):
        return None
    return None


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        v = int(decimal_float(raw))  # (decimal, as every number given as text: 5e7 or 50000000)
    except (ValueError, OverflowError):
        raise ConfigError(f"{name}={raw!r} is not a number{hint(raw)}") from None
    if v < 1:
        raise ConfigError(f"{name} must be >= 1, got {v}")
    return v


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def limits() -> dict[str, int]:
    """The limits in force: elements, routing-table entries, bytes."""
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        files = 50_000 if hard == resource.RLIM_INFINITY else max(64, min(50_000, hard - 512))
    except ImportError:
        files = 50_000
    avail = _available_bytes()
    return {"elements": _env_int("EMU_MAX_ELEMENTS", files),
            "route_entries": _env_int("EMU_MAX_ROUTE_ENTRIES", 50_000_000),
            "bytes": avail // 2 if avail else 1 << 62}


def check(spec: str, est: Estimate | None) -> None:
    """Refuse ``spec`` if its estimate is past a limit (ConfigError naming the estimate and the limit)."""
    if est is None:
        return
    lim = limits()
    size = (f"{spec} would have {est.hosts:,} hosts and {est.switches:,} switches ({est.elements:,} elements), "
            f"{est.route_entries:,} routing-table entries, about {est.bytes / 2**30:.1f} GiB")
    if est.elements > lim["elements"]:
        raise ConfigError(f"{size}: over the limit of {lim['elements']:,} elements (one socket each; "
                          "EMU_MAX_ELEMENTS raises it); choose a smaller topology")
    if est.route_entries > lim["route_entries"]:
        raise ConfigError(f"{size}: over the limit of {lim['route_entries']:,} routing-table entries "
                          "(EMU_MAX_ROUTE_ENTRIES raises it); choose a smaller topology")
    if est.bytes > lim["bytes"]:
        raise ConfigError(f"{size}: over half of the memory available ({lim['bytes'] / 2**30:.1f} GiB); "
                          "choose a smaller topology")
