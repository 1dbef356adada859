#!/usr/bin/env python3
"""Spec 03's broadcast measurement: the hardware broadcast's time to reach all nodes vs the time
for the same bytes to reach one, and its network load vs a software (store-and-forward) binomial
broadcast.

    python scripts/qsnet_bcast.py [--topos 'fattree:k=4,n=2;fattree:k=4,n=3'] [--sizes 64,1KiB,16KiB,256KiB]
                                  [--out results/qsnet_bcast/]

For each topology and size, from rank 0 (every host a member):

* ``hw all`` -- ``comm.bcast(x, offload="hw")``: the adapters' multicast over the group's tree
  (rooted at the lowest top switch spanning the members), switches combining the ACKs; completion
  is when the last member has the data in memory;
* ``hw one`` -- one put of the same bytes to the farthest rank (time until it is in memory there);
* ``sw binomial`` -- the host software binomial broadcast (``algo="binomial"``).

Load is counted in link crossings (frames on links, every direction) and bytes on links, from the
run's metrics. The model for the hardware broadcast's load: every packet and its combined ACK cross
each link of the tree exactly once, so crossings = 2 x packets x tree links (the tree from
``Topology.group_ports``); the script prints it beside the measurement (equal when nothing was
resent). Links run at QsNet's 20 Gbit/s of data unless a spec sets ``bandwidth_gbps``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import pyplot, write_csv  # noqa: E402

BUF_FROM, BUF_TO = 0x1000_0000, 0x4000_0000


async def put_far(host, rank, size):
    host.mem_write(BUF_FROM, bytes(size))
    t0 = host.now
    r = await host.put(rank, BUF_FROM, BUF_TO, size)
    return r.ok, r.t_ns - t0


async def wait_one(host):
    got = await host.wait_arrivals(1)
    return got[0].t_ns if got else None


def tree_links(t, gid: int) -> int:
    members = len(t.groups[gid])
    return (sum(len(g[gid]) for g in t.group_ports.values() if gid in g) + members) // 2


async def measure(spec: str, size: int) -> dict:
    import emu
    from emu.nodes.collectives.hw import HW_GROUP
    from emu.nodes.collectives.run import check_results, run_collective
    from emu.topologies.registry import build

    t = build(spec if "bandwidth_gbps" in spec else spec + ",bandwidth_gbps=20")
    t.add_group(HW_GROUP, t.host_names())
    n = len(t.hosts)
    count = max(1, size // 4)
    packets = max(1, -(-count * 4 // t.hosts[0].spec.elan.packet_bytes))
    row = {"topology": spec, "nodes": n, "size": count * 4, "tree_root": t.group_roots[HW_GROUP],
           "tree_links": tree_links(t, HW_GROUP)}
    async with emu.Cluster(t) as net:
        hw = await run_collective(net, "bcast", count=count, dtype="float32", offload="hw")
        check_results(hw, count, np.dtype("float32"), "sum", 0, 0)
        far = net.hosts[-1]
        t0 = net.now
        one = await net.run({net.hosts[0]: (put_far, n - 1, count * 4), far: (wait_one,)})
        one_ns = one[far] - t0
        one_links = sum(net.metrics.link_frames.values())
        sw = await run_collective(net, "bcast", count=count, dtype="float32", algo="binomial")
        check_results(sw, count, np.dtype("float32"), "sum", 0, 0)
    row.update(hw_all_ns=hw.completion_ns, hw_one_ns=one_ns, ratio=round(hw.completion_ns / one_ns, 2),
               sw_ns=sw.completion_ns, speedup=round(sw.completion_ns / hw.completion_ns, 2),
               hw_crossings=sum(hw.link_frames.values()), model_crossings=2 * packets * row["tree_links"],
               one_crossings=one_links, sw_crossings=sum(sw.link_frames.values()),
               hw_link_bytes=sum(hw.link_bytes.values()), sw_link_bytes=sum(sw.link_bytes.values()))
    return row


def main(argv=None) -> list[dict]:
    from emu.front.checks import parse_size

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--topos", default="fattree:k=4,n=2;fattree:k=4,n=3")
    ap.add_argument("--sizes", default="64,1KiB,16KiB,256KiB")
    ap.add_argument("--out", default="results/qsnet_bcast")
    a = ap.parse_args(argv)
    rows = []
    cols = ("topology", "nodes", "size", "hw_all_ns", "hw_one_ns", "ratio", "sw_ns", "speedup", "hw_crossings",
            "model_crossings", "sw_crossings", "hw_link_bytes", "sw_link_bytes")
    print(" ".join(f"{c:>15}" for c in cols))
    for spec in [s.strip() for s in a.topos.split(";") if s.strip()]:
        for size in [parse_size(s) for s in a.sizes.split(",")]:
            r = trio.run(measure, spec, size)
            rows.append(r)
            print(" ".join(f"{r[c]:>15,}" if isinstance(r[c], int) else f"{r[c]!s:>15}" for c in cols), flush=True)
    out = pathlib.Path(a.out)
    write_csv(out / "bcast.csv", rows)
    plt = pyplot()
    if plt is None:
        return rows
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    for k, spec in enumerate(dict.fromkeys(r["topology"] for r in rows)):
        sel = [r for r in rows if r["topology"] == spec]
        x = [r["size"] for r in sel]
        ax1.plot(x, [r["hw_all_ns"] for r in sel], "o-", color=f"C{k}", label=f"{spec} hw, all")
        ax1.plot(x, [r["hw_one_ns"] for r in sel], "x--", color=f"C{k}", label=f"{spec} put, one")
        ax1.plot(x, [r["sw_ns"] for r in sel], "s:", color=f"C{k}", label=f"{spec} sw binomial")
        ax2.plot(x, [r["hw_link_bytes"] for r in sel], "o-", color=f"C{k}", label=f"{spec} hw")
        ax2.plot(x, [r["sw_link_bytes"] for r in sel], "s:", color=f"C{k}", label=f"{spec} sw binomial")
    for ax, yl in ((ax1, "completion (ns, virtual)"), (ax2, "bytes on links")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes broadcast")
        ax.set_ylabel(yl)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "bcast.png", dpi=120)
    print(f"wrote {out}/bcast.csv and bcast.png")
    return rows


if __name__ == "__main__":
    main()
