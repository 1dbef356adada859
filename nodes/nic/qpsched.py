"""Arbitration between a NIC's queue pairs (``nic.qp_sched=rr``, the default under a ``host.cc``; issue #47).

A real RDMA NIC keeps a send queue per queue pair and, each time its port can take a packet, picks
one QP round robin among those that have data, an open window (or pull credit) and whose pacing time
has come (the HPCC repository's ns-3 ``RdmaEgressQueue::GetNextQindex``, called by
``QbbNetDevice::DequeueAndTransmit`` when the line is free). That is what this scheduler does for the
segment transport (:mod:`emu.nodes.nic.cc.base`), one per NIC:

* per output port, a ring of the active queue pairs (:class:`emu.nodes.nic.cc.base.Flow`: one per
  peer) in round-robin order; a QP joins at the back when it gets something to send (a message, an
  acknowledgement that opens its window, a pull, a NACK, a timeout, a new rate) and leaves when it has
  nothing it may send;
* the port is free for a new segment when every frame handed to it so far has left the line -- the
  port's own ``free_at`` (which counts the NIC's other frames too: acknowledgements, CNPs, the
  offloads') or the end of the last segment this scheduler handed over, whichever is later. Since
  the NIC hands a frame to its port ``nic_delay_ns`` after it decides, it decides that much ahead;
* at that time the first QP of the ring whose next segment is allowed and due (its pacing time
  ``Flow.next_ns`` and its message's ``ready_ns``) sends one segment and goes to the back; QPs not
  yet due keep their place and the scheduler looks again when the first is due.

So a small message to one peer waits for at most one segment of each other active peer, not for a
whole large message, and one QP alone is sent exactly as without the scheduler (each segment at its
pacing time, at most the line rate). The QP is per peer: two messages to the same peer stay in order,
one after the other (an RC connection between two processes; the HPCC code opens a QP per flow).

Not modelled: a port paused by PFC or waiting for credit stops the line, and its ``free_at`` with it,
but the scheduler does not see frames held there; it goes on handing over one segment per line time
of its own (they wait at the port, as without the scheduler).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from emu.wire import FCS_LEN

SCHEDULES = ("auto", "fifo", "rr")
"""``nic.qp_sched``: auto (rr under a host.cc, fifo without one), fifo or rr."""


class QpScheduler:
    """Round robin among one NIC's queue pairs, one segment at a time per port (module docstring)."""

    def __init__(self, transport: Any):
        self.tr = transport
        self.nic = transport.nic
        self.delay = transport.delay
        self.rings: dict[int, deque] = {}
        """Port -> its active queue pairs, the next to serve first."""
        self.free: dict[int, int] = {}
        """Port -> when the last segment handed over by us has left its line."""
        self.timers: dict[int, tuple[int, int]] = {}
        """Port -> (when, timer id) of the pending look."""
        self.active: set[int] = set()
        """Peers whose queue pair is in a ring."""
        self._serving: int | None = None
        self._again: set[int] = set()

    def kick(self, f: Any) -> None:
        """Queue pair ``f`` may have something to send: into its port's ring, and a look at the port."""
        port = f.port
        if f.dst not in self.active:
            self.active.add(f.dst)
            ring = self.rings.get(port)
            if ring is None:
                ring = self.rings[port] = deque()
            ring.append(f)
        if self._serving is not None:  # (inside a look: it or the next one sees it)
            if port != self._serving:
                self._again.add(port)
            return
        self._serve(port)

    def _serve(self, port: int) -> None:
        self._serving = port
        try:
            self._look(port)
            while self._again:
                p = self._again.pop()
                self._serving = p
                self._look(p)
        finally:
            self._serving = None

    def forget(self, f: Any) -> None:
        """Queue pair ``f`` is gone (its messages given up)."""
        if f.dst in self.active:
            self.active.discard(f.dst)
            ring = self.rings.get(f.port)
            if ring is not None and f in ring:
                ring.remove(f)

    def _timer(self, port: int) -> None:
        self.timers.pop(port, None)
        self._serve(port)

    def _arm(self, port: int, t: int) -> None:
        old = self.timers.get(port)
        if old is not None:
            if old[0] == t:
                return
            self.nic.timers.cancel(old[1])
        self.timers[port] = (t, self.nic.at(t, self._timer, port))

    def _line_free(self, port: int) -> int:
        free = self.free.get(port, 0)
        ports = getattr(self.nic, "ports", None)
        if ports is not None and ports.linked(port):
            free = max(free, ports.free_at(port))
        return free

    def _look(self, port: int) -> None:
        """The port's turn: one segment of the first due queue pair, or a look again when one can go."""
        tr = self.tr
        now = self.nic.now
        earliest = now + self.delay
        busy = self._line_free(port)
        if busy > earliest:
            self._arm(port, busy - self.delay)
            return
        ring = self.rings.get(port)
        if not ring:
            return
        wake = None
        for _ in range(len(ring)):
            f = ring[0]
            nxt = tr._next(f)
            if nxt is None or not tr.allowed(f, nxt[3] if nxt[1].data else 1):
                ring.popleft()  # nothing it may send: out until kicked
                self.active.discard(f.dst)
                continue
            due = max(f.next_ns, nxt[1].ready_ns)
            ring.rotate(-1)  # (served or not, the next one is looked at first next time)
            if due > earliest:
                if wake is None or due < wake:
                    wake = due
                continue
            wire = tr.send_segment(f, nxt, earliest)
            self.free[port] = end = earliest + self.line_ns(port, wire)
            self._arm(port, end - self.delay)
            return
        if wake is not None:
            self._arm(port, wake - self.delay)

    def line_ns(self, port: int, wire: int) -> int:
        """A frame's time on the port's line (``wire`` bytes, its FCS aside)."""
        ports = getattr(self.nic, "ports", None)
        rate = ports.rate_bps(port) if ports is not None and ports.linked(port) else 0
        return -(-(wire + FCS_LEN) * 8_000_000_000 // (rate or self.tr.line_bps))
