"""Named tests ``emu run --test NAME`` runs on a cluster (DESIGN.md principle 8).

A test is ``async def test(net, options) -> dict`` of test-specific figures; it raises to fail.
The runner adds the run's common figures (completion time, frames, bytes, hop count) from
``net.metrics``. Register more with :func:`register`; later mechanisms add theirs.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import EmuError

CheckFn = Callable[[Any, "Options"], Awaitable[dict[str, Any]]]
CHECKS: dict[str, CheckFn] = {}


@dataclass(frozen=True)
class Options:
    seed: int = 0
    pingall_full_max_hosts: int = 64
    """Above this many hosts, pingall samples pairs instead of trying all of them."""
    pingall_peers: int = 4
    """Peers per host when sampling."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckResult:
    name: str
    ok: bool
    completion_ns: int | None
    frames: int
    bytes: int
    hop_count: int
    figures: dict[str, Any]
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "ok": self.ok, "completion_ns": self.completion_ns, "frames": self.frames,
             "bytes": self.bytes, "hop_count": self.hop_count, **self.figures}
        if self.error:
            d["error"] = self.error
        return d


def register(name: str) -> Callable[[CheckFn], CheckFn]:
    def deco(fn: CheckFn) -> CheckFn:
        CHECKS[name] = fn
        return fn
    return deco


async def run_check(net, name: str, options: Options) -> CheckResult:
    fn = CHECKS.get(name)
    if fn is None:
        raise EmuError(f"unknown test {name!r}; known: {', '.join(sorted(CHECKS))}")
    try:
        figures = await fn(net, options)
        ok, error = True, None
    except EmuError as e:
        figures, ok, error = {}, False, f"{type(e).__name__}: {e}"
    m = net.metrics
    if m is None:
        return CheckResult(name, ok, None, 0, 0, 0, figures, error)
    return CheckResult(name, ok, m.completion_ns if ok else None, m.frames, m.bytes, m.hop_count,
                       {**figures, "max_queue_frames": m.max_queue_frames}, error)


async def _ping_list(host, peers):
    return [await host.ping(p) for p in peers]


@register("pingall")
async def pingall(net, options: Options) -> dict[str, Any]:
    """Every host pings every other host (a sample of peers beyond ``pingall_full_max_hosts``);
    all hosts start together and ping their peers one after the other."""
    hosts = net.hosts
    n = len(hosts)
    if n <= options.pingall_full_max_hosts:
        peers = {h: [p for p in hosts if p != h] for h in hosts}
        sampled = None
    else:
        rng = random.Random(options.seed)
        k = min(options.pingall_peers, n - 1)
        peers = {}
        for i, h in enumerate(hosts):
            others = rng.sample(range(n - 1), k)
            peers[h] = [hosts[j if j < i else j + 1] for j in others]
        sampled = f"{k} random peers per host ({n} hosts > {options.pingall_full_max_hosts})"
    res = await net.run({h: (_ping_list, ps) for h, ps in peers.items()})
    rtts = [r for h in hosts for r in res[h]]
    out = {"pairs": len(rtts), "rtt_min_ns": min(rtts), "rtt_max_ns": max(rtts),
           "rtt_mean_ns": round(sum(rtts) / len(rtts), 1)}
    if sampled:
        out["sampled"] = sampled
    return out
