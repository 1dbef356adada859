"""Reliable packets of the QsNet adapter (spec 03), the part below memory-based communication.

A transfer is cut into packets (each its own segmented QsNet packet, :mod:`emu.wire.qsnet`), and
every packet is made reliable:

* every packet is acknowledged by the target: an ACK token, or a NACK when its payload fails the
  CRC-32 (or a router found no way to the target, or a conditional compared unequal);
* the source keeps up to ``window`` packets outstanding; a NACK resends at once, a packet not
  acknowledged within ``retransmit_ns`` is resent; every resend takes the next route id (with
  ``routing=dispersive`` switches: another route); after ``max_tries`` sends the transfer fails
  with the reason -- reported, never a hang;
* ACKs are early (``nic_delay_ns`` after arrival) for every packet of a transfer but the one that
  completes it, whose ACK (flag DONE) leaves once its data is in memory (``mem_write_ns``): the
  source's completion means the data is at the target;
* a broadcast's combined ACKs count the members done; a conditional's say true everywhere or not;
* multi-rail: unicast packets go out round robin over the node's links, ACKs back on the link their
  packet came in on.

Each packet's life is the state table ``TX`` (DESIGN.md principle 4). ``emu.nodes.nic.qsnet`` builds
put, get, atomics and broadcasts on it.
"""

from __future__ import annotations

import enum
import logging
import random
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from emu.wire import HDR_LEN, PacketType
from emu.wire.fabric import FLAG_BCAST, FLAG_SRCRT
from emu.wire.qsnet import ACK, ACK_BCAST, ACK_DONE, AckKind, QsOp, Reason, encode_packet

if TYPE_CHECKING:
    from .interface import NicCore

log = logging.getLogger(__name__)


class TxState(enum.Enum):
    QUEUED = "queued"    # waiting for a window slot, or to be resent
    SENT = "sent"        # on its way; its timer runs
    ACKED = "acked"
    FAILED = "failed"


class TxEvent(enum.Enum):
    SEND = "send"
    ACK = "ack"
    NACK = "nack"
    TIMEOUT = "timeout"
    GIVE_UP = "give_up"  # max_tries sends, or its transfer failed
    ANSWERED = "answered"  # a get's reply arrived: its request got there, whatever became of the ACK
    RECOUNT = "recount"    # a broadcast whose ACKs did not count every member: send it all again


TX: dict[TxState, dict[TxEvent, TxState]] = {
    TxState.QUEUED: {TxEvent.SEND: TxState.SENT, TxEvent.GIVE_UP: TxState.FAILED,
                     TxEvent.ANSWERED: TxState.ACKED},
    TxState.SENT: {TxEvent.ACK: TxState.ACKED, TxEvent.NACK: TxState.QUEUED, TxEvent.TIMEOUT: TxState.QUEUED,
                   TxEvent.GIVE_UP: TxState.FAILED, TxEvent.ANSWERED: TxState.ACKED},
    TxState.ACKED: {TxEvent.RECOUNT: TxState.QUEUED},
    TxState.FAILED: {},
}
"""A packet's states and what moves it (an event a state does not list is a bug: raised)."""


@dataclass
class QsResult:
    """What a put, get, fetch-and-add or conditional returns to the application."""

    ok: bool
    value: int = 0
    """Fetch-and-add: the old value; conditional: the word read; else 0."""
    error: str | None = None
    t_ns: int = 0
    """Virtual time the operation completed (the application resumes then)."""
    nbytes: int = 0
    resent: int = 0
    """Packets of this operation sent more than once."""
    cond: bool = True
    """A conditional: did the word equal the expected value?"""


@dataclass(eq=False)
class Xfer:
    xid: int
    op: QsOp
    dst: int
    total: int
    on_done: Callable[[QsResult], None] | None
    txs: list = field(default_factory=list)
    acked: int = 0
    done_seen: bool = False
    value: int = 0
    cond: bool = True
    finished: bool = False
    resent: int = 0
    deadline: int | None = None
    members: int = 0
    """A broadcast: the group's members but the source (0: a unicast transfer)."""
    done_count: int = 0
    prio: int = 0
    """User-level priority (0 or 1): its packets carry it in their segment and fabric headers, and
    overtake priority-0 traffic at segment boundaries (spec 03)."""


