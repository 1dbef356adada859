"""An element's credit flow control and emulated link faults (part of :class:`emu.element.Element`):
input buffers and the credits that go back, port events (wake, release, credit out and back,
stretch), frames damaged or lost on the wire and the credit they took."""

from __future__ import annotations

import heapq
from typing import Any


from . import native
from .errors import EngineError
from .buffers import VC_OFF
from .port import InPort, OutPort, frame_error_probability
from .segcut import stretch as stretch_port
from .wire.credit import CREDIT, STRETCH, build_credit, is_credit
from .wire.fabric import ETH_LEN, FLAG_POOL, FLAGS_OFF, add_fcs
from .element_const import (DIR_IN, DIR_OUT, FAULT_DROP, FAULT_CORRUPT, WAKE, CREDIT_OUT, CREDIT_BACK, STRETCH_OUT,
                            POOL, NOFCS, FCS_ERROR, LOST_DOWN)

_KEEP = 4096
_BUILT: dict = {}
"""Credit frames with their FCS by (sender MAC, VC, pool, bytes, frames): the same fields, the same bytes."""
_READ: dict = {}
"""A credit frame's fields by its bytes (``CREDIT.unpack``'s, for frames seen before)."""


class Flow:
    """The flow-control side of :class:`emu.element.Element` (a part of it, never used alone)."""

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
        if inp.buf is not None and inp.buf.pfc:  # (never held at a PFC ingress: nothing to free)
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
        fields = _READ.get(wire) if wire.__class__ is bytes else None
        if fields is None:  # (decoded once per distinct credit frame)
            fields = CREDIT.unpack(wire, ETH_LEN)
            if wire.__class__ is bytes:
                if len(_READ) >= _KEEP:
                    _READ.clear()
                _READ[wire] = fields
        vc, pool, frames, nbytes = fields
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

    def _event(self, t: int, what: int, obj: Any) -> None:
        self._pseq += 1
        heapq.heappush(self.pevents, (t, self._pseq, what, obj))

    def _wake(self, p: OutPort) -> None:
        """Start what port ``p`` can start now; release the input buffers of what started."""
        core = native.CORE  # (its twin of start_ready's plain case: csrc/flowwake.h; None: Python's)
        r = core.start_ready(p, self.now) if core is not None else None
        started, wake = p.start_ready(self.now) if r is None else r
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
        if pool is None:  # a PFC ingress's bytes (emu.element_pfc)
            self._pfc_free(inp, vc, n)
            return
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
            c = fl.cost(wire)
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
        key = (self.mac, vc, pool, n, frames)
        wire = _BUILT.get(key)
        if wire is None:  # (a credit's bytes are those of its fields: built once per sender and fields)
            if len(_BUILT) >= _KEEP:
                _BUILT.clear()
            wire = _BUILT[key] = add_fcs(build_credit(self.mac, vc, pool, n, frames))
        outp.ctl.append((self.now, self.now + outp.latency_ns, wire, False))
        self.busy[outp] = None

    def _send_credit(self, inp: InPort, vc: int, pool: bool, n: int) -> None:
        outp = self.outs[inp.index]
        start = self.now + inp.buf.credit_delay_ns
        outp.ctl.append((start, start + outp.latency_ns, add_fcs(build_credit(self.mac, vc, pool, n)), False))
        self.busy[outp] = None

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
