"""``qsnet``: QsNet's threshold-based adaptive routing (spec 03, "Adaptive routing").

On the way up any top switch reaches any destination, so a QsNet router chooses a link: it first
takes the subset of *lightly loaded* candidate links -- those whose load, the number of pending
operations, is below a threshold (``SwitchSpec.adaptive_threshold``) -- then picks among them by
``SwitchSpec.adaptive_pick``:

* ``first_free`` -- the lowest-numbered lightly loaded link;
* ``next_free`` -- round robin: the first lightly loaded link after the one this switch chose last
  time (whatever the destination), wrapping round to the lowest;
* ``random`` -- a lightly loaded link drawn from a generator seeded per switch (the run's seed and
  the switch's fabric address, DESIGN.md principle 10), so runs repeat exactly.

If no candidate is lightly loaded (``SwitchSpec.adaptive_heavy``): ``least_loaded`` takes the least
loaded link (ties to the preferred port, then the lowest); ``route`` takes the preferred port (below),
since the source's rule only sorts links into lightly loaded or not and ranks no heavy link above
another -- unless that port is down or out of service, when the least loaded is taken as before.
``least_loaded`` compares counts that, under load, differ by one or two operations out of the
round trip's worth every link at line rate carries, and moves packets on that difference
(docs/qsnet.md, "Adaptive routing below static").

**The load** (``SwitchSpec.adaptive_load``):

* ``pending`` (the default, the source's measure) -- the QsNet operations this router routed out of
  the link whose ACK (or NACK) has not come back through it: the token retraces its packet's route,
  so the router sees both (:mod:`.pending`);
* ``queue`` -- a local stand-in read from the port view as a number of frames: those handed to the
  port whose last bit has not left by ``now`` (``view.queue(p, now)[0]``) plus, under credit flow
  control, those waiting on any VC of the port for the line or a credit (``view.waiting(p)``; on
  the input-queued router, its ``IQView``: the frames waiting for the port in its input buffers).
  A frame that has left the port no longer counts, even though its ACK is still to come.

**Ports that are down.** A port taken down (or scheduled down at ``now``), or out of service (``engine.held``:
bring-up not over, or the manager reset its link), is never lightly loaded and
is taken only when every candidate is down (then the preferred port is returned, and the switch
NACKs a QsNet packet it cannot send on, as under every policy).

**The preferred port** is the routing table's (static) port -- or, for a frame whose source chose
its route (fabric flag SRCRT: a resent QsNet packet or its ACK, or an adapter spreading over
``elan.routes``), the port its route id names at this hop (read as ``dispersive`` reads it). A
source-chosen port is taken whenever it is lightly loaded, whatever the pick, so that a packet
NACKed by a router that lost its way down tries another way even on an idle fabric (as ``adaptive``
does on a tie).

The policy decides only where a frame has two or more minimal next hops (going up a fat tree; on
meshes and tori any minimal turn); elsewhere it is the static port. Without a port view (an
engine driven by hand, or :class:`emu.sim.EngineNet`) it is the static port.
"""

from __future__ import annotations

import random

from emu.config import ConfigError
from emu.wire.fabric import source_route

from .pending import Pending

PICKS = ("first_free", "next_free", "random")
"""The ways to pick among the lightly loaded links (``SwitchSpec.adaptive_pick``)."""


def load(view, port: int, now: int) -> int:
    """Pending frames on ``port`` at ``now``: on the line (last bit not out) plus waiting for credit."""
    frames = view.queue(port, now)[0]
    waiting = getattr(view, "waiting", None)
    return frames + waiting(port) if waiting is not None else frames


def qsnet(engine, seed: int):
    spec = engine.spec
    threshold = spec.adaptive_threshold
    pick = spec.adaptive_pick
    if pick not in PICKS:  # SwitchSpec refuses it first; a spec built by hand may not have been
        raise ConfigError(f"SwitchSpec.adaptive_pick {pick!r} is not one of {', '.join(PICKS)}")
    pending = None
    if getattr(spec, "adaptive_load", "queue") == "pending":
        pending = engine.pending = Pending(spec.pending_expiry_ns)
    rng = random.Random(seed * 1_000_003 + engine.node_id)
    keep_route = getattr(spec, "adaptive_heavy", "least_loaded") == "route"
    last = [-1]  # next_free: the port chosen last time, per switch

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        cands = engine.candidates  # read per frame: the manager's SET_ROUTES replaces the table
        ports = cands[dst] if dst < len(cands) else ()
        view = engine.ports
        if len(ports) < 2 or view is None:
            return static
        chosen = source_route(frame, ports)
        preferred, source_chose = (static, False) if chosen is None else (chosen, True)
        light = []
        best, best_key = preferred, None
        held = engine.held
        usable = False
        for p in ports:
            if not view.up(p, now) or p in held:  # down, or out of service (bring-up, the manager's reset)
                continue
            usable = usable or p == preferred
            n = load(view, p, now) if pending is None else pending.load(p, now)
            if n < threshold:
                light.append(p)
            key = (n, p != preferred, p)
            if best_key is None or key < best_key:
                best, best_key = p, key
        if not light:  # nothing lightly loaded: the route, or the least loaded (every port down: the preferred)
            out = preferred if keep_route and usable else best
        elif source_chose and preferred in light:
            out = preferred
        elif pick == "first_free":
            out = light[0]
        elif pick == "next_free":
            prev = last[0]
            out = next((p for p in light if p > prev), light[0])
        else:
            out = light[rng.randrange(len(light))] if len(light) > 1 else light[0]
        last[0] = out
        return out
    return choose
