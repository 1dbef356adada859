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

import functools
import heapq
import logging
import random
import socket
from typing import Any, Protocol

import trio

from . import native
from .errors import CausalityError, EngineError
from .link import MAX_DATAGRAM, LinkReceiver, LinkSender
from .port import InPort, OutPort
from .portview import PortView
from .wire.credit import CREDIT_FRAME_LEN, ETHERTYPE_CREDIT, build_stretch, is_credit
from .wire.fabric import (DST_OFF, ETHERTYPE_FABRIC, FCS_RESIDUE, FLAG_BCAST, FLAGS_OFF, HDR_LEN, HOPS_OFF, add_fcs,
                          PacketType, node_mac)
from .wire.lazy import LazyFrame, made
from .wire.outer import MAGIC, OUTER_LEN, VERSION, LinkKind, tagger
from .element_const import (INF, RCVBUF, DIR_IN, DIR_OUT, DROPPED, WAKE, RELEASE, CREDIT_OUT, STRETCH_OUT, PAUSE_END, POOL,
                            CLEAN, NOFCS)
from .element_flow import Flow
from .element_links import Links
from .element_pfc import Pfc
from .wire.pause import is_pause

log = logging.getLogger(__name__)


if native.CORE is not None:  # the compiled core learns the ports' layout and the frames' (emu.native)
    try:
        native.CORE.setup(OutPort, InPort, LazyFrame, LinkSender, LinkReceiver, CausalityError,
                          (MAGIC, VERSION, int(LinkKind.DATA), int(LinkKind.DATA_POOL), OUTER_LEN, MAX_DATAGRAM, POOL, CLEAN, NOFCS, FCS_RESIDUE, CREDIT_FRAME_LEN, ETHERTYPE_CREDIT >> 8, ETHERTYPE_CREDIT & 0xFF, ETHERTYPE_FABRIC >> 8, ETHERTYPE_FABRIC & 0xFF,
                           HDR_LEN, DST_OFF, DST_OFF + 6, FLAGS_OFF, HOPS_OFF, DST_OFF + 5, FLAG_BCAST, int(PacketType.QPKT)))
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


