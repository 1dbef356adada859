#!/usr/bin/env python3
"""Spec 04's sparse measurements: the sparse in-network allreduce against dense and host software.

    python scripts/inc_sparse.py [--densities 0.2,0.1,0.01] [--length 65536] [--overlap 0]
                                 [--scale source] [--buckets 512] [--scale-length N | --full]
                                 [--parts leaves,scale] [--scale-methods ...] [--out results/inc_sparse/]

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
value at the same place on every host: ``make_sparse_input(bucket=)``, the data of ``emu run --test
allreduce --bucket 512 --overlap O``) -- dense host ring, dense in-network, sparse host (split
allgather), sparse in-network: completion and the bytes that crossed the network, each against
dense in-network and sparse host. Every result is checked against numpy. The source ran 100 MiB per
host: ``--full`` (``--scale-length`` 26,214,400 float32); the default is 1 MiB per host. At the full
size the dense methods are left out unless ``--scale-methods`` names them: each host's operand and
result are 100 MiB (12.8 GiB over 64 hosts) and the dense in-network run moves 6.5 million packets up.

Every row prints the index overlap beside its figures (the sparse comparison depends on it):
``overlap``, the setting, and ``shared``, measured: the share of a host's non-zero indices that
some other host has too (``inc_spill.index_overlap``; at 20 % density and overlap 0, 16 hosts share
96 % of their indices by chance, 4 hosts 49 %). ``leaf_uplink_bytes``: the bytes on the links from
the leaf switches (hash stores) to their parents, beside ``model_leaf_uplink_bytes``, the ideal
there: the extra traffic of spilling where it happens (``scripts/inc_spill.py`` sweeps its
assumptions).

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
from inc_spill import index_overlap  # noqa: E402

from emu.wire import HDR_LEN  # noqa: E402
from emu.wire.fabric import FCS_LEN  # noqa: E402

HDR = HDR_LEN + FCS_LEN  # per frame on the wire besides the INC header and the payload

METHODS = ("dense host", "dense switch", "sparse host", "sparse switch (hash leaves)", "sparse switch (arrays)")


def data(rank: int, length: int, density: float | None, buckets: int | None, dtype, overlap: float = 0.0):
    """A host's non-zeros: ``emu.nodes.collectives.run.make_sparse_input``, what ``emu run --density D
    --overlap O`` uses, or with ``buckets`` what ``emu run --bucket B --overlap O`` uses (one value per
    bucket; ``overlap``: the share of buckets whose value sits at the same place on every host)."""
    from emu.nodes.collectives.run import make_sparse_input

    if not buckets:
        return make_sparse_input(length, rank, length, dtype, density, overlap)
    return make_sparse_input(length, rank, length, dtype, 1 / buckets, overlap, buckets)


async def app(host, method, length, density, buckets, dtype, span, overlap, ref=None):
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
    if ref is not None:  # checked here, not kept: 64 results of 100 MiB would not fit in memory
        return _close(y, ref), c.last_algo
    return y, c.last_algo


def _close(y, ref) -> bool:
    step = 1 << 22
    return all(np.allclose(y[i:i + step].astype(np.float64), ref[i:i + step], rtol=1e-4, atol=1e-3)
               for i in range(0, len(ref), step))


async def measure(spec: str, method: str, length: int, density, buckets, dtype: str, span, overlap: float = 0.0) -> dict:
    import emu
    from emu.topologies import build

    t = build(spec)
    t.add_manager()
    n = len(t.hosts)
    ref = np.zeros(length, np.float64)
    for r in range(n):
        i, v = data(r, length, density, buckets, dtype, overlap)
        np.add.at(ref, i, v.astype(np.float64))
    args = (method, length, density, buckets, dtype, span, overlap, ref)
    async with emu.Cluster(t) as net:
        await net.run({h: (app, *args) for h in net.hosts})  # setup
        res = await net.run({h: (app, *args) for h in net.hosts})
        m = net.metrics
        stats = {s["name"]: s for s in await net.stats()}
    per = np.dtype(dtype).itemsize
    pairs = 1024 // (4 + per)
    indices = [data(r, length, density, buckets, dtype, overlap)[0] for r in range(n)]
    uplink = model_uplink = 0
    if method.startswith("sparse switch"):
        model_bytes, model_uplink, ups = ideal_bytes(t, indices, length, span, pairs, 4 + per, uplinks=True)
        uplink = sum(m.link_bytes.get(p, 0) for p in ups)
        model_block = span * per  # the root's array (a leaf's hash store is smaller: 3 x pairs x pair bytes)
    elif method == "dense switch":
        nb = -(-length // (1024 // per))
        root, tree = t.spanning_tree(t.host_names())
        model_bytes = 2 * (n + len(tree) - 1) * (nb * (HDR + 16) + length * per)
        model_block = 0
    else:
        model_bytes = model_block = 0
    bad = [h for h in t.host_names() if not res[h][0]]
    assert not bad, f"{spec} {method}: wrong result on {', '.join(bad)}"
    return dict(topology=spec, hosts=n, method=method, density=density if not buckets else round(1 / buckets, 5),
                length=length, completion_ns=m.completion_ns, link_bytes=sum(m.link_bytes.values()),
                peak_working_memory=max(s.get("pu", {}).get("peak_working_memory", 0) for s in stats.values()),
                spill_bytes=sum(s["engine"].get("inc_spill_bytes", 0) for s in stats.values()),
                algo=res[t.host_names()[0]][1], model_link_bytes=model_bytes, model_block_bytes=model_block,
                overlap=overlap, shared=round(index_overlap(indices), 3), leaf_uplink_bytes=uplink,
                model_leaf_uplink_bytes=model_uplink,
                store_peak=max(s["engine"].get("inc_store_peak", 0) for s in stats.values()),
                model_store_peak=model_block * min(-(-length // span) if span else 1, _window(res[t.host_names()[0]][1])))


def _window(algo: str) -> int:
    return int(algo.rsplit("window ", 1)[1].rstrip(")")) if "window " in algo else 1


def ideal_bytes(t, indices: list, length: int, span: int, pairs: int, pair_bytes: int, uplinks: bool = False):
    """Bytes on the links of an ideal sparse aggregation over the reduction tree (see the docstring);
    ``uplinks``: also those on the links from the leaf switches (whose children are hosts) to their
    parents, and the names of those links (their sending ports)."""
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
    leaf_up, names = 0, []
    for sw, (parent, children) in tree.items():
        if parent is not None:  # the link to its parent: its subtree's union up, the result down
            up = frames_bytes(np.concatenate([indices[r] for r in below(sw)]))
            total += up + frames_bytes(union)
            if all(next(v for q, v, _vp, _l in nb[sw] if q == p) in hosts for p in children):
                leaf_up += up
                names.append(f"{sw}-p{parent}")
    return (total, leaf_up, names) if uplinks else total


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--densities", default="0.2,0.1,0.01")
    ap.add_argument("--length", type=int, default=65536)
    ap.add_argument("--leaves", default="fattree:k=4,n=2", help="a two-level tree: hash stores at its leaves")
    ap.add_argument("--scale", default="source",
                    help="';'-separated topologies; source: the closest tree of 8-port switches to the source's 64 hosts")
    ap.add_argument("--overlap", type=float, default=0.0,
                    help="share of each host's non-zero indices common to all hosts (0..1)")
    ap.add_argument("--buckets", type=int, default=512)
    ap.add_argument("--scale-length", type=int, default=1 << 18,
                    help="float32 elements per host at scale (default 1 MiB; --full: the source's 100 MiB)")
    ap.add_argument("--full", action="store_true", help="at scale, the source's 100 MiB per host")
    ap.add_argument("--parts", default="leaves,scale", help="leaves (part 1), scale (part 2), or both")
    ap.add_argument("--scale-methods", default=None,
                    help="comma-separated methods at scale (default: all four; with --full the two sparse ones)")
    ap.add_argument("--out", default="results/inc_sparse")
    a = ap.parse_args(argv)
    parts = a.parts.split(",")
    if any(p not in ("leaves", "scale") for p in parts):
        raise SystemExit(f"--parts {a.parts}: leaves, scale or leaves,scale")
    if a.full:
        a.scale_length = 100 * (1 << 20) // 4
    scale_methods = (a.scale_methods.split(",") if a.scale_methods else
                     [m for m in METHODS[:4] if not (a.full and m.startswith("dense"))])
    if any(m not in METHODS[:4] for m in scale_methods):
        raise SystemExit(f"--scale-methods: comma-separated, of {', '.join(METHODS[:4])}")
    if a.buckets < 2 or a.scale_length % a.buckets or not 0 <= a.overlap <= 1:
        raise SystemExit(f"--buckets {a.buckets} >= 2 dividing --scale-length {a.scale_length}; --overlap within 0..1")
    rows = []
    cols = ("topology", "method", "density", "overlap", "shared", "completion_ns", "link_bytes", "model_link_bytes",
            "leaf_uplink_bytes", "model_leaf_uplink_bytes", "spill_bytes", "store_peak", "model_store_peak")
    w = {"topology": 24, "method": 28, "overlap": 7, "shared": 7, "model_leaf_uplink_bytes": 23}
    print(" ".join(f"{c:>{w.get(c, 17)}}" for c in cols))

    def show(r):
        print(" ".join(f"{r[c]:>{w.get(c, 17)},}" if isinstance(r[c], int) else f"{r[c]!s:>{w.get(c, 17)}}"
                       for c in cols), flush=True)

    for d in [float(x) for x in a.densities.split(",")] if "leaves" in parts else []:
        span = max(128, int(128 / d))  # a block's non-zeros fill about one packet of 128 int32 pairs
        for method in METHODS:
            r = trio.run(measure, a.leaves, method, a.length, d, None, "int32", span, a.overlap)
            rows.append(r)
            show(r)
    if "scale" in parts:
        print(f"at scale: {a.scale_length * 4:,} B of float32 per host, one value per bucket of {a.buckets} "
              f"(density {1 / a.buckets:.4%}), overlap {a.overlap}; 100 Gbit/s links (the source's)", flush=True)
    for spec in scale_specs(a.scale) if "scale" in parts else []:
        mine = []
        for method in scale_methods:
            r = trio.run(measure, spec, method, a.scale_length, None, a.buckets, "float32", a.buckets * 128, a.overlap)
            mine.append(r)
            show(r)
        rows += mine
        by = {r["method"]: r for r in mine}
        for method in ("sparse switch (hash leaves)", "sparse host", "dense host"):
            r = by.get(method)
            if r is None or "dense switch" not in by or "sparse host" not in by:
                continue
            print(f"{spec}, overlap {r['overlap']} (shared {r['shared']}), {method} ({r['algo']}): time x{r['completion_ns'] / by['dense switch']['completion_ns']:.2f} "
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
