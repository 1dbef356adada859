"""The element driver: a thin trio shell around a sans-I/O engine (DESIGN.md principle 1).

An :class:`Element` owns one UDP socket (on 127.0.0.1 unless ``RunConfig.bind`` says otherwise), the element's virtual-time event heap, its
ports, and the outer encapsulation (sequence numbers, retransmission, batching). The engine (a host's
NIC, a switch) only sees ``receive(frame, port, now)`` and ``on_timer(now)`` and returns
``(port, frame, at)`` tuples; it never touches a socket or a clock.

Ordering inside an element is fixed and independent of socket arrival order: events are processed in
virtual-time order; at equal times the engine's timer runs first, then received frames by input port,
then by sequence number (DESIGN.md principle 10).
"""

from __future__ import annotations

import heapq
import hmac
import logging
import random
import socket
import zlib
from typing import Any, Protocol

import trio

from . import native
from .errors import CausalityError, EngineError
from .link import ACCEPT, GAP, MAX_DATAGRAM, LinkReceiver, LinkSender
from .port import VC_OFF, InPort, OutPort, frame_error_probability
from .portview import PortView
from .segcut import stretch as stretch_port
from .wire.credit import CREDIT, CREDIT_FRAME_LEN, ETHERTYPE_CREDIT, STRETCH, build_credit, build_stretch, is_credit
from .wire.fabric import (DST_OFF, ETH_LEN, ETHERTYPE_FABRIC, FCS_RESIDUE, FLAG_BCAST, FLAG_POOL, FLAGS_OFF, HDR_LEN,
                          HOPS_OFF, add_fcs, node_mac)
from .wire.lazy import LazyFrame, made
from .wire.outer import MAGIC, OUTER, OUTER_LEN, TAG_LEN, VERSION, LinkKind, tagger

log = logging.getLogger(__name__)
crc32 = zlib.crc32

INF = 1 << 62
RCVBUF = 4 << 20

DIR_IN = 1   # pcapng epb_flags direction bits
DIR_OUT = 2
DROPPED = 4  # capture record of a frame dropped on purpose (written with a comment)
FAULT_DROP = 8  # ... lost on the wire by an emulated fault
FAULT_CORRUPT = 16  # ... sent intact, delivered with a bit flipped by an emulated fault
WAKE, RELEASE, CREDIT_OUT, CREDIT_BACK, STRETCH_OUT = 0, 1, 2, 3, 4  # kinds of port events
POOL = int(LinkKind.DATA_POOL)  # flags of a received record in the heap: the sender used the pool ...
CLEAN = 4  # ... it was handed over in this process with no fault possible: its FCS need not be checked
NOFCS = 8  # ... and its FCS was never appended (``OutPort.defer_fcs``): the frame is the engine's, 4 bytes short
assert POOL == 2 and int(LinkKind.DATA) == 0
RX_FLAGS = (0, 0, POOL)
"""Heap flags of a received DATA record by its kind (DATA, -, DATA_POOL): a frame from a socket carries
its FCS (``NOFCS`` is only for frames handed over in memory)."""
FCS_ERROR = 32  # ... received with a bad frame check sequence, dropped by the receiving port
LOST_DOWN = 64  # ... was on the wire while its link was down (scheduled): lost

if native.CORE is not None:  # the compiled core learns the ports' layout and the frames' (emu.native)
    try:
        native.CORE.setup(OutPort, InPort, LazyFrame, LinkSender, LinkReceiver, CausalityError,
                          (MAGIC, VERSION, int(LinkKind.DATA), int(LinkKind.DATA_POOL), OUTER_LEN, MAX_DATAGRAM, POOL, CLEAN, NOFCS, FCS_RESIDUE, CREDIT_FRAME_LEN, ETHERTYPE_CREDIT >> 8, ETHERTYPE_CREDIT & 0xFF, ETHERTYPE_FABRIC >> 8, ETHERTYPE_FABRIC & 0xFF,
                           HDR_LEN, DST_OFF, DST_OFF + 6, FLAGS_OFF, HOPS_OFF, DST_OFF + 5, FLAG_BCAST))
    except (TypeError, ValueError, AttributeError) as e:
        native.disable(str(e))


class Engine(Protocol):
    """What an element runs: sans-I/O, time is an argument."""

    timer: int | None
    """Virtual time at which ``on_timer`` wants to run next, or None."""
    min_delay_ns: int
    """Promise: every frame emitted while handling an event at ``now`` has ``at >= now + min_delay_ns``.
    The synchroniser's lookahead is built on it; the element checks it."""
    stats: dict[str, int]
    ports: "PortView"
    """Set by the runtime: a read-only view of the element's ports at the engine's ``now``."""

    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]: ...

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]: ...


class Scheduler(Protocol):
    """What an element tells the domain it lives in (``emu.domain.Domain``), which decides when
    each of its elements runs."""

    def wake(self) -> None:
        """Datagrams were accepted by a socket reader: the domain's window may go on."""

    def frames_arrived(self, el: Element, n: int, first_ts: int, window: int) -> None:
        """``el`` accepted ``n`` DATA frames from a socket, the earliest stamped ``first_ts``."""

    def frames_local(self, el: Element, n: int, first_ts: int, window: int) -> None:
        """``n`` frames were handed straight to ``el`` of this domain (no socket)."""

    def frames_sent(self, peer_domain: int, n: int, peer: str) -> None:
        """``n`` frames went by socket to element ``peer`` of domain ``peer_domain``."""


def read_datagrams(sock, on_datagram) -> int:
    """Read every datagram waiting on the non-blocking ``sock`` into ``on_datagram(data, sender)``;
    return the sum of what it returned (DATA frames accepted)."""
    accepted = 0
    recv = sock.recvfrom
    while True:
        try:
            data, sender = recv(65536)
        except BlockingIOError:
            return accepted
        except ConnectionRefusedError:  # ICMP from a peer that already closed (teardown)
            continue
        accepted += on_datagram(data, sender)


