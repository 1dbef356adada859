"""The input-queued router's buffers and credits: per-VC buffers and the input port's shared pool.

``SwitchSpec.vc_buffer_bytes`` per VC and ``pool_bytes`` per input port (QsNet: a 256-byte buffer
per VC plus a shared pool of 16 such buffers, spec 03). Where a frame of ``cost`` bytes (its modelled
length in whole flits) goes is decided by its sender, with the room it holds credit for, by one rule:

* **its VC buffer first**: the frame's first ``min(cost, B)`` bytes go into its VC's buffer of ``B``
  bytes, the rest (a frame longer than a VC buffer) into the pool -- when the sender holds credit for
  both;
* **else the pool**: the whole frame into the pool (a frame whose VC buffer is full), when the pool
  has room for it;
* else it waits for a credit.

The sender marks a frame it placed wholly in the pool with the fabric header's ``POOL`` flag
(``emu.wire.fabric.FLAG_POOL``), so the receiver files it where the sender counted it and returns
its credit to the same place: per VC, and for the pool (a credit frame with ``pool`` = 1), when its
tail has left the buffer. Both sides follow the rule from the frame's bytes alone: credits are exact
and runs deterministic. A frame may be as long as ``B + pool`` (QsNet: 17 segments, one 4 KiB packet
with its headers); virtual cut-through needs its whole room before it starts.
"""

from __future__ import annotations

from emu.buffers import pool_parts as parts
from emu.buffers import pool_place as place
from emu.wire.fabric import FLAG_POOL, FLAGS_OFF

__all__ = ["InBuffers", "OutCredits", "in_pool", "mark", "parts", "place"]


def in_pool(frame) -> bool:
    """Did the frame's sender place it wholly in the receiver's pool?"""
    return len(frame) > FLAGS_OFF and bool(frame[FLAGS_OFF] & FLAG_POOL)


def mark(frame: bytearray, pool: bool) -> None:
    """Set (or clear) the frame's POOL flag in place."""
    if len(frame) > FLAGS_OFF:
        frame[FLAGS_OFF] = (frame[FLAGS_OFF] | FLAG_POOL) if pool else (frame[FLAGS_OFF] & ~FLAG_POOL & 0xFF)


class InBuffers:
    """The receiving side of an input-queued router: bytes held per (input port, VC) and in each
    input port's pool, with their peaks."""

    def __init__(self, nports: int, vcs: int, vc_bytes: int, pool_bytes: int, name: str) -> None:
        self.occ = [[0] * vcs for _ in range(nports)]
        self.peak = [[0] * vcs for _ in range(nports)]
        self.pool = [0] * nports
        self.pool_peak = [0] * nports
        self.vc_bytes, self.pool_bytes, self.name = vc_bytes, pool_bytes, name

    def take(self, port: int, vc: int, cost: int, pool: bool) -> tuple[int, int]:
        """A frame arrived: file its parts; a sender that overran its credit is refused."""
        from emu.errors import EngineError

        a, b = parts(cost, self.vc_bytes, pool)
        occ = self.occ[port]
        if occ[vc] + a > self.vc_bytes or self.pool[port] + b > self.pool_bytes:
            raise EngineError(f"{self.name}: input port {port} VC {vc} buffer overrun: {occ[vc]} + {a} > {self.vc_bytes} "
                              f"bytes, or its pool {self.pool[port]} + {b} > {self.pool_bytes} (a frame larger than a "
                              "VC buffer and the pool never fits: raise switch.vc_buffer_bytes or pool_bytes, or lower "
                              "host.mtu_bytes / elan.packet_bytes)")
        occ[vc] += a
        if occ[vc] + b > self.peak[port][vc]:  # (the VC's figure counts its frames' pool bytes too)
            self.peak[port][vc] = occ[vc] + b
        if b:
            self.pool[port] += b
            if self.pool[port] > self.pool_peak[port]:
                self.pool_peak[port] = self.pool[port]
        return a, b

    def free(self, port: int, vc: int, a: int, b: int) -> None:
        self.occ[port][vc] -= a
        self.pool[port] -= b


class OutCredits:
    """The sending side: per output port, the credit held per VC of the receiver and for its pool
    (None: an unbounded receiver)."""

    def __init__(self, downstream: list, nports: int) -> None:
        self.vc: list = []
        self.pool: list = []
        self.cap: list = []
        self.frames: list = []
        """Per output and VC of the receiver: frames sent and not yet out of its queue (the credit
        frames' ``frames`` count)."""
        for o in range(nports):
            d = downstream[o] if o < len(downstream) else None
            if d is None:
                self.vc.append(None)
                self.pool.append(0)
                self.cap.append((0, 0))
                self.frames.append(None)
                continue
            vcs, cap, _unit, pool = d
            self.frames.append([0] * vcs)
            self.vc.append([cap] * vcs)
            self.pool.append(pool)
            self.cap.append((cap, pool))

    def empty(self, o: int, vc: int) -> bool:
        """Does no frame wait in the receiver's queue of ``vc`` (or come toward it)? With a pool, by the
        credits' frame counts; without, its whole buffer's credit is back."""
        return not self.frames[o][vc] if self.cap[o][1] else self.vc[o][vc] == self.cap[o][0]

    def place(self, o: int, vc: int, need: int) -> bool | None:
        """Where a frame needing ``need`` bytes would go on output ``o``'s VC ``vc`` now (``place``)."""
        return place(need, self.cap[o][0], self.vc[o][vc], self.pool[o])

    def debit(self, o: int, vc: int, need: int, pool: bool) -> None:
        a, b = parts(need, self.cap[o][0], pool)
        self.vc[o][vc] -= a
        self.pool[o] -= b

    def credit(self, o: int, vc: int, nbytes: int, pool: bool) -> str | None:
        """A credit arrived; returns what is wrong when it overfills the receiver's room, else None."""
        cap, pcap = self.cap[o]
        if pool:
            self.pool[o] += nbytes
            if self.pool[o] > pcap:
                return f"pool credit above the receiver's pool ({self.pool[o]} > {pcap} bytes)"
        else:
            c = self.vc[o]
            c[vc % len(c)] += nbytes
            if c[vc % len(c)] > cap:
                return f"credit above the receiver's buffer ({c[vc % len(c)]} > {cap} bytes)"
        return None
