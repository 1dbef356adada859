"""``emu run --test put|get``: QsNet memory-based communication (spec 03), checked byte for byte.

Every rank writes a seeded pattern of ``--size`` bytes into its memory; rank i then puts it to (or
gets it from) rank i + n/2 (mod n), all at once: a bisection pattern. Reported beside the
measurement, the model of one adapter's bandwidth: packets of ``elan.packet_bytes`` of data carry
the 24-byte transaction header, their segment headers and trailer (``emu.wire.qsnet.packet_bytes``)
the modelled length of each on the link (``link.framing``: on ``qsnet:`` the packet alone, elsewhere with the
emulator's Ethernet/fabric envelope and FCS), at the host link's rate, times the node's links (``rails=2``: packets striped over both networks).
Before that, a lone 8-byte put from rank 0 to rank n-1 gives the latency.
"""

from __future__ import annotations

import random
from typing import Any

from ..config import ConfigError
from ..errors import EmuError
from .check_registry import Options, register
from .sizes import parse_size

BASE_LOCAL = 0x1000_0000
BASE_REMOTE = 0x4000_0000


def pattern(seed: int, rank: int, size: int) -> bytes:
    return random.Random(seed * 7919 + rank).randbytes(size)


def model_gbps(net, size: int) -> float:
    """Data bandwidth of one adapter (Gbit/s) by the packet model, at its link's rate, times its
    links (multi-rail: packets striped over one link to each network)."""
    from emu.wire import PacketType
    from emu.wire.qsnet import TXN_LEN, packet_bytes

    spec = net.topology.hosts[0].spec.elan
    rate = net.topology.links[0].spec.bandwidth_bps
    wire = 0
    left = size
    while True:
        n = min(left, spec.packet_bytes)
        wire += net.topology.links[0].spec.frame_bytes(PacketType.QPKT, packet_bytes(TXN_LEN + n))
        left -= n
        if left <= 0:
            break
    rails = max(1, net.topology.nports(net.topology.hosts[0].name))
    return round(size * rate / wire / 1e9 * rails, 3)


async def _lone_put(host, peer):
    host.mem_write(BASE_LOCAL, b"\x5a" * 8)
    t0 = host.now
    r = await host.put(peer, BASE_LOCAL, BASE_REMOTE, 8)
    return r.ok, r.t_ns - t0


async def _wait(host, n):
    return await host.wait_arrivals(n)


async def _pair(host, kind, peer, size, data):
    host.mem_write(BASE_LOCAL, data)
    t0 = host.now
    if kind == "put":
        r = await host.put(peer, BASE_LOCAL, BASE_REMOTE, size)
        got = None
    else:
        r = await host.get(peer, BASE_LOCAL, BASE_REMOTE, size)
        got = host.mem_read(BASE_REMOTE, size)
    if kind == "put":
        await host.wait_arrivals(1)
        got = host.mem_read(BASE_REMOTE, size)
    return r.ok, r.error, r.t_ns - t0, r.resent, got


def put_size(extra: dict) -> int:
    """The bytes each rank puts or gets (``--size``, default 64KiB); out of 1 B..1 GiB is refused
    (the CLI asks before anything starts)."""
    size = parse_size(extra.get("size") or "64KiB")
    if not 1 <= size <= 1 << 30:
        raise ConfigError(f"--size {extra.get('size')}: put and get move 1 B..1 GiB per rank; give e.g. --size 64KiB")
    return size


def _check(kind: str):
    async def check(net, options: Options) -> dict[str, Any]:
        hosts = net.hosts
        n = len(hosts)
        if n < 2:
            raise EmuError(f"{kind} needs at least 2 hosts")
        size = put_size(options.extra)
        lone = await net.run({hosts[0]: (_lone_put, n - 1), hosts[-1]: (_wait, 1)})
        ok, latency = lone[hosts[0]]
        if not ok:
            raise EmuError("the 8-byte put from rank 0 did not complete")
        apps = {}
        for i, h in enumerate(hosts):
            apps[h] = (_pair, kind, (i + n // 2) % n, size, pattern(options.seed, i, size))
        res = await net.run(apps)
        times, resent = [], 0
        for i, h in enumerate(hosts):
            ok, err, dt, rs, got = res[h]
            if not ok:
                raise EmuError(f"{h}: {kind} failed: {err}")
            # a put brings rank (i - n/2)'s pattern here; a get brings rank (i + n/2)'s
            src = (i - n // 2) % n if kind == "put" else (i + n // 2) % n
            if got != pattern(options.seed, src, size):
                raise EmuError(f"{h}: the {size} bytes in memory are not rank {src}'s pattern")
            times.append(dt)
            resent += rs
        gbps = [size * 8 / t for t in times]
        return {"ranks": n, "size_bytes": size, "latency_8B_ns": latency, "time_max_ns": max(times),
                "bw_mean_gbps": round(sum(gbps) / n, 3), "bw_min_gbps": round(min(gbps), 3),
                "model_gbps": model_gbps(net, size), "packets_resent": resent, "result": "every byte right"}
    check.__doc__ = (f"QsNet {kind}: rank i {'puts to' if kind == 'put' else 'gets from'} rank i+n/2, "
                     "every byte checked; bandwidth beside the packet model. Options: size.")
    return check


register("put")(_check("put"))
register("get")(_check("get"))
