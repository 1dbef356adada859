"""The input-queued router's packets and copies (``emu.switch.iq``): a frame in an input VC buffer,
and each frame the router sends because of it, with the state the allocation round keeps
(``emu.switch.iqround``)."""

from __future__ import annotations

INF = 1 << 62


class Packet:
    """A frame in an input VC buffer."""

    __slots__ = ("port", "vc", "head", "tail", "cost", "copies", "left", "exit", "hexit", "rc_at", "vpart", "ppart")

    def __init__(self, port: int, vc: int, head: int, tail: int, cost: int) -> None:
        self.port, self.vc, self.head, self.tail, self.cost = port, vc, head, tail, cost
        self.vpart, self.ppart = cost, 0
        """Its bytes in its VC buffer and in the port's pool (``emu.switch.iqpool``)."""
        self.copies: list[Copy] = []
        self.left = 0
        self.exit = self.hexit = 0
        """When its last granted copy's tail, and head, have left the buffer."""
        self.rc_at = INF
        """When route computation is over (set when it reaches the head of its VC)."""


class Copy:
    """One frame the router sends because of a packet: its output, VC and progress."""

    __slots__ = ("pkt", "out", "frame", "group", "ovc", "need", "sa_at", "granted", "prio", "n", "ser", "lag", "rank", "vpart",
                 "va_try", "sa_try")

    def __init__(self, pkt: Packet, out: int, frame, group: int, need: int, prio: int = 0, n: int = 0) -> None:
        self.pkt, self.out, self.frame, self.group, self.need = pkt, out, frame, group, need
        self.n = n
        """Its modelled length on its output's link (``mlen``)."""
        self.ser = self.lag = 0
        """Its time on its output's line; from its head's start to its tail's (``InputQueuedEngine._copy``)."""
        self.rank = 0
        """Its place among its packet's copies."""
        self.vpart = need
        """Its part for the receiver's VC buffer when it goes there (the rest: the pool; ``iqpool``)."""
        self.prio = prio
        """1: a high-priority frame (fabric header prio > 0, ``link.priority`` on its output): the
        allocators serve it before every priority-0 one."""
        self.ovc = -1
        self.sa_at = INF
        self.granted = False
        self.va_try = self.sa_try = -1
        """When it last asked the VC allocator, the switch allocator (``Rounds._round``: once an instant)."""
