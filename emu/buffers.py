"""Input buffers and credit flow control (sans-I/O): the receiving side's buffers per VC and in a
shared pool (:class:`BufferState`), the sending side's credits and the frames waiting for them
(:class:`CreditState`), and where a frame's bytes go in an input-queued router's buffers."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .wire.framing import ETHERNET, Framing

VC_OFF = 22
"""Offset of the fabric header's vc byte in a frame (after the 14-byte Ethernet header)."""


def pool_parts(cost: int, vc_bytes: int, in_pool: bool) -> tuple[int, int]:
    """An input-queued router's buffers (``emu.switch.iqpool``): (bytes in its VC buffer of
    ``vc_bytes``, bytes in the port's shared pool) of a frame of ``cost`` bytes, ``in_pool`` when its
    sender marked it POOL."""
    if in_pool:
        return 0, cost
    head = cost if cost < vc_bytes else vc_bytes
    return head, cost - head


def pool_place(cost: int, vc_bytes: int, vc_credit: int, pool_credit: int) -> bool | None:
    """Where a sender puts a frame of ``cost`` bytes into an input-queued router with a shared pool:
    False (its first ``vc_bytes`` in its VC buffer, the rest in the pool), True (wholly in the pool:
    its VC buffer is not free for that) or None (no room yet: it waits for a credit)."""
    head = cost if cost < vc_bytes else vc_bytes
    if vc_credit >= head and pool_credit >= cost - head:
        return False
    if pool_credit >= cost:
        return True
    return None


