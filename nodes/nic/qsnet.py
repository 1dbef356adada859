"""The QsNet adapter of spec 03: memory-based communication (sans-I/O part of the NIC engine).

A **put** writes ``size`` bytes from a local virtual address to a remote one on a rank, a **get**
reads, **fetch-and-add** adds to a 64-bit word and returns the old value, a **network conditional**
reads a word and compares, a **broadcast** puts to every member of a multicast group. The adapter
translates ranks to fabric addresses (``rank_to_node``) and cuts transfers into packets of
``ElanSpec.packet_bytes`` that may take different routes and arrive in any order; each packet is
reliable (:mod:`emu.nodes.nic.qsreliable`). Completion is detected exactly once on both sides, whatever
is replayed: the target tracks the offsets of each transfer (a replayed packet is ACKed again, not
written or counted again); a get's request is served once (its reply is a reliable transfer of its
own); atomics follow a sequence-number protocol (the transfer id is the sequence number; the target
remembers each one's result and answers a replay with it instead of adding twice). Hardware
barriers and the tree reduction sit on top: :mod:`emu.nodes.nic.qsbarrier`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from emu.wire import HDR_LEN, DecodeError, PacketType
from emu.wire.fabric import FLAG_BCAST, FLAG_SRCRT, FLAGS_OFF, RSVD_OFF
from emu.wire.qsnet import TXN, TXN_BCAST, TXN_GE, TXN_LAST, TXN_LEN, Damaged, QsOp, Reason, decode_packet, is_qsnet_packet

from .interface import Mechanism, NicCore, register_mechanism
from .memory import Memory
from .qsbarrier import Barriers
from .qsreliable import TX, QsResult, Reliable, Tx, TxEvent, TxState, Xfer
from .qsrequests import REQUESTS, VERBS, QsRequests

__all__ = ["TX", "Arrival", "QsNIC", "QsResult", "Rx", "Tx", "TxEvent", "TxState", "Xfer"]

log = logging.getLogger(__name__)


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


@register_mechanism
class QsNIC(QsRequests, Reliable, Mechanism):
    """The adapter: spec 03's operations on the reliable packets, and the host's requests of them."""

    name = "qsnet"
    frames = {PacketType.QPKT: "on_packet", PacketType.QACK: "on_ack"}
    requests = REQUESTS
    verbs = VERBS
    passes_damaged = staticmethod(is_qsnet_packet)
    """QsNet packets that fail the link's FCS still reach the adapter, which checks their own
    CRCs and NACKs a damaged payload (spec 03)."""

    def __init__(self, nic: NicCore):
        super().__init__(nic)
        self.mem = Memory()
        self.rank_to_node: list[int] = list(range(len(nic.names)))
        """The job's rank -> fabric address table (a rank is a host's address unless a job says else)."""
        self.rx: dict[tuple[int, int, int], Rx] = {}
        self.gets_served: set[tuple[int, int]] = set()
        self.atomics: dict[tuple[int, int], int] = {}
        self.events_seen: set[tuple[int, int]] = set()
        self.arrivals: list[Arrival] = []
        self.on_arrival: Callable[[Arrival], None] | None = None
        self.watchers: list[list] = []
        """Processes waiting for a 64-bit word to reach a value: [addr, at_least, callback]."""
        self.barriers = Barriers(self)

    # -- commands from the host ------------------------------------------------------------------
    def node_of(self, rank: int) -> int:
        if not 0 <= rank < len(self.rank_to_node):
            raise ValueError(f"rank {rank} is not in the job (ranks 0..{len(self.rank_to_node) - 1})")
        return self.rank_to_node[rank]

    def start_put(self, rank: int, local: int, remote: int, size: int, t: int, on_done, prio: int = 0) -> Xfer:
        data = self.mem.read(local, size)
        Memory.check(remote, size)
        return self._transfer(QsOp.PUT, self.node_of(rank), remote, data, t, on_done, prio=prio)

    def bcast(self, gid: int, members: int, local: int, remote: int, size: int, t: int, on_done) -> Xfer:
        """Hardware broadcast: ``size`` bytes at ``local`` to ``remote`` on every member of group
        ``gid`` (``members`` of them besides this node); switches replicate each packet down the
        group's tree and combine the members' ACKs, so the source gets one per packet, and the
        transfer completes when the ACKs have counted every member done."""
        data = self.mem.read(local, size)
        Memory.check(remote, size)
        return self._transfer(QsOp.PUT, gid, remote, data, t, on_done, members=members)

    def start_get(self, rank: int, remote: int, local: int, size: int, t: int, on_done, prio: int = 0) -> Xfer:
        Memory.check(remote, size)
        Memory.check(local, size)
        x = self._new_xfer(QsOp.GET, self.node_of(rank), size, on_done)
        x.value = local
        x.prio = prio
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

    def _transfer(self, op: QsOp, dst: int, addr: int, data: bytes, t: int, on_done, xid: int | None = None,
                  members: int = 0, prio: int = 0) -> Xfer:
        x = self._new_xfer(op, dst, len(data), on_done)
        x.members = members
        x.prio = prio
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

    # -- packets arriving ------------------------------------------------------------------------
    def on_packet(self, frame: bytes, src: int, port: int, now: int) -> None:
        self.port_in = port
        self._route_in = frame[RSVD_OFF] if frame[FLAGS_OFF] & FLAG_SRCRT else None
        self._bcast_in = bcast = bool(frame[FLAGS_OFF] & FLAG_BCAST)
        try:
            _vc, self._prio_in, dest, _ts, payload, pkt_id = decode_packet(frame, HDR_LEN)
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
        self.nic.at(t_read, self._serve_get, (src, xid, addr, total, reply_to, self._prio_in))

    def _serve_get(self, arg) -> None:
        src, xid, addr, total, reply_to, prio = arg  # the reply has the get's priority
        self._transfer(QsOp.GET_REPLY, src, reply_to, self.mem.read(addr, total), self.nic.now, None, xid=xid,
                       prio=prio)

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
