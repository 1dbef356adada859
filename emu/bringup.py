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

The answering end reports too, and only a link it finds bad (its count of the starter's pattern, one
way, over ``frames``; or no HELLO at all): the starter's trap may have to cross the very link under
test on its way up the manager tree, the answerer's then does not (one of a link's two ends is the
other's parent in that tree, or neither uses it). Frames are taken only on the ports they belong to
-- HELLO, and the END that closes a pattern coming in, on a port the other end starts (``answers``),
at most one answer per HELLO; HELLO_ACK, RESULT and the returning pattern on a port this end starts
-- so a forged frame cannot keep two ends answering each other: bring-up ends in a bounded number of
frames. Others are refused (:meth:`LinkTest.refused`), counted by the caller.

How many frames to send: :func:`frames_to_catch` -- the least ``n`` whose one-way count exceeds the
threshold ``floor(r n)`` with probability at least ``1 - miss`` on a link losing a share ``p > r``
of its frames (the binomial tail ``P[Bin(n, p) <= floor(r n)] <= miss``); :func:`caught_rate`
is the least such ``p`` for a given ``n``.
"""

from __future__ import annotations

import enum
import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable

from .wire import HDR_LEN, PacketType, build_frame
from .wire.framing import frame_length
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


_STARTER_TAKES = {MgmtOp.HELLO_ACK: Bringup.HELLO, MgmtOp.RESULT: Bringup.TESTING, MgmtOp.PATTERN: Bringup.RETURN,
                  MgmtOp.END: Bringup.RETURN}
"""What a starting end's port takes, and in which state; anything else there is refused."""


def pattern(a: int, b: int, index: int, nbytes: int) -> bytes:
    """Test-pattern frame ``index`` from address ``a`` to ``b``: pseudo-random, the same at both ends."""
    out = bytearray()
    seed = f"{a}:{b}:{index}".encode()
    while len(out) < nbytes:
        seed = hashlib.blake2b(seed, digest_size=64).digest()
        out += seed
    return bytes(out[:nbytes])


MISS = 1e-9
"""Largest chance that bring-up misses a link above ``manager.max_error_rate`` (:func:`frames_to_catch`)."""
_MISS = f"{MISS:g}".replace("e-0", "e-")
AUTO_FRAMES = 4096
"""Most test frames :func:`sized` chooses by itself (more take long to emulate on every link)."""
MAX_FRAMES = 32_767
"""Most test frames per direction: a trap's 16-bit count holds the errors of both (2 x frames)."""


