#!/usr/bin/env python3
"""Spec 04's sparse measurements: the sparse in-network allreduce against dense and host software.

    python scripts/inc_sparse.py [--densities 0.2,0.1,0.01] [--length 65536] [--overlap 0]
                                 [--scale source] [--buckets 512] [--out results/inc_sparse/]

Part 1, one switch (``star:n=--ports``): int32 vectors of ``--length`` at each density, summed in the
switch with hash tables + spill buffers at the leaves (here: the one switch is the root, so also with
``store=array`` everywhere and a two-level tree to have leaves), against the dense in-network allreduce
and the SparCML-style host allreduce (split allgather: each rank's partition of the index space
reduced from pairs, then gathered; a message goes dense when that is smaller): completion, bytes on
links, the switches' peak working memory, spilled (unaggregated) bytes -- the extra traffic of the
hash store, which grows with density. ``--overlap``: the share of each host's non-zero indices
drawn from a pool common to all hosts (0: each host's own; 1: the same everywhere).

Part 2, at scale (the source's 64 hosts, ``--scale source``: the closest tree of real 8-port
switches, ``fattree:k=4,n=3``, since two levels of them hold 32 hosts at full bisection; the output
says so): gradient-like float32 data -- one value per bucket of ``--buckets`` elements at a random
place in it (density 1/buckets, about 0.2 %; with ``--overlap``, that share of the buckets has its
value at the same place on every host) -- dense host ring, dense in-network, sparse host (split
allgather), sparse in-network: completion and the bytes that crossed the network, each against
dense in-network and sparse host. Every result is checked against numpy.

Beside each measurement, the model:

* ``model_link_bytes``, sparse in-network: what an ideal aggregation sends -- every link up carries,
  per block, the union of the non-zeros of the hosts below it (in shards of a packet's pairs; an
  empty block as one empty shard), every link down the block's result non-zeros -- computed from the
  data over the reduction tree. Arrays everywhere meet it exactly (without loss); the hash stores'
  spill is the difference. Dense: every link carries every block once each way.
* ``model_store_peak``: the working memory a switch's sparse stores take at most -- a window of blocks
  at the root, each an array of the span (a leaf's hash table of twice a packet's pairs plus a spill
  buffer of one packet is smaller), beside the measured peak over the switches (``inc_store_peak``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import pyplot, scale_specs, write_csv  # noqa: E402

from emu.wire import HDR_LEN  # noqa: E402
from emu.wire.fabric import FCS_LEN  # noqa: E402

HDR = HDR_LEN + FCS_LEN  # per frame on the wire besides the INC header and the payload

METHODS = ("dense host", "dense switch", "sparse host", "sparse switch (hash leaves)", "sparse switch (arrays)")


def data(rank: int, length: int, density: float | None, buckets: int | None, dtype, overlap: float = 0.0):
    """A host's non-zeros. Density data: ``emu.nodes.collectives.run.make_sparse_input`` (what ``emu
    run --density D --overlap O`` uses). Buckets: one value per bucket, at a place common to all
    hosts in the first ``overlap`` share of the buckets, at a random place of its own elsewhere."""
    if not buckets:
        from emu.nodes.collectives.run import make_sparse_input

        return make_sparse_input(length, rank, length, dtype, density, overlap)
    rng = np.random.default_rng([rank, length])
    nb = length // buckets
    common = round(overlap * nb)
    place = np.concatenate([np.random.default_rng([length, 0x5EED]).integers(0, buckets, common),
                            rng.integers(0, buckets, nb - common)])
    idx = np.arange(0, nb * buckets, buckets) + place
    vals = (rng.integers(1, 50, len(idx)) if np.dtype(dtype).kind == "i" else rng.standard_normal(len(idx)))
    return idx, vals.astype(dtype)


async def app(host, method, length, density, buckets, dtype, span, overlap):
    from emu.nodes.collectives.comm import Comm

    c = Comm(host)
    idx, vals = data(c.rank, length, density, buckets, dtype, overlap)
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


async def measure(spec: str, method: str, length: int, density, buckets, dtype: str, span, overlap: float = 0.0) -> dict:
    import emu
    from emu.topologies import build

    t = build(spec)
    t.add_manager()
    n = len(t.hosts)
    async with emu.Cluster(t) as net:
        await net.run({h: (app, method, length, density, buckets, dtype, span, overlap) for h in net.hosts})  # setup
        res = await net.run({h: (app, method, length, density, buckets, dtype, span, overlap) for h in net.hosts})
        m = net.metrics
        stats = {s["name"]: s for s in await net.stats()}
    ref = np.zeros(length, np.float64)
    for r in range(n):
        i, v = data(r, length, density, buckets, dtype, overlap)
        np.add.at(ref, i, v.astype(np.float64))
    y = res[t.host_names()[0]][0]
    per = np.dtype(dtype).itemsize
    pairs = 1024 // (4 + per)
    if method.startswith("sparse switch"):
        model_bytes = ideal_bytes(t, [data(r, length, density, buckets, dtype, overlap)[0] for r in range(n)], length, span,
                                  pairs, 4 + per)
        model_block = span * per  # the root's array (a leaf's hash store is smaller: 3 x pairs x pair bytes)
    elif method == "dense switch":
        nb = -(-length // (1024 // per))
        root, tree = t.spanning_tree(t.host_names())
        model_bytes = 2 * (n + len(tree) - 1) * (nb * (HDR + 16) + length * per)
        model_block = 0
    else:
        model_bytes = model_block = 0
    assert np.allclose(y.astype(np.float64), ref, rtol=1e-4, atol=1e-3), f"{spec} {method}: wrong result"
    return dict(topology=spec, hosts=n, method=method, density=density if not buckets else round(1 / buckets, 5),
                length=length, completion_ns=m.completion_ns, link_bytes=sum(m.link_bytes.values()),
                peak_working_memory=max(s.get("pu", {}).get("peak_working_memory", 0) for s in stats.values()),
                spill_bytes=sum(s["engine"].get("inc_spill_bytes", 0) for s in stats.values()),
                algo=res[t.host_names()[0]][1], model_link_bytes=model_bytes, model_block_bytes=model_block,
                store_peak=max(s["engine"].get("inc_store_peak", 0) for s in stats.values()),
                model_store_peak=model_block * min(-(-length // span) if span else 1, _window(res[t.host_names()[0]][1])))


def _window(algo: str) -> int:
    return int(algo.rsplit("window ", 1)[1].rstrip(")")) if "window " in algo else 1


def ideal_bytes(t, indices: list, length: int, span: int, pairs: int, pair_bytes: int) -> int:
    """Bytes on the links of an ideal sparse aggregation over the reduction tree (see the docstring)."""
    hosts = t.host_names()
    root, tree = t.spanning_tree(hosts)
    nb = t.neighbours()
    blocks = -(-length // span)

    def frames_bytes(idx: np.ndarray) -> int:  # one block set: shards per block, empty blocks one shard
        per_block = np.bincount(np.unique(idx) // span, minlength=blocks)
        return int(np.maximum(1, -(-per_block // pairs)).sum() * (HDR + 16) + per_block.sum() * pair_bytes)

    def below(sw: str) -> list[int]:
        ranks = []
        for p in tree[sw][1]:
            v = next(v for q, v, _vp, _l in nb[sw] if q == p)
            ranks += [hosts.index(v)] if v in hosts else below(v)
        return ranks

    union = np.unique(np.concatenate(indices))
    total = sum(frames_bytes(i) for i in indices) + len(hosts) * frames_bytes(union)  # host links up and down
    for sw, (parent, _children) in tree.items():
        if parent is not None:  # the link to its parent: its subtree's union up, the result down
            total += frames_bytes(np.concatenate([indices[r] for r in below(sw)])) + frames_bytes(union)
    return total


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--densities", default="0.2,0.1,0.01")
    ap.add_argument("--length", type=int, default=65536)
    ap.add_argument("--leaves", default="fattree:k=4,n=2", help="a two-level tree: hash stores at its leaves")
    ap.add_argument("--scale", default="source",
                    help="';'-separated topologies; source: the closest tree of 8-port switches to the source's 64 hosts")
    ap.add_argument("--overlap", type=float, default=0.0,
                    help="share of each host's non-zero indices common to all hosts (0..1)")
    ap.add_argument("--buckets", type=int, default=512)
    ap.add_argument("--scale-length", type=int, default=1 << 18)
    ap.add_argument("--out", default="results/inc_sparse")
    a = ap.parse_args(argv)
    rows = []
    cols = ("topology", "method", "density", "completion_ns", "link_bytes", "model_link_bytes", "spill_bytes",
            "store_peak", "model_store_peak")
    w = {"topology": 24, "method": 28}
    print(" ".join(f"{c:>{w.get(c, 17)}}" for c in cols))

    def show(r):
        print(" ".join(f"{r[c]:>{w.get(c, 17)},}" if isinstance(r[c], int) else f"{r[c]!s:>{w.get(c, 17)}}"
                       for c in cols), flush=True)

    for d in [float(x) for x in a.densities.split(",")]:
        span = max(128, int(128 / d))  # a block's non-zeros fill about one packet of 128 int32 pairs
        for method in METHODS:
            r = trio.run(measure, a.leaves, method, a.length, d, None, "int32", span, a.overlap)
            rows.append(r)
            show(r)
    for spec in scale_specs(a.scale):
        mine = []
        for method in METHODS[:4]:
            r = trio.run(measure, spec, method, a.scale_length, None, a.buckets, "float32", a.buckets * 128, a.overlap)
            mine.append(r)
            show(r)
        rows += mine
        by = {r["method"]: r for r in mine}
        for method in ("sparse switch (hash leaves)", "sparse host", "dense host"):
            r = by[method]
            print(f"{spec}, {method} ({r['algo']}): time x{r['completion_ns'] / by['dense switch']['completion_ns']:.2f} "
                  f"and traffic x{r['link_bytes'] / by['dense switch']['link_bytes']:.3f} of dense in-network; "
                  f"x{r['completion_ns'] / by['sparse host']['completion_ns']:.2f} and "
                  f"x{r['link_bytes'] / by['sparse host']['link_bytes']:.3f} of sparse host", flush=True)
    out = pathlib.Path(a.out)
    write_csv(out / "inc_sparse.csv", rows)
    plt = pyplot()
    if plt is not None:
        groups = sorted({(r["topology"], r["density"]) for r in rows}, key=lambda g: (g[0] != a.leaves, -g[1]))
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
        width = 0.8 / len(METHODS)
        for k, method in enumerate(METHODS):
            for ax, col in zip(axes, ("completion_ns", "link_bytes")):
                ys = [next((r[col] for r in rows if (r["topology"], r["density"]) == g and r["method"] == method), 0)
                      for g in groups]
                ax.bar([i + k * width for i in range(len(groups))], [y / (1e3 if col == "completion_ns" else 1e6)
                                                                      for y in ys], width, label=method)
        for ax, label in zip(axes, ("completion (us)", "bytes on links (MB)")):
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))],
                          [f"{g[0].split(':')[0]}\n{g[1]:.3g}" for g in groups])
            ax.set_ylabel(label)
            ax.set_yscale("log")
        axes[0].legend(fontsize=7)
        fig.suptitle("sparse allreduce: host vs switch, dense vs sparse, hash vs array (per density)")
        fig.tight_layout()
        fig.savefig(out / "inc_sparse.png", dpi=120)
    print(f"wrote {out}/inc_sparse.csv" + (" and inc_sparse.png" if plt is not None else ""))
    return rows


if __name__ == "__main__":
    main()
