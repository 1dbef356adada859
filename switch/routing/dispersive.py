"""``dispersive``: a random minimal next hop per frame (oblivious spreading, as QsNet's dispersive
mode, here chosen hop by hop by the switches rather than by the source adapter).

Each switch draws from its own generator, seeded by the run's seed and the switch's fabric address:
the same seed spreads the same frames the same way, run after run and whatever the number of
processes (each switch's draws depend only on the frames it forwards, in its fixed order).
"""

from __future__ import annotations

import random


def dispersive(engine, seed: int):
    cands = engine.candidates
    rng = random.Random(seed * 1_000_003 + engine.node_id)

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        ports = cands[dst] if dst < len(cands) else ()
        return ports[rng.randrange(len(ports))] if len(ports) > 1 else static
    return choose
