"""What happens to a frame as it joins an output queue of a switch, and as it leaves it (sans-I/O).

One :class:`SwitchQueues` per output-queued switch with ``[queues]`` settings; its ports queue per
traffic class (``emu.pause.PrioQueues``), so every frame goes through :meth:`SwitchQueues.admit` at
its hand-off to the port (``Element._emit``) and through :meth:`SwitchQueues.stamp` as it starts on
the line (``OutPort.start_ready``):

* **shared buffer, dynamic thresholds** (Choudhury and Hahne, "Dynamic queue length thresholds for
  shared-memory packet switches", IEEE/ACM ToN 1998): the switch's ``buffer_bytes`` are shared by its
  output queues; a frame of a lossy class is tail-dropped when its queue holds ``alpha`` x the free
  buffer or more, or when it does not fit in the buffer. The switch decides as the frame arrives; a
  queue (a port and a traffic class) holds then the frames of its class for its port that arrived and
  whose last bit has not left: the one on the line, those waiting, those still in the switch's
  processing delay; the shared buffer, those of every queue of the switch.
  Lossless classes (PFC) are never dropped here: their ingress pauses instead.
  With ``class_shares`` a class c has ``reserve[c]`` bytes of the buffer to itself: a frame of c is
  admitted when the bytes of c in the whole switch, with it, fit in the reserve; otherwise it takes
  the shared rest ``S = buffer - sum(reserve)``, of which ``U = sum_c max(0, bytes of c - reserve[c])``
  is in use: it is dropped when its part beyond the reserve does not fit in ``S - U`` or its queue's
  bytes beyond the reserve are ``alpha x (S - U)`` or more. With no reserves this is the rule above.
* **trimming** (NDP, Handley et al., SIGCOMM 2017): a host message segment that would be dropped is
  cut to its headers (``emu.wire.cc.trim``: fabric, INT, segment header; fabric flag TRIM) and joins
  the queue of class 7.
* **ECN** (RED: Floyd and Jacobson 1993, with DCQCN's settings, Zhu et al. SIGCOMM 2015; step: DCTCP,
  Alizadeh et al. SIGCOMM 2010): a host message segment of a marked class finding ``q`` bytes in its
  queue (its port and class) is marked (fabric flag ECN) with probability 0 below ``kmin_bytes``, ``pmax (q - kmin) /
  (kmax - kmin)`` up to ``kmax_bytes``, 1 from there; or, with ``step``, when ``q >= k_bytes``. The
  draws come from a generator per port seeded by the run's seed, the switch and the port.
* **INT** (HPCC, Li et al., SIGCOMM 2019): a host message segment with the fabric flag INT gets a hop
  record as it starts (an acknowledgement echoing its segment's stack is left as it is): the bytes left in the port's queues behind it, the bytes started on the port so far (this
  frame's included), the start time and the line rate in Mbit/s (``emu.wire.cc.int_push``).
"""

from __future__ import annotations

import random

from emu.port import PRIO_OFF, PTYPE_OFF
from emu.wire.cc import FLAG_ECN, FLAG_INT, trim, int_push
from emu.wire.fabric import FLAGS_OFF, PacketType, add_fcs

_MSG = int(PacketType.MSG)


