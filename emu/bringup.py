"""Link bring-up in three steps (spec 03), sans-I/O: both ends of a link run a :class:`LinkTest`.

Before a link joins the routing tables, the end that starts (a switch toward a host, the switch of
lower address between two switches):

1. **connectivity** -- sends HELLO (its address and port) and waits for HELLO_ACK (the peer's);
   no answer within ``timeout_ns``: the link is dead;
2. **cabling** -- compares the peer's address and port with what the cabling plan expects on that
   port (``Topology.cabling_plan``, else the links as built); a mismatch is mis-cabling;
3. **test pattern** -- sends ``frames`` pseudo-random frames back to back (at line rate: the port
   serialises them) and END; the peer counts the frames that arrived intact (the link FCS drops
   damaged ones, :func:`pattern` is checked byte for byte), answers RESULT with the count and sends
   its own pattern and END the other way, which the starter counts.

The result -- frames lost or damaged both ways out of ``2 x frames`` -- goes to ``report(port,
outcome, errors, peer, peer_port, now)``; the engine traps it to the network manager, which takes a
link with too high an error rate out of the tables where the network has another way. Each port's
progress is the state table ``BRINGUP`` (DESIGN.md principle 4).
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Callable

from .wire import HDR_LEN, PacketType, build_frame
from .wire.qsnet import MGMT, MgmtOp

_ID = __import__("struct").Struct("!IB")


class Bringup(enum.Enum):
    HELLO = "hello"        # HELLO sent, waiting for the peer's answer
    TESTING = "testing"    # cabling right; our pattern and END sent, waiting for RESULT
    RETURN = "return"      # RESULT in; counting the peer's pattern until its END
    UP = "up"              # done: the error count is reported
    MISCABLED = "miscabled"
    DEAD = "dead"          # no answer


class BringupEvent(enum.Enum):
    RETRY = "retry"        # no answer to HELLO yet: say it again (up to ``hello_tries`` times)
    ACK_RIGHT = "ack_right"
    ACK_WRONG = "ack_wrong"
    RESULT = "result"
    END = "end"
    TIMEOUT = "timeout"


BRINGUP: dict[Bringup, dict[BringupEvent, Bringup]] = {
    Bringup.HELLO: {BringupEvent.RETRY: Bringup.HELLO, BringupEvent.ACK_RIGHT: Bringup.TESTING,
                    BringupEvent.ACK_WRONG: Bringup.MISCABLED, BringupEvent.TIMEOUT: Bringup.DEAD},
    Bringup.TESTING: {BringupEvent.RESULT: Bringup.RETURN, BringupEvent.TIMEOUT: Bringup.UP},
    Bringup.RETURN: {BringupEvent.END: Bringup.UP, BringupEvent.TIMEOUT: Bringup.UP},
    Bringup.UP: {}, Bringup.MISCABLED: {}, Bringup.DEAD: {},
}
"""A starting end's port. A timeout waiting for RESULT reports every frame lost (the link could
not carry the test); one while the peer's pattern comes back counts what arrived (its END may be the
frame that was lost)."""


def pattern(a: int, b: int, index: int, nbytes: int) -> bytes:
    """Test-pattern frame ``index`` from address ``a`` to ``b``: pseudo-random, the same at both ends."""
    out = bytearray()
    seed = f"{a}:{b}:{index}".encode()
    while len(out) < nbytes:
        seed = hashlib.blake2b(seed, digest_size=64).digest()
        out += seed
    return bytes(out[:nbytes])


@dataclass(eq=False)
class PortTest:
    peer_expected: tuple[int, int] | None
    state: Bringup = Bringup.HELLO
    peer: tuple[int, int] = (-1, -1)
    lost_out: int = 0
    good_back: int = 0
    deadline: int = 0
    tries: int = 1


@dataclass(eq=False)
class LinkTest:
    node_id: int
    delay_ns: int
    """Least time from an event to a frame this engine emits."""
    starts: dict[int, tuple[int, int] | None]
    """Ports this end starts -> the (peer address, peer port) the cabling plan expects there."""
    report: Callable[[int, Bringup, int, int, int, int], list]
    frames: int = 64
    nbytes: int = 1024
    timeout_ns: int = 100_000
    hello_tries: int = 3
    ports: dict[int, PortTest] = field(default_factory=dict)
    counting: dict[int, list[int]] = field(default_factory=dict)
    """Port -> [peer address, good frames so far, their size] for a pattern coming in."""
    answered: Callable[[int], None] | None = None
    """Called with the port once this end, not the starter, has sent its own pattern back."""
    stats: dict[str, int] = field(default_factory=lambda: {"bringup_frames": 0})

    def _frame(self, dst: int, op: MgmtOp, seq: int = 0, count: int = 0, body: bytes = b"") -> bytes:
        self.stats["bringup_frames"] += 1
        return build_frame(self.node_id, dst, PacketType.MGMT, MGMT.pack(op, 0, 0, 0, seq & 0xFFFF, count) + body,
                           prio=1)

    def start(self, now: int) -> list[tuple[int, bytes, int]]:
        """Say HELLO on every port this end starts (at virtual time ``now``)."""
        at = now + self.delay_ns
        out = []
        for port, expected in sorted(self.starts.items()):
            self.ports[port] = PortTest(expected, deadline=now + self.timeout_ns)
            out.append((port, self._frame(0xFFFFFFFF, MgmtOp.HELLO, count=self.frames,
                                          body=_ID.pack(self.node_id, port)), at))
        return out

    def next_deadline(self) -> int | None:
        live = [t.deadline for t in self.ports.values() if t.state in (Bringup.HELLO, Bringup.TESTING, Bringup.RETURN)]
        return min(live) if live else None

    def on_timer(self, now: int) -> list:
        out = []
        for port, t in self.ports.items():
            if t.state in (Bringup.HELLO, Bringup.TESTING, Bringup.RETURN) and t.deadline <= now:
                if t.state is Bringup.HELLO and t.tries < self.hello_tries:
                    self._move(port, t, BringupEvent.RETRY, now)
                    t.tries += 1
                    t.deadline = now + self.timeout_ns
                    out.append((port, self._frame(0xFFFFFFFF, MgmtOp.HELLO, count=self.frames,
                                                  body=_ID.pack(self.node_id, port)), now + self.delay_ns))
                    continue
                out += self._move(port, t, BringupEvent.TIMEOUT, now)
        return out

    def _move(self, port: int, t: PortTest, event: BringupEvent, now: int) -> list:
        nxt = BRINGUP[t.state].get(event)
        if nxt is None:
            raise AssertionError(f"bring-up of port {port}: event {event.value} in state {t.state.value}")
        t.state = nxt
        if nxt is Bringup.UP:
            if event is BringupEvent.TIMEOUT:
                c = self.counting.pop(port, None)
                t.good_back = c[1] if c is not None and c[0] == t.peer[0] else 0
                if t.state is Bringup.UP and c is None:
                    t.lost_out = self.frames  # no RESULT: nothing is known to have arrived
            errors = t.lost_out + (self.frames - t.good_back)
            return self.report(port, nxt, errors, t.peer[0], t.peer[1], now)
        if nxt in (Bringup.MISCABLED, Bringup.DEAD):
            return self.report(port, nxt, 2 * self.frames, t.peer[0], t.peer[1], now)
        return []

    def on_frame(self, frame: bytes, port: int, src: int, now: int) -> list[tuple[int, bytes, int]]:
        """A bring-up frame (ptype MGMT, op HELLO..RESULT) that arrived on ``port``."""
        op, _hop, _n, _r, seq, count = MGMT.unpack(frame, HDR_LEN)
        body = frame[HDR_LEN + MGMT.size:]
        at = now + self.delay_ns
        t = self.ports.get(port)
        if op == MgmtOp.HELLO:  # the other end starts: tell it who we are, count what comes
            peer, _pp = _ID.unpack_from(body)
            self.counting[port] = [peer, 0, self.nbytes]
            return [(port, self._frame(peer, MgmtOp.HELLO_ACK, body=_ID.pack(self.node_id, port)), at)]
        if op == MgmtOp.PATTERN:
            c = self.counting.get(port)
            if c is not None and body == pattern(c[0], self.node_id, seq, len(body)):
                c[1] += 1
                c[2] = len(body)
            return []
        if op == MgmtOp.END:
            c = self.counting.pop(port, [src, 0, self.nbytes])
            if t is not None and t.state is Bringup.RETURN:  # the peer's pattern, back to us
                t.good_back = c[1]
                return self._move(port, t, BringupEvent.END, now)
            # the starter's pattern is over: our count, then our own pattern the other way
            out = [(port, self._frame(src, MgmtOp.RESULT, count=c[1]), at)]
            out += [(port, self._frame(src, MgmtOp.PATTERN, seq=i, body=pattern(self.node_id, src, i, c[2])), at)
                    for i in range(count)]
            out.append((port, self._frame(src, MgmtOp.END, count=count), at))
            if self.answered is not None:
                self.answered(port)
            return out
        if t is None:
            return []
        if op == MgmtOp.HELLO_ACK and t.state is Bringup.HELLO:
            t.peer = _ID.unpack_from(body)
            if t.peer_expected is not None and t.peer != t.peer_expected:
                return self._move(port, t, BringupEvent.ACK_WRONG, now)
            self._move(port, t, BringupEvent.ACK_RIGHT, now)
            t.deadline = now + self.timeout_ns
            peer = t.peer[0]
            out = [(port, self._frame(peer, MgmtOp.PATTERN, seq=i, body=pattern(self.node_id, peer, i, self.nbytes)), at)
                   for i in range(self.frames)]
            out.append((port, self._frame(peer, MgmtOp.END, count=self.frames), at))
            return out
        if op == MgmtOp.RESULT and t.state is Bringup.TESTING:
            t.lost_out = self.frames - min(count, self.frames)
            self.counting[port] = [t.peer[0], 0, self.nbytes]
            t.deadline = now + self.timeout_ns
            return self._move(port, t, BringupEvent.RESULT, now)
        return []
