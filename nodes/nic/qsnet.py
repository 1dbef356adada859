"""The QsNet adapter of spec 03: reliable packets, put/get, atomics (sans-I/O part of the NIC engine).

Memory-based communication: a **put** writes ``size`` bytes from a local virtual address to a
remote one on a rank, a **get** reads, **fetch-and-add** adds to a 64-bit word and returns the old
value, a **network conditional** reads a word and compares. The adapter translates ranks to fabric
addresses (``rank_to_node``), cuts transfers into packets of ``ElanSpec.packet_bytes`` (each its own
segmented QsNet packet, :mod:`emu.wire.qsnet`) that may take different routes and arrive in any
order, and makes every packet reliable:

* every packet is acknowledged by the target: an ACK token, or a NACK when its payload fails the
  CRC-32 (or a router found no way to the target, or a conditional compared unequal);
* the source keeps up to ``window`` packets outstanding; a NACK resends at once, a packet not
  acknowledged within ``retransmit_ns`` is resent; every resend takes the next route id (with
  ``routing=dispersive`` switches: another route); after ``max_tries`` sends the transfer fails
  with the reason -- reported, never a hang;
* ACKs are early (``nic_delay_ns`` after arrival) for every packet of a transfer but the one that
  completes it, whose ACK (flag DONE) leaves once its data is in memory (``mem_write_ns``): the
  source's completion means the data is at the target;
* completion is detected exactly once on both sides, whatever is replayed: the target tracks the
  offsets of each transfer (a replayed packet is ACKed again, not written or counted again); a
  get's request is served once (its reply is a reliable transfer of its own); atomics follow a
  sequence-number protocol (the transfer id is the sequence number; the target remembers each
  one's result and answers a replay with it instead of adding twice).

Each packet's life is the state table ``TX`` (DESIGN.md principle 4).
"""

from __future__ import annotations

import enum
import logging
import random
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from emu.wire import HDR_LEN, DecodeError, PacketType
from emu.wire.fabric import FLAG_BCAST, FLAG_SRCRT, FLAGS_OFF, RSVD_OFF
from emu.wire.qsnet import (ACK, ACK_BCAST, ACK_DONE, TXN, TXN_BCAST, TXN_GE, TXN_LAST, TXN_LEN, AckKind, Damaged, QsOp, Reason, decode_packet,
                            encode_packet)

from .memory import Memory
from .qsbarrier import Barriers

if TYPE_CHECKING:
    from .engine import NicEngine

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


@dataclass(eq=False)
class Tx:
    pkt_id: int
    xfer: Xfer
    payload: bytes
    state: TxState = TxState.QUEUED
    tries: int = 0
    route: int = 0
    timer: int | None = None


@dataclass(eq=False)
class Rx:
    """A transfer arriving at this node."""

    total: int
    addr: int
    got: set = field(default_factory=set)
    nbytes: int = 0
    done: bool = False
    last: int = -1
    """Offset of the packet that completed the transfer (its ACK, and only its, counts a broadcast
    member as done)."""


@dataclass
class Arrival:
    """A transfer that completed here (what ``host.wait_arrivals`` returns)."""

    src: str
    op: str
    addr: int
    nbytes: int
    t_ns: int


