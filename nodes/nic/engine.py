"""The host's NIC: the engine of a host node (sans-I/O, DESIGN.md principle 1).

``receive(frame, port, now)`` and ``on_timer(now)`` return the frames to send as ``(port, frame,
at)``; ``timer`` says when to call ``on_timer`` next. The NIC segments the messages its host sends
and reassembles those it receives, answers echo requests, and loads its mechanisms by name
(:mod:`emu.nodes.nic.interface`: spec 01's triggered descriptors ``coll``, spec 03's QsNet adapter
``qsnet``, spec 04's in-network client ``inc``, spec 02's coding endpoint ``coding``): each
receives the packet types it registers and carries out the host's requests of its types. The host it
serves (``host``, :class:`emu.nodes.host.engine.Host`: the applications and their CPU time) reaches it
through :meth:`send_message`, :meth:`ping` and :meth:`request`, and hears back through
``host.deliver`` and ``host.resume``.

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
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import emu.native as native
from emu.plugins import NIC_MECHANISMS, load as load_plugin
from emu.build import register_engine
from emu.config import HostSpec
from emu.wire import (ETH_LEN, ETHERTYPE_FABRIC, FABRIC, FLAG_BCAST, HDR_LEN, MSG, PING, DecodeError, PacketType,
                      build_frame, parse_frame)
from emu.wire.fabric import FLAG_SRCRT, FLAGS_OFF as _FLAGS_OFF

from ..host.api import HostAPI, Recv, Send
from ..host.engine import _HANDLERS as HOST_HANDLERS, AppState, Host, Proc
from ..timers import Timers
from . import coding, coll, inc, qsnet  # noqa: F401  (the built-in mechanisms register themselves)
from .interface import MECHANISMS, Mechanism, Message, NicRequest, Op
from .outgoing import Outgoing
from .cc import make_transport

BUILT_IN = ("coll", "qsnet", "inc", "coding")
"""The mechanisms a NIC loads unless told others (``NicEngine.mechanisms``), in this order."""

log = logging.getLogger(__name__)

_BASE_PTYPES = frozenset({PacketType.MGMT, PacketType.MSG, PacketType.MACK, PacketType.PING, PacketType.PONG})
"""Packet types the NIC itself handles (link bring-up, messages, echo)."""
_MSG_LEN = MSG.size
BIG_MESSAGE = 1 << 20
"""Messages longer than this reach the application as a ``bytearray`` (the reassembly buffer)."""
LAZY_BYTES = 64 << 10
"""Messages of this many bytes and more go to the port as lazy frames, made from the sender's buffer
as the port sends them (:mod:`emu.nodes.nic.outgoing`); shorter ones as bytes at once."""
_FABRIC_PACK = FABRIC.struct.pack
# the hot path reads the fabric and message headers with their structs (both codecs are flat: no bit
# fields, so ``codec.unpack`` is ``struct.unpack_from`` behind a length check); a frame too short or
# of another EtherType goes through ``parse_frame``, which raises the DecodeError that says so
assert FABRIC._flat and MSG._flat and FABRIC.struct.format.startswith("!") and ETH_LEN == 14
_ETH_FABRIC_AT = struct.Struct("!12xH" + FABRIC.struct.format[1:]).unpack_from
"""The EtherType and the fabric header's fields, from a frame's start."""
_MSG_AT, _MSG_PACK = MSG.struct.unpack_from, MSG.struct.pack
_DATA_OFF = HDR_LEN + _MSG_LEN
"""Where a message frame's data starts."""
_MGMT, _MSG_T, _PING_T, _MACK_T, _PONG_T = (int(t) for t in (PacketType.MGMT, PacketType.MSG, PacketType.PING,
                                                                PacketType.MACK, PacketType.PONG))
_new_message = tuple.__new__
"""``_new_message(Message, (src, tag, data, t_ns, hops))``: a :class:`Message` without the Python-level
``__new__`` of a named tuple (one call less per message received)."""


@dataclass(eq=False, slots=True)
class _Partial:
    tag: int
    buf: bytearray
    got: int = 0
    offsets: set = field(default_factory=set)
    """Offsets of the frames taken (``host.transport=reliable``: a message sent again)."""


class _Attributes:
    """(A base with an instance ``__dict__``: the attributes of a NIC the core does not read, its
    mechanisms' and a trace's, live there.)"""


