#!/usr/bin/env python3
"""Spec 03's user-level priority: a small put's latency under bulk load, with and without priority.

    python scripts/qsnet_priority.py [--nodes 32] [--bulk 6] [--bulk-size 64KiB] [--at 5000]
                                     [--set SECTION.FIELD=VALUE ...]

``--bulk`` nodes (ranks 1..bulk) each stream one put of ``--bulk-size`` to the last rank (packets of
``elan.packet_bytes``, up to ``elan.window`` outstanding each): the routers on the way and the last
rank's link are busy with 1 KiB packets. ``--at`` ns later rank 0 puts 8 bytes to the same rank,
once at priority 0 and once at ``priority=1`` (``host.put(..., priority=1)``: its packet carries the
priority bit in its segment and fabric headers). Printed for each: the small put's latency (issue to
ACK, ``host.put``) beside the idle model (``scripts/qsnet_latency.py``), and what it waited for:

* at priority 0 it queues behind the bulk packets ahead of it on every contended port and in the
  routers' allocators (round robin with the bulk inputs), a bulk packet's time each;
* at priority 1 it goes first wherever frames wait: at the adapter's port (its credit queues), in
  the routers' VC allocators (a VC at the next router that holds no frame, so it queues behind no
  bulk packet) and switch allocators; and into a bulk packet already on the line at its next segment
  boundary (``emu.segcut``, ``emu.switch.iqcut``): at most one segment's time (``seg_ns``) per
  contended hop, against a whole bulk packet's (``bulk_pkt_ns``) without the cut.

The ACK tokens are high priority in both runs (the source's). Default: ``qsnet:nodes=32``; every figure
is virtual time, the same on every run.
"""

from __future__ import annotations

import argparse
import sys

import trio

LOCAL, REMOTE = 0x1000_0000, 0x4000_0000


async def bulk(host, to: int, size: int):
    host.mem_write(LOCAL, bytes(i & 0xFF for i in range(size)))
    r = await host.put(to, LOCAL, REMOTE + host.rank * size, size)
    return r.ok, host.now


async def small(host, to: int, at: int, prio: int):
    host.mem_write(LOCAL, b"\x5a" * 8)
    await host.sleep(at)
    t0 = host.now
    r = await host.put(to, LOCAL, REMOTE - 8, 8, priority=prio)
    return r.ok, r.t_ns - t0


async def measure(spec: str, bulk_nodes: int, bulk_size: int, at: int, prio: int, settings: dict | None = None) -> dict:
    import emu
    from emu.topologies.registry import build

    t = build(spec, settings=settings)
    n = len(t.hosts)
    if not 1 <= bulk_nodes <= n - 2:
        raise SystemExit(f"qsnet_priority: --bulk must be within 1..{n - 2} on {n} nodes")
    async with emu.Cluster(t, direct=True) as net:
        hs = net.hosts
        apps = {hs[i]: (bulk, n - 1, bulk_size) for i in range(1, bulk_nodes + 1)}
        apps[hs[0]] = (small, n - 1, at, prio)
        res = await net.run(apps)
    ok, dt = res[hs[0]]
    if not ok or not all(res[hs[i]][0] for i in range(1, bulk_nodes + 1)):
        raise SystemExit(f"{spec}: a put failed")
    return {"latency_ns": dt, "bulk_done_ns": max(res[hs[i]][1] for i in range(1, bulk_nodes + 1))}


def models(spec: str, settings: dict | None) -> dict:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from qsnet_latency import model, ser

    from emu.topologies.registry import build

    t = build(spec, settings=settings)
    idle = model(t, 8)
    big = model(t, t.hosts[0].spec.elan.packet_bytes)
    bps = t.links[0].spec.bandwidth_bps
    return {"idle_ns": idle["model_ns"], "bulk_pkt_ns": ser(big["packet_bytes"], bps),
            "seg_ns": ser(min(256, big["packet_bytes"]), bps), "hops": idle["hops"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--bulk", type=int, default=6, help="nodes streaming bulk puts to the last node")
    ap.add_argument("--bulk-size", default="64KiB", help="bytes of each bulk put")
    ap.add_argument("--at", type=int, default=5000, help="ns into the bulk load when the small put is issued")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    a = ap.parse_args(argv)
    from emu.config import ConfigError, parse_settings
    from emu.front.sizes import parse_size

    try:
        size = parse_size(a.bulk_size)
        settings = parse_settings(a.set)
        spec = f"qsnet:nodes={a.nodes}"
        m = models(spec, settings)
    except (ValueError, ConfigError) as e:
        print(f"qsnet_priority: {e}", file=sys.stderr)
        return 2
    print(f"{spec}: {a.bulk} nodes put {size} bytes each to rank {a.nodes - 1}; rank 0 puts 8 bytes there "
          f"{a.at} ns in")
    print(f"model: idle 8-byte put {m['idle_ns']} ns; a bulk packet on the line {m['bulk_pkt_ns']} ns, "
          f"a segment {m['seg_ns']} ns; {m['hops']} hops")
    rows = []
    for prio in (0, 1):
        r = trio.run(measure, spec, a.bulk, size, a.at, prio, settings)
        rows.append(r)
        bound = m["idle_ns"] + m["hops"] * m["seg_ns"]
        what = (f"model: <= idle + {m['hops']} hops x seg_ns = {bound} ns; a whole bulk packet a hop would be "
                f"{m['idle_ns'] + m['hops'] * m['bulk_pkt_ns']}" if prio
                else "waits behind the bulk packets queued ahead")
        print(f"  priority={prio}: {r['latency_ns']:>6} ns  (idle + {r['latency_ns'] - m['idle_ns']} ns; {what})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
