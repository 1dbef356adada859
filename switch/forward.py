"""The switch engine: table forwarding with a per-frame processing delay (sans-I/O)."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

from emu.build import register_engine
from emu.config import SwitchSpec
from emu.wire import DST_OFF, ETHERTYPE_FABRIC, FCS_LEN, FLAG_BCAST, HDR_LEN, HOPS_OFF, PacketType, build_frame
from emu.wire.qsnet import ACK, ACK_BCAST, AckKind, Reason, TRAP, TrapKind, is_qsnet_packet

from .routing import lookup as routing_policy
from .routing import static
from .vc import selector

VC_OFF = DST_OFF + 4  # the fabric header's vc byte
FLAGS_OFF = DST_OFF + 7  # ... and its flags
PTYPE_OFF = DST_OFF + 6  # ... and its packet type
_QPKT, _QACK = int(PacketType.QPKT), int(PacketType.QACK)  # plain ints: compared per frame

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
    passes_damaged = staticmethod(is_qsnet_packet)
    """Cut-through for QsNet packets: one that fails a link's FCS is forwarded all the same (its
    head left before its tail was checked); the target adapter's CRC-32 catches it and NACKs."""
    combining: dict = field(default_factory=dict)
    """Broadcast packets replicated here whose ACKs are being combined: (source, packet id) ->
    [in port, ports still to answer, any NACK, sum of values, NACK reason]."""
    manager: int | None = None
    """Fabric address of the network manager that receives this router's traps (None: counted only)."""
    stats: dict[str, int] = field(default_factory=lambda: {"forwarded": 0, "malformed": 0, "no_route": 0})

    candidates: list = field(default_factory=list)
    """Minimal next-hop ports per destination host address (for adaptive and dispersive routing)."""
    groups: dict = field(default_factory=dict)
    """Multicast group id -> the ports of its tree at this switch."""
    choose: object = None
    """The routing policy's ``choose(dst, static_port, frame, now)`` (``switch.routing``), or None:
    static."""
    ports: object = None
    """The runtime's port view (what the adaptive policy reads)."""
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
        if frame[FLAGS_OFF] & FLAG_BCAST:
            return self._replicate(frame, port, dst, now)
        if self.groups and frame[PTYPE_OFF] == _QACK and len(frame) >= HDR_LEN + ACK.size \
                and frame[HDR_LEN + 2] & ACK_BCAST:
            combined = self._combine(frame, port, dst, now)
            if combined is not None:
                return combined
        table = self.routes
        out = table[dst] if dst < len(table) else -1
        if out < 0:
            self.stats["no_route"] += 1
            log.warning("%s: no route for destination %d at %d ns", self.name, dst, now)
            return []
        if self.choose is not None:
            out = self.choose(dst, out, frame, now)
        view = self.ports
        if view is not None and frame[PTYPE_OFF] == _QPKT and not view.up(out, now):
            return self._unreachable(frame, port, dst, out, now)
        self.stats["forwarded"] += 1
        return [(out, self._next_hop(frame, port, out), now + self.spec.processing_delay_ns)]

    def _unreachable(self, frame: bytes, port: int, dst: int, out: int, now: int) -> list[tuple[int, bytes, int]]:
        """A QsNet packet this router cannot send on (its port toward ``dst`` is down, and the
        policy had no live alternative): NACK it back to its source, which resends (possibly
        another way), and raise an invalid-destination trap (spec 03)."""
        self.stats["invalid_dest"] = self.stats.get("invalid_dest", 0) + 1
        src = _U32.unpack_from(frame, DST_OFF - 4)[0]
        at = now + self.spec.processing_delay_ns
        res = []
        back = self.routes[src] if src < len(self.routes) else -1
        if back >= 0 and len(frame) >= HDR_LEN + 8:
            pkt_id = _U32.unpack_from(frame, len(frame) - 4)[0]
            nack = ACK.pack(AckKind.NACK, Reason.NO_ROUTE, 0, 0, pkt_id, 0)
            res.append((back, build_frame(self.node_id, src, PacketType.QACK, nack, prio=1), at))
        log.info("%s: no way to %d on port %d at %d ns: NACK to %d, invalid-destination trap", self.name, dst, out,
                 now, src)
        res.extend(self.trap(TrapKind.INVALID_DEST, out, dst, now))
        return res

    def trap(self, kind: TrapKind, port: int, dest: int, now: int) -> list[tuple[int, bytes, int]]:
        """Raise a trap: counted, and sent to the network manager if there is one."""
        key = "traps_" + kind.name.lower()
        self.stats[key] = self.stats.get(key, 0) + 1
        mgr = self.manager
        if mgr is None or mgr >= len(self.routes) or self.routes[mgr] < 0:
            return []
        body = TRAP.pack(kind, port & 0xFF, 1, self.node_id, dest, now)
        return [(self.routes[mgr], build_frame(self.node_id, mgr, PacketType.TRAP, body, prio=1),
                 now + self.spec.processing_delay_ns)]

    def _replicate(self, frame: bytes, port: int, gid: int, now: int) -> list[tuple[int, bytes, int]]:
        """A group frame: a copy on every port of the group's tree but the one it came in on."""
        tree = self.groups.get(gid)
        if tree is None:
            self.stats["no_route"] += 1
            log.warning("%s: no group %d at %d ns", self.name, gid, now)
            return []
        at = now + self.spec.processing_delay_ns
        out = [(p, self._next_hop(frame, port, p), at) for p in tree if p != port]
        self.stats["replicated"] = self.stats.get("replicated", 0) + len(out)
        if frame[PTYPE_OFF] == _QPKT and len(frame) >= HDR_LEN + 16:
            # ACK combining (spec 03): expect one ACK per copy, send one back where it came from
            src = _U32.unpack_from(frame, DST_OFF - 4)[0]
            pkt_id = _U32.unpack_from(frame, len(frame) - 4)[0]
            self.combining[(src, pkt_id)] = [port, {p for p, _f, _a in out}, False, 0, 0]
        return out

    def _combine(self, frame: bytes, port: int, src: int, now: int) -> list[tuple[int, bytes, int]] | None:
        """An ACK of a broadcast packet from one branch of the tree: when every branch this switch
        sent a copy down has answered, one ACK (a NACK if any branch NACKed; ``value`` the sum of
        the branches') goes back up toward the source. None: not a packet this switch replicated."""
        kind, reason, flags, _r, pkt_id, value = ACK.unpack(frame, HDR_LEN)
        entry = self.combining.get((src, pkt_id))
        if entry is None or port not in entry[1]:
            if self.groups:  # a member's ACK of a copy already answered (a duplicate): dropped
                self.stats["stray_bcast_acks"] = self.stats.get("stray_bcast_acks", 0) + 1
                return []
            return None
        entry[1].discard(port)
        if kind == AckKind.NACK:
            entry[2], entry[4] = True, reason
        entry[3] += value
        self.stats["acks_combined"] = self.stats.get("acks_combined", 0) + 1
        if entry[1]:
            return []
        del self.combining[(src, pkt_id)]
        nack = entry[2]
        body = ACK.pack(AckKind.NACK if nack else AckKind.ACK, entry[4] if nack else 0,
                        ACK_BCAST, 0, pkt_id, entry[3])
        out = build_frame(self.node_id, src, PacketType.QACK, body, prio=1, vc=frame[VC_OFF])
        return [(entry[0], out, now + self.spec.processing_delay_ns)]

    def _next_hop(self, frame: bytes, port: int, out: int) -> bytes:
        """The frame as it leaves on ``out``: one more hop, and the VC the policy picks."""
        hops = frame[HOPS_OFF]
        if self.vc_select is not None:
            vc = self.vc_select(port, out, frame[VC_OFF])
            return b"".join((frame[:VC_OFF], bytes((vc,)), frame[VC_OFF + 1:HOPS_OFF],
                             bytes(((hops + 1) & 0xFF,)), frame[HOPS_OFF + 1:]))
        return b"".join((frame[:HOPS_OFF], bytes(((hops + 1) & 0xFF,)), frame[HOPS_OFF + 1:]))

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        return []


def make_switch(node, topology, cache: dict) -> SwitchEngine:
    eng = SwitchEngine(node.name, node.id, node.spec, topology.routes.get(node.name),
                       candidates=topology.candidates.get(node.name, []),
                       groups=topology.group_ports.get(node.name, {}),
                       vc_select=selector(node.spec.vc_policy, node, node.spec.vcs))
    make = routing_policy(node.spec.routing)
    if make is not static and not topology.candidates:
        topology.compute_candidates()  # a plan computes them before the engines; a test harness may not
        eng.candidates = topology.candidates.get(node.name, [])
    eng.choose = make(eng, cache.get("seed", 0))
    return eng


register_engine("switch", make_switch, min_delay=lambda spec: spec.processing_delay_ns)

