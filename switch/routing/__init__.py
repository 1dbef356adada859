"""Routing policies, by name (``SwitchSpec.routing``; DESIGN.md principle 8).

A policy chooses a frame's output port among the minimal next hops the topology lists for its
destination (``Topology.candidates``; the runtime computes them when a switch's policy is not
``static``):

* ``static`` -- the routing table's one port (up*/down* with destination-mod-k on trees, dimension
  order on meshes and tori): today's deterministic choice, and the default;
* ``adaptive`` -- the least-loaded candidate at ``now``, read from the engine's port view
  (:mod:`.adaptive`);
* ``dispersive`` -- a random candidate from a generator seeded per switch (:mod:`.dispersive`);
* ``qsnet`` -- QsNet's threshold rule: among the candidates with fewer than
  ``SwitchSpec.adaptive_threshold`` pending frames, a free one (``SwitchSpec.adaptive_free``: free
  now, or the first to free), the first, the next after the last one chosen (round robin) or a
  seeded random one (``SwitchSpec.adaptive_pick``); none below the threshold: the same pick over
  every candidate, the least loaded, or the packet's route (``SwitchSpec.adaptive_heavy``; :mod:`.qsnet`);
* ``minimal``, ``valiant``, ``ugal_l``, ``ugal_g``, ``par`` -- on dragonflies, HyperX and Slim Flies:
  the family's minimal routes, Valiant's random intermediate, UGAL with local (or, as an oracle,
  global) queue depths, progressive adaptive routing (:mod:`.nonminimal`; a policy may rewrite the
  frame's header through ``engine.retag``);
* ``ecmp`` -- per flow: a CRC-32 of the frame's source, destination, packet type and the entropy byte
  its sender may set (``rsvd`` without SRCRT), salted per switch; ``spray`` -- per packet, round the
  candidates in turn (:mod:`.ecmp`).

Writing one (in your own package, declared as an entry point of the group ``emu.routing``, or
registered before the run): ``register("mine", make)``, where ``make(engine, seed)`` is called once per switch as
its engine is built and returns ``choose(dst, static, frame, now) -> port``, or None for "always
the static port" (then nothing is called per frame). ``dst`` is the destination host address,
``static`` the table's port (always one of the candidates), ``frame`` the bytes as received and
``now`` the switch's virtual time. A policy reads ``engine.candidates[dst]`` (a tuple of ports,
increasing; read-only, shared between switches), ``engine.ports`` (the port view: ``up``,
``queue``, ``credits``...; None where no runtime drives the engine, e.g. a unit test) and
``engine.node_id``; it draws any random number from a generator seeded by ``seed`` and the switch
(DESIGN.md principle 10), so that runs repeat exactly.
"""

from __future__ import annotations

from collections.abc import Callable

from emu.config import ConfigError

from .adaptive import adaptive
from . import deadlock as _deadlock  # noqa: F401 -- registers the VC-class check topology files use
from .dispersive import dispersive
from .ecmp import POLICIES as BALANCE
from .nonminimal import POLICIES as NONMINIMAL
from .qsnet import qsnet

Choose = Callable[[int, int, bytes, int], int]
"""``choose(dst, static_port, frame, now) -> port``."""
Make = Callable[..., "Choose | None"]
"""``make(engine, seed) -> choose`` (or None: the static port)."""


def static(engine, seed: int) -> None:
    """The table's port: nothing to choose."""
    return None


POLICIES: dict[str, Make] = {"static": static, "adaptive": adaptive, "dispersive": dispersive,
                           "qsnet": qsnet, **NONMINIMAL, **BALANCE}


def register(name: str, make: Make) -> None:
    """Add a policy by name (see the module docstring for ``make``)."""
    POLICIES[name] = make


def lookup(name: str) -> Make:
    """The policy called ``name``: registered, or registered by the module an installed package names
    for it in the entry-point group ``emu.routing`` (``[project.entry-points."emu.routing"] two =
    "mypkg.two"``: ``mypkg/two.py`` calls :func:`register`), in whichever process builds the switch; an
    unknown name is refused, naming the known ones and the package each installed one comes from."""
    from emu.plugins import ROUTING, load, others

    if name not in POLICIES:
        load(ROUTING, name)
    make = POLICIES.get(name)
    if make is None:
        raise ConfigError(f"unknown routing policy {name!r}; known: {', '.join(POLICIES)}" + others(ROUTING, POLICIES))
    return make


__all__ = ["POLICIES", "Choose", "Make", "lookup", "register", "static", "adaptive", "dispersive", "qsnet"]