@dataclass(eq=False)
class Tx:
    pkt_id: int
    xfer: Xfer
    payload: bytes
    state: TxState = TxState.QUEUED
    tries: int = 0
    route: int = 0
    timer: int | None = None


class Reliable:
    """The adapter's reliable-packet machinery (``QsNIC`` adds the operations on top)."""

    def __init__(self, nic: "NicCore"):
        self.nic = nic
        self.spec = nic.spec.elan
        self.rng = random.Random(nic.seed * 1_000_003 + nic.node_id)
        self._pkt_id = 0
        self._xid = 0
        self._rr: dict[int, int] = {}
        self.outstanding = 0
        self.backlog: deque[Tx] = deque()
        self.by_id: dict[int, Tx] = {}
        self._gets: dict[int, Xfer] = {}
        self._route_in: int | None = None
        self._bcast_in = False
        self.rails = nic.rails
        """Multi-rail: packets of unicast transfers go out round robin over the node's links (each
        to its own network), a resend on the next; ACKs go back on the link their packet came in
        on; broadcasts use rail 0 (the group's tree)."""
        self._rail = 0
        self.port_in = 0
        self._prio_in = 0
        """The priority of the packet being handled (a get's reply takes its request's)."""
        """The link the packet being handled came in on (set by the engine)."""
        self.stats = {"packets_sent": 0, "packets_resent": 0, "acks": 0, "nacks_crc": 0, "nacks_no_route": 0,
                      "nacks_cond": 0, "timeouts": 0, "stray_acks": 0, "crc_errors": 0, "replayed": 0,
                      "transfers_done": 0, "transfers_failed": 0, "arrivals": 0, "peak_outstanding": 0}

    # -- the state table -------------------------------------------------------------------------
    @staticmethod
    def _move(tx: Tx, event: TxEvent) -> None:
        nxt = TX[tx.state].get(event)
        if nxt is None:
            raise AssertionError(f"packet {tx.pkt_id}: event {event.value} in state {tx.state.value}")
        tx.state = nxt

    def _new_xfer(self, op: QsOp, dst: int, total: int, on_done) -> Xfer:
        self._xid = (self._xid + 1) & 0xFFFFFFFF
        return Xfer(self._xid, op, dst, total, on_done)

    def _queue(self, x: Xfer, bodies: list[bytes], t: int) -> None:
        for body in bodies:
            self._pkt_id = (self._pkt_id + 1) & 0xFFFFFFFF
            tx = Tx(self._pkt_id, x, body)
            x.txs.append(tx)
            self.backlog.append(tx)
        self._pump(t)

    # -- sending ---------------------------------------------------------------------------------
    def _pump(self, t: int) -> None:
        while self.backlog and self.outstanding < self.spec.window:
            tx = self.backlog.popleft()
            if tx.state is not TxState.QUEUED:
                continue
            self.outstanding += 1
            if self.outstanding > self.stats["peak_outstanding"]:
                self.stats["peak_outstanding"] = self.outstanding
            self.by_id[tx.pkt_id] = tx
            self._send(tx, t)

    def _route(self, dst: int) -> int:
        n = self.spec.routes
        if n <= 1:
            return 0
        if self.spec.route_pick == "random":
            return self.rng.randrange(n)
        r = self._rr.get(dst, 0)
        self._rr[dst] = (r + 1) % n
        return r

    def _send(self, tx: Tx, t: int) -> None:
        self._move(tx, TxEvent.SEND)
        if tx.tries == 0:
            tx.route = self._route(tx.xfer.dst)
        else:
            tx.route = (tx.route + 1) & 0xFF
            self.stats["packets_resent"] += 1
            if self.nic.tracer is not None:
                self.nic.tracer.instant(self.nic.name, "retransmit", t, {"what": "packet", "pkt_id": tx.pkt_id,
                                                                         "to": tx.xfer.dst, "try": tx.tries + 1}, "retransmit")
            if tx.tries == 1:
                tx.xfer.resent += 1
        tx.tries += 1
        srcrt = (self.spec.routes > 1 or tx.tries > 1) and not tx.xfer.members
        at = t + self.nic.spec.nic_delay_ns
        prio = tx.xfer.prio
        pkt = encode_packet(tx.payload, vc=self.spec.vc, prio=prio, dest=tx.xfer.dst, tstamp=at, pkt_id=tx.pkt_id)
        flags = (FLAG_SRCRT if srcrt else 0) | (FLAG_BCAST if tx.xfer.members else 0)
        rail = None
        if self.rails > 1 and not tx.xfer.members:
            rail, self._rail = self._rail, (self._rail + 1) % self.rails
            key = f"packets_rail{rail}"
            self.stats[key] = self.stats.get(key, 0) + 1
        self.nic.emit(tx.xfer.dst, PacketType.QPKT, pkt, at, vc=self.spec.vc + prio, prio=prio, flags=flags,
                      rsvd=tx.route if srcrt else 0, port=rail)
        self.stats["packets_sent"] += 1
        tx.timer = self.nic.at(at + self.spec.retransmit_ns, self._timeout, tx)

    def _timeout(self, tx: Tx) -> None:
        tx.timer = None
        if tx.state is not TxState.SENT:
            return
        self.stats["timeouts"] += 1
        self._retry(tx, TxEvent.TIMEOUT, "no acknowledgement")

    def _cancel_timer(self, tx: Tx) -> None:
        if tx.timer is not None:
            self.nic.timers.cancel(tx.timer)
            tx.timer = None

    def _release(self, tx: Tx) -> None:
        """``tx`` no longer holds a window slot (acknowledged, answered or given up)."""
        if self.by_id.pop(tx.pkt_id, None) is not None:
            self.outstanding -= 1

    def _retire(self, x: Xfer, event: TxEvent) -> None:
        """Close every packet of ``x`` still queued or on its way (``event``: given up, or answered)."""
        for tx in x.txs:
            if tx.state in (TxState.QUEUED, TxState.SENT):
                self._cancel_timer(tx)
                self._release(tx)
                self._move(tx, event)

    def _retry(self, tx: Tx, event: TxEvent, why: str) -> None:
        self._move(tx, event)
        self._cancel_timer(tx)
        if tx.tries >= self.spec.max_tries:
            why = f"{why} after {tx.tries} sends"
            cut = [n for n in map(self.nic.down_link, range(self.rails)) if n]
            if len(cut) == self.rails:  # every link of this node is down: say which, by name
                why += f": its own link{'s' if len(cut) > 1 else ''} {', '.join(cut)} {'are' if len(cut) > 1 else 'is'} down"
            self._fail(tx.xfer, f"packet {tx.pkt_id} to {self.nic.names[tx.xfer.dst] if tx.xfer.dst < len(self.nic.names) else tx.xfer.dst}: "
                                f"{why}")
            return
        self._send(tx, self.nic.now)

    def _fail(self, x: Xfer, why: str) -> None:
        self._retire(x, TxEvent.GIVE_UP)
        self.stats["transfers_failed"] += 1
        log.warning("%s: transfer %d failed: %s", self.nic.name, x.xid, why)
        self._finish(x, QsResult(False, error=why))
        self._pump(self.nic.now)

    def _finish(self, x: Xfer, res: QsResult) -> None:
        if x.finished:
            return
        x.finished = True
        if res.ok:
            self.stats["transfers_done"] += 1
        t = self.nic.now + self.nic.spec.nic_delay_ns
        res.t_ns, res.nbytes, res.resent = t, x.total, x.resent
        if x.on_done is not None:
            self.nic.at(t, x.on_done, res)

    # -- ACK tokens ------------------------------------------------------------------------------
    def on_ack(self, frame: bytes, src: int, port: int, now: int) -> None:
        kind, reason, flags, _r, pkt_id, value = ACK.unpack(frame, HDR_LEN)
        tx = self.by_id.get(pkt_id)
        if tx is None or tx.state is not TxState.SENT:
            self.stats["stray_acks"] += 1  # late (already ACKed or resent), or not ours
            return
        x = tx.xfer
        if kind == AckKind.NACK and reason != Reason.COND_FALSE:
            self.stats["nacks_no_route" if reason == Reason.NO_ROUTE else "nacks_crc"] += 1
            if self.nic.tracer is not None:
                self.nic.tracer.instant(self.nic.name, "NACK", now, {"from": x.dst, "pkt_id": tx.pkt_id,
                                                                     "reason": "no route" if reason == Reason.NO_ROUTE
                                                                     else "crc"}, "nack")
            self._retry(tx, TxEvent.NACK, f"NACK ({Reason(reason).name if reason in Reason._value2member_map_ else reason})")
            return
        self.stats["acks"] += 1
        self._move(tx, TxEvent.ACK)
        self._cancel_timer(tx)
        self._release(tx)
        x.acked += 1
        if kind == AckKind.NACK:  # a conditional that compared unequal: answered, not an error
            self.stats["nacks_cond"] += 1
            x.cond, x.done_seen, x.value = False, True, value
        elif x.members and x.op == QsOp.COND:  # a combined ACK: true on every member
            x.done_count += value
            x.done_seen = True
            if x.done_count < x.members:
                self._recount(x)
                return
        elif x.members:  # a broadcast: the combined ACK counts the members this packet completed
            x.done_count += value
            x.done_seen = x.done_count >= x.members
            if x.acked == len(x.txs) and not x.done_seen:
                self._recount(x)
                return
        elif flags & ACK_DONE:
            x.done_seen, x.value = True, value if x.op != QsOp.GET else x.value
        if x.op == QsOp.GET:
            if x.deadline is None and not x.finished:  # the request is there: the reply must follow
                wait = self.spec.retransmit_ns * self.spec.max_tries * 2
                x.deadline = self.nic.at(now + wait, self._get_deadline, x)
        elif x.done_seen and x.acked == len(x.txs):
            self._finish(x, QsResult(True, x.value if x.op in (QsOp.FADD, QsOp.COND) else 0, cond=x.cond))
        self._pump(now)

    def _recount(self, x: Xfer) -> None:
        """Every packet of a broadcast is acknowledged, yet the combined ACKs counted fewer members
        done than the group has (a member's ACK was lost where a switch could not tell): send the
        whole transfer again under fresh packet ids (late ACKs of this round become strays) and
        count afresh; members that have it answer as replays. Bounded by ``max_tries``."""
        self.stats["recounts"] = self.stats.get("recounts", 0) + 1
        x.acked, x.done_count = 0, 0
        for tx in x.txs:
            self._move(tx, TxEvent.RECOUNT)
            self._pkt_id = (self._pkt_id + 1) & 0xFFFFFFFF
            tx.pkt_id = self._pkt_id
            if tx.tries >= self.spec.max_tries:
                self._fail(x, f"broadcast to group {x.dst}: {x.members} members not all counted after {tx.tries} sends")
                return
            self.backlog.append(tx)
        self._pump(self.nic.now)

    def _get_deadline(self, x: Xfer) -> None:
        if not x.finished:
            self._fail(x, f"get from {x.dst}: no reply")

    def _ack(self, dst: int, pkt_id: int, now: int, *, at: int | None = None, done: bool = False,
             nack: Reason | None = None, value: int = 0, bcast: bool = False) -> None:
        """An ACK token back to the packet's source; it takes the route id the packet came with
        (``self._route_in``), so the ACK of a resent packet tries another way back too."""
        bcast = bcast or self._bcast_in
        body = ACK.pack(AckKind.NACK if nack is not None else AckKind.ACK, nack or 0,
                        (ACK_DONE if done else 0) | (ACK_BCAST if bcast else 0), 0, pkt_id, value & ((1 << 64) - 1))
        t = now + self.nic.spec.nic_delay_ns if at is None else at
        route = None if bcast else self._route_in
        self.nic.emit(dst, PacketType.QACK, body, t, vc=self.spec.vc + 1, prio=1,
                      flags=FLAG_SRCRT if route is not None else 0, rsvd=route or 0,
                      port=self.port_in if self.rails > 1 and not bcast else None)
