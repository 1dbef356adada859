"""The switch engine: table forwarding with a per-frame processing delay (sans-I/O)."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

from emu.build import register_engine
from emu.config import SwitchSpec
from emu.wire import DST_OFF, ETHERTYPE_FABRIC, HDR_LEN, HOPS_OFF

from .vc import selector

VC_OFF = DST_OFF + 4  # the fabric header's vc byte

log = logging.getLogger(__name__)

_U32 = struct.Struct("!I")
_ET_HI, _ET_LO = ETHERTYPE_FABRIC >> 8, ETHERTYPE_FABRIC & 0xFF


@dataclass(eq=False)
class SwitchEngine:
    name: str
    node_id: int
    spec: SwitchSpec
    routes: list[int]
    """Output port per destination host address (-1: no route)."""
    timer: int | None = None
    kind = "switch"
    stats: dict[str, int] = field(default_factory=lambda: {"forwarded": 0, "malformed": 0, "no_route": 0})

    vc_select: object = None
    """``select(in_port, out_port, vc) -> vc`` (``switch.vc``), or None: frames keep their VC."""

    def __post_init__(self) -> None:
        self.min_delay_ns = self.spec.processing_delay_ns

    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        if len(frame) < HDR_LEN or frame[12] != _ET_HI or frame[13] != _ET_LO:
            self.stats["malformed"] += 1
            log.warning("%s: dropped malformed frame (%d bytes) on port %d at %d ns", self.name, len(frame), port, now)
            return []
        dst = _U32.unpack_from(frame, DST_OFF)[0]
        table = self.routes
        out = table[dst] if dst < len(table) else -1
        if out < 0:
            self.stats["no_route"] += 1
            log.warning("%s: no route for destination %d at %d ns", self.name, dst, now)
            return []
        self.stats["forwarded"] += 1
        hops = frame[HOPS_OFF]
        if self.vc_select is not None:
            vc = self.vc_select(port, out, frame[VC_OFF])
            frame = b"".join((frame[:VC_OFF], bytes((vc,)), frame[VC_OFF + 1:HOPS_OFF],
                              bytes(((hops + 1) & 0xFF,)), frame[HOPS_OFF + 1:]))
        else:
            frame = b"".join((frame[:HOPS_OFF], bytes(((hops + 1) & 0xFF,)), frame[HOPS_OFF + 1:]))
        return [(out, frame, now + self.spec.processing_delay_ns)]

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        return []


def make_switch(node, topology, cache: dict) -> SwitchEngine:
    return SwitchEngine(node.name, node.id, node.spec, topology.routes.get(node.name),
                        vc_select=selector(node.spec.vc_policy, node, node.spec.vcs))


register_engine("switch", make_switch, min_delay=lambda spec: spec.processing_delay_ns)

