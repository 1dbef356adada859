"""Per-priority output queues and priority flow control (IEEE 802.1Qbb PFC), sans-I/O.

Two halves, one per end of a link into a switch with ``queues.pfc_classes``:

* :class:`PrioQueues` is the sending port's side (``OutPort.flow``): a queue per traffic class
  (the fabric header's ``prio``) that the credit machinery of ``emu.port`` starts frames from
  (``hand_over``/``start_ready``/``_take_credit``), where a class paused by the receiver waits
  instead of a VC without credit. Every output port of a switch with output-queue mechanisms has
  one (its frames go through ``admit`` there, ``switch.queues``), and so does every port, a host's
  NIC's included, into a switch with PFC.
* :class:`Ingress` is the receiving port's side (``InPort.buf``): the bytes of each lossless class
  held for that ingress, from arrival until they start on their way out; at ``xoff_bytes`` a PAUSE
  goes upstream, below ``xon_bytes`` a resume (a PAUSE of 0 quanta). On a port from a switch with
  PFC into anything else it only marks the port as one where PAUSE frames arrive (``mask`` 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .buffers import CreditState

INF = 1 << 62
HELD = 65535
"""A pause of this many quanta is held until the resume (see ``QueueSpec.pause_quanta``)."""
DROP = -1
"""What :meth:`Ingress.take` returns for a frame beyond the headroom."""


@dataclass(eq=False)
class PrioQueues(CreditState):
    """A queue per traffic class at a sending port; a class paused by PFC waits (see module)."""

    vcs: int = 8
    credits: list = field(default_factory=lambda: [INF] * 8)
    paused: list = field(default_factory=lambda: [0] * 8)
    """Per class: until when it is paused (INF: until a resume), 0: not paused."""
    since: list = field(default_factory=lambda: [0] * 8)
    """Per class: when its current pause began."""
    paused_ns: int = 0
    """Time the classes spent paused, summed over the classes (a pause still on counts up to ``now``
    in :meth:`counters`)."""
    pause_rx: int = 0
    """PAUSE frames (XOFF and XON) received for this port."""
    held: list = field(default_factory=lambda: [0] * 8)
    """Per class: modelled bytes waiting (``held_bytes`` is their sum)."""
    line_class: int = 0
    """The class of the frame started last (``line_bytes``)."""
    stats: dict = field(default_factory=dict)
    """The switch's queue counters of this port (``switch.queues``): marks, drops, trims, INT."""
    tx_frames: list = field(default_factory=lambda: [0] * 8)
    """Per class: frames started on the line (``per_link``'s ``classes``)."""
    tx_bytes: list = field(default_factory=lambda: [0] * 8)
    """Per class: their bytes as sent (FCS included: as ``link_bytes`` counts them)."""
    drops: list = field(default_factory=lambda: [0] * 8)
    """Per class: frames tail-dropped as they came to this port (``switch.queues``)."""
    marks: list = field(default_factory=lambda: [0] * 8)
    """Per class: segments ECN-marked as they joined this port's queue."""
    pauses: list = field(default_factory=lambda: [0] * 8)
    """Per class: pauses received for it (a PAUSE frame's class with quanta > 0)."""
    class_paused_ns: list = field(default_factory=lambda: [0] * 8)
    """Per class: the time it spent paused (``paused_ns`` is their sum)."""

    quanta: list | None = None
    """Deficit round robin between the classes (``queues.arbiter=drr``): bytes each class may send per
    turn; None: strict priority, the highest class first."""
    deficit: list = field(default_factory=lambda: [0] * 8)
    rr: int = 0
    """DRR: the class whose turn it is."""
    fresh: bool = True
    """DRR: that class's quantum is still to be added (its turn has just begun)."""

    by_prio = True

    def drr_pick(self, ready: dict) -> int:
        """Deficit round robin (Shreedhar and Varghese, SIGCOMM 1995), one frame at a time: ``ready``
        maps each class whose head may start now to its head's modelled bytes; returns the class
        that sends. A turn adds the class's quantum; it sends while its deficit covers its head; a
        class whose queue is empty when its turn ends keeps no deficit."""
        q = self.quanta
        while True:
            v = self.rr
            n = ready.get(v)
            if n is not None:
                if self.fresh:
                    self.deficit[v] += q[v]
                    self.fresh = False
                if self.deficit[v] >= n:
                    self.deficit[v] -= n
                    return v
            if not self.queues[v]:
                self.deficit[v] = 0
            self.rr = (v + 1) & 7
            self.fresh = True

    def place(self, vc: int, c: int) -> bool | None:
        return None if self.paused[vc] else False

    def pause(self, c: int, until: int, now: int) -> None:
        if not self.paused[c]:
            self.since[c] = now
        self.paused[c] = until
        self.pauses[c] += 1

    def resume(self, c: int, now: int) -> bool:
        """Lift class ``c``'s pause; was it paused?"""
        if not self.paused[c]:
            return False
        self.paused[c] = 0
        self.paused_ns += now - self.since[c]
        self.class_paused_ns[c] += now - self.since[c]
        return True

    def counters(self, now: int) -> dict:
        on = [now - s if self.paused[c] else 0 for c, s in enumerate(self.since)]
        out = dict(self.stats)
        if self.pause_rx:
            out.update(pause_rx=self.pause_rx, paused_ns=self.paused_ns + sum(on))
        out.update(class_frames=list(self.tx_frames), class_bytes=list(self.tx_bytes), class_drops=list(self.drops),
                   class_marks=list(self.marks), class_pauses=list(self.pauses),
                   class_paused_ns=[a + b for a, b in zip(self.class_paused_ns, on)])
        return out

    def paused_classes(self) -> list[int]:
        return [c for c in range(8) if self.paused[c]]


