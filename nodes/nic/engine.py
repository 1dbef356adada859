"""The host's NIC: the engine of a host node (sans-I/O, DESIGN.md principle 1).

``receive(frame, port, now)`` and ``on_timer(now)`` return the frames to send as ``(port, frame,
at)``; ``timer`` says when to call ``on_timer`` next. The NIC segments the messages its host sends
and reassembles those it receives, answers echo requests, and carries the collective-offload unit
of spec 01 (``coll``, :mod:`nodes.nic.coll`). The host it serves (``host``,
:class:`nodes.host.engine.Host`: the applications and their CPU time) reaches it through
:meth:`send_message`, :meth:`ping` and ``coll``, and hears back through ``host.deliver``,
``host.pong`` and ``host.completion``.

Timing (all virtual):

* a message is cut into frames of at most ``mtu_bytes`` of data; each frame is handed to the port
  ``nic_delay_ns`` after the NIC took the message;
* a message is delivered to the host ``nic_delay_ns`` after its last frame arrived;
* the NIC answers an echo request ``nic_delay_ns`` after it arrived; a reply reaches the host
  ``nic_delay_ns`` after it arrived.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from emu.build import register_engine
from emu.config import HostSpec
from emu.wire import (ETH_LEN, FABRIC, FLAG_BCAST, HDR_LEN, MSG, PING, DecodeError, PacketType, build_frame,
                      parse_frame)

from emu.wire.qsnet import is_qsnet_packet

from ..host.api import Message
from ..host.engine import AppState, Host
from ..timers import Timers
from .coding import CodingNIC
from .coll import CollNIC
from .inc import IncNIC
from .qsnet import QsNIC

log = logging.getLogger(__name__)

_MSG_LEN = MSG.size
BIG_MESSAGE = 1 << 20
"""Messages longer than this reach the application as a ``bytearray`` (the reassembly buffer)."""
_FABRIC_PACK = FABRIC.struct.pack


@dataclass(eq=False)
class _Partial:
    tag: int
    buf: bytearray
    got: int = 0


@dataclass(eq=False)
class NicEngine:
    name: str
    node_id: int
    spec: HostSpec
    routes: list[int] | None
    """Output port per destination host address, or None: everything leaves on port 0."""
    host_ids: dict[str, int]
    """Every host's name -> fabric address (shared by all hosts of a process)."""
    names: list[str]
    """Host names by address (shared)."""
    seed: int = 0
    """The run's seed (the adapter's random route picks draw from it and the node id)."""
    timer: int | None = None
    now: int = 0
    rails: int = 1
    """Links of this node (multi-rail: one to each network); QsNet packets are striped over them."""
    grid: tuple | None = None
    """A direct network's (k, n, wrap) (``topologies.grid.Grid``), for spec 02's coded broadcast."""
    manager: int | None = None
    """Fabric address of the network manager (spec 04 requests go there), if the topology has one."""
    kind = "host"
    passes_damaged = staticmethod(is_qsnet_packet)
    """QsNet packets that fail the link's FCS still reach the adapter, which checks their own
    CRCs and NACKs a damaged payload (spec 03)."""
    stats: dict[str, int] = field(default_factory=lambda: {
        "malformed": 0, "misdelivered": 0, "no_route": 0, "messages_sent": 0, "messages_received": 0,
        "frames_sent": 0, "frames_received": 0, "pings_answered": 0})

    def __post_init__(self) -> None:
        self.min_delay_ns = self.spec.nic_delay_ns
        self.timers = Timers()
        self._out: list[tuple[int, bytes, int]] = []
        self._partial: dict[tuple[int, int], _Partial] = {}
        self._msg_id = 0
        self._ping_seq = 0
        self._heads: dict[int, bytes] = {}
        self.coll = CollNIC(self)
        self.qs = QsNIC(self)
        self.inc = IncNIC(self)
        self.nc = CodingNIC(self)
        self.host = Host(self)

    # -- engine interface -----------------------------------------------------------------------
    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        self.now = now
        self._out = out = []
        try:
            src, dst, _vc, _prio, ptype, flags, hops, _r, length = parse_frame(frame)
            if ptype == PacketType.MGMT:  # link bring-up: the switch starts, the NIC answers
                out.extend(self._link_test().on_frame(frame, port, src, now))
                return out
            if ptype == PacketType.INC:  # in-network allreduce: results come hop by hop from the switch
                self.inc.on_data(frame, now)
                self.timer = self.timers.next
                return out
            if dst != self.node_id and not flags & FLAG_BCAST:  # a group frame is for every member
                self.stats["misdelivered"] += 1
                log.debug("%s: frame for %d delivered here", self.name, dst)
                return out
            self.stats["frames_received"] += 1
            if ptype == PacketType.MSG:
                self._on_segment(src, hops, frame)
            elif ptype == PacketType.PING:
                ident, seq, t_sent = PING.unpack(frame, HDR_LEN)
                self.stats["pings_answered"] += 1
                self.emit(src, PacketType.PONG, PING.pack(ident, seq, t_sent), now + self.spec.nic_delay_ns)
            elif ptype == PacketType.COLL:
                self.coll.receive(frame, src, now)
            elif ptype == PacketType.QPKT:
                self.qs.port_in = port
                self.qs.on_packet(frame, src, now)
            elif ptype == PacketType.QACK:
                self.qs.on_ack(frame, src, now)
            elif ptype == PacketType.INCCTL:
                self.inc.on_ctl(frame, src, now)
            elif ptype == PacketType.NC:
                self.nc.on_frame(frame, src, now)
            elif ptype == PacketType.PONG:
                ident, seq, t_sent = PING.unpack(frame, HDR_LEN)
                waiter = self.host.take_ping(seq)
                if waiter is None:
                    raise DecodeError(f"echo reply seq {seq} matches no outstanding ping")
                t = now + self.spec.nic_delay_ns
                self.at(t, self.host.resume, (waiter, t - t_sent))
            else:
                raise DecodeError(f"packet type {ptype} is not handled by a host")
        except (DecodeError, struct.error) as e:
            self.stats["malformed"] += 1
            log.warning("%s: dropped malformed frame at %d ns: %s", self.name, now, e)
        self.timer = self.timers.next
        return out

    def _link_test(self):
        lt = getattr(self, "_lt", None)
        if lt is None:
            from emu.bringup import LinkTest

            lt = self._lt = LinkTest(self.node_id, self.spec.nic_delay_ns, {}, lambda *a: [])
        return lt

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        self.now = now
        self._out = out = []
        self.timers.run_due(now)
        self.timer = self.timers.next
        return out

    # applications run on the host this NIC serves
    def start_app(self, key: str, fn: Callable, args: tuple, now: int) -> None:
        self.host.start_app(key, fn, args, now)
        self.timer = self.timers.next

    def app_states(self) -> list[AppState]:
        return self.host.app_states()

    def extra_stats(self) -> dict[str, dict[str, int]]:
        """Counters of the engine's parts, for ``Cluster.stats``."""
        return {"nic": dict(self.coll.stats), "qsnet": dict(self.qs.stats), "inc": dict(self.inc.stats),
                "coding": dict(self.nc.stats)}

    # -- what the host asks of its NIC ----------------------------------------------------------
    def at(self, t: int, fn: Callable, arg: Any) -> int:
        return self.timers.at(t, fn, arg)

    def resolve(self, host: str | int) -> int:
        if isinstance(host, str):
            try:
                return self.host_ids[host]
            except KeyError:
                raise ValueError(f"unknown host {host!r}; hosts are {list(self.host_ids)[:8]}...") from None
        if not 0 <= host < len(self.names):
            raise ValueError(f"unknown host address {host}")
        return host

    def send_message(self, dst: int, tag: int, data: bytes, t: int) -> None:
        """Take a message at ``t`` (after the sender's software overhead) and put its frames out."""
        total = len(data)
        mtu = self.spec.mtu_bytes
        self._msg_id = msg_id = (self._msg_id + 1) & 0xFFFFFFFF
        at = t + self.spec.nic_delay_ns
        # the frames ``emit`` would make, each in one join (no header+chunk intermediate)
        port, head = self._route(dst, None)
        out, fab, msg, join, me, ptype = self._out.append, _FABRIC_PACK, MSG.pack, b"".join, self.node_id, PacketType.MSG
        off = frames = 0
        while True:
            chunk = data[off:off + mtu]
            n = len(chunk)
            out((port, join((head, fab(me, dst, 0, 0, ptype, 0, 0, 0, _MSG_LEN + n), msg(msg_id, tag, total, off), chunk)), at))
            frames += 1
            off += n
            if off >= total:
                break
        self.stats["frames_sent"] += frames
        self.stats["messages_sent"] += 1

    def ping(self, dst: int) -> int:
        """Send an echo request now; returns its sequence number (the reply carries it back)."""
        self._ping_seq = seq = (self._ping_seq + 1) & 0xFFFFFFFF
        self.emit(dst, PacketType.PING, PING.pack(self.node_id, seq, self.now), self.now + self.spec.nic_delay_ns)
        return seq

    def emit(self, dst: int, ptype: int, body: bytes, at: int, *, vc: int = 0, prio: int = 0, flags: int = 0,
             rsvd: int = 0, port: int | None = None) -> None:
        """A frame to ``dst`` (out the routed port, or ``port``: a rail of a multi-rail node)."""
        if flags & FLAG_BCAST:  # a group frame (dst: the group id): out on port 0, Ethernet broadcast
            head = self._heads.get(-1)  # the same for every group: broadcast MAC, ours
            if head is None:
                head = self._heads[-1] = build_frame(self.node_id, dst, ptype, b"", flags=FLAG_BCAST)[:ETH_LEN]
            self._out.append((0, head + _FABRIC_PACK(self.node_id, dst, vc, prio, ptype, flags, 0, rsvd, len(body))
                              + body, at))
            self.stats["frames_sent"] += 1
            return
        port, head = self._route(dst, port)
        self._out.append((port, b"".join((head, _FABRIC_PACK(self.node_id, dst, vc, prio, ptype, flags, 0, rsvd, len(body)), body)), at))
        self.stats["frames_sent"] += 1

    def _route(self, dst: int, port: int | None) -> tuple[int, bytes]:
        """The port toward host ``dst`` (``port`` if given) and the Ethernet header of frames to it."""
        if port is None:
            port = 0 if self.routes is None else (self.routes[dst] if 0 <= dst < len(self.routes) else -1)
        if port < 0:
            self.stats["no_route"] += 1
            raise ValueError(f"{self.name} has no route to host address {dst}")
        head = self._heads.get(dst)
        if head is None:
            head = self._heads[dst] = build_frame(self.node_id, dst, 0, b"")[:ETH_LEN]
        return port, head

    # -- reassembly -----------------------------------------------------------------------------
    def _on_segment(self, src: int, hops: int, frame: bytes) -> None:
        msg_id, tag, total, offset = MSG.unpack(frame, HDR_LEN)
        chunk = frame[HDR_LEN + _MSG_LEN:]
        if offset + len(chunk) > total:
            raise DecodeError(f"segment at {offset}+{len(chunk)} overruns message of {total} bytes")
        name = self.names[src] if 0 <= src < len(self.names) else str(src)
        if offset == 0 and len(chunk) == total:  # a one-frame message: nothing to reassemble
            self.stats["messages_received"] += 1
            t = self.now + self.spec.nic_delay_ns
            self.at(t, self.host.deliver, Message(name, tag, chunk, t, hops))
            return
        key = (src, msg_id)
        part = self._partial.get(key)
        if part is None:
            if total > self.spec.max_message_bytes:
                raise DecodeError(f"message of {total} bytes announced, over max_message_bytes "
                                  f"({self.spec.max_message_bytes})")
            part = self._partial[key] = _Partial(tag, bytearray(total))
        elif part.tag != tag or len(part.buf) != total:
            raise DecodeError(f"segment of message {msg_id} from {src} disagrees with the first one "
                              f"(tag {tag}/{part.tag}, total {total}/{len(part.buf)})")
        part.buf[offset:offset + len(chunk)] = chunk
        part.got += len(chunk)
        if part.got >= total:
            del self._partial[key]
            # a large message is handed over as its reassembly buffer (no copy); a small one as bytes
            data = part.buf if total > BIG_MESSAGE else bytes(part.buf)
            msg = Message(name, tag, data, self.now + self.spec.nic_delay_ns, hops)
            self.stats["messages_received"] += 1
            self.at(msg.t_ns, self.host.deliver, msg)


def host_tables(topology) -> tuple[dict[str, int], list[str]]:
    """Every host's name -> address, and names by address (shared by the hosts of a process)."""
    names = topology.host_names()
    return {n: i for i, n in enumerate(names)}, names


def make_host(node, topology, cache: dict) -> NicEngine:
    shared = cache.get("host_tables")
    if shared is None:
        shared = cache["host_tables"] = host_tables(topology)
    return NicEngine(node.name, node.id, node.spec, topology.routes.get(node.name), shared[0], shared[1],
                     cache.get("seed", 0), rails=max(1, topology.nports(node.name)),
                     manager=topology.nodes[topology.manager].id if topology.manager else None,
                     grid=getattr(topology, "grid", None))


register_engine("host", make_host, min_delay=lambda spec: spec.nic_delay_ns)