class SwitchQueues:
    """The output-queue mechanisms of one switch (see module)."""

    def __init__(self, spec, outs: list, seed: int, node_id: int):
        self.spec = spec
        self.ports = [p for p in outs if p is not None and p.flow is not None and p.flow.by_prio]
        self.buffer = spec.buffer_bytes
        self.alpha = spec.alpha
        self.lossless = spec.pfc_mask
        self.ecn = spec.ecn
        self.ecn_mask = spec.ecn_mask if spec.ecn != "off" else 0
        self.kmin, self.kmax, self.pmax, self.k = spec.kmin_bytes, spec.kmax_bytes, spec.pmax, spec.k_bytes
        self.trim = spec.trim
        self.reserve = spec.reserves
        """Per class: its reserved bytes of the buffer (``queues.class_shares``; None: all shared)."""
        self.shared = self.buffer - sum(self.reserve) if self.reserve else self.buffer
        self.peak_bytes = 0
        """The most bytes the shared buffer held at once."""
        self.tx = {}
        """Bytes started per port (INT's transmitted bytes)."""
        for p in self.ports:
            fl = p.flow
            fl.rng = random.Random((seed * 1_000_003 + node_id) * 4099 + p.index)
            fl.admit = self._admitter(p)
            if spec.int_telemetry:
                fl.stamp = self.stamp
            self.tx[p.index] = 0

    def _admitter(self, p):
        return lambda frame, at: self.admit(p, frame, at)

    @staticmethod
    def queue_bytes(p, now: int) -> int:
        """Bytes in the buffer for port ``p`` at ``now``: the frame on its line, the frames waiting in its
        class queues and those still in the switch's pipeline (arrived, not yet handed to the port)."""
        fl = p.flow
        return fl.held_bytes + fl.line_bytes if p.free_at > now else fl.held_bytes

    @staticmethod
    def class_bytes(p, c: int, now: int) -> int:
        """... of class ``c`` only: the bytes of the egress queue (port, class) a frame of ``c`` joins."""
        fl = p.flow
        return fl.held[c] + fl.line_bytes if p.free_at > now and fl.line_class == c else fl.held[c]

    def admit(self, p, frame, now: int):
        """``frame``, arriving at ``now`` for port ``p``, as it joins the port's queue (marked, trimmed),
        or None (dropped)."""
        fl = p.flow
        st = fl.stats
        prio = frame[PRIO_OFF] & 7
        q = self.class_bytes(p, prio, now)
        if self.buffer:
            n = p.framing.length(frame)
            if self.reserve is None:
                total = sum(self.queue_bytes(x, now) for x in self.ports)
                full = total + n > self.buffer or q >= self.alpha * (self.buffer - total)
            else:
                total, full = self._shares(prio, q, n, now)
            if full and not self.lossless >> prio & 1:
                cut = trim(frame) if self.trim else None
                if cut is None:
                    st["tail_drops"] = st.get("tail_drops", 0) + 1
                    fl.drops[prio] += 1
                    return None
                st["trimmed"] = st.get("trimmed", 0) + 1
                frame = cut
                n = p.framing.length(frame)
            if total + n > self.peak_bytes:
                self.peak_bytes = total + n
        if self.ecn_mask >> prio & 1 and frame[PTYPE_OFF] == _MSG and not frame[FLAGS_OFF] & FLAG_ECN and self.marks(fl, q):
            b = bytearray(frame)
            b[FLAGS_OFF] |= FLAG_ECN
            frame = bytes(b)
            st["ecn_marked"] = st.get("ecn_marked", 0) + 1
            fl.marks[prio] += 1
        return frame

    def _shares(self, prio: int, q: int, n: int, now: int) -> tuple[int, bool]:
        """With class reserves: (bytes in the buffer, is it full for a frame of ``n`` bytes of class
        ``prio`` whose queue holds ``q``?) -- see the module's text."""
        by = [0] * 8
        for x in self.ports:
            for c in range(8):
                by[c] += self.class_bytes(x, c, now)
        r = self.reserve
        mine, res = by[prio], r[prio]
        if mine + n <= res:
            return sum(by), False
        used = sum(b - r[c] for c, b in enumerate(by) if b > r[c])
        free = self.shared - used
        beyond = mine + n - (res if res > mine else mine)
        return sum(by), beyond > free or q - res >= self.alpha * free

    def marks(self, fl, q: int) -> bool:
        """Is a segment finding ``q`` bytes in its queue marked?"""
        if self.ecn == "step":
            return q >= self.k
        if q < self.kmin:
            return False
        if q >= self.kmax:
            return True
        return fl.rng.random() < self.pmax * (q - self.kmin) / (self.kmax - self.kmin)

    def stamp(self, p, wire: bytes, now: int, n: int) -> bytes:
        """INT: ``wire`` (with its FCS) as it starts on ``p`` at ``now``: a hop record if it asks for one."""
        tx = self.tx[p.index] = self.tx[p.index] + n
        if not wire[FLAGS_OFF] & FLAG_INT or wire[PTYPE_OFF] != _MSG:  # (an ack echoing a stack is not stamped)
            return wire
        st = p.flow.stats
        st["int_stamped"] = st.get("int_stamped", 0) + 1
        return add_fcs(int_push(wire[:-4], p.flow.held_bytes, tx, now, p.bandwidth_bps // 1_000_000))