class QsNIC:
    def __init__(self, nic: "NicEngine"):
        self.nic = nic
        self.spec = nic.spec.elan
        self.mem = Memory()
        self.rank_to_node: list[int] = list(range(len(nic.names)))
        """The job's rank -> fabric address table (a rank is a host's address unless a job says else)."""
        self.rng = random.Random(nic.seed * 1_000_003 + nic.node_id)
        self._pkt_id = 0
        self._xid = 0
        self._rr: dict[int, int] = {}
        self.outstanding = 0
        self.backlog: deque[Tx] = deque()
        self.by_id: dict[int, Tx] = {}
        self.rx: dict[tuple[int, int, int], Rx] = {}
        self.gets_served: set[tuple[int, int]] = set()
        self.atomics: dict[tuple[int, int], int] = {}
        self.events_seen: set[tuple[int, int]] = set()
        self._gets: dict[int, Xfer] = {}
        self._route_in: int | None = None
        self.rails = nic.rails
        """Multi-rail: packets of unicast transfers go out round robin over the node's links (each
        to its own network), a resend on the next; ACKs go back on the link their packet came in
        on; broadcasts use rail 0 (the group's tree)."""
        self._rail = 0
        self.port_in = 0
        """The link the packet being handled came in on (set by the engine)."""
        self._bcast_in = False
        self.arrivals: list[Arrival] = []
        self.on_arrival: Callable[[Arrival], None] | None = None
        self.stats = {"packets_sent": 0, "packets_resent": 0, "acks": 0, "nacks_crc": 0, "nacks_no_route": 0,
                      "nacks_cond": 0, "timeouts": 0, "stray_acks": 0, "crc_errors": 0, "replayed": 0,
                      "transfers_done": 0, "transfers_failed": 0, "arrivals": 0, "peak_outstanding": 0}
        self.watchers: list[list] = []
        """Processes waiting for a 64-bit word to reach a value: [addr, at_least, callback]."""
        self.barriers = Barriers(self)

    # -- the state table -------------------------------------------------------------------------
    @staticmethod
    def _move(tx: Tx, event: TxEvent) -> None:
        nxt = TX[tx.state].get(event)
        if nxt is None:
            raise AssertionError(f"packet {tx.pkt_id}: event {event.value} in state {tx.state.value}")
        tx.state = nxt

    # -- commands from the host ------------------------------------------------------------------
    def node_of(self, rank: int) -> int:
        if not 0 <= rank < len(self.rank_to_node):
            raise ValueError(f"rank {rank} is not in the job (ranks 0..{len(self.rank_to_node) - 1})")
        return self.rank_to_node[rank]

    def put(self, rank: int, local: int, remote: int, size: int, t: int, on_done) -> Xfer:
        data = self.mem.read(local, size)
        Memory.check(remote, size)
        return self._transfer(QsOp.PUT, self.node_of(rank), remote, data, t, on_done)

    def bcast(self, gid: int, members: int, local: int, remote: int, size: int, t: int, on_done) -> Xfer:
        """Hardware broadcast: ``size`` bytes at ``local`` to ``remote`` on every member of group
        ``gid`` (``members`` of them besides this node); switches replicate each packet down the
        group's tree and combine the members' ACKs, so the source gets one per packet, and the
        transfer completes when the ACKs have counted every member done."""
        data = self.mem.read(local, size)
        Memory.check(remote, size)
        return self._transfer(QsOp.PUT, gid, remote, data, t, on_done, members=members)

    def get(self, rank: int, remote: int, local: int, size: int, t: int, on_done) -> Xfer:
        Memory.check(remote, size)
        Memory.check(local, size)
        x = self._new_xfer(QsOp.GET, self.node_of(rank), size, on_done)
        x.value = local
        self.rx[(x.dst, 1, x.xid)] = Rx(size, local)
        self._gets[x.xid] = x
        body = TXN.pack(QsOp.GET, TXN_LAST, self.nic.node_id & 0xFFFF, x.xid, 0, size, remote) + local.to_bytes(8, "big")
        self._queue(x, [body], t)
        return x

    def atomic(self, op: QsOp, rank: int, addr: int, word: int, t: int, on_done) -> Xfer:
        Memory.check(addr, 8)
        x = self._new_xfer(op, self.node_of(rank), 8, on_done)
        body = TXN.pack(op, TXN_LAST, self.nic.node_id & 0xFFFF, x.xid, 0, 8, addr) + (word & ((1 << 64) - 1)).to_bytes(8, "big")
        self._queue(x, [body], t)
        return x

    def bcast_cond(self, gid: int, members: int, addr: int, word: int, t: int, on_done) -> Xfer:
        """Network conditional to every member of group ``gid``: "is the word at ``addr`` >=
        ``word``?"; the switches combine the answers, so the result's ``cond`` is true only if it
        held on every member (the polled barrier's test)."""
        Memory.check(addr, 8)
        x = self._new_xfer(QsOp.COND, gid, 8, on_done)
        x.members = members
        body = TXN.pack(QsOp.COND, TXN_LAST | TXN_BCAST | TXN_GE, self.nic.node_id & 0xFFFF, x.xid, 0, 8, addr) \
            + (word & ((1 << 64) - 1)).to_bytes(8, "big")
        self._queue(x, [body], t)
        return x

    def send_event(self, dst: int, addr: int, body: bytes, t: int, on_done) -> Xfer:
        """One count (with ``body``: sequence, position, reduction part) to the counted event of
        the barrier at ``addr`` on node ``dst``: a reliable single-packet transfer."""
        if len(body) > self.spec.packet_bytes:
            raise ValueError(f"an event carries at most {self.spec.packet_bytes} bytes (ElanSpec.packet_bytes), "
                             f"not {len(body)}")
        return self._transfer(QsOp.EVENT, dst, addr, body, t, on_done)

    # -- this node's memory and the processes waiting on it --------------------------------------
    def write_local(self, addr: int, data: bytes) -> None:
        self.mem.write(addr, data)
        if self.watchers:
            self._check_watchers()

    def watch(self, addr: int, at_least: int, callback: Callable[[str | None], None]) -> list:
        """Call ``callback(None)`` once the 64-bit word at ``addr`` is >= ``at_least`` (at once if
        it is), or ``callback(reason)`` if whatever should raise it failed."""
        w = [addr, at_least, callback]
        if self.mem.read_u64(addr) >= at_least:
            callback(None)
        else:
            self.watchers.append(w)
        return w

    def unwatch(self, w: list) -> None:
        if w in self.watchers:
            self.watchers.remove(w)

    def _check_watchers(self) -> None:
        ready = [w for w in self.watchers if self.mem.read_u64(w[0]) >= w[1]]
        for w in ready:
            self.watchers.remove(w)
            w[2](None)

    def wake_watchers(self, addr: int, why: str) -> None:
        for w in [w for w in self.watchers if w[0] == addr]:
            self.watchers.remove(w)
            w[2](why)

    def _new_xfer(self, op: QsOp, dst: int, total: int, on_done) -> Xfer:
        self._xid = (self._xid + 1) & 0xFFFFFFFF
        return Xfer(self._xid, op, dst, total, on_done)

    def _transfer(self, op: QsOp, dst: int, addr: int, data: bytes, t: int, on_done, xid: int | None = None,
                  members: int = 0) -> Xfer:
        x = self._new_xfer(op, dst, len(data), on_done)
        x.members = members
        bflag = TXN_BCAST if members else 0
        if xid is not None:
            x.xid = xid
        size, step = len(data), self.spec.packet_bytes
        bodies = []
        off = 0
        while True:
            chunk = data[off:off + step]
            last = off + len(chunk) >= size
            bodies.append(TXN.pack(op, (TXN_LAST if last else 0) | bflag, self.nic.node_id & 0xFFFF, x.xid, off, size,
                                   addr) + chunk)
            off += len(chunk)
            if last:
                break
        self._queue(x, bodies, t)
        return x

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
            if tx.tries == 1:
                tx.xfer.resent += 1
        tx.tries += 1
        srcrt = (self.spec.routes > 1 or tx.tries > 1) and not tx.xfer.members
        at = t + self.nic.spec.nic_delay_ns
        pkt = encode_packet(tx.payload, vc=self.spec.vc, prio=0, dest=tx.xfer.dst, tstamp=at, pkt_id=tx.pkt_id)
        flags = (FLAG_SRCRT if srcrt else 0) | (FLAG_BCAST if tx.xfer.members else 0)
        rail = None
        if self.rails > 1 and not tx.xfer.members:
            rail, self._rail = self._rail, (self._rail + 1) % self.rails
            key = f"packets_rail{rail}"
            self.stats[key] = self.stats.get(key, 0) + 1
        self.nic.emit(tx.xfer.dst, PacketType.QPKT, pkt, at, vc=self.spec.vc, flags=flags, rsvd=tx.route if srcrt else 0,
                      port=rail)
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
            self._fail(tx.xfer, f"packet {tx.pkt_id} to {self.nic.names[tx.xfer.dst] if tx.xfer.dst < len(self.nic.names) else tx.xfer.dst}: "
                                f"{why} after {tx.tries} sends")
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
    def on_ack(self, frame: bytes, src: int, now: int) -> None:
        kind, reason, flags, _r, pkt_id, value = ACK.unpack(frame, HDR_LEN)
        tx = self.by_id.get(pkt_id)
        if tx is None or tx.state is not TxState.SENT:
            self.stats["stray_acks"] += 1  # late (already ACKed or resent), or not ours
            return
        x = tx.xfer
        if kind == AckKind.NACK and reason != Reason.COND_FALSE:
            self.stats["nacks_no_route" if reason == Reason.NO_ROUTE else "nacks_crc"] += 1
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

    # -- packets arriving ------------------------------------------------------------------------
    def on_packet(self, frame: bytes, src: int, now: int) -> None:
        self._route_in = frame[RSVD_OFF] if frame[FLAGS_OFF] & FLAG_SRCRT else None
        self._bcast_in = bcast = bool(frame[FLAGS_OFF] & FLAG_BCAST)
        try:
            _vc, _prio, dest, _ts, payload, pkt_id = decode_packet(frame, HDR_LEN)
        except Damaged as d:
            if d.dest != self.nic.node_id & 0xFFFF and not bcast:
                raise DecodeError(f"damaged packet {d.pkt_id} for {d.dest} arrived here") from None
            self.stats["crc_errors"] += 1
            log.info("%s: packet %d from %d failed its CRC-32: NACK", self.nic.name, d.pkt_id, src)
            self._ack(src, d.pkt_id, now, nack=Reason.CRC)
            return
        if dest != self.nic.node_id & 0xFFFF and not bcast:
            raise DecodeError(f"packet {pkt_id} for destination {dest} arrived at {self.nic.node_id}")
        if len(payload) < TXN_LEN:
            raise DecodeError(f"packet {pkt_id}: payload of {len(payload)} bytes has no transaction header")
        op, flags, _rank, xid, offset, total, addr = TXN.unpack(payload)
        handler = _RX.get(op)
        if handler is None:
            raise DecodeError(f"packet {pkt_id}: unknown operation {op}")
        handler(self, src, pkt_id, op, flags, xid, offset, total, addr, payload[TXN_LEN:], now)

    def _rx_data(self, src, pkt_id, op, flags, xid, offset, total, addr, data, now) -> None:
        key = (src, 1 if op == QsOp.GET_REPLY else 0, xid)
        rx = self.rx.get(key)
        if op == QsOp.GET_REPLY and rx is None:
            raise DecodeError(f"get reply {xid} from {src} matches no get of ours")
        if rx is None:
            rx = self.rx[key] = Rx(total, addr)
        if rx.total != total or offset + len(data) > total or (op == QsOp.PUT and rx.addr != addr):
            raise DecodeError(f"packet {pkt_id}: offset {offset}+{len(data)} of a {total}-byte transfer "
                              f"disagrees with the transfer ({rx.total} bytes at {rx.addr:#x})")
        if rx.done or offset in rx.got:  # a replay (its ACK was lost, or it was resent early)
            self.stats["replayed"] += 1
            completed = rx.done and offset == rx.last
            self._ack(src, pkt_id, now, done=rx.done, value=1 if completed and self._bcast_in else 0)
            return
        rx.got.add(offset)
        rx.nbytes += len(data)
        t_written = now + self.spec.mem_write_ns
        self.nic.at(t_written, self._write, (rx.addr + offset, data))
        if rx.nbytes < total:
            self._ack(src, pkt_id, now)  # early
            return
        rx.done, rx.last = True, offset
        self._ack(src, pkt_id, now, at=t_written, done=True, value=1 if self._bcast_in else 0)
        self.nic.at(t_written, self._arrived, (src, op, key, rx))

    def _write(self, arg) -> None:
        self.write_local(*arg)

    def _arrived(self, arg) -> None:
        src, op, key, rx = arg
        if op == QsOp.GET_REPLY:  # our get is complete
            x = self._gets.pop(key[2], None)
            if x is not None:
                self._retire(x, TxEvent.ANSWERED)
                if x.deadline is not None:
                    self.nic.timers.cancel(x.deadline)
                self._finish(x, QsResult(True))
                self._pump(self.nic.now)
            return
        name = self.nic.names[src] if 0 <= src < len(self.nic.names) else str(src)
        a = Arrival(name, QsOp(op).name.lower(), rx.addr, rx.total, self.nic.now)
        self.stats["arrivals"] += 1
        self.arrivals.append(a)
        if self.on_arrival is not None:
            self.on_arrival(a)

    def _rx_get(self, src, pkt_id, op, flags, xid, offset, total, addr, data, now) -> None:
        if len(data) != 8:
            raise DecodeError(f"get request {pkt_id} carries {len(data)} bytes, not an 8-byte reply address")
        if (src, xid) in self.gets_served:
            self.stats["replayed"] += 1
            self._ack(src, pkt_id, now)
            return
        self.gets_served.add((src, xid))
        self._ack(src, pkt_id, now)
        reply_to = int.from_bytes(data, "big")
        t_read = now + self.spec.mem_write_ns
        self.nic.at(t_read, self._serve_get, (src, xid, addr, total, reply_to))

    def _serve_get(self, arg) -> None:
        src, xid, addr, total, reply_to = arg
        self._transfer(QsOp.GET_REPLY, src, reply_to, self.mem.read(addr, total), self.nic.now, None, xid=xid)

    def _rx_atomic(self, src, pkt_id, op, flags, xid, offset, total, addr, data, now) -> None:
        if len(data) != 8:
            raise DecodeError(f"atomic {pkt_id} carries {len(data)} bytes, not one 64-bit word")
        word = int.from_bytes(data, "big")
        t = now + self.spec.mem_write_ns
        if op == QsOp.COND:
            cur = self.mem.read_u64(addr)
            if cur == word or (flags & TXN_GE and cur >= word):
                self._ack(src, pkt_id, now, at=t, done=True, value=1 if self._bcast_in else cur)
            else:
                self._ack(src, pkt_id, now, at=t, nack=Reason.COND_FALSE, value=cur)
            return
        key = (src, xid)
        old = self.atomics.get(key)
        if old is None:  # first time: apply (a replay gets the remembered result: never added twice)
            old = self.atomics[key] = self.mem.read_u64(addr)
            self.mem.write_u64(addr, old + word)
        else:
            self.stats["replayed"] += 1
        self._ack(src, pkt_id, now, at=t, done=True, value=old)


    def _rx_event(self, src, pkt_id, op, flags, xid, offset, total, addr, data, now) -> None:
        if len(data) < 12 or offset != 0 or total != len(data):
            raise DecodeError(f"event {pkt_id} carries {len(data)} bytes of a {total}-byte transfer at {offset}, "
                              "not one whole sequence + position + data")
        self._ack(src, pkt_id, now, done=True)
        if (src, xid) in self.events_seen:  # a replay: counted once
            self.stats["replayed"] += 1
            return
        self.events_seen.add((src, xid))
        seq, pos = int.from_bytes(data[:8], "big"), int.from_bytes(data[8:12], "big")
        self.barriers.on_event(src, addr, seq, pos, data[12:], now)


_RX: dict[int, Callable[..., None]] = {
    QsOp.PUT: QsNIC._rx_data, QsOp.GET_REPLY: QsNIC._rx_data, QsOp.GET: QsNIC._rx_get,
    QsOp.FADD: QsNIC._rx_atomic, QsOp.COND: QsNIC._rx_atomic, QsOp.EVENT: QsNIC._rx_event,
}
"""Receive handlers by operation (DESIGN.md principle 4)."""
