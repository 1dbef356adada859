#!/usr/bin/env python3
"""The sparse hash store's extra traffic against its assumptions (spec 04, issue 44).

    python scripts/inc_spill.py [--densities 0.2,0.1,0.01] [--length 16384] [--children 2,4,8,16,64]
                                [--slots 1,2,4,8] [--overlaps 0,0.5,1] [--full-grid]

A leaf switch's hash store (``switch/aggregate/hashstore.py``, the code the emulated switches run):
per block, ``--children`` hosts' int32 pairs (``make_sparse_input``, what ``emu run --density D
--overlap O`` sends; block span 128 / density, so a host's block fills about one packet of 128
pairs) are folded into a table of ``slots x 128`` slots with a spill buffer of 128 pairs, children
one after the other; a full spill buffer leaves at once, unaggregated. Printed per setting:

* ``spilled``: the share of the pairs in that went to the spill buffer;
* ``extra_uplink``: the leaf's output (spill shards, then the table and the rest of the spill
  buffer, in shards of 128 pairs; every shard with its headers) over the ideal output (the union of
  the children's indices in shards) -- minus 1: the extra traffic on the link to the parent, what
  a switch's spilling costs where it happens;
* ``extra_network``: the same extra bytes over what the whole aggregation moves in the ideal case
  on a two-level tree of ``children`` hosts per leaf and 4 leaves (every host's pairs up, the leaves'
  unions up, the result down to the leaves and to every host): the figure
  ``scripts/inc_sparse.py`` reports (link_bytes over model_link_bytes), diluted by the host links;
* ``overlap`` (the setting: share of each host's indices from a pool common to all) and
  ``shared`` (measured: the share of a host's indices some other child of the leaf has too).

The default is one factor at a time around the emulator's setting (4 hosts per leaf, 2 slots per
pair, overlap 0); ``--full-grid`` runs every combination.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

PAIRS = 128
"""int32 (index, value) pairs per packet: 1 KiB of pairs of 8 bytes."""


def _shard_extra() -> int:
    """Bytes a shard adds on the wire besides its pairs: frame header, INC header, FCS."""
    from emu.wire import HDR_LEN
    from emu.wire.fabric import FCS_LEN
    from emu.wire.inc import DATA_LEN

    return HDR_LEN + DATA_LEN + FCS_LEN


def index_overlap(indices: list[np.ndarray]) -> float:
    """The share of a rank's indices that some other rank has too, averaged over the ranks (each
    rank's indices distinct)."""
    if len(indices) < 2:
        return 0.0
    allidx = np.concatenate(indices)
    if not len(allidx):
        return 0.0
    u, counts = np.unique(allidx, return_counts=True)
    shared = u[counts > 1]
    return float(np.mean([np.isin(i, shared, assume_unique=True).mean() if len(i) else 0.0 for i in indices]))


def shard_bytes(n_pairs: int) -> int:
    """Bytes of ``n_pairs`` pairs leaving in shards of PAIRS (an empty block: one empty shard)."""
    return max(1, -(-n_pairs // PAIRS)) * _shard_extra() + n_pairs * 8


def leaf(children: int, slots: float, overlap: float, density: float, length: int, seed: int = 7) -> dict:
    from emu.nodes.collectives.run import make_sparse_input
    from emu.switch.aggregate import hashstore

    span = max(PAIRS, int(PAIRS / density))
    idx = [make_sparse_input(seed, r, length, "int32", density, overlap)[0] for r in range(children)]
    pairs_in = spilled = out_bytes = ideal_bytes = host_bytes = 0
    for lo in range(0, length, span):
        parts = [i[(i >= lo) & (i < lo + span)] - lo for i in idx]
        h = hashstore.new_store(PAIRS, np.int32, slots)
        spills = []
        for p in parts:
            pairs_in += len(p)
            host_bytes += shard_bytes(len(p))
            spills += hashstore.fold(h, p, np.ones(len(p), np.int32), np.add, PAIRS)
        rest, _ = hashstore.leftovers(h)
        spilled += len(spills) * PAIRS + len(h["si"])
        out_bytes += len(spills) * shard_bytes(PAIRS) + shard_bytes(len(rest))
        ideal_bytes += shard_bytes(len(np.unique(np.concatenate(parts))))
    extra = out_bytes - ideal_bytes
    # the ideal on a two-level tree of 4 such leaves: hosts up, leaves' unions up, the result (about
    # the union of the 4 leaves, taken as 4 x a leaf's union at most the span) down to the leaves and hosts
    result_bytes = min(4 * ideal_bytes, shard_bytes(0) * -(-length // span) + length * 8)
    network = 4 * (host_bytes + ideal_bytes) + (4 + 4 * children) * result_bytes
    return dict(children=children, slots_per_pair=slots, overlap=overlap, density=density, span=span,
                shared=round(index_overlap(idx), 3), spilled=round(spilled / max(1, pairs_in), 3),
                extra_uplink=round(extra / ideal_bytes, 3), extra_network=round(4 * extra / network, 4))


COLS = ("density", "children", "slots_per_pair", "overlap", "shared", "spilled", "extra_uplink", "extra_network")


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--densities", default="0.2,0.1,0.01")
    ap.add_argument("--length", type=int, default=16384)
    ap.add_argument("--children", default="2,4,8,16,64", help="hosts per leaf switch (the emulator's tree: 4)")
    ap.add_argument("--slots", default="1,2,4,8", help="hash-table slots per pair of a packet (the emulator's: 2)")
    ap.add_argument("--overlaps", default="0,0.5,1", help="share of each host's indices common to all (default 0)")
    ap.add_argument("--full-grid", action="store_true", help="every combination, not one factor at a time")
    a = ap.parse_args(argv)
    try:
        dens = [float(x) for x in a.densities.split(",")]
        kids = [int(x) for x in a.children.split(",")]
        slots = [float(x) for x in a.slots.split(",")]
        overs = [float(x) for x in a.overlaps.split(",")]
    except ValueError:
        raise SystemExit("--densities, --children, --slots, --overlaps: comma-separated numbers") from None
    if (any(not 0 < d <= 1 for d in dens) or any(c < 1 for c in kids) or any(s <= 0 for s in slots)
            or any(not 0 <= o <= 1 for o in overs) or a.length < PAIRS):
        raise SystemExit(f"densities in (0, 1], children >= 1, slots > 0, overlaps in [0, 1], --length >= {PAIRS}")
    base = (4, 2.0, 0.0)
    if a.full_grid:
        combos = list(itertools.product(kids, slots, overs))
    else:
        combos = list(dict.fromkeys([base] + [(c, base[1], base[2]) for c in kids] + [(base[0], s, base[2]) for s in slots]
                                    + [(base[0], base[1], o) for o in overs]))
    print(f"one leaf's hash store, int32, {a.length:,} elements per host, {PAIRS} pairs per packet; the emulator's "
          f"setting: {base[0]} hosts per leaf, {base[1]:g} slots per pair, overlap {base[2]:g}")
    print(" ".join(f"{c:>14}" for c in COLS))
    rows = []
    for d in dens:
        for c, s, o in combos:
            r = leaf(c, s, o, d, a.length)
            rows.append(r)
            print(" ".join(f"{r[k]!s:>14}" for k in COLS), flush=True)
    print("spilled: share of the pairs in sent to the spill buffer; extra_uplink: the leaf's output over the ideal "
          "(the union), minus 1; extra_network: those extra bytes over the whole ideal aggregation on 4 such leaves; "
          "shared: measured share of a host's indices another child has too")
    return rows


if __name__ == "__main__":
    main()
