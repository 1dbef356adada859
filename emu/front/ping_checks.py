"""The test ``pingall``: every host pings every other host."""

from __future__ import annotations

import random
from typing import Any

from .check_registry import Options, register


async def _ping_list(host, peers):
    return [await host.ping(p) for p in peers]


@register("pingall")
async def pingall(net, options: Options) -> dict[str, Any]:
    """Every host pings every other host, all starting together (beyond 64 hosts: 4 random peers each).

    Each host pings its peers one after the other; ``pingall_full_max_hosts`` and ``pingall_peers``
    set when and how it samples."""
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