@dataclass(eq=False, slots=True)
class NicEngine(_Attributes):
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
    """A direct network's (k, n, wrap) (``emu.topologies.grid.Grid``), for spec 02's coded broadcast."""
    manager: int | None = None
    """Fabric address of the network manager (spec 04 requests go there), if the topology has one."""
    mechanisms: tuple[str, ...] = BUILT_IN
    """The NIC mechanisms this NIC loads, by registered name (:mod:`emu.nodes.nic.interface`)."""
    kind = "host"
    lazy_bytes = LAZY_BYTES
    """Messages of this many bytes and more are sent as lazy frames (:mod:`emu.nodes.nic.outgoing`)."""
    tracer = None
    """The run's ``emu.trace.Tracer`` when traced (the host's spans, the mechanisms' instants), else None."""
    stats: dict[str, int] = field(default_factory=lambda: {
        "malformed": 0, "misdelivered": 0, "no_route": 0, "messages_sent": 0, "messages_received": 0,
        "frames_sent": 0, "frames_received": 0, "pings_answered": 0})
    # set by __post_init__ (fields, hence slots: the compiled core reads them in place, emu/csrc/host.h)
    min_delay_ns: int = field(init=False, repr=False)
    timers: Timers = field(init=False, repr=False)
    _out: list = field(init=False, repr=False)
    _msg_id: int = field(init=False, repr=False)
    _heads: dict = field(init=False, repr=False)
    _lazy: Any = field(init=False, repr=False)
    transport: Any = field(init=False, repr=False)
    _anywhere: dict = field(init=False, repr=False)
    _partial: dict = field(init=False, repr=False)
    host: Host = field(init=False, repr=False)
    _deliver: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.min_delay_ns = self.spec.nic_delay_ns
        self.timers = Timers()
        self._out: list[tuple[int, bytes, int]] = []
        self._partial: dict[tuple[int, int], _Partial] = {}
        self._msg_id = 0
        self._ping_seq = 0
        self._heads: dict[int, bytes] = {}
        self._lazy: Outgoing | None = None
        if self.spec.traffic_class or getattr(self.spec, "class_vc", 0):  # the compiled core's one-frame send writes
            self._route = self._route  # prio 0 and the op's vc: a NIC with a method of its own (in its __dict__) is
            # left to Python (emu/csrc/nic.h inst_plain), whose Host._op_send puts HostSpec.class_vc in
        self._load(self.mechanisms)
        self.transport = make_transport(self, self._put_message)  # (host.cc's, or host.transport's)
        """The end-to-end transport of host messages (None: each frame sent once)."""
        self._segment = getattr(self.transport, "on_segment", None) or self._on_segment  # (a MSG frame's first stop)
        self.host = Host(self)
        self._deliver = self.host.deliver
        """``host.deliver``, bound once (every message received is handed to it)."""

    port_links = {}  # (no annotation: not a dataclass field; an instance attribute in its __dict__)
    """Port -> the name of its link (``Topology.link_names``, as ``--fault link=`` takes it): set by
    :func:`make_host`, for the one line that says a host's own link is down."""

    def down_link(self, port: int) -> str | None:
        """The name of the link on ``port`` if it is down at ``now`` (a host cut off names it), else
        None (up, or no port view)."""
        ports = getattr(self, "ports", None)
        if ports is None or not ports.linked(port) or ports.up(port, self.now):
            return None
        return self.port_links.get(port, f"on port {port}")

    def _load(self, names: tuple[str, ...]) -> None:
        """Make the mechanisms ``names`` and their dispatch tables: packet type -> handler, request
        type -> handler, verb -> the mechanism that offers it."""
        self._mech: dict[str, Mechanism] = {}
        self._frames: dict[int, Any] = {}
        self._anywhere: dict[int, Any] = {}
        self._requests: dict[type, Any] = {}
        self._verbs: dict[str, Mechanism] = {}
        damaged = []
        for name in names:
            cls = MECHANISMS.get(name)
            if cls is None and load_plugin(NIC_MECHANISMS, name):  # an installed package registers it
                cls = MECHANISMS.get(name)
            if cls is None:
                raise ValueError(f"{self.name}: no NIC mechanism {name!r} is registered (known: "
                                 f"{', '.join(sorted(MECHANISMS))}); import the module that registers it")
            m = self._mech[name] = cls(self)
            for ptype, method in cls.frames.items():
                table = self._anywhere if ptype in cls.any_destination else self._frames
                if ptype in self._frames or ptype in self._anywhere or ptype in _BASE_PTYPES:
                    raise ValueError(f"{self.name}: NIC mechanism {name!r} claims packet type {ptype}, already taken")
                table[ptype] = getattr(m, method)
            for rtype, method in cls.requests.items():
                self._requests[rtype] = getattr(m, method)
            for verb in cls.verbs:
                self._verbs.setdefault(verb, m)
            if cls.passes_damaged is not None:
                damaged.append(cls.passes_damaged)
        if damaged:
            self.passes_damaged = damaged[0] if len(damaged) == 1 else (lambda f: any(p(f) for p in damaged))

    @property
    def loaded(self) -> tuple[str, ...]:
        """Names of the mechanisms loaded, in load order."""
        return tuple(self._mech)

    def mechanism(self, name: str) -> Mechanism:
        """The loaded mechanism ``name`` (``nic.mechanism("coll")``)."""
        try:
            return self._mech[name]
        except KeyError:
            raise KeyError(f"{self.name} has no NIC mechanism {name!r} loaded (loaded: {', '.join(self._mech)})") from None

    # -- engine interface -----------------------------------------------------------------------
    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        self.now = now
        self._out = out = []
        try:
            n = len(frame)
            if n < HDR_LEN:
                parse_frame(frame)  # (raises)
            ethertype, src, dst, _vc, _prio, ptype, flags, hops, _r, length = _ETH_FABRIC_AT(frame)
            if ethertype != ETHERTYPE_FABRIC or length != n - HDR_LEN:
                parse_frame(frame)  # (raises)
            if ptype == _MGMT:  # link bring-up: the switch starts, the NIC answers
                out.extend(self._link_test().on_frame(frame, port, src, now))
                return out
            anywhere = self._anywhere.get(ptype)
            if anywhere is not None:  # e.g. in-network allreduce results, hop by hop from the switch
                anywhere(frame, src, port, now)
                self.timer = self.timers.next
                return out
            if dst != self.node_id and not flags & FLAG_BCAST:  # a group frame is for every member
                self.stats["misdelivered"] += 1
                log.debug("%s: frame for %d delivered here", self.name, dst)
                return out
            self.stats["frames_received"] += 1
            if ptype == _MSG_T:
                self._segment(src, hops, frame)
            elif ptype == _PING_T:
                ident, seq, t_sent = PING.unpack(frame, HDR_LEN)
                self.stats["pings_answered"] += 1
                self.emit(src, PacketType.PONG, PING.pack(ident, seq, t_sent), now + self.spec.nic_delay_ns)
            elif ptype == _MACK_T:
                if self.transport is None:
                    raise DecodeError("a message acknowledgement, but this host's transport is none")
                self.transport.on_ack(src, frame)
            elif ptype == _PONG_T:
                ident, seq, t_sent = PING.unpack(frame, HDR_LEN)
                waiter = self.host.take_ping(seq)
                if waiter is None:
                    raise DecodeError(f"echo reply seq {seq} matches no outstanding ping")
                t = now + self.spec.nic_delay_ns
                self.at(t, self.host.resume, (waiter, t - t_sent))
            else:
                handler = self._frames.get(ptype)
                if handler is None:
                    raise DecodeError(f"packet type {ptype} is not handled by this host's NIC")
                handler(frame, src, port, now)
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
            lt.stats = self.stats  # its frames and refusals (a stray END, a RESULT) counted with the NIC's
        return lt

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        self.now = now
        self._out = out = []
        self.timer = self.timers.run_due(now)
        return out

    # applications run on the host this NIC serves
    def start_app(self, key: str, fn: Callable, args: tuple, now: int) -> None:
        self.host.start_app(key, fn, args, now)
        self.timer = self.timers.next

    def app_states(self) -> list[AppState]:
        for m in self._mech.values():
            m.apps_ended()
        return self.host.app_states()

    def extra_stats(self) -> dict[str, dict[str, int]]:
        """Counters of the engine's parts, for ``Cluster.stats``."""
        out = {(m.stats_key or m.name): dict(m.stats) for m in self._mech.values()}
        if self.transport is not None:
            out["transport"] = {**self.transport.stats, "failures": list(self.transport.failures)}
        return out

    # -- the host's requests of the mechanisms (nodes.nic.interface) ----------------------------
    def request(self, req: NicRequest, now: int, done) -> tuple[int, Any]:
        """Carry out ``req`` through the mechanism that owns its type: (host CPU ns, value or PENDING)."""
        handler = self._requests.get(type(req))
        if handler is None:
            raise TypeError(f"no NIC mechanism loaded on {self.name} ({', '.join(self._mech)}) handles "
                            f"{type(req).__name__}")
        return handler(req, now, done)

    def verb_owner(self, name: str) -> Mechanism | None:
        """The mechanism that offers host-API verb ``name`` (None: none loaded does)."""
        return self._verbs.get(name)

    def verb_names(self) -> list[str]:
        return list(self._verbs)

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

    def send_message(self, dst: int, tag: int, data: bytes, t: int, vc: int = 0,
                     prio: int | None = None) -> Outgoing | None:
        """Take a message at ``t`` (after the sender's software overhead) and put its frames out
        with VC byte ``vc`` and traffic class ``prio`` (None: the host's, ``host.traffic_class``),
        through the end-to-end transport if there is one.
        Returns the message's :class:`Outgoing` while its frames are made from ``data`` as the port
        sends them (a long message), else None: ``data`` is free already."""
        if self.transport is not None:
            if prio is None:  # (a transport of a plug-in may not know prio)
                self.transport.send(dst, tag, data, t + self.spec.nic_delay_ns, vc)  # (a copy of its own)
            else:
                self.transport.send(dst, tag, data, t + self.spec.nic_delay_ns, vc, prio)
            self.stats["messages_sent"] += 1
            return None
        self._msg_id = msg_id = (self._msg_id + 1) & 0xFFFFFFFF
        self._put_message(dst, tag, msg_id, data, t + self.spec.nic_delay_ns, vc, None, prio)
        self.stats["messages_sent"] += 1
        return self._lazy

    def _put_message(self, dst: int, tag: int, msg_id: int, data: bytes, at: int, vc: int = 0,
                     route: int | None = None, prio: int | None = None) -> int:
        """The frames of one message, handed to the port at ``at`` with VC byte ``vc`` (the routers
        map it to their VCs) and traffic class ``prio`` (None: the host's); returns the port. A message of ``lazy_bytes`` or more goes
        as lazy frames (``self._lazy``: its :class:`Outgoing`, else None). ``route``: a source-chosen
        route id (fabric flag SRCRT, the id in ``rsvd``: a resend, that routers which choose among
        ways -- adaptive, dispersive, qsnet -- send another way; ``emu.wire.fabric.source_route``)."""
        total = len(data)
        mtu = self.spec.mtu_bytes
        routes = self.routes  # (``_route``: it counts and refuses a missing route, and makes a new header)
        port = 0 if routes is None else (routes[dst] if 0 <= dst < len(routes) else -1)
        head = self._heads.get(dst)
        if port < 0 or head is None:
            port, head = self._route(dst, None)
        self._lazy = None
        flags, rsvd = (0, 0) if route is None else (FLAG_SRCRT, route & 0xFF)
        if prio is None:
            prio = self.spec.traffic_class  # (a job's class: the fabric header's prio)
        if total <= mtu:  # one frame (the loop below, once)
            self._out.append((port, b"".join((head, _FABRIC_PACK(self.node_id, dst, vc, prio, _MSG_T, flags, 0, rsvd,
                                                                   _MSG_LEN + total),
                                             _MSG_PACK(msg_id, tag, total, 0), data)), at))
            self.stats["frames_sent"] += 1
            return port
        if total >= self.lazy_bytes:
            og = self._lazy = Outgoing(head, self.node_id, dst, vc, msg_id, tag, data, mtu, flags, rsvd, prio)
            frames = og.frames()
            self._out.extend([(port, f, at) for f in frames])
            self.stats["frames_sent"] += len(frames)
            return port
        # the frames ``emit`` would make, each in one join (no header+chunk intermediate)
        out, fab, msg, join, me, ptype = self._out.append, _FABRIC_PACK, _MSG_PACK, b"".join, self.node_id, _MSG_T
        off = frames = 0
        while True:
            chunk = data[off:off + mtu]
            n = len(chunk)
            out((port, join((head, fab(me, dst, vc, prio, ptype, flags, 0, rsvd, _MSG_LEN + n), msg(msg_id, tag, total, off),
                             chunk)), at))
            frames += 1
            off += n
            if off >= total:
                break
        self.stats["frames_sent"] += frames
        return port

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
        n = len(frame) - _DATA_OFF
        if n < 0:
            MSG.unpack(frame, HDR_LEN)  # (raises: too short for the message header)
        msg_id, tag, total, offset = _MSG_AT(frame, HDR_LEN)
        if offset + n > total:
            raise DecodeError(f"segment at {offset}+{n} overruns message of {total} bytes")
        names = self.names
        name = names[src] if 0 <= src < len(names) else str(src)
        tr = self.transport
        if tr is not None and tr.seen(src, msg_id):  # delivered already: the sender missed our acknowledgement
            tr.duplicate(src, msg_id, total, offset + n == total, _route(frame))
            return
        if offset == 0 and n == total:  # a one-frame message: nothing to reassemble
            if tr is not None:
                tr.done(src, msg_id, total, _route(frame))
            self.stats["messages_received"] += 1
            t = self.now + self.spec.nic_delay_ns
            data = frame[_DATA_OFF:]  # (bytes already when the frame is)
            if data.__class__ is not bytes:
                data = bytes(data)
            self.timers.at(t, self._deliver, _new_message(Message, (name, tag, data, t, hops)))
            return
        chunk = memoryview(frame)[_DATA_OFF:]  # copied once: into the message's buffer
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
        if tr is not None:  # a message sent again: count each of its frames once
            if offset in part.offsets:
                tr.stats["duplicates_dropped"] += 1
                return
            part.offsets.add(offset)
        part.buf[offset:offset + len(chunk)] = chunk
        part.got += len(chunk)
        if part.got >= total:
            del self._partial[key]
            if tr is not None:
                tr.done(src, msg_id, total, _route(frame))
            # a large message is handed over as its reassembly buffer (no copy); a small one as bytes
            data = part.buf if total > BIG_MESSAGE else bytes(part.buf)
            msg = Message(name, tag, data, self.now + self.spec.nic_delay_ns, hops)
            self.stats["messages_received"] += 1
            self.at(msg.t_ns, self.host.deliver, msg)


