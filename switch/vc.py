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


POLICIES: dict[str, Callable] = {"by_class": lambda node, vcs: None, "dateline": _dateline,
                                 "class_dateline": _class_dateline}


def selector(policy: str, node, vcs: int) -> Selector | None:
    """The VC selector of ``node`` for ``policy`` (None: frames keep their VC)."""
    make = POLICIES.get(policy)
    if make is None:
        raise ConfigError(f"unknown VC policy {policy!r}; known: {', '.join(POLICIES)}")
    return make(node, vcs)
