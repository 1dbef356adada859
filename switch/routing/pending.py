"""Pending operations per link: the load QsNet's adaptive routing compares against its threshold.

Spec 03: a router "first takes the subset of lightly loaded links -- load measured as the number of
pending (unacknowledged) operations". A router sees a packet leave on a link and its ACK come back:
:class:`Pending` counts, per output port, the QsNet packets (``QPKT``, unicast) this router routed
out of it whose ACK or NACK token (``QACK``) has not yet come back through it.

* A packet is keyed by its source address and packet id (the trailer's; an adapter gives a resent
  packet a new id). Routing it out of port ``p`` adds one to ``p``'s count and remembers the port it
  came in on.
* Its token (an ACK's destination is the packet's source, its ``pkt_id`` the packet's) **retraces
  the packet's route**: the router sends it out of the port the packet came in on, as QsNet's
  acknowledgement returns along the route its packet opened, and takes one off ``p``'s count. So
  every router the packet crossed sees the token, and the count is exact; a token whose packet this
  router never saw (or whose way back is down) is routed as any frame.
* A packet whose token never comes back (lost on a link with its packet or on its way back; the
  adapter resends it under a new id) leaves the count ``SwitchSpec.pending_expiry_ns`` after it was
  routed.

The IQ router (``switch.model=input_queued``) routes through the same code: there a packet counts
from its route computation (it is committed to that output), which is what its allocator then
serves. Broadcast packets and their combined ACKs are not counted (their replication and combining
are the group's). Other traffic (host messages, NIC-offload frames) has no per-packet ACK and adds
no load.
"""

from __future__ import annotations

import struct
from collections import deque

from emu.wire import DST_OFF, HDR_LEN

_U32 = struct.Struct("!I")


class Pending:
    """Unacknowledged QsNet operations per output port of one router (see the module's text)."""

    __slots__ = ("count", "ops", "order", "expiry", "seq", "stats")

    def __init__(self, expiry_ns: int) -> None:
        self.count: dict[int, int] = {}
        """Output port -> operations routed out of it and not acknowledged back through it."""
        self.ops: dict[tuple[int, int], tuple[int, int, int]] = {}
        """(source, packet id) -> (in port, out port, sequence)."""
        self.order: deque = deque()
        """(expires at, key, sequence), in the order routed (``now`` never goes back)."""
        self.expiry = expiry_ns
        self.seq = 0
        self.stats = {"ops": 0, "acked": 0, "expired": 0}

    def load(self, port: int, now: int) -> int:
        self._expire(now)
        return self.count.get(port, 0)

    def sent(self, frame: bytes, in_port: int, out: int, now: int) -> None:
        """A QsNet packet routed out of ``out``."""
        self._expire(now)
        key = (_U32.unpack_from(frame, DST_OFF - 4)[0], _U32.unpack_from(frame, len(frame) - 4)[0])
        old = self.ops.get(key)
        if old is not None:  # seen again (a duplicate): it counts once, on its latest port
            self.count[old[1]] -= 1
        self.seq += 1
        self.ops[key] = (in_port, out, self.seq)
        self.count[out] = self.count.get(out, 0) + 1
        self.order.append((now + self.expiry, key, self.seq))
        self.stats["ops"] += 1

    def returned(self, frame: bytes, now: int) -> int | None:
        """A token (ACK or NACK) on its way back: the port its packet came in on (None: not seen here)."""
        self._expire(now)
        key = (_U32.unpack_from(frame, DST_OFF)[0], _U32.unpack_from(frame, HDR_LEN + 4)[0])
        return self.forget(key)

    def forget(self, key: tuple[int, int]) -> int | None:
        op = self.ops.pop(key, None)
        if op is None:
            return None
        self.count[op[1]] -= 1
        self.stats["acked"] += 1
        return op[0]

    def _expire(self, now: int) -> None:
        order = self.order
        while order and order[0][0] <= now:
            _t, key, seq = order.popleft()
            op = self.ops.get(key)
            if op is not None and op[2] == seq:
                del self.ops[key]
                self.count[op[1]] -= 1
                self.stats["expired"] += 1
