"""Host messaging end to end (``host.transport=reliable``): acknowledgements, resends, duplicates.

Real interconnect transports (InfiniBand RC, the QsNet adapter of spec 03) recover what a failed
link lost. Here, per pair of hosts: the sender numbers its messages to each peer (the segment
header's ``msg_id`` is then a per-peer sequence number), keeps each until the receiver acknowledges
the whole message (a ``MsgAck`` frame), and sends it again when no acknowledgement came a
retransmission timeout after its last frame left the port -- the wait doubling each time -- up to
``max_tries`` sends, then
gives up, logs and counts it (``messages_failed``) and keeps a one-line note of why. The receiver
drops what it already delivered (acknowledging it again, since the first acknowledgement may be
what was lost) and ignores the repeated frames of a message it is still reassembling. Sans-I/O, in
virtual time; the NIC engine (``emu.nodes.nic.engine``) owns it and hands it its frames.

The timeout follows the measured round trip (:class:`RttEstimator`, Jacobson/Karn as RFC 6298):
``host.rto_ns`` until the first acknowledgement, then ``srtt + 4 * rttvar`` within
``host.rto_min_ns`` and ``host.rto_ns`` -- so a message lost to a failing link costs a few round
trips and the floor, not a fixed millisecond.

**Transports by name** (``host.transport``): ``none`` (each frame sent once) and ``reliable`` (this
module's :class:`Transport`) are registered here; another is a class with the same methods
(``send``, ``on_ack``, ``seen``, ``duplicate``, ``done``, ``stats``, ``failures``), usually a
subclass, registered with :func:`register_transport` -- in your own package, named as an entry point
of the group ``emu.transports`` (``emu.plugins``), so that every process of a run finds it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from emu.wire import HDR_LEN, MACK, PacketType
from emu.wire.fabric import FLAG_SRCRT

log = logging.getLogger(__name__)


class _Out:
    """A message sent and not yet acknowledged."""

    __slots__ = ("dst", "tag", "data", "port", "sends", "rto", "timer", "first_ns", "vc", "prio")

    def __init__(self, dst: int, tag: int, data: bytes, port: int, rto: int, first_ns: int, vc: int = 0,
                 prio: int | None = None):
        self.dst, self.tag, self.data, self.port, self.rto, self.first_ns = dst, tag, data, port, rto, first_ns
        self.sends, self.timer, self.vc, self.prio = 1, None, vc, prio


class RttEstimator:
    """The round-trip estimate of one host (RFC 6298 in integer ns): ``srtt`` and ``rttvar`` from
    the samples, ``rto`` the timeout a message sent now waits. Before any sample ``rto`` is
    ``initial_ns``; after, ``srtt + max(1, 4 * rttvar)`` held within ``min_ns`` and ``max_ns``.
    Integer arithmetic (floor division), so that every run computes the same timeouts."""

    __slots__ = ("srtt", "rttvar", "rto", "min_ns", "max_ns", "samples")

    def __init__(self, initial_ns: int, min_ns: int, max_ns: int):
        self.srtt = self.rttvar = None
        self.rto, self.min_ns, self.max_ns, self.samples = initial_ns, min(min_ns, max_ns), max_ns, 0

    def sample(self, r: int) -> None:
        """A round trip of ``r`` ns, from a message acknowledged after its first send (Karn: a
        resent message's acknowledgement could answer any of its sends, so it gives none)."""
        if self.srtt is None:
            self.srtt, self.rttvar = r, r // 2
        else:
            self.rttvar = (3 * self.rttvar + abs(self.srtt - r)) // 4
            self.srtt = (7 * self.srtt + r) // 8
        self.samples += 1
        self.rto = min(self.max_ns, max(self.min_ns, self.srtt + max(1, 4 * self.rttvar)))


class Transport:
    def __init__(self, nic: Any, put: Callable[[int, int, int, Any, int], int]):
        """``put(dst, tag, msg_id, data, at, vc, route=None, prio=None) -> port``: the NIC's frames of one
        message, handed to the port at ``at`` with VC byte ``vc`` and traffic class ``prio`` (None: the
        host's) (``route``: a source-chosen route id)."""
        self.nic = nic
        self.put = put
        self.spec = nic.spec
        self.next_seq: dict[int, int] = {}
        self.unacked: dict[tuple[int, int], _Out] = {}
        self.delivered: dict[int, list] = {}
        """Per source: [every id below this delivered, the ids delivered above it]."""
        self.failures: list[str] = []
        self.rtt = RttEstimator(self.spec.rto_ns, self.spec.rto_min_ns, self.spec.rto_ns)
        """The host's round-trip estimate: the timeout of each message at its first send."""
        self.stats = {"acks_sent": 0, "acks_received": 0, "acks_stray": 0, "messages_resent": 0,
                      "messages_failed": 0, "duplicates_dropped": 0}

    # -- the sender --------------------------------------------------------------------------------
    def send(self, dst: int, tag: int, data: Any, at: int, vc: int = 0, prio: int | None = None) -> None:
        seq = self.next_seq.get(dst, 0)
        self.next_seq[dst] = (seq + 1) & 0xFFFFFFFF
        data = bytes(data)  # kept to send again: the application may reuse its buffer
        port = self.put(dst, tag, seq, data, at, vc, None, prio)
        out = self.unacked[(dst, seq)] = _Out(dst, tag, data, port, self.rtt.rto, at, vc, prio)
        out.timer = self.nic.at(at + out.rto, self._timeout, (dst, seq))

    def on_ack(self, src: int, frame: bytes) -> None:
        msg_id, _total = MACK.unpack(frame, HDR_LEN)
        out = self.unacked.pop((src, msg_id), None)
        if out is None:  # a late second acknowledgement, or a stranger's
            self.stats["acks_stray"] += 1
            return
        self.stats["acks_received"] += 1
        self.nic.timers.cancel(out.timer)
        if out.sends == 1:  # Karn: only a message sent once times the round trip
            first = self.rtt.samples == 0
            self.rtt.sample(self.nic.now - out.first_ns)
            if first:  # the initial value was no measurement: the messages waiting on it take the measured one
                self._rearm(self.rtt.rto)

    def _rearm(self, rto: int) -> None:
        """Messages at their first send, waiting the initial timeout: wait ``rto`` from their send."""
        for key, o in self.unacked.items():
            if o.sends == 1 and o.rto > rto:
                self.nic.timers.cancel(o.timer)
                o.rto = rto
                o.timer = self.nic.at(max(self.nic.now + 1, o.first_ns + rto), self._timeout, key)

    def _timeout(self, key: tuple[int, int]) -> None:
        out = self.unacked.get(key)
        if out is None:
            return
        now = self.nic.now
        ports = getattr(self.nic, "ports", None)
        if ports is not None and ports.linked(out.port) and ports.queue(out.port, now)[0]:
            # frames still wait at our own port (ours or later ones): the wait counts from the line
            out.timer = self.nic.at(max(now + 1, ports.free_at(out.port)) + out.rto, self._timeout, key)
            return
        if out.sends >= self.spec.max_tries:
            del self.unacked[key]
            self.stats["messages_failed"] += 1
            why = self._why(out, now)
            self.failures.append(why)
            log.warning("%s", why)
            return
        out.sends += 1
        out.rto *= 2
        self.stats["messages_resent"] += 1
        if self.nic.tracer is not None:
            self.nic.tracer.instant(self.nic.name, "retransmit", now, {"what": "message", "to": self.nic.names[out.dst]
                                                                       if out.dst < len(self.nic.names) else out.dst,
                                                                       "tag": out.tag, "send": out.sends}, "retransmit")
        at = now + self.spec.nic_delay_ns
        # sent again by a source route (route id: the sends before it): routers that choose among ways
        # (adaptive, dispersive, qsnet) send each resend another way, so one dead end is left behind
        self.put(out.dst, out.tag, key[1], out.data, at, out.vc, out.sends - 1, out.prio)
        out.timer = self.nic.at(at + out.rto, self._timeout, key)

    def _why(self, out: _Out, now: int) -> str:
        names = self.nic.names
        dst = names[out.dst] if 0 <= out.dst < len(names) else str(out.dst)
        cut = self.nic.down_link(out.port)
        where = (f"its own link {cut} is down" if cut else
                 f"no acknowledgement from {dst}: no way through the network, or {dst} cannot answer")
        return (f"{self.nic.name}: a message of {len(out.data)} bytes to {dst} (tag {out.tag}) given up after "
                f"{out.sends} sends over {now - out.first_ns:,} ns: {where}")

    # -- the receiver ------------------------------------------------------------------------------
    def seen(self, src: int, msg_id: int) -> bool:
        """Was message ``msg_id`` from ``src`` delivered already?"""
        low, above = self.delivered.get(src) or (0, ())
        return msg_id < low or msg_id in above

    def duplicate(self, src: int, msg_id: int, total: int, last: bool, route: int | None = None) -> None:
        """A frame of a message delivered already: dropped; its last frame acknowledged again (by
        the route the resend took, ``route``)."""
        self.stats["duplicates_dropped"] += 1
        if last:
            self.ack(src, msg_id, total, route)

    def done(self, src: int, msg_id: int, total: int, route: int | None = None) -> None:
        """Message ``msg_id`` from ``src`` is whole: remember it and acknowledge it (a resend's by the
        route id it came by, ``route``)."""
        d = self.delivered.setdefault(src, [0, set()])
        d[1].add(msg_id)
        while d[0] in d[1]:
            d[1].discard(d[0])
            d[0] += 1
        self.ack(src, msg_id, total, route)

    def ack(self, src: int, msg_id: int, total: int, route: int | None = None) -> None:
        """Acknowledge a whole message; one that came by a source route (a resend) is answered by the
        same route id, so that its acknowledgement too leaves a dead end behind."""
        self.stats["acks_sent"] += 1
        if route is None:
            self.nic.emit(src, PacketType.MACK, MACK.pack(msg_id, total), self.nic.now + self.spec.nic_delay_ns, prio=1)
        else:
            self.nic.emit(src, PacketType.MACK, MACK.pack(msg_id, total), self.nic.now + self.spec.nic_delay_ns, prio=1,
                          flags=FLAG_SRCRT, rsvd=route)


TRANSPORTS: dict[str, type | None] = {"none": None, "reliable": Transport}
"""Host messaging's end-to-end transports by name (``host.transport``); None: each frame sent once."""


def register_transport(name: str):
    """Class decorator: the transport ``name`` (``@register_transport("mine")``)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a transport's name is an identifier, got {name!r}")

    def deco(cls: type) -> type:
        TRANSPORTS[name] = cls
        return cls
    return deco


def transport_class(name: str) -> type | None:
    """The transport ``name``: registered, or registered by the module an installed package names for
    it in the entry-point group ``emu.transports``; an unknown name is refused in one line naming the
    known ones and the package each installed one comes from."""
    from emu.config import ConfigError
    from emu.plugins import TRANSPORTS as GROUP, load, others

    if name not in TRANSPORTS:
        load(GROUP, name)
    if name not in TRANSPORTS:
        raise ConfigError(f"unknown host.transport {name!r}; known: {', '.join(TRANSPORTS)}"
                          + others(GROUP, TRANSPORTS))
    return TRANSPORTS[name]
