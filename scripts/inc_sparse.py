#!/usr/bin/env python3
"""Spec 04's sparse measurements: the sparse in-network allreduce against dense and host software.

    python scripts/inc_sparse.py [--densities 0.2,0.1,0.01] [--length 65536] [--ports 8]
                                 [--scale twolevel:ports=8,hosts=64] [--buckets 512] [--out results/inc_sparse/]

Part 1, one switch (``star:n=--ports``): int32 vectors of ``--length`` at each density, summed in the
switch with hash tables + spill buffers at the leaves (here: the one switch is the root, so also with
``store=array`` everywhere and a two-level tree to have leaves), against the dense in-network allreduce
and the SparCML-style host allreduce: completion, bytes on links, the switches' peak working memory,
spilled (unaggregated) bytes -- the extra traffic of the hash store, which grows with density.

Part 2, at scale (the source's 64 hosts): gradient-like float32 data -- one value per bucket of
``--buckets`` elements at a random place in it (density 1/buckets, about 0.2 %) -- dense host ring,
dense in-network, sparse host (recursive doubling on pairs), sparse in-network: completion and the
bytes that crossed the network. Every result is checked against numpy.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import write_csv  # noqa: E402

METHODS = ("dense host", "dense switch", "sparse host", "sparse switch (hash leaves)", "sparse switch (arrays)")


def data(rank: int, length: int, density: float | None, buckets: int | None, dtype):
    rng = np.random.default_rng([rank, length])
    if buckets:  # gradient-like: one value per bucket
        idx = np.arange(0, length, buckets) + rng.integers(0, buckets, length // buckets)
    else:
        idx = np.sort(rng.choice(length, max(1, int(length * density)), replace=False))
    vals = (rng.integers(1, 50, len(idx)) if np.dtype(dtype).kind == "i" else rng.standard_normal(len(idx)))
    return idx, vals.astype(dtype)


async def app(host, method, length, density, buckets, dtype, span):
    from nodes.collectives.comm import Comm

    c = Comm(host)
    idx, vals = data(c.rank, length, density, buckets, dtype)
    if method.startswith("dense"):
        x = np.zeros(length, dtype)
        x[idx] = vals
        y = await c.allreduce(x, "sum", "ring" if method == "dense host" else None,
                              offload="switch" if method == "dense switch" else None)
    else:
        c.inc_store = "array" if "arrays" in method else "auto"
        y = await c.allreduce_sparse(idx, vals, length, offload=None if method == "sparse host" else "switch",
                                     span=span)
    return y, c.last_algo


async def measure(spec: str, method: str, length: int, density, buckets, dtype: str, span) -> dict:
    import emu
    from topologies import build

    t = build(spec)
    t.add_manager()
    n = len(t.hosts)
    async with emu.Cluster(t) as net:
        await net.run({h: (app, method, length, density, buckets, dtype, span) for h in net.hosts})  # setup
        res = await net.run({h: (app, method, length, density, buckets, dtype, span) for h in net.hosts})
        m = net.metrics
        stats = {s["name"]: s for s in await net.stats()}
    ref = np.zeros(length, np.float64)
    for r in range(n):
        i, v = data(r, length, density, buckets, dtype)
        np.add.at(ref, i, v.astype(np.float64))
    y = res[t.host_names()[0]][0]
    assert np.allclose(y.astype(np.float64), ref, rtol=1e-4, atol=1e-3), f"{spec} {method}: wrong result"
    return dict(topology=spec, hosts=n, method=method, density=density if not buckets else round(1 / buckets, 5),
                length=length, completion_ns=m.completion_ns, link_bytes=sum(m.link_bytes.values()),
                peak_working_memory=max(s.get("pu", {}).get("peak_working_memory", 0) for s in stats.values()),
                spill_bytes=sum(s["engine"].get("inc_spill_bytes", 0) for s in stats.values()),
                algo=res[t.host_names()[0]][1])


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--densities", default="0.2,0.1,0.01")
    ap.add_argument("--length", type=int, default=65536)
    ap.add_argument("--leaves", default="fattree:k=4,n=2", help="a two-level tree: hash stores at its leaves")
    ap.add_argument("--scale", default="twolevel:ports=8,hosts=64")
    ap.add_argument("--buckets", type=int, default=512)
    ap.add_argument("--scale-length", type=int, default=1 << 18)
    ap.add_argument("--out", default="results/inc_sparse")
    a = ap.parse_args(argv)
    rows = []
    cols = ("topology", "method", "density", "completion_ns", "link_bytes", "peak_working_memory", "spill_bytes")
    print(" ".join(f"{c:>28}" for c in cols))

    def show(r):
        print(" ".join(f"{r[c]:>28,}" if isinstance(r[c], int) else f"{r[c]!s:>28}" for c in cols), flush=True)

    for d in [float(x) for x in a.densities.split(",")]:
        span = max(128, int(128 / d))  # a block's non-zeros fill about one packet of 128 int32 pairs
        for method in METHODS:
            r = trio.run(measure, a.leaves, method, a.length, d, None, "int32", span)
            rows.append(r)
            show(r)
    for spec in [s.strip() for s in a.scale.split(";") if s.strip()]:
        for method in METHODS[:4]:
            r = trio.run(measure, spec, method, a.scale_length, None, a.buckets, "float32", a.buckets * 128)
            rows.append(r)
            show(r)
    write_csv(pathlib.Path(a.out) / "inc_sparse.csv", rows)
    print(f"wrote {a.out}/inc_sparse.csv")
    return rows


if __name__ == "__main__":
    main()
