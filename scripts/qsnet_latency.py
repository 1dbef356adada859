#!/usr/bin/env python3
"""Spec 03's latency figure: a lone put across a ``qsnet:`` network, beside its model.

    python scripts/qsnet_latency.py [--nodes 32,512,2048] [--sizes 8,1024] [--set switch.routing=static ...]

The source: "routing a packet across a router costs under 40 ns; 1 KiB crosses a network of 32-2048
nodes in 40-200 ns, plus 300-400 ns to write to memory at the destination". Rank 0 puts ``size``
bytes to rank n-1 (the farthest: across the top stage where there is one) on an idle network; the
put completes when its ACK is back. Printed per run:

* ``put_ns`` -- the put's completion time seen by rank 0 (issue to ACK, what ``host.put`` returns);
* ``model_ns`` -- the same from the model: the adapter's issue time, then one-way for the packet
  and back for its ACK token, each ``hops`` links of ``latency`` plus ``hops - 1`` routers of
  ``route_ns``, the head segment's time on each link (cut-through at segment granularity: a router
  forwards a packet once its first segment is in), the packet's remaining segments once (its tail
  follows its head), ``nic_delay_ns`` at each adapter and the target's memory write
  (``elan.mem_write_ns``) before the ACK goes;
* ``cross_ns`` -- the part the source quotes: the packet's crossing from its first bit on the
  source's link to its last bit in the target adapter (links, routers, segments), without the
  adapter, memory write or ACK.

The model is exact for an idle network with ``switch.model=input_queued`` and ``cut_through``;
``--set switch.model=output_queued,switch.cut_through=false`` (store-and-forward) is modelled too.
"""

from __future__ import annotations

import argparse
import sys

import trio

LOCAL, REMOTE = 0x1000_0000, 0x4000_0000


def ser(nbytes: int, bps: int) -> int:
    return -((-nbytes * 8_000_000_000) // bps)


def model(t, size: int) -> dict:
    """The lone put's figures from the topology's specs (see the module text)."""
    from emu.wire import PacketType
    from emu.wire.qsnet import ACK, TXN_LEN, packet_bytes

    host = t.hosts[0].spec
    link = t.links[0].spec
    sw = t.switches[0].spec
    hops = t.diameter
    bps = link.bandwidth_bps
    route = sw.stages_ns[0] + sum(sw.stages_ns[1:]) if sw.input_queued else sw.processing_delay_ns
    cut = sw.cut_through
    ack_n = link.frame_bytes(PacketType.QACK, ACK.size)
    elan = host.elan
    n_pkt = -(-size // elan.packet_bytes) if size else 1
    last = size - (n_pkt - 1) * elan.packet_bytes
    pkt_n = link.frame_bytes(PacketType.QPKT, packet_bytes(TXN_LEN + last))
    unit = sw.flit_bytes if sw.input_queued else pkt_n

    def one_way(n: int) -> int:
        head = ser(min(unit, n), bps) if cut else ser(n, bps)
        return hops * (link.latency_ns + head) + (hops - 1) * route + (ser(n, bps) - head if cut else 0)

    cross = one_way(pkt_n)
    nic = host.nic_delay_ns
    total = elan.issue_ns + nic + cross + elan.mem_write_ns + nic + one_way(ack_n)
    return {"hops": hops, "route_ns": route, "packet_bytes": pkt_n, "cross_ns": cross, "model_ns": total,
            "seg_ns": ser(min(unit, pkt_n), bps)}


async def lone_put(host, to: int, size: int):
    host.mem_write(LOCAL, bytes(i & 0xFF for i in range(size)))
    t0 = host.now
    r = await host.put(to, LOCAL, REMOTE, size)
    return r.ok, r.t_ns - t0


async def _wait(host):
    return await host.wait_arrivals(1)


async def measure(spec: str, size: int, settings: dict | None = None) -> dict:
    import emu
    from emu.topologies.registry import build

    t = build(spec, settings=settings)
    m = model(t, size)
    async with emu.Cluster(t, direct=True) as net:
        hs = net.hosts
        res = await net.run({hs[0]: (lone_put, len(hs) - 1, size), hs[-1]: (_wait,)})
    ok, dt = res[hs[0]]
    if not ok:
        raise SystemExit(f"{spec}: the {size}-byte put failed")
    return {"nodes": len(t.hosts), "size": size, "put_ns": dt, **m}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--nodes", default="32,512,2048", help="node counts, comma-separated")
    ap.add_argument("--sizes", default="8,1024", help="put sizes in bytes, comma-separated")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                    help="any setting, as emu run --set")
    a = ap.parse_args(argv)
    from emu.config import ConfigError, parse_settings

    try:
        nodes = [int(x) for x in a.nodes.split(",")]
        sizes = [int(x) for x in a.sizes.split(",")]
        settings = parse_settings(a.set)
    except (ValueError, ConfigError) as e:
        print(f"qsnet_latency: {e} (e.g. --nodes 32,512 --sizes 8,1024)", file=sys.stderr)
        return 2
    print("source: a router < 40 ns; 1 KiB crosses 32-2048 nodes in 40-200 ns, + 300-400 ns to write memory")
    print(f"{'nodes':>6} {'size':>6} {'hops':>4} {'put_ns':>7} {'model_ns':>8} {'cross_ns':>8} {'seg_ns':>6} {'pkt_B':>6}")
    for n in nodes:
        for s in sizes:
            try:
                r = trio.run(measure, f"qsnet:nodes={n}", s, settings)
            except ConfigError as e:
                print(f"qsnet_latency: {e}", file=sys.stderr)
                return 2
            print(f"{r['nodes']:>6} {s:>6} {r['hops']:>4} {r['put_ns']:>7} {r['model_ns']:>8} {r['cross_ns']:>8} "
                  f"{r['seg_ns']:>6} {r['packet_bytes']:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
