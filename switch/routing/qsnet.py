"""``qsnet``: QsNet's threshold-based adaptive routing (spec 03, "Adaptive routing").

On the way up any top switch reaches any destination, so a QsNet router chooses a link: it first
takes the subset of *lightly loaded* candidate links -- those whose load, the number of pending
operations, is below a threshold (``SwitchSpec.adaptive_threshold``) -- then picks among them by
``SwitchSpec.adaptive_pick``: **first free**, **next free** or **random**.

**Free** (``SwitchSpec.adaptive_free``). ``now`` (the default): a link is *free* when nothing is on its
line and no packet in this router waits for it; the pick is among the free links of the subset,
and when none is free, among those that free first (the fewest bytes ahead of the packet: on the
line and waiting for the port, ``view.queue(p, now)[1]``) -- the router routes a packet as its
head comes in, so "the first link to free" is read from what is already committed to each. Two
measures, then, as the source names two: how many operations a link has outstanding downstream
(the subset; an ACK returns a round trip later) and whether it can take the packet now (the pick).
``light`` (the reading before issue 44): every lightly loaded link counts as free, and the pick
goes by port order alone. The picks, over the links so found:

* ``first_free`` -- the lowest-numbered of them;
* ``next_free`` -- round robin: the first of them after the link this switch chose last time
  (whatever the destination), wrapping round to the lowest;
* ``random`` -- one drawn from a generator seeded per switch (the run's seed and the switch's
  fabric address, DESIGN.md principle 10), so runs repeat exactly.

If no candidate is lightly loaded (``SwitchSpec.adaptive_heavy``): ``pick`` (the default) makes the
same pick over every live candidate -- the threshold sorts links into light or not and ranks no
heavy link above another, so it leaves the choice to the pick; ``least_loaded`` takes the least
loaded link (ties to the preferred port, then the lowest); ``route`` takes the preferred port
(below) unless that port is down or out of service, when the least loaded is taken as before.
Under load every link at line rate carries a round trip's worth of pending operations (4-8 at
threshold 2, docs/qsnet.md), so this case decides most packets; ``least_loaded`` then compares
counts that differ by ACK timing and moves packets on that difference.

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
source-chosen port is taken whenever it is lightly loaded, free or not (under ``adaptive_heavy=pick``
with no link light: whenever it is among those the pick chooses from), so that a packet
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
    heavy = getattr(spec, "adaptive_heavy", "least_loaded")
    free_now = getattr(spec, "adaptive_free", "light") == "now"
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
        live = []
        best, best_key = preferred, None
        held = engine.held
        for p in ports:
            if not view.up(p, now) or p in held:  # down, or out of service (bring-up, the manager's reset)
                continue
            live.append(p)
            n = load(view, p, now) if pending is None else pending.load(p, now)
            if n < threshold:
                light.append(p)
            key = (n, p != preferred, p)
            if best_key is None or key < best_key:
                best, best_key = p, key
        if not live:  # every candidate down: the preferred (the switch NACKs a packet it cannot send)
            last[0] = preferred
            return preferred
        group = light
        if not light:
            if heavy == "route":
                out = preferred if preferred in live else best
                last[0] = out
                return out
            if heavy != "pick":  # least_loaded
                last[0] = best
                return best
            group = live
        elif source_chose and preferred in light:
            last[0] = preferred
            return preferred
        if free_now and len(group) > 1:  # the free ones, or those that free first
            ahead = [view.queue(p, now)[1] for p in group]
            first = min(ahead)
            group = [p for p, b in zip(group, ahead) if b == first]
        if source_chose and preferred in group:
            out = preferred
        elif pick == "first_free":
            out = group[0]
        elif pick == "next_free":
            prev = last[0]
            out = next((p for p in group if p > prev), group[0])
        else:
            out = group[rng.randrange(len(group))] if len(group) > 1 else group[0]
        last[0] = out
        return out
    return choose