async def send_unsent(sock, unsent: list) -> None:
    """Send the (datagram, address) pairs that found no room in ``sock``'s buffer, in order, as room
    comes."""
    while unsent:
        await trio.lowlevel.wait_writable(sock)
        data, addr = unsent[0]
        try:
            sock.sendto(data, addr)
        except BlockingIOError:
            continue
        unsent.pop(0)


class Element:
    def __init__(self, name: str, engine: Engine, *, cluster_id: int, domain: Scheduler,
                 outs: list[OutPort], ins: list[InPort], capture: bool, seed: int, lookahead_ns: int,
                 drop_rate: float = 0.0, node_id: int = 0, bind: str = "127.0.0.1", tag_key: bytes | None = None,
                 batch: Any = None):
        self.name = name
        self.mac = node_mac(node_id)
        """Source MAC of the link-control frames this element sends."""
        self.engine = engine
        self.cluster_id = cluster_id
        self.domain = domain
        self.outs = outs
        """Output ports by port number (None where a port has no link)."""
        self.ins = ins
        self.out_ports: list[OutPort] = [p for p in outs if p is not None]
        self.in_ports: list[InPort] = [p for p in ins if p is not None]
        self.in_by_link = {p.link_id: p for p in self.in_ports}
        self.out_by_link = {p.link_id: p for p in self.out_ports}
        for p in self.out_ports:
            p.link = LinkSender(cluster_id, p.link_id)
        for p in self.in_ports:
            p.link = LinkReceiver(cluster_id, p.link_id)
        self.lookahead = lookahead_ns
        self.heap: list[tuple[int, int, int, bytes]] = []
        """Received frames (with their FCS) waiting for their virtual arrival time."""
        self.pevents: list[tuple[int, int, int, Any]] = []
        """Port events of credit flow control: (time, seq, WAKE, out port) to start what a port can
        start; (time, seq, RELEASE, token) a frame leaving its input buffer. Handled in time order."""
        self._pseq = 0
        self.link_events: list[tuple[int, int, bool]] = []
        """(time, port, up): scheduled link changes the engine is told about (``on_link_change``)."""
        self.ports = PortView(self)
        self.iq = hasattr(engine, "on_credit")
        """The engine keeps its input buffers and credits itself (the input-queued router)."""
        if self.iq:
            engine.credit_out = self._credit_later
            engine.stretch_port = self._stretch_port
        for p in self.out_ports:
            if p.head_bytes:
                p.stretch_out = self._stretch_later
        try:  # the engine reads its ports through this view (engines with __slots__ may opt out)
            engine.ports = self.ports
        except AttributeError:
            pass
        self.now = 0
        self.active_ns = 0
        """Time of the last event that did something: a timer, a frame, a link change the engine
        answered (a scheduled change nobody answers does not stretch a run's completion time)."""
        self.lost_until = 0
        """When the last frame lost to an emulated fault finished leaving (it has no arrival event)."""
        self.safe_time = 0
        """Every event before this virtual time has been processed: a frame stamped earlier is a
        causality violation. Handed over in memory it is a bug of the synchroniser (CausalityError);
        from a socket, where a peer can be buggy or forged, it is counted (``late``) and dropped."""
        self.busy: dict[OutPort, None] = {}
        """Ports with frames waiting for their window (a dict: insertion order, never hash order)."""
        self.capture = [] if capture else None
        self.tracer = None
        """The process's ``emu.trace.Tracer`` when the run is traced (instants: faults, drops)."""
        self.stats = {"bad_magic": 0, "foreign_cluster": 0, "bad_link": 0, "truncated": 0,
                      "wrong_sender": 0, "gaps": 0, "duplicates": 0, "nacks_sent": 0, "retransmitted": 0,
                      "sock_dropped": 0, "datagrams_sent": 0, "datagrams_received": 0, "bad_tag": 0, "late": 0}
        self._drop_rate = drop_rate
        self._drop_rng = random.Random(seed ^ 0x5EED)
        self.unsent: list[tuple[bytes, tuple[str, int]]] = []
        self.batch = batch
        """The process's shared socket (``emu.batch.Batch``), or None: this element's own socket."""
        self._tag_key = tag_key
        if batch is not None:  # the batch reads, batches and tags (once per datagram)
            self.sock, self.addr = batch.sock, batch.addr
            return
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RCVBUF)
            self.sock.bind((bind, 0))  # loopback unless the user named an interface (RunConfig.bind)
            self.sock.setblocking(False)
        except BaseException:
            self.sock.close()
            raise
        self.addr: tuple[str, int] = self.sock.getsockname()
        if tag_key is not None:  # off loopback: every datagram carries a keyed tag (emu.wire.outer)
            self._tag = tagger(tag_key)
            self.on_datagram = self._on_tagged_datagram
            self._sendto = self._sendto_tagged

    # -- lifecycle ------------------------------------------------------------------------------
    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The element's task: report the socket address, then read datagrams until cancelled."""
        try:
            task_status.started(self.addr)
            while True:
                await trio.lowlevel.wait_readable(self.sock)
                if self.drain():
                    self.domain.wake()
        finally:
            self.sock.close()

    # -- receive side ---------------------------------------------------------------------------
    def drain(self) -> int:
        """Read every datagram waiting on the socket; return how many DATA frames were accepted."""
        if self.batch is not None:
            return self.batch.drain()
        return read_datagrams(self.sock, self.on_datagram)

    def on_datagram(self, data: bytes, sender: tuple[str, int]) -> int:
        """Parse the records of one datagram from socket address ``sender``; foreign, forged or
        malformed input is counted and dropped. A link's DATA records are accepted only from the
        socket of the element at its sending end, its NACKs only from the socket at its receiving
        end (``wrong_sender`` counts the rest): a stranger on the machine that guesses a cluster id,
        a link id and the next sequence number still cannot take a genuine frame's place."""
        n = len(data)
        off = 0
        accepted = 0
        stats = self.stats
        stats["datagrams_received"] += 1
        if not n:
            stats["truncated"] += 1
            self._note("truncated", "an empty datagram")
            return 0
        first_ts = INF
        unpack = OUTER.struct.unpack_from
        while off < n:
            if n - off < OUTER_LEN:
                stats["truncated"] += 1
                self._note("truncated", f"{n - off} trailing bytes are shorter than an outer header")
                break
            magic, ver, kind, cid, link, seq, ts, length, win = unpack(data, off)
            if magic != MAGIC or ver != VERSION:
                stats["bad_magic"] += 1
                self._note("bad_magic", f"magic 0x{magic:04x} version {ver}: not an emulator frame")
                break
            if cid != self.cluster_id:
                stats["foreign_cluster"] += 1
                self._note("foreign_cluster", f"cluster id 0x{cid:08x} is not this cluster's")
                break
            end = off + OUTER_LEN + length
            if end > n:
                stats["truncated"] += 1
                self._note("truncated", f"record says {length} bytes, datagram has {n - off - OUTER_LEN}")
                break
            if kind != LinkKind.NACK and kind <= LinkKind.DATA_POOL:
                inp = self.in_by_link.get(link)
                if inp is None:
                    stats["bad_link"] += 1
                    self._note("bad_link", f"frame for link {link}, which does not end here")
                    break
                if sender != inp.peer_addr:
                    stats["wrong_sender"] += 1
                    self._note("wrong_sender", f"frame for link {link} from {sender}, not from {inp.peer}")
                    break
                lk = inp.link
                if seq == lk.expected and ts < self.safe_time:  # the peer's fault (a bug, a forgery): not
                    stats["late"] += 1                           # taken, its place open for the real one
                    self._note("late", f"{inp.name}: record {seq} stamped {ts} ns, before {self.safe_time} ns "
                               "already processed here")
                    break
                if seq == lk.expected:  # (``LinkReceiver.classify``'s ACCEPT, inline: nearly every record)
                    lk.expected = (seq + 1) & 0xFFFFFFFF
                    verdict = ACCEPT
                else:
                    verdict = lk.classify(seq)
                if verdict == ACCEPT:
                    inp.rx_frames += 1
                    inp.rx_bytes += length
                    # handled at its virtual arrival: the port checks the FCS then (and strips it)
                    heapq.heappush(self.heap, (ts, inp.index, seq, data[off + OUTER_LEN:end], RX_FLAGS[kind]))
                    if ts < first_ts:
                        first_ts = ts
                    accepted += 1
                elif verdict == GAP:
                    # a datagram before this one was lost: go back N from what we expect
                    stats["gaps"] += 1
                    if not inp.link.gap_reported:
                        self.send_nack(inp)
                    break
                else:
                    stats["duplicates"] += 1
            elif kind == LinkKind.NACK:
                outp = self.out_by_link.get(link)
                if outp is None:
                    stats["bad_link"] += 1
                    self._note("bad_link", f"NACK for link {link}, which does not start here")
                    break
                if sender != outp.peer_addr:
                    stats["wrong_sender"] += 1
                    self._note("wrong_sender", f"NACK for link {link} from {sender}, not from {outp.peer}")
                    break
                self.retransmit(outp, seq)
            else:
                stats["bad_magic"] += 1
                self._note("bad_magic", f"unknown record kind {kind}")
                break
            off = end
        if accepted:
            self.domain.frames_arrived(self, accepted, first_ts, win)
        return accepted

    def _on_tagged_datagram(self, data: bytes, sender: tuple[str, int]) -> int:
        """``on_datagram`` off loopback: nothing of a datagram is read before its tag holds (a
        host on the network can forge a link's source address and port, not the tag)."""
        n = len(data) - TAG_LEN
        if n < 0 or not hmac.compare_digest(self._tag(memoryview(data)[:n]), data[n:]):
            self.stats["datagrams_received"] += 1
            self.stats["bad_tag"] += 1
            self._note("bad_tag", f"a datagram of {len(data)} bytes from {sender} without this cluster's tag")
            return 0
        return Element.on_datagram(self, data[:n], sender)

    def _sendto_tagged(self, data: bytes, addr: tuple[str, int], lossy: bool = True) -> None:
        Element._sendto(self, data + self._tag(data), addr, lossy)

    def _note(self, what: str, detail: str) -> None:
        """Log a dropped input: the first of each kind as a warning, the rest at debug (the
        counters in ``stats`` are the record)."""
        (log.warning if self.stats[what] == 1 else log.debug)("%s: dropped input (%s): %s", self.name, what, detail)

    def send_nack(self, inp: InPort) -> None:
        self.stats["nacks_sent"] += 1
        self._sendto(inp.link.nack(), inp.peer_addr)

    def retransmit(self, outp: OutPort, from_seq: int) -> None:
        """Go back N: resend every retained datagram that holds a record at or after ``from_seq``."""
        for dgram in outp.link.go_back(from_seq):
            self.stats["retransmitted"] += 1
            self._sendto(dgram, outp.peer_addr, lossy=False)

    # -- the window -----------------------------------------------------------------------------
    def next_time(self) -> int:
        """The time of this element's next event, scheduled link changes included (the hot path:
        called for every element every window, so it does not go through ``next_activity``)."""
        t = self.heap[0][0] if self.heap else INF
        if self.link_events and self.link_events[0][0] < t:
            t = self.link_events[0][0]
        tt = self.engine.timer
        if tt is not None and tt < t:
            t = tt
        if self.pevents and self.pevents[0][0] < t:
            t = self.pevents[0][0]
        la = self.lookahead
        for p in self.busy:
            if p.pending:
                s = p.pending[0][1] - la
                if s < t:
                    t = s
            if p.ctl:
                s = p.ctl[0][1] - la
                if s < t:
                    t = s
        return t

    def next_activity(self) -> int:
        """The time of this element's next event other than a scheduled link change: a frame, a
        timer, a port event, a frame due on the wire. A run is over when nothing has one."""
        t = self.heap[0][0] if self.heap else INF
        tt = self.engine.timer
        if tt is not None and tt < t:
            t = tt
        if self.pevents and self.pevents[0][0] < t:
            t = self.pevents[0][0]
        la = self.lookahead
        for p in self.busy:
            if p.pending:
                s = p.pending[0][1] - la
                if s < t:
                    t = s
            if p.ctl:
                s = p.ctl[0][1] - la
                if s < t:
                    t = s
        return t

    def run_window(self, t_end: int, window: int, link_end: int | None = None) -> int:
        """Process every event before ``t_end``; put on the wire every frame that arrives before
        ``t_end + lookahead``. Returns the earliest arrival time of the frames sent (or INF).

        A scheduled link change is processed only before ``link_end`` (the domain passes the
        window's start + 1: a change is reached in a window of its own, which the synchroniser
        starts only while something else is left to do); at a later one the element stops for this
        window, the change and what follows it waiting for that window. A run thus never reaches a
        change after its last event, however the windows fall.

        When to send a queued frame: the next window ends at ``t0' + L`` with ``t0' >= t_end``, and
        every frame arriving before then must be at its receiver when that window starts. A frame
        caused by a later event arrives at or after ``t0' + L`` (the lookahead promise), so what must
        go now is exactly what arrives before ``t_end + L``. Such a frame arrives at or after
        ``t_end``: it was not due earlier, because ``next_time`` reports a queued frame as due at
        ``arrival - L``. (Sending by transmission *start* instead would be wrong: a frame queued
        behind others starts long after the event that caused it, and its arrival is only one link
        latency after its start.) What is in flight on a link is thus bounded by what the port can
        serialise in one lookahead."""
        heap = self.heap
        eng = self.engine
        links = self.link_events
        pev = self.pevents
        min_delay = eng.min_delay_ns
        cut = getattr(eng, "cut_through", False)  # virtual cut-through: the promise is on the tail leaving
        # engines that check their own CRCs (QsNet) take frames that fail the FCS (cut-through)
        passes = getattr(eng, "passes_damaged", None)
        if link_end is None:
            link_end = t_end
        stop = t_end
        arrive, emit, receive = self._arrive, self._emit, eng.receive  # per frame: no lookups
        ins, pop = self.ins, heapq.heappop
        core = native.CORE
        plain = getattr(eng, "plain_table", None) if core is not None else None
        fwd = None
        while not links and not pev and eng.timer is None and self.capture is None:
            # only frames can be due (most windows of most elements): the same order, fewer tests
            if plain is not None:  # a static-table switch: its plain data frames in the compiled core
                fwd = plain()  # (asked again after every frame Python took: that may have changed it)
                if fwd is not None:
                    n, last = core.forward(heap, t_end, ins, self.outs, self.busy, fwd[0], fwd[1])
                    if n:
                        self.now = self.active_ns = last
                        eng.stats["forwarded"] += n
            while heap and heap[0][0] < t_end:
                now, port, _, wire, kind = pop(heap)
                self.now = self.active_ns = now
                inp = ins[port]
                if inp.timeline is None and inp.buf is None and (kind & CLEAN or crc32(wire) == FCS_RESIDUE) \
                        and (len(wire) < CREDIT_FRAME_LEN or wire[13] != 0xB6 or wire[12] != 0x88):
                    result = receive(wire if kind & NOFCS else wire[:-4], port, now)
                    if result:
                        emit(result, None, min_delay, cut)
                    if pev or eng.timer is not None or fwd is not None:  # the general loop, or the core again
                        break
                    continue
                arrived = self._arrived(now, port, wire, kind, passes)  # (the FCS is checked again there)
                if arrived is not None:
                    frame, port, token = arrived
                    result = receive(frame, port, now)
                    if result:
                        emit(result, token, min_delay, cut)
                    if token is not None and token[4] == 0:
                        token[4] = 1
                        self._release(token)
                break
            else:
                break
        while True:  # the next event in the fixed order: link change, port event, timer, frame
            tt = eng.timer
            th = heap[0][0] if heap else INF
            tp = pev[0][0] if pev else INF
            token = None
            if links and links[0][0] <= th and links[0][0] <= tp and (tt is None or links[0][0] <= tt):
                if links[0][0] >= link_end:
                    stop = min(stop, links[0][0])
                    break
                result = self._link_change()
            elif tp <= th and (tt is None or tp <= tt):
                if tp >= t_end:
                    break
                self._port_event()
                continue
            elif tt is not None and tt <= th:
                if tt >= t_end:
                    break
                result = self._fire_timer(tt)
            else:
                if th >= t_end:
                    break
                arrived = arrive(passes)
                if arrived is None:  # the port kept it: dropped, or link control
                    continue
                frame, port, token = arrived
                result = receive(frame, port, self.now)
            if result:
                emit(result, token, min_delay, cut)
            if token is not None and token[4] == 0:  # consumed here, or dropped: the buffer is free now
                token[4] = 1
                self._release(token)
        self.safe_time = stop
        return self._transmit(t_end + self.lookahead, window) if self.busy else INF

    # -- the events of a window ------------------------------------------------------------------
    def _link_change(self) -> list:
        """A scheduled link change, told to the engine before anything else at that time."""
        self.now, port, up = heapq.heappop(self.link_events)
        if self.tracer is not None:
            name = self.outs[port].name if 0 <= port < len(self.outs) and self.outs[port] is not None else port
            self.tracer.instant(self.name, "link up" if up else "link down", self.now, {"port": name}, "fault")
        handler = getattr(self.engine, "on_link_change", None)
        if handler is None:
            return []
        result = handler(port, up, self.now)
        if result:
            self.active_ns = self.now
        return result

    def _port_event(self) -> None:
        """Credit flow control: a port may start frames, or a frame left its input buffer."""
        self.now, _, what, obj = heapq.heappop(self.pevents)
        if what == WAKE:
            self._wake(obj)
        elif what == RELEASE:
            self._release(obj)
        elif what == CREDIT_OUT:
            self._credit_now(*obj)
        elif what == STRETCH_OUT:
            outp, d = obj
            outp.ctl.append((self.now, self.now + outp.latency_ns, add_fcs(build_stretch(self.mac, d)), False))
            self.busy[outp] = None
        else:
            self._credit_back(*obj)

    def _fire_timer(self, tt: int) -> list:
        if tt < self.now:
            raise EngineError(f"{self.name}: engine timer {tt} ns is before now ({self.now} ns)")
        self.now = self.active_ns = tt
        return self.engine.on_timer(tt)

    def _arrive(self, passes) -> tuple[bytes, int, list | None] | None:
        """The earliest received frame reaches its input port: the port checks its FCS and that
        its link was up while it was on the wire, hands a credit to the output port it is for, and
        puts the rest in its input buffer. Returns (frame without FCS, port, buffer token) for the
        engine, or None when the port kept the frame."""
        now, port, _, wire, kind = heapq.heappop(self.heap)
        self.now = self.active_ns = now
        return self._arrived(now, port, wire, kind, passes)

    def _arrived(self, now: int, port: int, wire: bytes, kind: int, passes) -> tuple[bytes, int, list | None] | None:
        """:meth:`_arrive` once the frame is off the heap (``now`` set)."""
        inp = self.ins[port]
        cap = self.capture
        # corrupted on the wire (captured as damaged); on a credit-flow link its sender gives its credit back
        damaged = not kind & CLEAN and crc32(wire) != FCS_RESIDUE
        if damaged and not self._take_damaged(inp, now, wire, passes):
            return None
        if inp.timeline is not None and self._lost_while_down(inp, now, wire, kind, damaged):
            return None
        if cap is not None and not damaged:
            cap.append((now, inp.iface, DIR_IN, wire))
        if is_credit(wire):  # link control: credit for the reverse direction's sender
            self._credit_arrived(port, wire)
            return None
        if damaged:  # passed on by an engine that checks its own CRCs: it takes no counted room
            if self.iq:
                self.engine.uncharged = True  # (the input-queued router files the next frame so)
            return wire[:-4], port, None
        token = None if inp.buf is None else self._enter_buffer(inp, wire, kind, now)
        return (wire if kind & NOFCS else wire[:-4]), port, token

    def _take_damaged(self, inp: InPort, now: int, wire: bytes, passes) -> bool:
        """A frame that fails its FCS: the port drops it, unless the engine checks its own CRCs
        and takes it (cut-through). Returns whether the engine takes it.

        Either way no credit goes back for it from here: its header, which names the VC and the pool
        its credit was charged to (and, on some framings, its length), may be what the bit error hit.
        Its sender, which applied the fault, knows them and gives that credit back itself
        (:meth:`_fault`), one round trip later, as for a frame a fault lost."""
        inp.fcs_errors += 1
        if self.tracer is not None:
            self.tracer.instant(self.name, "FCS error", now, {"port": inp.name}, "drop")
        if self.capture is not None:
            self.capture.append((now, inp.iface, DIR_IN | FCS_ERROR, wire))
        return passes is not None and passes(wire)

    def _not_buffered(self, inp: InPort, wire: bytes, kind: int) -> None:
        """A frame that never entered its input buffer (lost with its link down; it arrived intact, so its
        header says where its credit goes): its credit goes back."""
        if is_credit(wire):
            return
        if inp.buf is not None:
            self._return_credit(inp, wire, bool(kind & POOL))
        elif self.iq:
            self.engine.lost(inp.index, inp.framing.length(wire) if kind & NOFCS else inp.framing.length_wire(wire),
                             wire[VC_OFF] if len(wire) > VC_OFF else 0, self.now,
                             len(wire) > FLAGS_OFF and bool(wire[FLAGS_OFF] & FLAG_POOL))

    def _lost_while_down(self, inp: InPort, now: int, wire: bytes, kind: int, damaged: bool = False) -> bool:
        """Was the frame on the wire while its link was down (scheduled)? Then it is lost (a
        ``damaged`` one's credit its sender gives back: :meth:`_take_damaged`)."""
        n = inp.framing.length(wire) if kind & NOFCS else inp.framing.length_wire(wire)  # its modelled length
        ser_ns = -(-n * 8_000_000_000 // inp.bandwidth_bps)  # rounded up
        if inp.head_bytes:  # ``now`` is when its head came: the tail follows
            start = now - inp.latency_ns - -(-min(n, inp.head_bytes) * 8_000_000_000 // inp.bandwidth_bps)
            down = inp.timeline.down_during(start, start + ser_ns + inp.latency_ns)
        else:
            down = inp.timeline.down_during(now - inp.latency_ns - ser_ns, now)
        if not down:
            return False
        inp.lost_in_flight += 1
        if self.tracer is not None:
            self.tracer.instant(self.name, "lost in flight", now, {"port": inp.name, "reason": "link down"}, "drop")
        if self.capture is not None:
            self.capture.append((now, inp.iface, DIR_IN | LOST_DOWN, wire))
        if is_credit(wire):  # a link that comes back resynchronises its credits: none is lost for good
            self._credit_arrived(inp.index, wire)
        elif not damaged:
            self._not_buffered(inp, wire, kind)
        return True

    def _credit_arrived(self, port: int, wire: bytes) -> None:
        """Credit for the output port of the same number (the reverse direction of the link)."""
        vc, pool, frames, nbytes = CREDIT.unpack(wire, ETH_LEN)
        if pool == STRETCH:  # the packet arriving on this input port is late (emu.segcut)
            if self.iq:
                self.engine.on_stretch(port, nbytes, self.now)
            return
        outp = self.outs[port]
        if outp is not None and outp.flow is not None:
            outp.credit(vc, bool(pool), nbytes)
            self._wake(outp)
        elif self.iq:
            self.engine.on_credit(port, vc, nbytes, self.now, bool(pool), frames)

    def _enter_buffer(self, inp: InPort, wire: bytes, kind: int, now: int) -> list:
        """The frame takes its room in the input buffer; the token frees it when every frame the
        engine sends because of it has started on its way (``_release``)."""
        buf = inp.buf
        vc = wire[VC_OFF] % buf.vcs if len(wire) > VC_OFF else 0
        try:
            n = inp.framing.length(wire) if kind & NOFCS else inp.framing.length_wire(wire)
            buf.take(vc, bool(kind & POOL), n, now)
        except OverflowError as e:
            raise EngineError(f"{inp.name}: credit flow control broken: {e}") from None
        return [inp, vc, bool(kind & POOL), n, 0]

    def _emit(self, result: list, token: list | None, min_delay: int, cut: bool) -> None:
        """Hand the frames the engine returned to their output ports: queued for the line, or
        waiting for credit; dropped where the port is down when the frame would start. Each
        counts on ``token``, so the received frame that caused them stays in its input buffer
        until they have started on their way."""
        outs = self.outs
        now = self.now
        core = native.CORE
        for i in range(len(result)):
            port, frame, at = result[i]
            result[i] = None  # a burst of frames (a long message) is not held twice: port copy only
            p = outs[port] if 0 <= port < len(outs) else None
            if p is None:
                raise EngineError(f"{self.name}: engine sent a frame to port {port}, which has no link")
            if at - now < min_delay and not (cut and at + p._ser(p.framing.length(frame)) - now >= min_delay):
                raise EngineError(f"{self.name}: engine emitted a frame at {at} ns while handling an event at "
                                  f"{now} ns, earlier than its promised minimum delay of {min_delay} ns")
            if not p.up or (p.timeline is not None and not p.timeline.up_at(at)):
                frame = made(frame)  # (a lazy frame's sender learns it is gone)
                p.dropped += 1
                if self.tracer is not None:
                    self.tracer.instant(self.name, "drop", at, {"port": p.name, "reason": "link down"}, "drop")
                if self.capture is not None:
                    self.capture.append((at, p.iface, DIR_OUT | DROPPED, add_fcs(frame)))
                continue
            if token is not None:
                token[4] += 1
            if p.flow is not None:  # the receiver's buffers take it when a credit covers it
                p.hand_over(frame, at, token)
                if not now < p.wake_at <= at:  # (a wake already due by then covers it)
                    p.wake_at = at
                    self._event(at, WAKE, p)
                continue
            start = core.enqueue(p, frame, at) if core is not None else None  # (None: not the plain case)
            if start is None:
                start = p.enqueue(frame, at)
            self.busy[p] = None
            if token is not None:  # it leaves its input buffer as it starts on its way out
                self._event(start, RELEASE, token)

    # -- credit flow control ---------------------------------------------------------------------
    def _event(self, t: int, what: int, obj: Any) -> None:
        self._pseq += 1
        heapq.heappush(self.pevents, (t, self._pseq, what, obj))

    def _wake(self, p: OutPort) -> None:
        """Start what port ``p`` can start now; release the input buffers of what started."""
        started, wake = p.start_ready(self.now)
        if p.pending:
            self.busy[p] = None
        for token in started:
            self._release(token)
        if wake is not None and not self.now < p.wake_at <= wake:
            p.wake_at = wake
            self._event(wake, WAKE, p)

    def _release(self, token: list) -> None:
        """One of the frames a received frame caused has started on its way (or none will): when
        the last has, the received frame's bytes leave the input buffer and their credit goes back."""
        token[4] -= 1
        if token[4] > 0:
            return
        inp, vc, pool, n, _ = token
        inp.buf.free(vc, pool, n, self.now)
        self._send_credit(inp, vc, pool, n)

    def _return_credit(self, inp: InPort, wire: bytes, pool: bool) -> None:
        """A frame that never entered the buffer (lost, corrupted): its credit goes straight back."""
        vc = wire[VC_OFF] % inp.buf.vcs if len(wire) > VC_OFF else 0
        self._send_credit(inp, vc, pool, inp.framing.length_wire(wire))

    def _resync(self, p: OutPort, wire: bytes, pool: bool, at: int) -> None:
        """A frame an emulated fault lost on the wire took credit the receiver never returns: it comes
        back one round trip later, as a link's credit resynchronisation would bring it."""
        if len(wire) <= VC_OFF or is_credit(wire):
            return
        if p.flow is not None:
            fl = p.flow
            c = -(-p.framing.length_wire(wire) // fl.unit) * fl.unit
            a, b = fl.parts(c, pool if not fl.vc_bytes else bool(wire[FLAGS_OFF] & FLAG_POOL))
            if a:
                self._event(at, CREDIT_BACK, (p, wire[VC_OFF] % fl.vcs, False, a))
            if b:
                self._event(at, CREDIT_BACK, (p, wire[VC_OFF] % fl.vcs, True, b))
        elif self.iq:
            a, b, f = self.engine.resync_parts(p.index, p.framing.length_wire(wire),
                                               bool(wire[FLAGS_OFF] & FLAG_POOL))
            if a:
                self._event(at, CREDIT_BACK, (p, wire[VC_OFF], False, a, f))
            if b:
                self._event(at, CREDIT_BACK, (p, wire[VC_OFF], True, b, 0 if a else f))

    def _credit_back(self, p: OutPort, vc: int, pool: bool, n: int, frames: int = 0) -> None:
        self.active_ns = self.now  # a credit's arrival, as one on the wire is
        if p.flow is not None:
            p.credit(vc, pool, n)
            self._wake(p)
        else:
            self.engine.on_credit(p.index, vc, n, self.now, pool, frames)

    def _credit_later(self, port: int, vc: int, n: int, at: int, pool: bool = False, frames: int = 0) -> None:
        """The engine's credit for the sender on ``port`` (for its pool when ``pool``; ``frames`` that
        left with it): sent at ``at`` (a port event, so the credits on a link leave in time order)."""
        self._event(at, CREDIT_OUT, (port, vc, n, pool, frames))

    def _stretch_later(self, p: OutPort, at: int, d: int) -> None:
        """Tell the receiver on ``p`` at ``at`` that the packet on the line is ``d`` ns late (a port
        event, so the link-control frames on a port leave in time order)."""
        self._event(at, STRETCH_OUT, (p, d))

    def _stretch_port(self, port: int, start: int, d: int, now: int) -> bool:
        """The engine's packet that started at ``start`` on ``port`` finishes ``d`` later."""
        p = self.outs[port]
        found = stretch_port(p, start, d, now)
        if p.pending:
            self.busy[p] = None
        return found

    def _credit_now(self, port: int, vc: int, n: int, pool: bool, frames: int) -> None:
        outp = self.outs[port]
        outp.ctl.append((self.now, self.now + outp.latency_ns, add_fcs(build_credit(self.mac, vc, pool, n, frames)),
                         False))
        self.busy[outp] = None

    def _send_credit(self, inp: InPort, vc: int, pool: bool, n: int) -> None:
        outp = self.outs[inp.index]
        start = self.now + inp.buf.credit_delay_ns
        outp.ctl.append((start, start + outp.latency_ns, add_fcs(build_credit(self.mac, vc, pool, n)), False))
        self.busy[outp] = None

    def _transmit(self, release: int, window: int) -> int:
        """Every busy port's frames due before ``release`` on their way: into the heaps of this
        process's elements, or as records to other processes; returns the earliest arrival (INF: none)."""
        core = native.CORE
        if core is not None and self.capture is None:  # the ports to this process's elements (and to its socket) in the core
            first_arrival, ports = core.transmit_local(self.busy, release, window, self.domain,
                                                       None if self._drop_rate else self.batch, self.stats)
            return self._transmit_ports(ports, first_arrival, release, window) if ports else first_arrival
        return self._transmit_ports(self.busy, INF, release, window)

    def _transmit_ports(self, ports, first_arrival: int, release: int, window: int) -> int:
        """``_transmit`` for the busy ports ``ports`` (all, or those the compiled core left)."""
        cap = self.capture
        done = []
        domain = self.domain
        push = heapq.heappush
        batch = self.batch
        core = native.CORE
        for p in ports:
            pend, ctl = p.pending, p.ctl
            if p.local is not None and not ctl and p.fault_rng is None and cap is None:
                # to an element of this process, nothing to capture, no fault: straight into its heap
                # (what ``_hand_over`` does with the list below, without building the list)
                if pend and pend[0][1] < release:
                    peer, inp = p.local
                    a0 = pend[0][1]
                    if a0 < peer.safe_time:
                        raise CausalityError(f"{inp.name}: frame stamped {a0} ns handed over after {peer.safe_time} ns "
                                             "was processed; the synchroniser let a window run too far")
                    if a0 < first_arrival:
                        first_arrival = a0
                    heap, index, link = peer.heap, inp.index, p.link
                    seq = link.seq
                    flags = CLEAN | NOFCS if p.defer_fcs else CLEAN
                    n = nbytes = 0  # (with the compiled core, transmit_local above took these ports)
                    while pend and pend[0][1] < release:
                        _, arrival, frame, pool = pend.popleft()
                        if frame.__class__ is LazyFrame:  # made from its sender's buffer now (emu.wire.lazy)
                            frame = frame.make()
                        push(heap, (arrival, index, seq, frame, flags | POOL if pool else flags))
                        seq = (seq + 1) & 0xFFFFFFFF
                        n += 1
                        nbytes += len(frame)
                    if flags & NOFCS:
                        nbytes += 4 * n
                    link.seq = inp.link.expected = seq
                    p.sent_done = arrival - p.latency_ns
                    p.tx_frames += n
                    p.tx_bytes += nbytes
                    inp.rx_frames += n
                    inp.rx_bytes += nbytes
                    domain.frames_local(peer, n, a0, window)
                if not pend:
                    done.append(p)
                continue
            if batch is not None and not ctl and p.fault_rng is None and cap is None:
                # by the process's socket, nothing to capture, no fault, no credit: the frames become
                # records as they leave the port (what the list below does, without building it)
                if pend and pend[0][1] < release:
                    if pend[0][1] < first_arrival:
                        first_arrival = pend[0][1]
                    # (a frame on a socket carries its FCS: defer_fcs is only set on ports handed over in memory)
                    dgrams, n, nbytes, arrival = core.take(p.link, pend, release, window) if core is not None \
                        else p.link.take(pend, release, window)
                    if self._drop_rate:
                        for dgram in dgrams:
                            self._sendto(dgram, p.peer_addr)
                    else:
                        self.stats["datagrams_sent"] += len(dgrams)
                        for dgram in dgrams:
                            batch.send(dgram, p.peer_addr)
                    domain.frames_sent(p.peer_domain, n, p.peer)
                    p.sent_done = arrival - p.latency_ns
                    p.tx_frames += n
                    p.tx_bytes += nbytes
                if not pend:
                    done.append(p)
                continue
            frames = []
            while ctl and ctl[0][1] < release:  # credits: no time on the wire, never faulty
                start, arrival, frame, _ = ctl.popleft()
                if arrival < first_arrival:
                    first_arrival = arrival
                if cap is not None:
                    cap.append((start, p.iface, DIR_OUT, frame))
                frames.append((arrival, frame, False))
            credits = len(frames)
            total = 0
            if pend and pend[0][1] < release:
                if pend[0][1] < first_arrival:  # arrivals are in order on a port
                    first_arrival = pend[0][1]
                faulty = p.fault_rng is not None
                if faulty and p.defer_fcs:  # a fault acts on the frame as it is on the line
                    p.restore_fcs()
                nofcs = NOFCS if p.defer_fcs else 0
                while pend and pend[0][1] < release:
                    start, arrival, frame, pool = pend.popleft()
                    if frame.__class__ is LazyFrame:  # made from its sender's buffer now (emu.wire.lazy)
                        frame = frame.make()
                    if faulty:
                        frame, lost = self._fault(p, start, frame, pool, arrival)
                        if lost:  # the frame occupied the port, then vanished: that time still passed
                            if arrival - p.latency_ns > self.lost_until:
                                self.lost_until = arrival - p.latency_ns
                            self._resync(p, frame, pool, arrival + p.latency_ns)
                            continue
                    elif cap is not None:
                        cap.append((start, p.iface, DIR_OUT, frame))
                    frames.append((arrival, frame, (POOL if pool else 0) | nofcs))  # (UDP: 0, POOL or NOFCS)
                    total += len(frame)
                if nofcs:
                    total += 4 * (len(frames) - credits)
                p.sent_done = arrival - p.latency_ns
            if frames:  # (emulated faults may have lost every frame); credits ride with the data
                if p.local is not None:
                    self._hand_over(p, frames, window)
                else:
                    addr = p.peer_addr
                    for dgram in p.link.datagrams(frames, window):
                        self._sendto(dgram, addr)
                    domain.frames_sent(p.peer_domain, len(frames), p.peer)
                p.tx_frames += len(frames) - credits
                p.tx_bytes += total
            if not pend and not ctl:
                done.append(p)
        for p in done:
            del self.busy[p]
        return first_arrival

    def _hand_over(self, p: OutPort, frames: list, window: int) -> None:
        """Frames for an element of this process: into its input queue as the records a datagram
        would carry (the link's sequence numbers, so equal-time order is the same), no socket."""
        peer, inp = p.local
        if frames[0][0] < peer.safe_time:
            raise CausalityError(f"{inp.name}: frame stamped {frames[0][0]} ns handed over after {peer.safe_time} ns "
                                 "was processed; the synchroniser let a window run too far")
        heap, index = peer.heap, inp.index
        seq = p.link.seq
        clean = CLEAN if p.fault_rng is None else 0  # no emulated fault can have touched it: FCS good
        first_ts = INF
        nbytes = 0
        push = heapq.heappush
        for arrival, frame, flags in frames:  # flags: POOL, NOFCS
            push(heap, (arrival, index, seq, frame, clean | flags))
            seq = (seq + 1) & 0xFFFFFFFF
            nbytes += len(frame) + 4 if flags & NOFCS else len(frame)
            if arrival < first_ts:
                first_ts = arrival
        p.link.seq = inp.link.expected = seq
        inp.rx_frames += len(frames)
        inp.rx_bytes += nbytes
        self.domain.frames_local(peer, len(frames), first_ts, window)

    def _fault(self, p: OutPort, start: int, frame: bytes, pool: bool = False, arrival: int = 0) -> tuple[bytes, bool]:
        """Apply the port's emulated faults to one frame (``pool``: placed in the receiver's pool;
        arriving at ``arrival``): (frame as it will arrive, lost?). A frame a bit error damages
        fails its FCS at the receiver, which cannot trust the header that says where its credit
        goes: this sender gives it back, one round trip later (:meth:`_resync`)."""
        rng, cap = p.fault_rng, self.capture
        if rng.random() < p.fault_drop:
            p.fault_dropped += 1
            if self.tracer is not None:
                self.tracer.instant(self.name, "drop", start, {"port": p.name, "reason": "emulated loss"}, "drop")
            if cap is not None:
                cap.append((start, p.iface, DIR_OUT | FAULT_DROP, frame))
            return frame, True
        corrupt = p.fault_corrupt
        if p.timeline is not None:  # a scheduled bit-error rate, in force when the frame starts
            ber = p.timeline.ber_at(start)
            if ber:
                corrupt = 1 - (1 - corrupt) * (1 - frame_error_probability(ber, len(frame)))
        if rng.random() < corrupt:
            p.fault_corrupted += 1
            if self.tracer is not None:
                self.tracer.instant(self.name, "corrupt", start, {"port": p.name, "reason": "bit error"}, "fault")
            if cap is not None:
                cap.append((start, p.iface, DIR_OUT | FAULT_CORRUPT, frame))
            self._resync(p, frame, pool, arrival + p.latency_ns)
            bit = rng.randrange(8 * len(frame))
            b = bytearray(frame)
            b[bit // 8] ^= 0x80 >> (bit % 8)
            return bytes(b), False
        if cap is not None:
            cap.append((start, p.iface, DIR_OUT, frame))
        return frame, False

    def forget(self, upto_window: int) -> None:
        """Drop retained datagrams of windows <= ``upto_window``: every receiver has them."""
        if native.CORE is not None and type(self.out_ports) is list:
            native.CORE.forget(self.out_ports, upto_window)
            return
        for p in self.out_ports:
            r = p.link.retained
            if r and r[0][0] <= upto_window:  # (frames handed over in memory are never retained)
                p.link.forget(upto_window)

    def _sendto(self, data: bytes, addr: tuple[str, int], lossy: bool = True) -> None:
        if lossy and self._drop_rate and self._drop_rng.random() < self._drop_rate:
            self.stats["sock_dropped"] += 1
            return
        self.stats["datagrams_sent"] += 1
        if self.batch is not None:  # (a group of one link's records: the batch joins and sends them)
            self.batch.send(data, addr)
            return
        try:
            self.sock.sendto(data, addr)
        except BlockingIOError:
            self.unsent.append((data, addr))

    async def flush_unsent(self) -> None:
        await send_unsent(self.sock, self.unsent)

    # -- reporting ------------------------------------------------------------------------------
    def port_stats(self) -> list[dict[str, Any]]:
        out = []
        for p in self.out_ports:
            inp = self.ins[p.index]
            out.append({"port": p.name, "peer": p.peer_port_name, "tx_frames": p.tx_frames,
                        "tx_bytes": p.tx_bytes, "rx_frames": inp.rx_frames, "rx_bytes": inp.rx_bytes,
                        "fcs_errors": inp.fcs_errors, "lost_in_flight": inp.lost_in_flight,
                        "dropped": p.dropped, "up": p.up, "fault_dropped": p.fault_dropped,
                        "fault_corrupted": p.fault_corrupted,
                        "peak_queue_frames": p.peak_queue_frames, "peak_queue_bytes": p.peak_queue_bytes,
                        "overtakes": p.overtakes, "busy_ns": p.busy_ns})
            if inp.buf is not None:  # input buffers of this port (credit flow control)
                inp.buf._advance(self.now)
                out[-1].update(vc_peak_bytes=list(inp.buf.peak), vc_byte_ns=list(inp.buf.integral),
                               vc_buffer_bytes=inp.buf.capacity, pool_peak_bytes=inp.buf.pool_peak)
            if p.flow is not None:  # credits this port waits for
                out[-1].update(credit_stalls=p.flow.stalls, credit_stall_ns=p.flow.stall_ns,
                               frames_waiting=p.flow.waiting())
            elif self.iq:  # frames waiting for this port in the input-queued router's buffers
                out[-1]["frames_waiting"] = self.engine.wait_n[p.index]
        return out