class Ingress:
    """PFC at an ingress port (``InPort.buf``; see module). ``spec``: the switch's ``QueueSpec``, or
    None on a port that only receives PAUSE frames."""

    pfc = True
    """(``InPort.buf`` holds one of these instead of a credit ``BufferState``.)"""

    def __init__(self, spec=None, pause_ns: int = 0):
        self.mask = spec.pfc_mask if spec is not None else 0
        self.xoff = spec.xoff_bytes if spec is not None else 0
        self.xon = spec.xon_bytes if spec is not None else 0
        self.limit = self.xoff + (spec.headroom_bytes if spec is not None else 0)
        self.quanta = spec.pause_quanta if spec is not None else HELD
        self.lapse_ns = pause_ns if self.quanta != HELD else INF
        """How long the PAUSE it sends holds the sender (INF: until the resume)."""
        self.occ = [0] * 8
        self.peak = [0] * 8
        self.asserted = [False] * 8
        self.sent_at = [0] * 8
        self.pause_tx = 0
        self.class_xoff = [0] * 8
        """Per class: XOFFs sent upstream."""
        self.resume_tx = 0
        self.headroom_drops = 0

    def take(self, prio: int, n: int, now: int) -> int | None:
        """A frame of class ``prio`` and ``n`` bytes arrives: DROP (beyond the headroom), the quanta of
        a PAUSE to send upstream, or None."""
        if not self.mask >> prio & 1:
            return None
        occ = self.occ[prio] + n
        if occ > self.limit:
            self.headroom_drops += 1
            return DROP
        self.occ[prio] = occ
        if occ > self.peak[prio]:
            self.peak[prio] = occ
        if occ >= self.xoff and (not self.asserted[prio] or now >= self.sent_at[prio] + self.lapse_ns):
            self.asserted[prio] = True
            self.sent_at[prio] = now
            self.pause_tx += 1
            self.class_xoff[prio] += 1
            return self.quanta
        return None

    def free(self, prio: int, n: int) -> bool:
        """The frame's bytes left (it started on its way out): True when a resume is due."""
        if not self.mask >> prio & 1:
            return False
        occ = self.occ[prio] = self.occ[prio] - n
        if self.asserted[prio] and occ < self.xon:
            self.asserted[prio] = False
            self.resume_tx += 1
            return True
        return False

    def reset(self, t: int) -> None:
        self.peak = list(self.occ)

    def counters(self) -> dict:
        if not self.mask:
            return {}
        return {"pause_tx": self.pause_tx + self.resume_tx, "xoff_tx": self.pause_tx, "xon_tx": self.resume_tx,
                "headroom_drops": self.headroom_drops, "ingress_peak_bytes": max(self.peak),
                "class_xoff_tx": list(self.class_xoff)}
