"""``dispersive``: oblivious spreading over the minimal next hops (QsNet's dispersive routing).

A frame whose source chose its route (fabric flag SRCRT, the QsNet adapter with ``elan.routes > 1``,
or any resent packet) carries a route id in the fabric header's ``rsvd`` byte: the h-th switch it
crosses (``hops`` = h) takes digit h of the route id in base k, k its number of minimal next hops
for the destination -- so route ids 0..k^levels-1 name distinct paths up a tree, the adapter picks
among them (round robin or seeded random) and a resend moves to the next. Other frames take a
random minimal next hop, chosen hop by hop.

**Ports that are down.** A router sees loss of signal on its own port at once: a candidate whose
link is down at ``now`` (taken down, or scheduled down), or out of service (``engine.held``: bring-up
not over, the manager's reset), is never chosen while another is live. A source-chosen route that
names one moves to the next live candidate after it (the route id keeps meaning one way round the
fault); a random choice that draws one draws again among the live ones (the generator is drawn from
once more only then, so a healthy run draws exactly as before). Every candidate down: the choice
stands (the switch drops the frame, or NACKs a QsNet packet, as under every policy). Without a port
view (an engine driven by hand) only ``held`` is known.

Each switch draws from its own generator, seeded by the run's seed and the switch's fabric address:
the same seed spreads the same frames the same way, run after run and whatever the number of
processes (each switch's draws depend only on the frames it forwards, in its fixed order).
"""

from __future__ import annotations

import random

from emu.wire.fabric import source_route


def dispersive(engine, seed: int):
    rng = random.Random(seed * 1_000_003 + engine.node_id)

    def live(p: int, now: int) -> bool:
        view = engine.ports
        return p not in engine.held and (view is None or view.up(p, now))

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        cands = engine.candidates  # read per frame: the manager's SET_ROUTES replaces the table
        ports = cands[dst] if dst < len(cands) else ()
        k = len(ports)
        if k < 2:
            return static
        chosen = source_route(frame, ports)
        if chosen is not None:
            if live(chosen, now):
                return chosen
            i = ports.index(chosen)
            return next((q for q in ports[i + 1:] + ports[:i] if live(q, now)), chosen)
        chosen = ports[rng.randrange(k)]
        if live(chosen, now):
            return chosen
        up = [q for q in ports if live(q, now)]
        return up[rng.randrange(len(up))] if up else chosen
    return choose