class Element(Links, Flow, Pfc):
    __slots__ = ("heap", "ins", "outs", "busy", "link_events", "pevents", "capture", "engine", "now", "active_ns",
                 "safe_time", "lookahead", "lost_until", "unsent", "batch", "_drop_rate", "stats", "domain",
                 "out_ports", "mac", "iq")
    """The attributes the compiled core reads and writes in place (their offsets, read at
    ``element_setup``); the rest live in the instance's ``__dict__`` (its mixins have one)."""

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
        self._drop_seed = seed ^ 0x5EED  # (its generator made as it is first drawn from: _drop_rng)
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

    @functools.cached_property
    def _drop_rng(self) -> random.Random:
        """The seeded generator of the socket's emulated losses (``RunConfig.socket_drop_rate``), made
        when first drawn from -- the same draws as one made with the element, since nothing draws
        from it before (a generator per element, 5 us each, that most runs never use)."""
        return random.Random(self._drop_seed)

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
        if link_end is None:
            link_end = t_end
        stop = t_end
        ins, pop = self.ins, heapq.heappop
        core = native.CORE
        plain = core is not None and hasattr(eng, "plain_table")
        fwd = None
        while not links and not pev and eng.timer is None and self.capture is None:
            # only frames can be due (most windows of most elements): the same order, fewer tests
            if plain:  # a switch: its plain data frames in the compiled core while its table alone decides
                fwd = eng.plain_table  # (read again after every frame Python took: that may have changed it)
                if fwd is not None and fwd[2]:  # (ports held out of service: receive decides)
                    fwd = None
                if fwd is not None:
                    n, last = core.forward(heap, t_end, ins, self.outs, self.busy, fwd[0], fwd[1])
                    if n:
                        self.now = self.active_ns = last
                        eng.stats["forwarded"] += n
            while heap and heap[0][0] < t_end:
                now, port, _, wire, kind = pop(heap)
                self.now = self.active_ns = now
                inp = ins[port]
                if inp.timeline is None and inp.buf is None and (kind & CLEAN or native.crc32()(wire) == FCS_RESIDUE) \
                        and (len(wire) < CREDIT_FRAME_LEN or wire[13] != 0xB6 or wire[12] != 0x88):
                    result = eng.receive(wire if kind & NOFCS else wire[:-4], port, now)
                    if result:
                        self._emit(result, None, min_delay, cut)
                    if eng.timer == now and not pev:  # due at once (a host's message): before any other frame
                        result = eng.on_timer(now)  # (what the general loop would do next, ``_fire_timer``)
                        if result:
                            self._emit(result, None, min_delay, cut)
                    if pev or eng.timer is not None or fwd is not None:  # the general loop, or the core again
                        break
                    continue
                arrived = self._arrived(now, port, wire, kind)  # (the FCS is checked again there)
                if arrived is not None:
                    frame, port, token = arrived
                    result = eng.receive(frame, port, now)
                    if result:
                        self._emit(result, token, min_delay, cut)
                    if token is not None and token[4] == 0:
                        token[4] = 1
                        self._release(token)
                break
            else:
                break
        while True:  # the next event in the fixed order: link change, port event, timer, frame
            tt = eng.timer
            th = heap[0][0] if heap else INF
            token = None
            if links or pev:  # (neither: the next event is the timer or a frame)
                tp = pev[0][0] if pev else INF
                if links and links[0][0] <= th and links[0][0] <= tp and (tt is None or links[0][0] <= tt):
                    if links[0][0] >= link_end:
                        stop = min(stop, links[0][0])
                        break
                    result = self._link_change()
                    if result:
                        self._emit(result, None, min_delay, cut)
                    continue
                if pev and tp <= th and (tt is None or tp <= tt):
                    if tp >= t_end:
                        break
                    self._port_event()
                    continue
            if tt is not None and tt <= th:
                if tt >= t_end:
                    break
                if tt < self.now:
                    self._fire_timer(tt)  # (raises: a timer in the past)
                self.now = self.active_ns = tt  # (``_fire_timer``, without its call: one per message a host takes)
                result = eng.on_timer(tt)
            else:
                if not heap or th >= t_end:  # (nothing left: a window past the horizon INF ends here, as the core's)
                    break
                arrived = self._arrive()
                if arrived is None:  # the port kept it: dropped, or link control
                    continue
                frame, port, token = arrived
                result = eng.receive(frame, port, self.now)
            if result:
                self._emit(result, token, min_delay, cut)
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
        elif what == PAUSE_END:
            self._pause_end(obj)
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

    def _arrive(self) -> tuple[bytes, int, list | None] | None:
        """The earliest received frame reaches its input port: the port checks its FCS and that
        its link was up while it was on the wire, hands a credit to the output port it is for, and
        puts the rest in its input buffer. Returns (frame without FCS, port, buffer token) for the
        engine, or None when the port kept the frame."""
        now, port, _, wire, kind = heapq.heappop(self.heap)
        self.now = self.active_ns = now
        return self._arrived(now, port, wire, kind)

    def _arrived(self, now: int, port: int, wire: bytes, kind: int) -> tuple[bytes, int, list | None] | None:
        """:meth:`_arrive` once the frame is off the heap (``now`` set). A frame that fails its FCS
        reaches an engine that checks its own CRCs (QsNet: ``passes_damaged``, cut-through)."""
        inp = self.ins[port]
        cap = self.capture
        # corrupted on the wire (captured as damaged); on a credit-flow link its sender gives its credit back
        damaged = not kind & CLEAN and native.crc32()(wire) != FCS_RESIDUE
        if damaged and not self._take_damaged(inp, now, wire, getattr(self.engine, "passes_damaged", None)):
            return None
        if inp.timeline is not None and self._lost_while_down(inp, now, wire, kind, damaged):
            return None
        if cap is not None and not damaged:
            cap.append((now, inp.iface, DIR_IN, wire))
        if is_credit(wire):  # link control: credit for the reverse direction's sender
            self._credit_arrived(port, wire)
            return None
        if is_pause(wire):  # link control: PFC for the reverse direction's sender (emu.element_pfc)
            self._pause_arrived(port, wire)
            return None
        if damaged:  # passed on by an engine that checks its own CRCs: it takes no counted room
            if self.iq:
                self.engine.uncharged = True  # (the input-queued router files the next frame so)
            return wire[:-4], port, None
        if inp.buf is None:
            token = None
        elif inp.buf.pfc:  # a PFC ingress: the frame's bytes held for its class (emu.element_pfc)
            if (token := self._pfc_enter(inp, wire, kind, now)) is False:
                return None
        else:
            token = self._enter_buffer(inp, wire, kind, now)
        return (wire if kind & NOFCS else wire[:-4]), port, token

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
            fl = p.flow
            if fl is not None and fl.admit is not None and (frame := self._admit(p, frame, at)) is None:
                continue  # dropped by a switch's output-queue discipline (switch.queues)
            if token is not None:
                token[4] += 1
            if fl is not None:  # the receiver's buffers take it when a credit covers it (or its class is not paused)
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
            if inp.buf is not None and not inp.buf.pfc:  # input buffers of this port (credit flow control)
                inp.buf._advance(self.now)
                out[-1].update(vc_peak_bytes=list(inp.buf.peak), vc_byte_ns=list(inp.buf.integral),
                               vc_buffer_bytes=inp.buf.capacity, pool_peak_bytes=inp.buf.pool_peak)
            if p.flow is not None and p.flow.by_prio:  # queues per class, PFC (emu.pause, switch.queues)
                self._queue_stats(p, inp, out[-1])
            elif p.flow is not None:  # credits this port waits for
                out[-1].update(credit_stalls=p.flow.stalls, credit_stall_ns=p.flow.stall_ns,
                               frames_waiting=p.flow.waiting())
            elif self.iq:  # frames waiting for this port in the input-queued router's buffers
                out[-1]["frames_waiting"] = self.engine.wait_n[p.index]
            elif inp.buf is not None and inp.buf.pfc:  # a PFC ingress only
                self._queue_stats(p, inp, out[-1])
        return out


if native.CORE is not None:  # the compiled core reads and writes an Element's hot attributes in place
    try:
        native.CORE.element_setup(Element)
    except (TypeError, AttributeError) as e:
        native.disable(str(e))
