"""``adaptive``: the least-loaded minimal next hop (spec 03: adaptive routing on the way up).

Per frame with several candidates, the switch reads its port view at ``now`` and takes the
candidate with, in this order of keys:

1. the port up and in service (a port taken down, or scheduled down, or out of service -- ``engine.held`` --
   is chosen only when every candidate is);
2. the fewest bytes queued: those on the line whose last bit has not left by ``now``, plus, under
   credit flow control, those waiting for credit on the frame's VC;
3. the preferred port: the static one (ties go to the routing table's choice, so an idle fabric
   routes exactly as ``static`` does and the policy departs from it only under load) -- or, for a
   frame whose source chose a route (fabric flag SRCRT: a resent QsNet packet, or its ACK), the one
   that route id names (as ``dispersive`` reads it), so that a resend tries another way even on an
   idle fabric (a packet NACKed by a router that lost its way down goes round it) -- and a host
   message sent again by the reliable transport, or its acknowledgement, which carries a route id
   for the same reason, takes the port it names whenever that port is up and in service, whatever
   the load (its frames would otherwise spread over the idle ports, the dead end among them);
4. the lowest port.

Without a port view (an engine driven by hand) it is the static port. QsNet's routers instead
threshold the number of unacknowledged operations per link and pick among the lightly loaded by
first free, round robin or random; those can register as policies of their own.
"""

from __future__ import annotations

from emu.wire import DST_OFF, PacketType
from emu.wire.fabric import source_route

VC_OFF = DST_OFF + 4  # the fabric header's vc byte
PTYPE_OFF = DST_OFF + 6  # ... and its packet type
_HOST = frozenset((int(PacketType.MSG), int(PacketType.MACK)))
"""Host messages and their acknowledgements (``host.transport=reliable``)."""


def adaptive(engine, seed: int):

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        cands = engine.candidates  # read per frame: the manager's SET_ROUTES replaces the table
        ports = cands[dst] if dst < len(cands) else ()
        view = engine.ports
        if len(ports) < 2 or view is None:
            return static
        vc = frame[VC_OFF]
        chosen = source_route(frame, ports)
        held = engine.held
        if chosen is not None:
            if frame[PTYPE_OFF] in _HOST and chosen not in held and view.up(chosen, now):
                return chosen  # a host message's resend (or its acknowledgement) keeps to the way it names
            static = chosen
        best, best_key = static, None
        for p in ports:
            key = (not view.up(p, now) or p in held, view.queue(p, now)[1] + view.queue(p, now, vc)[1], p != static, p)
            if best_key is None or key < best_key:
                best, best_key = p, key
        return best
    return choose
