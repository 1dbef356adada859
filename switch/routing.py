"""Routing policies, by name (``SwitchSpec.routing``; DESIGN.md principle 8).

A policy chooses a frame's output port among the minimal next hops the topology lists for its
destination (``Topology.candidates``):

* ``static`` -- the routing table's one port (up*/down* on trees, dimension order on meshes and
  tori): today's deterministic choice, and the default;
* ``adaptive`` -- the candidate whose output queue holds the fewest bytes at ``now`` (the engine's
  port view), ties to the lowest port; a port that is down is never chosen while another is up;
* ``dispersive`` -- a random candidate, drawn from a generator seeded by the run's seed and the
  switch's address (oblivious spreading, as QsNet's dispersive mode).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from emu.config import ConfigError

Choose = Callable[[int, int, int], int]
"""``choose(dst, static_port, now) -> port``."""


def _static(engine, seed: int) -> Choose | None:
    return None


def _adaptive(engine, seed: int) -> Choose:
    cands = engine.candidates

    def choose(dst: int, static: int, now: int) -> int:
        ports = cands[dst] if dst < len(cands) else ()
        view = engine.ports
        if len(ports) < 2 or view is None:
            return static
        best, best_key = static, None
        for p in ports:
            key = (not view.up(p, now), view.queue(p, now)[1], p)
            if best_key is None or key < best_key:
                best, best_key = p, key
        return best
    return choose


def _dispersive(engine, seed: int) -> Choose:
    cands = engine.candidates
    rng = random.Random(seed * 1_000_003 + engine.node_id)

    def choose(dst: int, static: int, now: int) -> int:
        ports = cands[dst] if dst < len(cands) else ()
        return ports[rng.randrange(len(ports))] if len(ports) > 1 else static
    return choose


POLICIES: dict[str, Callable] = {"static": _static, "adaptive": _adaptive, "dispersive": _dispersive}


def register(name: str, make: Callable) -> None:
    """Add a policy: ``make(engine, seed) -> choose(dst, static_port, now) -> port`` (or None)."""
    POLICIES[name] = make


def policy(name: str, engine, seed: int) -> Choose | None:
    make = POLICIES.get(name)
    if make is None:
        raise ConfigError(f"unknown routing policy {name!r}; known: {', '.join(POLICIES)}")
    return make(engine, seed)
