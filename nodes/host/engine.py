"""The host engine: NIC segmentation/reassembly, echo, and the applications that run on the host.

Sans-I/O (DESIGN.md principle 1): ``receive(frame, port, now)`` and ``on_timer(now)`` return the
frames to send as ``(port, frame, at)``; ``timer`` says when to call ``on_timer`` next.

Timing of the minimal API (all virtual):

* ``send``: the message is cut into frames of at most ``mtu_bytes`` of data; each frame is handed
  to the port ``nic_delay_ns`` after the call; the application continues at once (local completion).
* a message is delivered to ``recv`` ``nic_delay_ns`` after its last frame arrived.
* ``ping``: the peer's NIC answers an echo request ``nic_delay_ns`` after it arrived; the round trip
  ends ``nic_delay_ns`` after the reply arrived.
"""

from __future__ import annotations

import heapq
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from emu.build import register_engine
from emu.config import HostSpec
from emu.wire import ETH_LEN, FABRIC, HDR_LEN, MSG, PING, DecodeError, PacketType, build_frame, parse_frame

from .api import Compute, HostAPI, Message, NicOpen, NicPost, NicWait, Op, PingOp, Recv, Send, Sleep
from nodes.nic.coll import CollNIC, Completion
from emu.wire.coll import ErrBit

log = logging.getLogger(__name__)

_MSG_LEN = MSG.size
_PING_LEN = PING.size
_FABRIC_PACK = FABRIC.struct.pack


@dataclass(eq=False)
class Proc:
    """An application coroutine running on this host."""

    key: str
    coro: Any
    started_ns: int
    waiting: Op | None = None
    since_ns: int = 0
    done: bool = False
    result: Any = None
    error: str | None = None
    finished_ns: int | None = None
    cpu_ns: int = 0


@dataclass(eq=False)
class _Partial:
    tag: int
    buf: bytearray
    got: int = 0


@dataclass
class AppState:
    """What a finished run reports for one application (picklable)."""

    host: str
    done: bool
    result: Any
    error: str | None
    waiting: str | None
    since_ns: int
    finished_ns: int | None
    cpu_ns: int = 0


