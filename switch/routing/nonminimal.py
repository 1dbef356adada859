"""Minimal, Valiant, UGAL and PAR routing on dragonflies, HyperX and Slim Flies (issue 48).

``--set switch.routing=NAME``; the routes come from :class:`.model.RouteModel` (the same the deadlock
check, :mod:`.deadlock`, follows):

* ``minimal`` -- the family's minimal tables (dragonfly l-g-l, HyperX dimension order, Slim Fly
  shortest paths): the same ports as ``static``, by its own name.
* ``valiant`` -- the source router (the first a frame meets: ``hops`` = 0) draws an intermediate
  uniformly -- a group of a dragonfly (a router with ``switch.ugal_intermediate=router``, as BookSim
  draws a node), a router elsewhere -- from its own seeded generator; the frame
  goes minimally to it, then minimally to its destination. An intermediate where the frame already is
  or where it is going (the source's or the destination's group or router) is no detour: the frame
  goes minimally. The frame carries its intermediate in the fabric header (flag ``DETOUR``, ``rsvd``
  the intermediate) until it gets there; the router that sees it arrive clears the flag.
* ``ugal_l`` -- UGAL with local information: the source router draws an intermediate as Valiant does
  and sends the frame the non-minimal way exactly when ``q_min * H_min > q_non * H_non + T``:
  ``q`` the depth of its own output port each way (:func:`depth`: bytes on the line or waiting for it
  in this router, plus the bytes the next router holds for it -- the credit it has used; with
  ``switch.ugal_queue=credits`` that credit alone, :func:`held`, BookSim's ``GetUsedCredit``), ``H`` the
  router-to-router hops of each route, ``T`` ``SwitchSpec.ugal_threshold_bytes``. Ties go minimal.
  The router counts its decisions (``stats``: ``ugal_minimal``, ``ugal_detour``, and
  ``ugal_no_detour`` for a draw that is no detour); the traffic tests print them per load.
* ``ugal_g`` -- the same rule with ``q`` summed over every router of each route (each router's own
  output depth, read from its engine at ``now``): an **oracle** no router has, as in BookSim's
  UGAL-G; it needs every router in one process (``--processes 1``) and says so otherwise.
* ``par`` -- progressive adaptive (Jiang, Kim and Dally, ISCA 2009): the UGAL-L decision at the
  source router and, for a frame sent minimally over a local link (still in its group), once more at
  the next router (flag ``AGAIN``); its detour then starts with a local hop, which the
  ``dragonfly`` VC policy gives a class of its own (4 classes).

Deadlock freedom comes from the VC classes (``SwitchSpec.vc_policy``: ``dragonfly`` or ``hops``,
``emu.switch.vc``) and the family's 4 VCs. A frame that takes a detour can overtake or be overtaken by
one of the same flow: the receivers count the packets that arrive out of order (``emu run --test
worst_case``: ``out_of_order``); hosts deliver messages whole, so a multi-frame message is
reassembled whatever order its frames come in.
"""

from __future__ import annotations

import random

from emu.config import ConfigError
from emu.errors import EngineError
from emu.wire import HOPS_OFF
from emu.wire.fabric import FLAGS_OFF, RSVD_OFF

from .model import route_model

FLAG_DETOUR = 0x08
"""Fabric flag: the frame is on its way to the intermediate ``rsvd`` names."""
FLAG_REDECIDE = 0x10
"""Fabric flag AGAIN (PAR): the next router decides again between the minimal route and a detour."""
FLAG_SRCRT = 0x02


def held(eng, p: int) -> int:
    """Bytes of the next router's buffers (every VC) output ``p`` holds credit for: sent and not yet
    credited back (BookSim's ``GetUsedCredit``); 0 on a router without credits or toward a host."""
    oc = getattr(eng, "oc", None)  # the input-queued router's credits of the next router's buffers
    if oc is None or oc.vc[p] is None:
        return 0
    cap = oc.cap[p][0]
    return sum(cap - c for c in oc.vc[p])


def depth(eng, view, p: int, now: int) -> int:
    """Bytes queued toward output ``p``: on the line or waiting for it here, and held downstream."""
    return view.queue(p, now)[1] + held(eng, p)


def minimal(engine, seed: int):
    """The family's minimal tables (the static port)."""
    return None