@dataclass(eq=False)
class CreditState:
    """The sending side of credit flow control on one link direction: what the receiver's input
    buffers can still take, per VC and in its shared pool, and the frames waiting for credit."""

    vcs: int
    credits: list[int]
    """Bytes the receiver can still take, per VC."""
    pool: int = 0
    """Bytes its shared pool can still take."""
    queues: list = field(default_factory=list)
    """Per VC: deque of (hand-off time, frame with FCS, release token or None), in hand-off order."""
    stalled_since: int | None = None
    stalls: int = 0
    """Times the port was free with a frame ready that no credit covered."""
    stall_ns: int = 0
    """Virtual time the port spent free with ready frames and no credit for any of them."""
    unit: int = 1
    """Credits count whole units of this many bytes (an input-queued receiver's flits)."""
    groups: int = 0
    """An input-queued receiver's VC groups: a frame of group g (its VC byte mod this) may take
    any VC w with w mod groups == g, and takes the one with the most credit not yet spoken for
    (ties: the lowest); 0: a frame takes the VC its byte names."""
    framing: Framing = ETHERNET
    """The link's framing: credits count modelled lengths (``OutPort.framing``)."""
    vc_bytes: int = 0
    """An input-queued receiver with a shared pool: its bytes per VC buffer. A frame's first
    ``vc_bytes`` go into its VC buffer and the rest into the pool, or the whole frame into the pool,
    marked with the fabric flag POOL (:func:`pool_place`); 0: a frame goes wholly into its VC buffer,
    or wholly into the pool when that is short (the record's DATA_POOL kind says which)."""

    late: bool = False
    """(With ``groups``) the sender's ``inject_vc=free``: ``queues[g]`` holds group g's frames in order,
    and the one at its head takes, when it starts, the VC :meth:`free` gives."""
    last: list = field(default_factory=list)
    """Per group: the VC the last frame took (``late``)."""

    by_prio = False
    """Queues per traffic class (the fabric header's prio) instead of per VC (``emu.pause.PrioQueues``)."""
    admit = None
    """``admit(frame, at) -> frame or None`` (a switch's output-queue discipline, ``switch.queues``): the
    frame as it joins the queue (marked, trimmed) or None (dropped); None: every frame joins as it is."""
    stamp = None
    """``stamp(port, wire, now, n) -> wire``: the frame as it starts on its way out (INT); None: as it is."""
    held_bytes = 0
    """(With ``by_prio``) modelled bytes waiting in the queues."""
    line_bytes = 0
    """(With ``by_prio``) modelled bytes of the frame started last (on the line until ``free_at``)."""

    def cost(self, wire) -> int:
        """Bytes of the receiver's buffer a frame takes: its modelled length on the link, in whole
        credit units. (The send path in ``emu.port`` writes it inline, as its compiled twin does.)"""
        return -(-self.framing.length_wire(wire) // self.unit) * self.unit

    def free(self, g: int, c: int) -> int:
        """``late``: the VC of group ``g`` a frame taking ``c`` bytes takes now -- the next after the
        group's last, round robin, whose buffer or pool has room for it; -1: none."""
        G, V = self.groups, self.vcs
        ws = list(range(g % V, V, G)) or [g % V]
        k = ws.index(self.last[g]) + 1 if self.last[g] in ws else 0
        for i in range(len(ws)):
            w = ws[(k + i) % len(ws)]
            if self.place(w, c) is not None:
                return w
        return -1

    def place(self, vc: int, c: int) -> bool | None:
        """Where a frame taking ``c`` bytes of buffer goes on ``vc`` now: False (its VC buffer first),
        True (the pool), None (no room: it waits)."""
        if self.vc_bytes:
            return pool_place(c, self.vc_bytes, self.credits[vc], self.pool)
        if self.credits[vc] >= c:
            return False
        return True if self.pool >= c else None

    def parts(self, c: int, pool: bool) -> tuple[int, int]:
        """(bytes of its VC buffer, bytes of the pool) a frame taking ``c`` bytes placed so takes."""
        if self.vc_bytes:
            return pool_parts(c, self.vc_bytes, pool)
        return (0, c) if pool else (c, 0)

    def pick(self, g: int) -> int:
        best, room = g % self.vcs, None
        for w in range(g % self.vcs, self.vcs, self.groups):
            r = self.credits[w] - sum(self.cost(x[1]) for x in self.queues[w])
            if room is None or r > room:
                best, room = w, r
        return best

    def __post_init__(self) -> None:
        if not self.queues:
            self.queues = [deque() for _ in range(self.vcs)]
        if not self.last:
            self.last = [-1] * max(self.groups, 1)

    def waiting(self) -> int:
        return sum(map(len, self.queues))


@dataclass(eq=False)
class BufferState:
    """An input port's buffers under credit flow control: occupancy per VC and in the shared pool,
    peaks and time integrals (for the time-weighted mean) since the last reset."""

    pfc = False
    """(An ``emu.pause.Ingress`` in ``InPort.buf`` says True: PFC, not credits.)"""
    vcs: int
    capacity: int
    """Bytes per VC buffer."""
    pool_capacity: int
    credit_delay_ns: int
    occ: list[int] = field(default_factory=list)
    pool_occ: int = 0
    pool_peak: int = 0
    peak: list[int] = field(default_factory=list)
    integral: list[int] = field(default_factory=list)
    """Occupancy x time (byte-ns) per VC (the pool's share counted under the frame's VC)."""
    last_t: int = 0

    def __post_init__(self) -> None:
        self.occ = [0] * self.vcs
        self.peak = [0] * self.vcs
        self.integral = [0] * self.vcs

    def _advance(self, t: int) -> None:
        if t > self.last_t:
            dt = t - self.last_t
            for v, o in enumerate(self.occ):
                if o:
                    self.integral[v] += o * dt
            self.last_t = t

    def take(self, vc: int, pool: bool, n: int, t: int) -> None:
        """A frame of ``n`` bytes arrived at ``t``; a sender that overran its credit is a bug."""
        self._advance(t)
        if pool:
            if self.pool_occ + n > self.pool_capacity:
                raise OverflowError(f"shared pool overrun: {self.pool_occ} + {n} > {self.pool_capacity} bytes")
            self.pool_occ += n
            if self.pool_occ > self.pool_peak:
                self.pool_peak = self.pool_occ
        elif self.occ[vc] + n > self.capacity:
            raise OverflowError(f"VC {vc} buffer overrun: {self.occ[vc]} + {n} > {self.capacity} bytes")
        self.occ[vc] += n  # the pool's bytes count toward the VC's occupancy figures too
        if self.occ[vc] > self.peak[vc]:
            self.peak[vc] = self.occ[vc]

    def free(self, vc: int, pool: bool, n: int, t: int) -> None:
        self._advance(t)
        self.occ[vc] -= n
        if pool:
            self.pool_occ -= n

    def reset(self, t: int) -> None:
        self._advance(t)
        self.peak = list(self.occ)
        self.pool_peak = self.pool_occ
        self.integral = [0] * self.vcs
