"""The sparse hash store of a leaf switch (spec 04): a block's partial sums in a hash table with a
spill buffer; pure, so the aggregation engine and the experiments (``scripts/inc_spill.py``) run the
same code.

A block's table has ``slots_per_pair x elems`` slots (``elems``: the (index, value) pairs of one
packet; 2 by default) and a spill buffer of ``elems`` pairs. A pair goes to slot
``index x 2654435761 mod slots`` (multiplicative hashing): an empty slot takes it, a slot with its
index adds it in, a slot with another index sends it to the spill buffer; a full spill buffer leaves
at once, unaggregated (extra traffic). When the block completes, the table's pairs and what is left
in the spill buffer leave.
"""

from __future__ import annotations

import numpy as np

HASH_MULT = 2654435761
SLOTS_PER_PAIR = 2
"""Table slots per pair of a packet (the table holds two packets' worth of distinct indices)."""


def new_store(elems: int, dtype, slots_per_pair: float = SLOTS_PER_PAIR) -> dict:
    slots = max(1, int(slots_per_pair * elems))
    return {"keys": np.full(slots, -1, np.int64), "vals": np.zeros(slots, np.dtype(dtype)), "si": [], "sv": [],
            "next": 0, "sent": []}


def fold(h: dict, idx, vals, combine, elems: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Fold a child's pairs into store ``h``; returns the spill buffers that filled meanwhile (each
    ``elems`` pairs: index, values), which leave at once."""
    keys, table = h["keys"], h["vals"]
    out = []
    with np.errstate(all="ignore"):
        for i, v in zip(np.asarray(idx).tolist(), vals):
            slot = (i * HASH_MULT) % len(keys)
            if keys[slot] == -1:
                keys[slot], table[slot] = i, v
            elif keys[slot] == i:
                table[slot] = combine(table[slot:slot + 1], np.array([v], table.dtype))[0]
            else:
                h["si"].append(i)
                h["sv"].append(v)
                if len(h["si"]) == elems:
                    out.append((np.array(h["si"], np.int64), np.array(h["sv"], table.dtype)))
                    h["si"], h["sv"] = [], []
    return out


def leftovers(h: dict) -> tuple[np.ndarray, np.ndarray]:
    """What leaves when the block completes: the table's pairs, then the spill buffer's."""
    used = h["keys"] >= 0
    return (np.concatenate([h["keys"][used], np.array(h["si"], np.int64)]),
            np.concatenate([h["vals"][used], np.array(h["sv"], h["vals"].dtype)]))


def store_bytes(elems: int, itemsize: int, slots_per_pair: float = SLOTS_PER_PAIR) -> int:
    """A hash store's memory: the table's slots and a spill buffer of ``elems``, (index, value) pairs."""
    return int((slots_per_pair + 1) * elems) * (4 + itemsize)
