"""The switch engine: table forwarding with a per-frame processing delay (sans-I/O)."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

import emu.native as native
from emu.config import SwitchSpec
from emu.wire import DST_OFF, ETHERTYPE_FABRIC, FLAG_BCAST, HDR_LEN, HOPS_OFF, DecodeError, PacketType, build_frame
from emu.wire.framing import ETHERNET, framing
from emu.wire.qsnet import ACK, ACK_BCAST, MGMT, ROUTE_ENTRY, AckKind, MgmtOp, Reason, TRAP, TrapKind, is_qsnet_packet

from .routing import lookup as routing_policy
from .routing import static
from .vc import selector

VC_OFF = DST_OFF + 4  # the fabric header's vc byte
FLAGS_OFF = DST_OFF + 7  # ... and its flags
PTYPE_OFF = DST_OFF + 6  # ... and its packet type
_QPKT, _QACK = int(PacketType.QPKT), int(PacketType.QACK)  # plain ints: compared per frame
_TRAP, _MGMT, _INC, _INCCTL = (int(PacketType.TRAP), int(PacketType.MGMT), int(PacketType.INC),
                               int(PacketType.INCCTL))
_SPECIAL = frozenset((_TRAP, _MGMT, _INC, _INCCTL))
"""Packet types a switch may take for itself rather than forward."""
_LINK_OPS = (MgmtOp.HELLO, MgmtOp.HELLO_ACK, MgmtOp.PATTERN, MgmtOp.END, MgmtOp.RESULT)

log = logging.getLogger(__name__)

MAX_HOPS = 255
"""A frame that arrives having crossed this many routers (the fabric header's 8-bit ``hops``, which
would wrap next) is looping and is dropped (``hop_limit``); no topology here has a path near it."""

_U32 = struct.Struct("!I")
_ET_HI, _ET_LO = ETHERTYPE_FABRIC >> 8, ETHERTYPE_FABRIC & 0xFF

if native.CORE is not None:  # the compiled core forwards what the table alone decides (plain_table)
    native.CORE.switch_setup(bytes(1 if t in _SPECIAL or t in (_QPKT, _QACK) else 0 for t in range(256)), MAX_HOPS)


_PLAIN_INPUTS = frozenset(("choose", "pending", "held", "cut_through", "min_delay_ns", "spec", "vc_select", "routes",
                           "__class__"))
"""The engine's attributes :meth:`SwitchEngine.plain_table_now` reads (``__class__``: ``type(self)``):
assigning one recomputes ``plain_table`` (``held`` is in it as the set itself, which changes in place)."""


@dataclass(eq=False)
class SwitchEngine:
    name: str
    node_id: int
    spec: SwitchSpec
    routes: list[int]
    """Output port per destination host address (-1: no route)."""
    timer: int | None = None
    kind = "switch"
    tracer = None
    """The run's ``emu.trace.Tracer`` when traced (traps and NACKs as instant events), else None."""
    passes_damaged = staticmethod(is_qsnet_packet)
    """Cut-through for QsNet packets: one that fails a link's FCS is forwarded all the same (its
    head left before its tail was checked); the target adapter's CRC-32 catches it and NACKs."""
    combining: dict = field(default_factory=dict)
    """Broadcast packets replicated here whose ACKs are being combined: (source, packet id) ->
    [in port, ports still to answer, any NACK, sum of values, NACK reason]."""
    manager: int | None = None
    """Fabric address of the network manager that receives this router's traps (None: counted only)."""
    manager_port: int | None = None
    """This router's port toward the manager (the manager tree); commands are taken from it only."""
    trusted: frozenset = frozenset()
    """Ports to other routers and the manager: management frames (traps, commands, answers) are
    taken from them only, never from a host's port (a host cannot forge a command or a trap)."""
    held: set = field(default_factory=set)
    """Ports not in service: their bring-up is not over, or failed and the manager has not admitted
    them (a QsNet packet routed there is NACKed, others dropped)."""
    link_test: object = None
    """``emu.bringup.LinkTest`` when links are brought up (``ManagerSpec.bringup``)."""
    agg: object = None
    """``emu.switch.aggregate.engine.Aggregator`` once the manager installed an allreduce here (spec 04)."""
    stats: dict[str, int] = field(default_factory=lambda: {"forwarded": 0, "malformed": 0, "no_route": 0})

    candidates: list = field(default_factory=list)
    """Minimal next-hop ports per destination host address (for adaptive and dispersive routing)."""
    groups: dict = field(default_factory=dict)
    """Multicast group id -> the ports of its tree at this switch."""
    choose: object = None
    """The routing policy's ``choose(dst, static_port, frame, now)`` (``emu.switch.routing``), or None:
    static."""
    ports: object = None
    """The runtime's port view (what the adaptive policy reads)."""
    vc_select: object = None
    """``select(in_port, out_port, vc) -> vc`` (``emu.switch.vc``), or None: frames keep their VC."""
    retag: object = None
    """``retag(frame, out) -> frame``: a policy that routes in phases (``emu.switch.routing.nonminimal``:
    Valiant, UGAL, PAR) rewrites the fabric header's flags and ``rsvd`` of the frame it has just
    chosen ``out`` for; None: frames keep them."""
    network: object = None
    """(topology, the domain's engine cache): for policies that need the whole network (set before
    the policy is made)."""
    pending: object = None
    """``emu.switch.routing.pending.Pending`` when the policy's load is the pending operations per link
    (``routing=qsnet``, ``adaptive_load=pending``): QsNet packets are counted out, their tokens retrace."""

    port_bps: dict = field(default_factory=dict)
    """Line rate of the link on each port (virtual cut-through needs both ends' serialisation)."""
    port_framing: dict = field(default_factory=dict)
    """The link's framing on each port (``emu.wire.framing``): a frame's time on a line is that of its
    modelled length there."""

    def mlen(self, port: int, frame) -> int:
        """The modelled length of MAC client frame ``frame`` on the link of ``port``."""
        return self.port_framing.get(port, ETHERNET).length(frame)

    def __post_init__(self) -> None:
        self.min_delay_ns = self.spec.processing_delay_ns
        self.cut_through = self.spec.cut_through and not self.spec.finite
        """Virtual cut-through is on (``SwitchSpec.cut_through``, unbounded buffers)."""
        object.__setattr__(self, "_plain_kept", True)
        object.__setattr__(self, "plain_table", self.plain_table_now())

    plain_table = None
    """``(routes, processing delay, held)`` while this switch may forward a plain data frame by its
    table alone -- static routing, store-and-forward, frames keep their VC (:meth:`plain_table_now`)
    -- and ``held`` (the ports out of service) is empty; else None. Then the compiled core
    (``emu.native``, and ``Element.run_window`` with it) forwards those frames itself, exactly as
    :meth:`receive` would: a frame of the types in ``_SPECIAL``, a QsNet packet or ACK, a broadcast,
    a frame with no route or at the hop limit it leaves to :meth:`receive`. Kept by ``__setattr__``
    whenever one of what it depends on is assigned (``_PLAIN_INPUTS``); ``held`` is read per window
    (its emptiness changes in place), so the core asks no Python code per window."""

    _plain_kept = False
    """``plain_table`` is kept from here on (set when the dataclass's ``__init__`` has set every field)."""

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name in _PLAIN_INPUTS and self._plain_kept:
            object.__setattr__(self, "plain_table", self.plain_table_now())

    def plain_table_now(self) -> tuple[list, int, set] | None:
        """What :attr:`plain_table` is, computed from the engine as it is now (its specification)."""
        if self.choose is None and self.pending is None and not self.cut_through and not self.spec.queues.on \
                and self.min_delay_ns <= self.spec.processing_delay_ns \
                and self.vc_select is None and type(self.routes) is list and type(self).receive is SwitchEngine.receive:
            return self.routes, self.spec.processing_delay_ns, self.held
        return None

    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        if len(frame) < HDR_LEN or frame[12] != _ET_HI or frame[13] != _ET_LO:
            self.stats["malformed"] += 1
            log.warning("%s: dropped malformed frame (%d bytes) on port %d at %d ns", self.name, len(frame), port, now)
            return []
        dst = _U32.unpack_from(frame, DST_OFF)[0]
        pt = frame[PTYPE_OFF]
        if pt in _SPECIAL:  # (one test for the data frames that pass by)
            if pt == _MGMT or (pt == _TRAP and dst == self.manager):
                return self._management(frame, port, dst, now)
            if pt == _INCCTL and dst == self.manager and self.manager_port is not None:
                # a host's request to the network manager (the manager checks it): up the manager tree
                return [(self.manager_port, self._next_hop(frame, port, self.manager_port),
                         now + self.spec.processing_delay_ns)]
            if pt == _INC:
                if self.agg is None:
                    self.stats["inc_unknown"] = self.stats.get("inc_unknown", 0) + 1
                    return []
                out = self.agg.receive(frame, port, now)
                self._set_timer()
                return out
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
        pend = self.pending
        if pend is not None and (pt == _QPKT or pt == _QACK):  # QsNet's load: pending operations per link
            back = pend.returned(frame, now) if pt == _QACK else None
            view = self.ports
            if back is not None and (view is None or view.up(back, now)):
                out = back  # the token retraces its packet's route
            else:
                if self.choose is not None:
                    out = self.choose(dst, out, frame, now)
                if pt == _QPKT:
                    pend.sent(frame, port, out, now)
        elif self.choose is not None:
            out = self.choose(dst, out, frame, now)
            if self.retag is not None:
                frame = self.retag(frame, out)
        view = self.ports
        if view is not None and pt == _QPKT and not view.up(out, now) or out in self.held:
            if pt != _QPKT:
                self.stats["held_drops"] = self.stats.get("held_drops", 0) + 1
                return []
            return self._unreachable(frame, port, dst, out, now)
        if frame[HOPS_OFF] >= MAX_HOPS:  # a loop (a table rewritten under traffic): the frame dies here
            return self._hop_limit(frame, dst, now)
        self.stats["forwarded"] += 1
        if self.cut_through:  # the head left once the header was through; the tail not before it came
            bps = self.port_bps
            shorter = min(-(-8_000_000_000 * self.mlen(port, frame) // bps[port]),
                          -(-8_000_000_000 * self.mlen(out, frame) // bps[out]))
            return [(out, self._next_hop(frame, port, out), now + self.spec.processing_delay_ns - shorter)]
        if self.vc_select is None:  # ``_next_hop`` inline: one more hop
            b = bytearray(frame)
            b[HOPS_OFF] = (b[HOPS_OFF] + 1) & 0xFF
            return [(out, bytes(b), now + self.spec.processing_delay_ns)]
        return [(out, self._next_hop(frame, port, out), now + self.spec.processing_delay_ns)]

    def _hop_limit(self, frame: bytes, dst: int, now: int) -> list:
        """Drop a frame that has crossed ``MAX_HOPS`` routers: it can only be looping. Counted and
        logged here; the sender's transport (QsNet's adapter, the reliable host transport) resends or
        gives up and says so, instead of the loop running forever."""
        self.stats["hop_limit"] = self.stats.get("hop_limit", 0) + 1
        log.warning("%s: a frame for %d crossed %d routers (a routing loop?): dropped at %d ns",
                    self.name, dst, MAX_HOPS, now)
        return []

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
            if self.pending is not None:  # not sent after all; the NACK retraces the packet's way in
                self.pending.forget((src, pkt_id))
                back = port
            nack = ACK.pack(AckKind.NACK, Reason.NO_ROUTE, 0, 0, pkt_id, 0)
            res.append((back, build_frame(self.node_id, src, PacketType.QACK, nack, prio=1), at))
            if self.tracer is not None:
                self.tracer.instant(self.name, "NACK", now, {"to": src, "reason": "no route", "dest": dst}, "nack")
        log.info("%s: no way to %d on port %d at %d ns: NACK to %d, invalid-destination trap", self.name, dst, out,
                 now, src)
        res.extend(self.trap(TrapKind.INVALID_DEST, out, dst, now))
        return res

    def trap(self, kind: TrapKind, port: int, dest: int, now: int) -> list[tuple[int, bytes, int]]:
        """Raise a trap: counted, and sent to the network manager if there is one."""
        key = "traps_" + kind.name.lower()
        self.stats[key] = self.stats.get(key, 0) + 1
        return self._trap(kind, port, 1, dest, now)

    def _trap(self, kind: TrapKind, port: int, count: int, dest: int, now: int) -> list[tuple[int, bytes, int]]:
        if self.tracer is not None:
            self.tracer.instant(self.name, "trap", now, {"kind": kind.name, "port": port, "dest": dest}, "trap")
        if self.manager is None or self.manager_port is None:
            return []
        body = TRAP.pack(kind, port & 0xFF, min(count, 0xFFFF), self.node_id, dest & 0xFFFFFFFF, now)
        return [(self.manager_port, build_frame(self.node_id, self.manager, PacketType.TRAP, body, prio=1),
                 now + self.spec.processing_delay_ns)]

    def on_link_change(self, port: int, up: bool, now: int) -> list[tuple[int, bytes, int]]:
        """A link of this router went down or came back: a trap to the manager."""
        return self.trap(TrapKind.LINK_UP if up else TrapKind.LINK_DOWN, port, 0, now)

    # -- management: traps up the manager tree, commands down it, link bring-up ------------------
    def _management(self, frame: bytes, port: int, dst: int, now: int) -> list[tuple[int, bytes, int]]:
        at = now + self.spec.processing_delay_ns
        if dst == self.manager and self.manager_port is not None:  # a trap or an answer, on its way up
            if port not in self.trusted:
                return self._foreign(frame, port, now, "to the manager from a host's port")
            if frame[PTYPE_OFF] == _MGMT and len(frame) > HDR_LEN + 3 and frame[HDR_LEN + 2]:
                return self._source_routed(frame, port, now, back=False)  # an answer retracing its command
            return [(self.manager_port, self._next_hop(frame, port, self.manager_port), at)]
        if len(frame) < HDR_LEN + MGMT.size:
            return self._foreign(frame, port, now, "too short")
        op, hop, nhops, _r, seq, count = MGMT.unpack(frame, HDR_LEN)
        if op in _LINK_OPS:
            if self.link_test is None:
                return self._foreign(frame, port, now, "bring-up frame, no bring-up here")
            why = self.link_test.refused(op, port)
            if why is not None:  # not this port's: a forged or stray frame gets no answer
                return self._foreign(frame, port, now, why)
            out = self.link_test.on_frame(frame, port, _U32.unpack_from(frame, DST_OFF - 4)[0], now)
            self._set_timer()
            return out
        if port not in self.trusted:  # commands come from the manager through routers, never from a host
            return self._foreign(frame, port, now, f"command {op} from a host's port")
        if dst != self.node_id:  # on its way down: the next route byte
            return self._source_routed(frame, port, now, back=True)
        if len(frame) < HDR_LEN + MGMT.size + 2 * nhops:
            return self._foreign(frame, port, now, "shorter than its routes")
        routes = frame[HDR_LEN + MGMT.size:HDR_LEN + MGMT.size + 2 * nhops]
        body = frame[HDR_LEN + MGMT.size + 2 * nhops:]
        try:
            ok = self._command(op, count, body)
        except (ValueError, IndexError, struct.error, DecodeError) as e:
            return self._foreign(frame, port, now, f"bad command {op}: {e}")
        self.stats["commands"] = self.stats.get("commands", 0) + 1
        # the answer retraces the command: out the port it came in on, then the ports it entered by
        back = bytes(reversed(routes[nhops:]))
        answer = MGMT.pack(MgmtOp.DONE if ok is not False else MgmtOp.REFUSED, 0, nhops, 0, seq, count) \
            + back + bytes(nhops)
        return [(port, build_frame(self.node_id, self.manager, PacketType.MGMT, answer, prio=1), at)]

    def _source_routed(self, frame: bytes, port: int, now: int, back: bool) -> list[tuple[int, bytes, int]]:
        """A management frame passing through: out the route byte for this hop. On the way down
        the router also writes the port it came in by (the answer's way back)."""
        hop, nhops = frame[HDR_LEN + 1], frame[HDR_LEN + 2]
        if hop >= nhops or len(frame) < HDR_LEN + MGMT.size + 2 * nhops:
            return self._foreign(frame, port, now, "source route exhausted")
        out = frame[HDR_LEN + MGMT.size + hop]
        if out not in self.trusted:
            return self._foreign(frame, port, now, f"source route to port {out}, not a router's")
        f = bytearray(self._next_hop(frame, port, out))
        f[HDR_LEN + 1] = hop + 1
        if back:
            f[HDR_LEN + MGMT.size + nhops + hop] = port
        return [(out, bytes(f), now + self.spec.processing_delay_ns)]

    def _command(self, op: int, count: int, body: bytes) -> None:
        if op == MgmtOp.SET_ROUTES:  # entries: dest u32, n u8, n ports (the first: the static choice)
            routes = self.routes = list(self.routes)  # copy on write: tables are shared between routers
            cands = self.candidates = list(self.candidates) if self.candidates else self.candidates
            off = 0
            for _ in range(count):
                dest, n = ROUTE_ENTRY.unpack_from(body, off)
                ports = tuple(body[off + ROUTE_ENTRY.size:off + ROUTE_ENTRY.size + n])
                if len(ports) != n or dest >= len(routes):
                    raise ValueError(f"entry for {dest} with {n} ports does not fit")
                off += ROUTE_ENTRY.size + n
                routes[dest] = ports[0] if ports else -1
                if cands:
                    cands[dest] = ports
            self.stats["routes_rewritten"] = self.stats.get("routes_rewritten", 0) + count
        elif op == MgmtOp.SET_GROUP:
            gid = _U32.unpack_from(body)[0]
            ports = tuple(body[4:4 + count])
            self.groups = dict(self.groups)
            if ports:
                self.groups[gid] = ports
            else:
                self.groups.pop(gid, None)
        elif op == MgmtOp.ADMIT:
            self.held.discard(count)
        elif op == MgmtOp.RESET:  # the manager resets links: out of data service, both ways, until ADMIT
            # (the port up the manager tree too: traps, commands and answers still cross a port out of
            # service, as subnet management packets cross an InfiniBand port that is not active)
            self.held.update(self.port_bps if count == 0xFFFF else (count,))
        elif op == MgmtOp.INC_INSTALL:
            from emu.wire.inc import INSTALL

            from .aggregate.engine import Aggregator

            children, _n, parent, algo, repro, dtype, sparse, elems, buffers, opc, span = INSTALL.unpack(body)
            if self.agg is None:
                self.agg = Aggregator(self)
            ports = tuple(p for p in range(64) if children >> p & 1)
            return self.agg.install(count, ports, None if parent == 255 else parent, algo, bool(repro), opc, dtype,
                                    elems, buffers, span if sparse else 0, "hash" if sparse == 2 else "array")
        elif op == MgmtOp.INC_RELEASE:
            if self.agg is not None:
                self.agg.release(count)
        else:
            raise ValueError("unknown operation")
        return True

    def _foreign(self, frame: bytes, port: int, now: int, why: str) -> list:
        self.stats["foreign_mgmt"] = self.stats.get("foreign_mgmt", 0) + 1
        log.warning("%s: dropped a management frame on port %d at %d ns: %s", self.name, port, now, why)
        return []

    def _bringup_done(self, port: int, outcome, errors: int, sample: int, peer: int, peer_port: int,
                      now: int) -> list:
        from emu.bringup import Bringup

        ok = outcome is Bringup.UP and errors <= int(self.max_error_rate * sample + 1e-9)
        if port not in self.link_test.starts:  # the answering end: a link it finds bad, in its own words
            if outcome is Bringup.DEAD:
                self.stats["bringup_no_hello"] = self.stats.get("bringup_no_hello", 0) + 1
                return self._trap(TrapKind.LINK_DOWN, port, 0, peer, now)
            if ok:
                return []
            self.stats["bringup_bad_in"] = self.stats.get("bringup_bad_in", 0) + 1
            return self._trap(TrapKind.BRINGUP_ONEWAY, port, errors, peer, now)
        self.stats["bringup_" + outcome.value] = self.stats.get("bringup_" + outcome.value, 0) + 1
        if ok:
            self.held.discard(port)
        if outcome is Bringup.MISCABLED:
            return self._trap(TrapKind.MISCABLED, port, peer_port, peer, now)
        if outcome is Bringup.DEAD:
            return self._trap(TrapKind.LINK_DOWN, port, 0, peer, now)
        return self._trap(TrapKind.BRINGUP, port, errors, peer, now)

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
        b = bytearray(frame)  # one copy in, one out (slicing and joining would copy it twice too, and more)
        b[HOPS_OFF] = (b[HOPS_OFF] + 1) & 0xFF
        if self.vc_select is not None:
            b[VC_OFF] = self.vc_select(port, out, frame[VC_OFF])
        return bytes(b)

    max_error_rate: float = 0.0
    """Bring-up: the share of its test frames a port may lose or damage and go into service at once
    (``ManagerSpec.max_error_rate``)."""

    queues = None
    """``switch.queues.SwitchQueues`` when ``SwitchSpec.queues`` turns a mechanism on (``attach_queues``)."""

    def attach_queues(self, outs: list, seed: int) -> None:
        """The element's output ports, once built: the queue mechanisms take them (``emu.build``)."""
        if self.spec.queues.on:
            from .queues import attach

            self.queues = attach(self, outs, seed)

    def extra_stats(self) -> dict[str, dict[str, int]]:
        """The processing unit's counters (``Cluster.stats``), once an allreduce was installed here."""
        out = {"pu": dict(self.agg.pu.stats)} if self.agg is not None else {}
        if self.queues is not None and self.queues.buffer:
            out["queues"] = {"peak_shared_bytes": self.queues.peak_bytes}
        if self.pending is not None:
            out["pending"] = dict(self.pending.stats)
        return out

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        out = []
        lt = self.link_test
        if lt is not None and (lt.next_deadline() or 0) <= now:
            out += lt.start(now) if not lt.started else lt.on_timer(now)
        if self.agg is not None:
            out += self.agg.on_timer(now)
        self._set_timer()
        return out

    def _set_timer(self) -> None:
        ts = [t for t in (self.link_test.next_deadline() if self.link_test is not None else None,
                          self.agg.next_time() if self.agg is not None else None) if t is not None]
        self.timer = min(ts) if ts else None


def make_switch(node, topology, cache: dict, engine: SwitchEngine | None = None) -> SwitchEngine:
    """The output-queued switch of ``node`` (or ``engine``, a subclass made by the caller, wired
    the same way: routing policy, line rates, the network manager)."""
    eng = engine
    if eng is None:
        eng = SwitchEngine(node.name, node.id, node.spec, topology.routes.get(node.name),
                           candidates=topology.candidates.get(node.name, []),
                           groups=topology.group_ports.get(node.name, {}),
                           vc_select=selector(node.spec.vc_policy, node, node.spec.vcs))
    make = routing_policy(node.spec.routing)
    if make is not static and not topology.candidates:
        topology.compute_candidates()  # a plan computes them before the engines; a test harness may not
        eng.candidates = topology.candidates.get(node.name, [])
    eng.network = (topology, cache)
    eng.choose = make(eng, cache.get("seed", 0))
    nb = cache.get("neighbours")
    if nb is None:
        nb = cache["neighbours"] = topology.neighbours()
    eng.port_bps = {p: lk.spec.bandwidth_bps for p, _v, _vp, lk in nb[node.name]}
    eng.port_framing = {p: framing(lk.spec.framing) for p, _v, _vp, lk in nb[node.name]}
    if topology.manager is not None:
        _managed(eng, node, topology)
    return eng


def _managed(eng: SwitchEngine, node, topology) -> None:
    """Wire a router to the network manager: its port up the manager tree, the ports of the routers
    below, and link bring-up if the manager asks for it."""
    mgr = topology.nodes[topology.manager]
    eng.manager = mgr.id
    eng.manager_port = topology.manager_ports.get(node.name)
    nb = topology.neighbours()
    eng.trusted = frozenset(p for p, v, _vp, _ in nb[node.name] if topology.nodes[v].kind == "switch")
    spec = mgr.info["manager"]
    if not spec.bringup:
        return
    from emu.bringup import LinkTest

    plan = topology.cabling_plan
    starts = {}
    for p, v, vp, _ in nb[node.name]:
        peer = topology.nodes[v]
        if v == topology.manager or (peer.kind == "switch" and peer.id < node.id):
            continue  # the lower address starts a switch-to-switch link; hosts never start
        exp_name, exp_port = plan.get((node.name, p), (v, vp))
        starts[p] = (topology.nodes[exp_name].id, exp_port)
    eng.held = set(starts) | {p for p, v, vp, _ in nb[node.name]
                              if v != topology.manager and topology.nodes[v].kind == "switch"}
    eng.max_error_rate = spec.max_error_rate
    answers = frozenset(p for p, v, _vp, _ in nb[node.name]
                        if v != topology.manager and topology.nodes[v].kind == "switch" and p not in starts)
    eng.link_test = LinkTest(node.id, eng.spec.processing_delay_ns, starts, eng._bringup_done,
                             spec.test_frames, spec.test_bytes, answered=eng.held.discard, answers=answers,
                             port_bps=eng.port_bps, port_framing=eng.port_framing)
    eng.timer = 0
