"""High-priority frames into a QsNet packet on the line, at a segment boundary, on links whose receiver
takes a frame as its head arrives (an input-queued router: ``OutPort.head_bytes``).

On such a link the receiver has the packet (it may already be forwarding it, cut-through) before its
last segment has left the sender, so the sender cannot move it; what moves is its *rest*. A frame of
priority > 0 handed to the port while a priority-0 QsNet packet is on the line starts at that packet's
next segment boundary; the packet's remaining segments follow it, ``d`` (the new frame's time on the
line) later. The sender tells the receiver with a **stretch** (a link-control frame, as a credit: no
time on the wire; ``emu.wire.credit``, ``what`` = 2, ``bytes`` = d ns), which arrives before the new
frame's head; the receiver's router moves the packet's tail by d and, where it already sends the
packet on, stretches that port in turn (:func:`stretch`): the delay follows the packet hop by hop, as
its missing segments would, down to the port into its destination, whose arrival moves by d.

Each port remembers the frame on its line: ``line`` = [start, done, modelled bytes, cuttable, shifts] (a
priority-0 QsNet packet is cuttable); ``done`` moves with every frame put into it or stretch, and
``shifts`` lists them as (at, d), so that its later segment boundaries move and earlier ones do not.
"""

from __future__ import annotations

SEG_BYTES = 256


def boundary(start: int, n: int, ser, first_end: int, shifts: list, at: int, done: int) -> int | None:
    """The first segment boundary at or after ``at`` of an ``n``-byte packet that started at ``start``
    (``ser(bytes)``: its time on the line), each boundary moved by the insertions ``shifts`` made so far
    ((at, d): frames put into it at a boundary, stretches from upstream -- a boundary at or after ``at``
    moves ``d`` later); None when none is left before ``done``."""
    off = first_end
    while off < n:
        t = start + ser(off)
        for x, d in shifts:
            if t >= x:
                t += d
        if t >= at:
            return t if t < done else None
        off += SEG_BYTES
    return None


def next_boundary(port, at: int) -> int | None:
    """The first segment boundary at or after ``at`` of the cuttable packet on ``port``'s line
    (None: none left, or nothing cuttable on the line)."""
    line = port.line
    if line is None or not line[3] or not line[0] <= at < line[1]:
        return None
    return boundary(line[0], line[2], port._ser, port.framing.qs_first_end, line[4], at, line[1])


def cut_point(port, at: int) -> int | None:
    """Where a high-priority frame handed over at ``at`` would go into the packet on the line (None:
    nowhere -- no boundary left, or frames already queued behind the packet)."""
    b = next_boundary(port, at)
    if b is None or any(e[0] >= b for e in port.pending if e[0] != port.line[0]):
        return None  # (frames queued behind the packet: it goes as the priority path of enqueue says)
    return b


def cut_in(port, wire, at: int, n: int) -> int | None:
    """Put high-priority ``wire`` (FCS included, ``n`` modelled bytes) into the packet on the line at
    its next boundary at or after ``at``; returns its start, or None (nothing to cut: it queues)."""
    b = cut_point(port, at)
    if b is None:
        return None
    d = port._ser(n)
    arrival = b + port._ser(min(port.head_bytes, n)) + port.latency_ns
    _shift_line(port, b, d)
    port.pending.append((b, arrival, wire, False))
    port.queued.append((b + d, n))
    port.queued_bytes += n
    port.busy_ns += d
    port.overtakes += 1
    _tell(port, b, d)
    return b


def _shift_line(port, b: int, d: int) -> None:
    """The packet on the line finishes ``d`` later (something went into it at ``b``)."""
    line = port.line
    line[1] += d
    line[4].append((b, d))
    port.free_at += d
    q = port.queued
    for i, (dn, nb) in enumerate(q):
        if dn > b:
            q[i] = (dn + d, nb)


def _tell(port, at: int, d: int) -> None:
    """A stretch for the receiver: sent at ``at``, it arrives one latency later (before anything put
    into the packet at ``at``)."""
    if port.stretch_out is not None:
        port.stretch_out(port, at, d)


def stretch(port, start: int, d: int, now: int) -> bool:
    """The frame that started at ``start`` on ``port`` finishes ``d`` later (its rest reaches this
    router ``d`` late): frames behind it move back by ``d``; into an input-queued router the receiver is
    told, into anything else the frame's arrival moves. Returns whether the frame was found."""
    line = port.line
    if port.head_bytes:
        if line is None or line[0] != start or line[1] <= now:
            return False
        _shift_line(port, now, d)
        # frames started before ``now`` (the packet, frames cut into it earlier) stay where they are
        moved = [(s + d if s > now else s, a + d if s > now else a, f, pl) for s, a, f, pl in port.pending]
        port.pending.clear()
        port.pending.extend(moved)
        _tell(port, now, d)
        return True
    i = next((k for k, e in enumerate(port.pending) if e[0] == start), None)
    if i is None:
        return False
    moved = [(s if k == i else s + d, a + d, f, pl) if k >= i else (s, a, f, pl)
             for k, (s, a, f, pl) in enumerate(port.pending)]
    port.pending.clear()
    port.pending.extend(moved)
    port.free_at += d
    q = port.queued
    for k, (dn, nb) in enumerate(q):
        if dn > now:
            q[k] = (dn + d, nb)
    if line is not None and line[0] == start:
        line[1] += d
        line[4].append((now, d))
    return True