@dataclass(eq=False)
class HostEngine:
    name: str
    node_id: int
    spec: HostSpec
    routes: list[int] | None
    """Output port per destination host address, or None: everything leaves on port 0."""
    host_ids: dict[str, int]
    """Every host's name -> fabric address (shared by all hosts of a process)."""
    names: list[str]
    """Host names by address (shared)."""
    timer: int | None = None
    now: int = 0
    kind = "host"
    stats: dict[str, int] = field(default_factory=lambda: {
        "malformed": 0, "misdelivered": 0, "no_route": 0, "messages_sent": 0, "messages_received": 0,
        "frames_sent": 0, "frames_received": 0, "pings_answered": 0})

    def __post_init__(self) -> None:
        self.min_delay_ns = self.spec.nic_delay_ns
        self._timers: list[tuple[int, int, Callable, Any]] = []
        self._cancelled: set[int] = set()
        self._tseq = 0
        self._out: list[tuple[int, bytes, int]] = []
        self._procs: list[Proc] = []
        self._inbox: list[Message] = []
        self._partial: dict[tuple[int, int], _Partial] = {}
        self._msg_id = 0
        self._ping_seq = 0
        self._pings: dict[int, Proc] = {}
        self._heads: dict[int, bytes] = {}
        self.nic = CollNIC(self)
        self._nic_done: dict[tuple[int, int], list[Completion]] = {}
        self._nic_waiters: dict[tuple[int, int], tuple[Proc, NicWait, int]] = {}
        self.current: Proc | None = None
        """The application being stepped (for ``HostAPI.cpu_ns``)."""
        self.api = HostAPI(self)

    # -- engine interface -----------------------------------------------------------------------
    def receive(self, frame: bytes, port: int, now: int) -> list[tuple[int, bytes, int]]:
        self.now = now
        self._out = out = []
        try:
            src, dst, _vc, _prio, ptype, _flags, hops, _r, length = parse_frame(frame)
            if dst != self.node_id:
                self.stats["misdelivered"] += 1
                log.debug("%s: frame for %d delivered here", self.name, dst)
                return out
            self.stats["frames_received"] += 1
            if ptype == PacketType.MSG:
                self._on_segment(src, hops, frame)
            elif ptype == PacketType.PING:
                ident, seq, t_sent = PING.unpack(frame, HDR_LEN)
                self.stats["pings_answered"] += 1
                self._emit(src, PacketType.PONG, PING.pack(ident, seq, t_sent), now + self.spec.nic_delay_ns)
            elif ptype == PacketType.COLL:
                self.nic.receive(frame, src, now)
            elif ptype == PacketType.PONG:
                ident, seq, t_sent = PING.unpack(frame, HDR_LEN)
                proc = self._pings.pop(seq, None)
                if proc is None:
                    raise DecodeError(f"echo reply seq {seq} matches no outstanding ping")
                t = now + self.spec.nic_delay_ns
                self._at(t, self._resume, (proc, t - t_sent))
            else:
                raise DecodeError(f"packet type {ptype} is not handled by a host")
        except DecodeError as e:
            self.stats["malformed"] += 1
            log.warning("%s: dropped malformed frame at %d ns: %s", self.name, now, e)
        self._update_timer()
        return out

    def on_timer(self, now: int) -> list[tuple[int, bytes, int]]:
        self.now = now
        self._out = out = []
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, tid, fn, arg = heapq.heappop(timers)
            if tid in self._cancelled:
                self._cancelled.discard(tid)
                continue
            fn(arg)
        self._update_timer()
        return out

    # -- applications ---------------------------------------------------------------------------
    def start_app(self, key: str, fn: Callable, args: tuple, now: int) -> None:
        coro = fn(self.api, *args)
        if not hasattr(coro, "send"):
            raise TypeError(f"{key}: the application {fn!r} must be an 'async def' function")
        proc = Proc(key, coro, now)
        self._procs.append(proc)
        self._at(now, self._resume, (proc, None))
        self._update_timer()

    def app_states(self) -> list[AppState]:
        """Report every application of the run that just ended, and forget them: one still
        waiting when nothing is left to do never wakes up, so it is closed."""
        out = []
        for p in self._procs:
            waiting = p.waiting.describe(self.names) if p.waiting is not None else None
            out.append(AppState(p.key, p.done, p.result, p.error, waiting, p.since_ns, p.finished_ns, p.cpu_ns))
            if not p.done:
                p.coro.close()
                p.done, p.waiting = True, None
        self._procs = []
        self._pings = {}
        self._nic_waiters = {}
        return out

    def _resume(self, arg: tuple[Proc, Any]) -> None:
        proc, value = arg
        if proc.done:
            return
        proc.waiting = None
        self.current = proc
        while True:
            try:
                op = proc.coro.send(value)
            except StopIteration as stop:
                proc.done, proc.result, proc.finished_ns = True, stop.value, self.now
                return
            except Exception:
                proc.done, proc.error, proc.finished_ns = True, traceback.format_exc(), self.now
                return
            try:
                ready, value = self._dispatch(proc, op)
            except Exception as e:  # misuse of the API inside the app: fail the app, not the host
                proc.coro.close()
                proc.done, proc.finished_ns = True, self.now
                proc.error = f"{type(e).__name__}: {e}"
                return
            if not ready:
                proc.waiting, proc.since_ns = op, self.now
                return

    def _dispatch(self, proc: Proc, op: Any) -> tuple[bool, Any]:
        """Carry out one request through the handler table; (True, value) if the app continues at
        once, (False, None) if something resumes it later."""
        handler = _HANDLERS.get(type(op))
        if handler is None:
            raise TypeError(f"an application on {self.name} awaited {op!r}; only the host API "
                            "(send, recv, ping, sleep, compute, nic_*) can be awaited in virtual time")
        return handler(self, proc, op)

    def _busy(self, proc: Proc, ns: int, value: Any = None) -> tuple[bool, Any]:
        """The app spends ``ns`` of host CPU time, then continues with ``value``."""
        if ns == 0:
            return True, value
        proc.cpu_ns += ns
        self._at(self.now + ns, self._resume, (proc, value))
        return False, None

    def _op_send(self, proc: Proc, op: Send) -> tuple[bool, Any]:
        o = self.spec.send_overhead_ns
        self._send_message(op, self.now + o)
        return self._busy(proc, o)

    def _op_recv(self, proc: Proc, op: Recv) -> tuple[bool, Any]:
        for i, m in enumerate(self._inbox):
            if op.matches(self.host_ids[m.src], m.tag):
                del self._inbox[i]
                return self._received(proc, m)
        return False, None

    def _op_compute(self, proc: Proc, op: Compute) -> tuple[bool, Any]:
        return self._busy(proc, op.ns)

    def _op_ping(self, proc: Proc, op: PingOp) -> tuple[bool, Any]:
        self._ping_seq = seq = (self._ping_seq + 1) & 0xFFFFFFFF
        self._pings[seq] = proc
        self._emit(op.dst, PacketType.PING, PING.pack(self.node_id, seq, self.now), self.now + self.spec.nic_delay_ns)
        return False, None

    def _op_sleep(self, proc: Proc, op: Sleep) -> tuple[bool, Any]:
        self._at(self.now + op.ns, self._resume, (proc, None))
        return False, None

    def _op_nic_open(self, proc: Proc, op: NicOpen) -> tuple[bool, Any]:
        self.nic.open_vp(op.vp)
        return True, None

    def _op_nic_post(self, proc: Proc, op: NicPost) -> tuple[bool, Any]:
        cost = self.spec.nic.post_ns * len(op.posted)
        self.nic.post(op.vp, op.posted, self.now + cost)
        return self._busy(proc, cost)

    def _op_nic_wait(self, proc: Proc, op: NicWait) -> tuple[bool, Any]:
        key = (op.vp, op.region)
        done = self._nic_done.get(key, [])
        if len(done) >= op.count:
            self._nic_done[key] = done[op.count:]
            return True, done[:op.count]
        tid = self._at(self.now + op.timeout_ns, self._nic_timeout, (proc, op))
        self._nic_waiters[key] = (proc, op, tid)
        return False, None

    # -- NIC ------------------------------------------------------------------------------------
    def resolve(self, host: str | int) -> int:
        if isinstance(host, str):
            try:
                return self.host_ids[host]
            except KeyError:
                raise ValueError(f"unknown host {host!r}; hosts are {list(self.host_ids)[:8]}...") from None
        if not 0 <= host < len(self.names):
            raise ValueError(f"unknown host address {host}")
        return host

    def _received(self, proc: Proc, msg: Message) -> tuple[bool, Any]:
        """A receive matched ``msg`` now: the app continues after the receive overhead."""
        return self._busy(proc, self.spec.recv_overhead_ns, msg)

    def _send_message(self, op: Send, t: int) -> None:
        """The NIC takes the message at ``t`` (after the sender's software overhead)."""
        data = op.data
        total = len(data)
        mtu = self.spec.mtu_bytes
        self._msg_id = msg_id = (self._msg_id + 1) & 0xFFFFFFFF
        at = t + self.spec.nic_delay_ns
        off = 0
        while True:
            chunk = data[off:off + mtu]
            self._emit(op.dst, PacketType.MSG, MSG.pack(msg_id, op.tag, total, off) + chunk, at)
            off += len(chunk)
            if off >= total:
                break
        self.stats["messages_sent"] += 1

    def _emit(self, dst: int, ptype: int, body: bytes, at: int) -> None:
        port = 0 if self.routes is None else (self.routes[dst] if 0 <= dst < len(self.routes) else -1)
        if port < 0:
            self.stats["no_route"] += 1
            raise ValueError(f"{self.name} has no route to host address {dst}")
        head = self._heads.get(dst)
        if head is None:
            head = self._heads[dst] = build_frame(self.node_id, dst, 0, b"")[:ETH_LEN]
        self._out.append((port, head + _FABRIC_PACK(self.node_id, dst, 0, 0, ptype, 0, 0, 0, len(body)) + body, at))
        self.stats["frames_sent"] += 1

    def _on_segment(self, src: int, hops: int, frame: bytes) -> None:
        msg_id, tag, total, offset = MSG.unpack(frame, HDR_LEN)
        chunk = frame[HDR_LEN + _MSG_LEN:]
        if offset + len(chunk) > total:
            raise DecodeError(f"segment at {offset}+{len(chunk)} overruns message of {total} bytes")
        if offset == 0 and len(chunk) == total:  # a one-frame message: nothing to reassemble
            self.stats["messages_received"] += 1
            t = self.now + self.spec.nic_delay_ns
            self._at(t, self._deliver, Message((self.names[src] if 0 <= src < len(self.names) else str(src)), tag, chunk, t, hops))
            return
        key = (src, msg_id)
        part = self._partial.get(key)
        if part is None:
            if total > self.spec.max_message_bytes:
                raise DecodeError(f"message of {total} bytes announced, over max_message_bytes "
                                  f"({self.spec.max_message_bytes})")
            part = self._partial[key] = _Partial(tag, bytearray(total))
        elif part.tag != tag or len(part.buf) != total:
            raise DecodeError(f"segment of message {msg_id} from {src} disagrees with the first one "
                              f"(tag {tag}/{part.tag}, total {total}/{len(part.buf)})")
        part.buf[offset:offset + len(chunk)] = chunk
        part.got += len(chunk)
        if part.got >= total:
            del self._partial[key]
            msg = Message((self.names[src] if 0 <= src < len(self.names) else str(src)), tag, bytes(part.buf),
                          self.now + self.spec.nic_delay_ns, hops)
            self.stats["messages_received"] += 1
            self._at(msg.t_ns, self._deliver, msg)

    def _deliver(self, msg: Message) -> None:
        src = self.host_ids.get(msg.src, -1)
        for proc in self._procs:
            if isinstance(proc.waiting, Recv) and proc.waiting.matches(src, msg.tag):
                ready, value = self._received(proc, msg)
                if ready:
                    self._resume((proc, value))
                else:
                    proc.waiting = None
                return
        self._inbox.append(msg)

    def _nic_completion(self, c: Completion) -> None:
        """The NIC wrote a completion to host memory."""
        key = (c.vp, c.region)
        done = self._nic_done.setdefault(key, [])
        done.append(c)
        w = self._nic_waiters.get(key)
        if w is not None and len(done) >= w[1].count:
            proc, op, tid = self._nic_waiters.pop(key)
            self._cancel(tid)
            self._nic_done[key] = done[op.count:]
            self._resume((proc, done[:op.count]))

    def _nic_timeout(self, arg) -> None:
        proc, op = arg
        key = (op.vp, op.region)
        w = self._nic_waiters.get(key)
        if w is None or w[0] is not proc:
            return
        del self._nic_waiters[key]
        self.nic.abort(op.vp, op.region)
        done = self._nic_done.pop(key, [])
        done.append(Completion(op.region, -1, ErrBit.TIMEOUT, None, None, self.now, op.vp))
        self._resume((proc, done))

    # -- timers ---------------------------------------------------------------------------------
    def _at(self, t: int, fn: Callable, arg: Any) -> int:
        """Call ``fn(arg)`` at virtual time ``t``; returns an id for ``_cancel``."""
        self._tseq += 1
        heapq.heappush(self._timers, (t, self._tseq, fn, arg))
        return self._tseq

    def _cancel(self, timer_id: int) -> None:
        """Forget a timer: it neither runs nor keeps the element (and the run) going."""
        self._cancelled.add(timer_id)

    def _update_timer(self) -> None:
        timers = self._timers
        while timers and timers[0][1] in self._cancelled:
            self._cancelled.discard(heapq.heappop(timers)[1])
        self.timer = timers[0][0] if timers else None


# requests an application can await, dispatched by type (DESIGN.md principle 4)
_HANDLERS = {Send: HostEngine._op_send, Recv: HostEngine._op_recv, Compute: HostEngine._op_compute,
             PingOp: HostEngine._op_ping, Sleep: HostEngine._op_sleep, NicOpen: HostEngine._op_nic_open,
             NicPost: HostEngine._op_nic_post, NicWait: HostEngine._op_nic_wait}


def host_tables(topology) -> tuple[dict[str, int], list[str]]:
    """Every host's name -> address, and names by address (shared by the hosts of a process)."""
    names = topology.host_names()
    return {n: i for i, n in enumerate(names)}, names


def make_host(node, topology, cache: dict) -> HostEngine:
    shared = cache.get("host_tables")
    if shared is None:
        shared = cache["host_tables"] = host_tables(topology)
    return HostEngine(node.name, node.id, node.spec, topology.routes.get(node.name), shared[0], shared[1])


register_engine("host", make_host, min_delay=lambda spec: spec.nic_delay_ns)

