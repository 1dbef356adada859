"""``dispersive``: oblivious spreading over the minimal next hops (QsNet's dispersive routing).

A frame whose source chose its route (fabric flag SRCRT, the QsNet adapter with ``elan.routes > 1``,
or any resent packet) carries a route id in the fabric header's ``rsvd`` byte: the h-th switch it
crosses (``hops`` = h) takes digit h of the route id in base k, k its number of minimal next hops
for the destination -- so route ids 0..k^levels-1 name distinct paths up a tree, the adapter picks
among them (round robin or seeded random) and a resend moves to the next. Other frames take a
random minimal next hop, chosen hop by hop.

Each switch draws from its own generator, seeded by the run's seed and the switch's fabric address:
the same seed spreads the same frames the same way, run after run and whatever the number of
processes (each switch's draws depend only on the frames it forwards, in its fixed order).
"""

from __future__ import annotations

import random

from emu.wire.fabric import source_route

def dispersive(engine, seed: int):
    rng = random.Random(seed * 1_000_003 + engine.node_id)

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        cands = engine.candidates  # read per frame: the manager's SET_ROUTES replaces the table
        ports = cands[dst] if dst < len(cands) else ()
        k = len(ports)
        if k < 2:
            return static
        chosen = source_route(frame, ports)
        return chosen if chosen is not None else ports[rng.randrange(k)]
    return choose
