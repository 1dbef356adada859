"""An element's priority flow control (part of :class:`emu.element.Element`): the bytes a frame holds at
a PFC ingress (``emu.pause.Ingress``), the PAUSE frames that go upstream, and the PAUSE frames that
arrive for an output port (``emu.pause.PrioQueues``): its classes stop starting frames until the pause
lapses or a resume comes. A PAUSE goes out as link control, as a credit does: no serialisation, on
the reverse direction of the link, numbered, captured and decoded like any frame."""

from __future__ import annotations

from .element_const import DIR_IN, DIR_OUT, DROPPED, NOFCS, PAUSE_END
from .pause import DROP, HELD, INF
from .port import PRIO_OFF, InPort
from .wire.fabric import add_fcs
from .wire.lazy import made
from .wire.pause import build_pause, parse_pause, quanta_ns

class Pfc:
    """The PFC side of :class:`emu.element.Element` (a part of it, never used alone)."""

    def _pfc_enter(self, inp: InPort, wire: bytes, kind: int, now: int) -> list | None | bool:
        """A data frame arrives at a PFC ingress: its bytes are held for its class (a PAUSE upstream at
        ``xoff_bytes``) until the token is released; None: a class (or a port) PFC does not hold; False:
        beyond the headroom (dropped, counted and captured)."""
        prio = wire[PRIO_OFF] & 7 if len(wire) > PRIO_OFF else 0
        if not inp.buf.mask >> prio & 1:
            return None
        n = inp.framing.length(wire) if kind & NOFCS else inp.framing.length_wire(wire)
        q = inp.buf.take(prio, n, now)
        if q is None:
            return [inp, prio, None, n, 0]
        if q == DROP:
            if self.capture is not None:
                self.capture.append((now, inp.iface, DIR_IN | DROPPED, wire))
            return False
        self._send_pause(inp.index, {prio: q})
        return [inp, prio, None, n, 0]

    def _pfc_free(self, inp: InPort, prio: int, n: int) -> None:
        if inp.buf.free(prio, n):
            self._send_pause(inp.index, {prio: 0})

    def _send_pause(self, port: int, times: dict[int, int]) -> None:
        outp = self.outs[port]
        outp.ctl.append((self.now, self.now + outp.latency_ns, add_fcs(build_pause(self.mac, times)), False))
        self.busy[outp] = None
        if self.tracer is not None:
            self.tracer.instant(self.name, "PAUSE" if any(times.values()) else "XON", self.now,
                                {"port": outp.name, "classes": sorted(times)}, "pfc")

    def _pause_arrived(self, port: int, wire: bytes) -> None:
        """A PAUSE for the output port of the same number (the reverse direction of the link)."""
        p = self.outs[port]
        fl = p.flow if p is not None else None
        if fl is None or not fl.by_prio:  # a port that never queues by class: nothing to hold
            self.stats["pause_ignored"] = self.stats.get("pause_ignored", 0) + 1
            return
        fl.pause_rx += 1
        now = self.now
        woke = False
        for c, q in parse_pause(wire).items():
            if q == 0:
                woke |= fl.resume(c, now)
                continue
            until = INF if q == HELD else now + quanta_ns(q, p.bandwidth_bps)
            fl.pause(c, until, now)
            if until < INF:
                self._event(until, PAUSE_END, (p, c, until))
        if woke:
            self._wake(p)

    def _pause_end(self, obj: tuple) -> None:
        p, c, until = obj
        if p.flow.paused[c] == until and p.flow.resume(c, self.now):
            self._wake(p)

    def _admit(self, p, frame, at: int):
        """``frame`` as port ``p``'s queue discipline takes it (marked, trimmed), deciding as it arrives
        (``now``), or None: dropped (counted there, captured here at ``at``, its hand-off)."""
        kept = p.flow.admit(frame, self.now)
        if kept is None:
            self._queue_drop(p, made(frame), at)
        return kept

    def _queue_drop(self, p, frame, at: int) -> None:
        """The output queue's discipline dropped ``frame`` (counted there): captured as dropped."""
        if self.capture is not None:
            self.capture.append((at, p.iface, DIR_OUT | DROPPED, add_fcs(frame)))
        if self.tracer is not None:
            self.tracer.instant(self.name, "drop", at, {"port": p.name, "reason": "queue full"}, "drop")

    def _queue_stats(self, p, inp: InPort, out: dict) -> None:
        """``port_stats`` of a port with class queues or a PFC ingress: their counters under ``queues``."""
        q = inp.buf.counters() if inp.buf is not None and inp.buf.pfc else {}
        if p.flow is not None and p.flow.by_prio:
            q.update(p.flow.counters(self.now))
            out["frames_waiting"] = p.flow.waiting()
        if q:
            out["queues"] = q