def _policy(kind: str):
    def make(engine, seed: int):
        if engine.network is None:
            raise ConfigError(f"{engine.name}: routing={kind} needs the switch built from its topology")
        t, cache = engine.network
        model = route_model(t, cache)
        if engine.name not in model.index:
            return None  # the network manager's element routes by its table
        me = model.index[engine.name]
        rng = random.Random(seed * 1_000_003 + engine.node_id)
        threshold = getattr(engine.spec, "ugal_threshold_bytes", 0)
        credits_only = getattr(engine.spec, "ugal_queue", "depth") == "credits"

        def queue(e, view, p: int, now: int) -> int:
            return held(e, p) if credits_only else depth(e, view, p, now)
        tag = [None]
        engines = None
        if kind == "ugal_g":
            engines = cache.setdefault("ugal_g_engines", {})
            engines[engine.name] = engine

        def q_path(src: int, inter, dst: int, now: int) -> int:
            total = 0
            for r, p in model.path(src, inter, dst)[:-1]:  # (the last: the port to the host)
                e = engines.get(model.names[r])
                if e is None:
                    raise EngineError(f"routing=ugal_g is an oracle that reads every router's queues; router "
                                      f"{model.names[r]} runs in another process: run it with --processes 1")
                if e.ports is not None:
                    total += queue(e, e.ports, p, now)
            return total

        def decide(dst: int, static: int, now: int, tgt: int):
            """UGAL: (port, intermediate or None)."""
            inter = rng.randrange(model.inters)
            if not model.intermediate_useful(me, inter, tgt):
                engine.stats["ugal_no_detour"] = engine.stats.get("ugal_no_detour", 0) + 1
                return static, None
            non = model.step(me, inter, tgt)
            view = engine.ports
            if view is None:
                return static, None
            h_min, h_non = model.hops(me, None, dst), model.hops(me, inter, dst)
            if kind == "ugal_g":
                q_min, q_non = q_path(me, None, dst, now), q_path(me, inter, dst, now)
            else:
                q_min, q_non = queue(engine, view, static, now), queue(engine, view, non, now)
            st = engine.stats
            if q_min * h_min > q_non * h_non + threshold:
                st["ugal_detour"] = st.get("ugal_detour", 0) + 1
                return non, inter
            st["ugal_minimal"] = st.get("ugal_minimal", 0) + 1
            return static, None

        def choose(dst: int, static: int, frame: bytes, now: int) -> int:
            flags = frame[FLAGS_OFF]
            tgt = model.of_host[dst] if dst < len(model.of_host) else me
            if flags & FLAG_DETOUR:
                inter = frame[RSVD_OFF]
                if model.arrived(me, inter):
                    tag[0] = (flags & ~FLAG_DETOUR, 0)
                    return static
                return model.step(me, inter, tgt)
            first = frame[HOPS_OFF] == 0
            if tgt == me or not (first or flags & FLAG_REDECIDE):
                return static
            if kind == "valiant":
                inter = rng.randrange(model.inters)
                if not model.intermediate_useful(me, inter, tgt):
                    return static
                out = model.step(me, inter, tgt)
            else:
                out, inter = decide(dst, static, now, tgt)
            new = flags & ~(FLAG_REDECIDE | FLAG_SRCRT) if inter is not None else flags & ~FLAG_REDECIDE
            if inter is not None:
                new |= FLAG_DETOUR
            elif kind == "par" and first and not _leaves_group(model, me, out):
                new |= FLAG_REDECIDE
            if new != flags or inter is not None:
                tag[0] = (new, inter or 0)
            return out

        def retag(frame: bytes, out: int) -> bytes:
            t_ = tag[0]
            if t_ is None:
                return frame
            tag[0] = None
            b = bytearray(frame)
            b[FLAGS_OFF], b[RSVD_OFF] = t_
            return bytes(b)

        engine.retag = retag
        return choose
    make.__name__ = kind
    make.__doc__ = f"``{kind}`` (emu.switch.routing.nonminimal)"
    return make


def _leaves_group(model, me: int, out: int) -> bool:
    """Does port ``out`` of router ``me`` leave its group (a dragonfly's global link), or its router
    (a host port)? Elsewhere every router is its own group."""
    nxt = model.peer[me].get(out)
    if nxt is None or not model.dragonfly:  # (PAR re-decides on dragonflies only: elsewhere it is UGAL-L)
        return True
    return model.group[nxt] != model.group[me]


valiant = _policy("valiant")
ugal_l = _policy("ugal_l")
ugal_g = _policy("ugal_g")
par = _policy("par")

POLICIES = {"minimal": minimal, "valiant": valiant, "ugal_l": ugal_l, "ugal_g": ugal_g, "par": par}
__all__ = ["FLAG_DETOUR", "FLAG_REDECIDE", "POLICIES", "depth", "held"]