def miss_probability(n: int, p: float, r: float) -> float:
    """P[Bin(n, p) <= floor(r n)]: a link losing each frame with probability ``p`` shows no more
    than the threshold's errors in ``n`` frames, so it passes (exact sum of the binomial terms)."""
    k = math.floor(r * n + 1e-9)
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0 if k < n else 1.0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(min(k, n) + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def frames_to_catch(p: float, r: float, miss: float = MISS, limit: int = MAX_FRAMES) -> int | None:
    """The least number of test frames (one way) that catches a link whose frames are lost or
    damaged with probability ``p`` (> ``r``) at threshold ``r`` with probability >= 1 - ``miss``;
    None: more than ``limit`` (``p`` too close to ``r``)."""
    if p <= r:
        return None
    ok = lambda n: miss_probability(n, p, r) <= miss  # noqa: E731
    hi = 1
    while not ok(hi):
        if hi >= limit:
            return None
        hi = min(2 * hi, limit)
    lo = hi // 2  # ok(lo) is false (or lo == 0); the tail falls with n but for floor(r n)'s steps
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def caught_rate(n: int, r: float, miss: float = MISS) -> float:
    """The least frame error probability that ``n`` test frames (one way) catch at threshold ``r``
    with probability >= 1 - ``miss`` (bisection; the tail falls as ``p`` grows)."""
    lo, hi = r, 1.0
    if miss_probability(n, hi, r) > miss:
        return math.inf  # not even a link losing every frame: n is too small for the threshold
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if miss_probability(n, mid, r) <= miss else (mid, hi)
    return hi


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
    report: Callable[..., list]
    """``report(port, outcome, errors, sample, peer, peer_port, now)``: ``errors`` of ``sample``
    test frames (``2 x frames`` at the starter, ``frames`` one way at the answerer)."""
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
    answers: frozenset | None = None
    """Ports the other end starts, where this end answers and reports a bad link itself (None: any
    port it does not start, without reports -- a NIC)."""
    port_bps: dict = field(default_factory=dict)
    port_framing: dict = field(default_factory=dict)
    """The link's framing per port (``emu.wire.framing``): a pattern's time on the line is its modelled length's."""
    """Line rate per port: a pattern's serialisation time is added to the timeouts that wait for it."""
    waiting: dict[int, int] = field(default_factory=dict)
    """Answering port -> deadline: for the HELLO, then for the END of the pattern coming in."""
    started: bool = False

    def _frame(self, dst: int, op: MgmtOp, seq: int = 0, count: int = 0, body: bytes = b"") -> bytes:
        self.stats["bringup_frames"] = self.stats.get("bringup_frames", 0) + 1
        return build_frame(self.node_id, dst, PacketType.MGMT, MGMT.pack(op, 0, 0, 0, seq & 0xFFFF, count) + body,
                           prio=1)

    def start(self, now: int) -> list[tuple[int, bytes, int]]:
        """Say HELLO on every port this end starts (at virtual time ``now``)."""
        at = now + self.delay_ns
        out = []
        self.started = True
        for port in sorted(self.answers or ()):  # the other end's HELLO, after all its tries
            self.waiting[port] = now + (self.hello_tries + 1) * self.timeout_ns
        for port, expected in sorted(self.starts.items()):
            self.ports[port] = PortTest(expected, deadline=now + self.timeout_ns)
            out.append((port, self._frame(0xFFFFFFFF, MgmtOp.HELLO, count=self.frames,
                                          body=_ID.pack(self.node_id, port)), at))
        return out

    def _pattern_ns(self, port: int) -> int:
        """The time a whole test pattern takes on the line (0: the line rate is not known)."""
        bps = self.port_bps.get(port)
        fr = self.port_framing.get(port)
        n = frame_length(fr.name if fr else "ethernet", PacketType.MGMT, MGMT.size + self.nbytes)
        return -(-self.frames * 8_000_000_000 * n // bps) if bps else 0

    def next_deadline(self) -> int | None:
        live = [t.deadline for t in self.ports.values() if t.state in (Bringup.HELLO, Bringup.TESTING, Bringup.RETURN)]
        live += self.waiting.values()
        return min(live) if live else None

    def refused(self, op: int, port: int) -> str | None:
        """Why a bring-up frame on ``port`` is not this end's to take (None: it is)."""
        if port in self.starts:
            t = self.ports.get(port)
            if t is not None and t.state is _STARTER_TAKES.get(op):
                return None
            return (f"bring-up {MgmtOp(op).name} on port {port}, which this end starts "
                    f"({t.state.value if t is not None else 'not started'})")
        if self.answers is not None and port not in self.answers:
            return f"bring-up {MgmtOp(op).name} on port {port}, which is not brought up"
        if op in (MgmtOp.HELLO_ACK, MgmtOp.RESULT):
            return f"bring-up {MgmtOp(op).name} on port {port}, which the other end starts"
        if op == MgmtOp.END and port not in self.counting:
            return f"bring-up END on port {port} without a HELLO before it (or answered already)"
        return None

    def on_timer(self, now: int) -> list:
        out = []
        for port, due in sorted(self.waiting.items()):
            if due <= now:  # the other end fell silent: what came in is all there is to count
                del self.waiting[port]
                c = self.counting.pop(port, None)
                if c is None:
                    out += self.report(port, Bringup.DEAD, self.frames, self.frames, -1, -1, now)
                else:
                    out += self.report(port, Bringup.UP, self.frames - min(c[1], self.frames), self.frames,
                                       c[0], -1, now)
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
            return self.report(port, nxt, errors, 2 * self.frames, t.peer[0], t.peer[1], now)
        if nxt in (Bringup.MISCABLED, Bringup.DEAD):
            return self.report(port, nxt, 2 * self.frames, 2 * self.frames, t.peer[0], t.peer[1], now)
        return []

    def on_frame(self, frame: bytes, port: int, src: int, now: int) -> list[tuple[int, bytes, int]]:
        """A bring-up frame (ptype MGMT, op HELLO..RESULT) that arrived on ``port``."""
        op, _hop, _n, _r, seq, count = MGMT.unpack(frame, HDR_LEN)
        body = frame[HDR_LEN + MGMT.size:]
        at = now + self.delay_ns
        if self.refused(op, port) is not None:  # the caller counts it (it asks first)
            self.stats["bringup_refused"] = self.stats.get("bringup_refused", 0) + 1
            return []
        t = self.ports.get(port)
        if op == MgmtOp.HELLO:  # the other end starts: tell it who we are, count what comes
            peer, _pp = _ID.unpack_from(body)
            self.counting[port] = [peer, 0, self.nbytes]
            if port in self.waiting:
                self.waiting[port] = now + 2 * self.timeout_ns + self._pattern_ns(port)
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
            count = min(count, MAX_FRAMES)
            out = []
            if self.waiting.pop(port, None) is not None:  # our own view, one way (the caller keeps a bad one)
                out += self.report(port, Bringup.UP, max(0, count - c[1]), count, c[0], -1, now)
            out += [(port, self._frame(src, MgmtOp.RESULT, count=c[1]), at)]
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
            t.deadline = now + self.timeout_ns + self._pattern_ns(port)
            peer = t.peer[0]
            out = [(port, self._frame(peer, MgmtOp.PATTERN, seq=i, body=pattern(self.node_id, peer, i, self.nbytes)), at)
                   for i in range(self.frames)]
            out.append((port, self._frame(peer, MgmtOp.END, count=self.frames), at))
            return out
        if op == MgmtOp.RESULT and t.state is Bringup.TESTING:
            t.lost_out = self.frames - min(count, self.frames)
            self.counting[port] = [t.peer[0], 0, self.nbytes]
            t.deadline = now + self.timeout_ns + self._pattern_ns(port)
            return self._move(port, t, BringupEvent.RESULT, now)
        return []


def sized(spec, bers: dict) -> tuple:
    """``ManagerSpec`` with enough test frames to catch each link of ``bers`` ({link name: bit-error
    rate}, faults from the start) whose frame error probability is above ``max_error_rate``, with
    probability >= 1 - MISS; and a line per link that says so (rate, probability, frames needed)."""
    import dataclasses

    from .port import frame_error_probability
    from .wire import FCS_LEN

    r, notes, need = spec.max_error_rate, [], spec.test_frames
    wire = HDR_LEN + MGMT.size + spec.test_bytes + FCS_LEN
    for name, ber in sorted(bers.items()):
        p = frame_error_probability(ber, wire)
        if p <= r:
            notes.append(f"link {name} ber {ber:g}: frame error rate {p:.3g} <= max {r:g}, within tolerance")
            continue
        n = frames_to_catch(p, r, limit=AUTO_FRAMES)
        if n is None:
            n = max(need, AUTO_FRAMES)
            notes.append(f"link {name} ber {ber:g}: frame error rate {p:.3g} > max {r:g}, too close to the threshold: "
                         f"{n} test frames miss it with probability {miss_probability(n, p, r):.2g} "
                         f"(1 - {_MISS} needs {frames_to_catch(p, r) or f'more than {MAX_FRAMES}'}; "
                         "set manager.test_frames to run more)")
        else:
            notes.append(f"link {name} ber {ber:g}: frame error rate {p:.3g} > max {r:g}: {n} test frames catch it "
                         f"with probability >= 1 - {_MISS}")
        need = max(need, n)
    return dataclasses.replace(spec, test_frames=need), notes


def guarantee(spec) -> str:
    """What the test pattern catches: frames, threshold, and the least error rate caught."""
    q = caught_rate(spec.test_frames, spec.max_error_rate)
    return (f"{spec.test_frames} test frames of {spec.test_bytes} B each way, threshold {spec.max_error_rate:g}: "
            f"a link losing a share >= {q:.3g} of its frames is caught with probability >= 1 - {_MISS}")