def _route(frame) -> int | None:
    """The route id a frame's source chose (flag SRCRT), else None: an acknowledgement echoes it."""
    return frame[_FLAGS_OFF + 2] if frame[_FLAGS_OFF] & FLAG_SRCRT else None


def host_tables(topology) -> tuple[dict[str, int], list[str]]:
    """Every host's name -> address, and names by address (shared by the hosts of a process)."""
    names = topology.host_names()
    return {n: i for i, n in enumerate(names)}, names


def make_host(node, topology, cache: dict) -> NicEngine:
    shared = cache.get("host_tables")
    if shared is None:
        shared = cache["host_tables"] = host_tables(topology)
    eng = NicEngine(node.name, node.id, node.spec, topology.routes.get(node.name), shared[0], shared[1],
                    cache.get("seed", 0), rails=max(1, topology.nports(node.name)),
                    manager=topology.nodes[topology.manager].id if topology.manager else None,
                    grid=getattr(topology, "grid", None),
                    mechanisms=tuple(node.info.get("nic_mechanisms", BUILT_IN)))
    links = cache.get("host_links")
    if links is None:  # every host's ports' link names, once per process
        links = cache["host_links"] = {}
        for lk, name in zip(topology.links, topology.link_names()):
            for end, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
                if topology.nodes[end].kind == "host":
                    links.setdefault(end, {})[port] = name
    eng.port_links = links.get(node.name, {})
    return eng


register_engine("host", make_host, min_delay=lambda spec: spec.nic_delay_ns)

if native.CORE is not None:  # the compiled core takes a one-frame message's receipt (NicEngine.receive's plain case)
    try:
        native.CORE.nic_setup(NicEngine, Timers, Message, int(PacketType.MSG), MSG.size,
                              build_frame(0x01020304, 0x05060708, 0, b"")[:ETH_LEN], _Partial, BIG_MESSAGE)
        native.CORE.host_setup(Host, Proc, Send, Recv, HOST_HANDLERS,  # (its timers, resume, deliver, send, recv)
                               sys.modules[Host.__module__].__dict__)  # (where Python's resume reads _HANDLERS)
        native.CORE.await_setup(Op)  # (awaiting a request: Op.__await__'s twin, without a generator per await)
        native.CORE.api_setup(HostAPI, sys.modules[HostAPI.__module__].__dict__)  # (send, sleep, now: their twins)
    except (TypeError, ValueError, AttributeError) as e:
        native.disable(str(e))
