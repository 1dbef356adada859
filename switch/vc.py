"""Virtual-channel selection policies, by name (``SwitchSpec.vc_policy``; DESIGN.md principle 8).

A policy gives a switch, per forwarded frame, the VC it uses on the next link from the input port,
the output port and the VC it arrived on -- as an InfiniBand switch's SL-to-VL table does. The
switch writes it into the frame's fabric header (``vc``); the next input buffer files the frame by
it.

* ``by_class``: the frame keeps the VC its source gave it (its traffic class).
* ``dateline`` (k-ary n-tori with dimension-order routing): VC 0 until the frame crosses the wrap-
  around link of the dimension it travels in, VC 1 from there on; back to VC 0 when it turns into
  the next dimension. On a ring, dimension-order routing with one VC has a cyclic channel
  dependency (a deadlock under load); splitting each ring at its dateline removes the cycle.
* ``dragonfly``: VC 0 from a host, one VC more after each global link, and one more at a local-to-local
  turn (only a route re-decided in its group takes one: PAR). Minimal routes (l-g-l) take VCs 0, 1;
  Valiant and UGAL (l-g-l-g-l) 0..2; PAR 0..3. The class never goes down along a route, so the
  channel dependencies cannot close a cycle (``emu.switch.routing.deadlock`` checks it).
* ``hops`` (HyperX, Slim Fly): VC 0 from a host, one more per router-to-router hop.
With both, classes past the last VC share it: too few VCs bring the cycles back (the check says so).
"""

from __future__ import annotations

from collections.abc import Callable

from emu.config import ConfigError

Selector = Callable[[int, int, int], int]


def _dateline(node, vcs: int) -> Selector | None:
    wraps = node.info.get("wrap_ports")
    if wraps is None:
        raise ConfigError(f"{node.name}: the dateline VC policy needs a torus (its routers' wrap-around "
                          "ports); use vc_policy=by_class elsewhere")
    wraps = frozenset(wraps)
    top = vcs - 1

    def select(in_port: int, out_port: int, vc: int) -> int:
        same_dim = in_port > 0 and out_port > 0 and (in_port - 1) // 2 == (out_port - 1) // 2
        v = 1 if out_port in wraps else (vc if same_dim else 0)
        return v if v <= top else top
    return select


def _class_dateline(node, vcs: int) -> Selector | None:
    plain = _dateline(node, 2)
    top = vcs - 1

    def select(in_port: int, out_port: int, vc: int) -> int:
        v = (vc & ~1) | plain(in_port, out_port, vc & 1)
        return v if v <= top else top
    return select


def _host_ports(node, policy: str) -> int:
    n = node.info.get("host_ports")
    if n is None:
        raise ConfigError(f"{node.name}: the {policy} VC policy needs a dragonfly, HyperX or Slim Fly router (its "
                          "host ports); use vc_policy=by_class elsewhere")
    return n


def _dragonfly(node, vcs: int) -> Selector:
    hosts = _host_ports(node, "dragonfly")
    glob = frozenset(node.info.get("global_ports", ()))
    top = vcs - 1

    def select(in_port: int, out_port: int, vc: int) -> int:
        if in_port < hosts:
            return 0
        if in_port in glob:
            v = vc + 1
        elif out_port >= hosts and out_port not in glob:
            v = vc + 1  # local to local: a route re-decided in its group (PAR)
        else:
            v = vc
        return v if v <= top else top
    return select


def _hops(node, vcs: int) -> Selector:
    hosts = _host_ports(node, "hops")
    top = vcs - 1

    def select(in_port: int, out_port: int, vc: int) -> int:
        if in_port < hosts:
            return 0
        if out_port < hosts:  # to its host: no hop more
            return vc
        return vc + 1 if vc < top else top
    return select


POLICIES: dict[str, Callable] = {"by_class": lambda node, vcs: None, "dateline": _dateline,
                                 "class_dateline": _class_dateline, "dragonfly": _dragonfly, "hops": _hops}


def selector(policy: str, node, vcs: int) -> Selector | None:
    """The VC selector of ``node`` for ``policy`` (None: frames keep their VC)."""
    make = POLICIES.get(policy)
    if make is None:
        raise ConfigError(f"unknown VC policy {policy!r}; known: {', '.join(POLICIES)}")
    return make(node, vcs)
