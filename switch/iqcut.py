"""The input-queued router's part of priority at segment boundaries (``emu.segcut``, spec 03).

* **Cutting in.** A high-priority copy (``Copy.prio``) whose output is busy with a priority-0 QsNet
  packet this router is sending may go at that packet's next segment boundary: it is granted then,
  the packet's rest follows it, and everything the packet holds (its output, its input, its VC at the
  next hop) is held the new frame's time longer. The output port does the same cut
  (``emu.segcut.cut_in`` into a router, ``OutPort._overtake`` into a host) at the same boundary.
* **Stretches.** When a packet arriving on an input is late (its sender cut it, or was itself
  told, a stretch frame on the link), its tail moves; where this router already sends it on, that
  output is held longer too and its port passes the stretch on (``stretch_port``), so the delay
  follows the packet's missing segments hop by hop to its destination.

Not modelled: the input buffer's credit of a packet already gone from its VC queue when it is cut
or stretched goes back when it would have left uncut (up to one high-priority frame's time early).
"""

from __future__ import annotations

from emu.port import PRIO_OFF, PTYPE_OFF
from emu.segcut import boundary
from emu.wire.fabric import PacketType
from emu.wire.framing import ETHERNET

_QPKT = int(PacketType.QPKT)


def cuttable(frame) -> bool:
    """A priority-0 QsNet packet: high-priority frames may go into it at its segment boundaries."""
    return len(frame) > PTYPE_OFF and frame[PTYPE_OFF] == _QPKT and not frame[PRIO_OFF]


class SegmentCut:
    """Mixed into :class:`emu.switch.iq.InputQueuedEngine` (needs its ``line``, ``arriving``,
    ``out_ready``, ``in_ready``, ``vc_free``, ``credits``, ``prio_ports``, ``_ser_out``, and
    ``_released`` told of every freeing time it moves)."""

    def _t0(self, c, now: int) -> int:
        """The earliest a granted copy's head could leave (its stages; its tail never before it came)."""
        t = now + self.sa + self.st
        if self.vct:
            h = c.pkt.tail - c.lag
            if h > t:
                t = h
        return t

    def _cut_at(self, c, t: int) -> int | None:
        """The segment boundary at or after ``t`` where high-priority copy ``c`` may go into the
        packet on its output's line (None: not high priority, nothing cuttable, no boundary left)."""
        o = c.out
        if not c.prio or o not in self.prio_ports:
            return None
        line = self.line[o]
        if line is None or not line[3] or not line[0] <= t < line[1]:
            return None
        ser = self._ser_out
        return boundary(line[0], line[2], lambda k: ser(o, k), self.port_framing.get(o, ETHERNET).qs_first_end,
                        line[5], t, line[1])

    def _hold_longer(self, c, d: int, at: int) -> None:
        """Copy ``c`` (on its output's line) finishes ``d`` later, from ``at``: its output, its input
        and its VC at the next hop are held that much longer."""
        o, pkt = c.out, c.pkt
        line = self.line[o]
        line[1] += d
        line[5].append((at, d))  # later segment boundaries move, earlier ones do not
        if self.out_ready[o] > at:
            self.out_ready[o] += d
            self._released(self._OUT + o, self.out_ready[o])
        if self.in_ready[pkt.port] > at:
            self.in_ready[pkt.port] += d
            self._released(pkt.port, self.in_ready[pkt.port])
        if self.credits[o] is not None and self.vc_free[o][c.ovc] > at:
            self.vc_free[o][c.ovc] += d
            self._released(self._VCF + o * self._VS + c.ovc, self.vc_free[o][c.ovc])
        if pkt.left:
            pkt.exit += d

    def on_stretch(self, port: int, d: int, now: int) -> None:
        """The packet arriving on ``port`` reaches this router ``d`` ns late from ``now`` on."""
        arr = self.arriving[port]
        pkt = next((p for p in reversed(arr) if p.tail > now), None)
        if pkt is None:
            return
        pkt.tail += d
        self.iq_stats["stretched"] = self.iq_stats.get("stretched", 0) + 1
        for c in pkt.copies:
            line = self.line[c.out]
            if c.granted and line is not None and line[4] is c and line[1] > now:
                self._hold_longer(c, d, now)
                self.stretch_port(c.out, line[0], d, now)
        self._wake_at(now)
