"""The host: the applications that run on it, their requests and their CPU time (sans-I/O).

Applications are coroutines (``emu.nodes.host.api``); each ``await`` on the host API is a request the
host carries out through a handler table (DESIGN.md principle 4), resuming the coroutine at the
virtual time the request completes. The host owns no port: what goes on the wire goes through its
NIC (``emu.nodes.nic.engine.NicEngine``, the node's engine), which calls back ``deliver`` (a message
arrived) and ``resume`` (an echo reply). Requests of the NIC's mechanisms (offloads, QsNet, ...)
go through the one interface of :mod:`emu.nodes.nic.interface`: ``nic.request(req, now, done)``, which
says what CPU time the request costs and whether it completes at once or later, through ``done``.

Timing (all virtual): ``send`` costs ``send_overhead_ns`` of CPU, after which the NIC takes the
message and the application continues (local completion; ``isend`` the same, and ``wait`` on its
request takes no time: it only hands the buffer back, :mod:`emu.nodes.nic.outgoing`); ``recv`` returns ``recv_overhead_ns``
after the message was there; ``ping`` ends when the reply reached the host.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import emu.native as native
from emu.nodes.nic.interface import PENDING, Message, NicRequest, Op

from .api import Compute, HostAPI, PingOp, Recv, Send, SendRequest, Sleep, TryRecv, Wait
from .noise import Noise, entry_skew_ns

log = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
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
    busy: bool = False
    """Spending CPU time before it continues (a receive's overhead too): no message may match it."""


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


class HostNic(Protocol):
    """What the host uses of its NIC (``emu.nodes.nic.engine.NicEngine``)."""

    name: str
    spec: Any
    host_ids: dict[str, int]
    names: list[str]
    now: int
    loaded: tuple[str, ...]

    def at(self, t: int, fn: Callable, arg: Any) -> int: ...

    def resolve(self, host: str | int) -> int: ...

    def send_message(self, dst: int, tag: int, data: bytes, t: int, vc: int = 0) -> Any: ...

    def ping(self, dst: int) -> int: ...

    def request(self, req: NicRequest, now: int, done: Callable[[Any], None]) -> tuple[int, Any]: ...

    def verb_owner(self, name: str) -> Any: ...

    def verb_names(self) -> list[str]: ...


class Host:
    __slots__ = ("nic", "name", "spec", "host_ids", "names", "_procs", "_inbox", "_pings", "current", "noise", "api")
    # (slots: the compiled core reads them in place, emu/csrc/host.h)

    def __init__(self, nic: HostNic):
        self.nic = nic
        self.name = nic.name
        self.spec = nic.spec
        self.host_ids = nic.host_ids
        self.names = nic.names
        self._procs: list[Proc] = []
        self._inbox: list[Message] = []
        self._pings: dict[int, Proc] = {}
        self.current: Proc | None = None
        """The application being stepped (for ``HostAPI.cpu_ns``)."""
        self.noise = Noise(self.spec, getattr(nic, "seed", 0), getattr(nic, "node_id", 0)) \
            if self.spec.noise != "none" and self.spec.noise_duration_ns > 0 else None
        """The CPU's detours (``host.noise``), or None: work takes exactly its time."""
        self.api = HostAPI(self)

    @property
    def now(self) -> int:
        return self.nic.now

    def resolve(self, host: str | int) -> int:
        return self.nic.resolve(host)

    # -- applications ---------------------------------------------------------------------------
    def start_app(self, key: str, fn: Callable, args: tuple, now: int) -> None:
        coro = fn(self.api, *args)
        if not hasattr(coro, "send"):
            raise TypeError(f"{key}: the application {fn!r} must be an 'async def' function")
        proc = Proc(key, coro, now)
        self._procs.append(proc)
        self.nic.at(now, self.resume, (proc, None))

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
        return out

    def resume(self, arg: tuple[Proc, Any]) -> None:
        proc, value = arg
        if proc.done:
            return
        proc.waiting, proc.busy = None, False
        self.current = proc
        coro = proc.coro
        while True:
            try:
                op = coro.send(value)
            except StopIteration as stop:
                proc.done, proc.result, proc.finished_ns = True, stop.value, self.now
                return
            except Exception as e:
                self._app_failed(proc, e, e.__traceback__.tb_next)  # (from the app's frames: not this one's)
                return
            handler = _HANDLERS.get(type(op))  # (``_dispatch``'s table, without its call)
            try:
                ready, value = handler(self, proc, op) if handler is not None else self._dispatch(proc, op)
            except Exception as e:  # misuse of the API inside the app: fail the app, not the host
                self._op_failed(proc, e)
                return
            if not ready:
                proc.waiting, proc.since_ns = op, self.nic.now
                return

    def _app_failed(self, proc: Proc, e: Exception, tb) -> None:
        """The application raised ``e``: it ends, with the traceback from ``tb`` (its own frames)."""
        proc.done, proc.error, proc.finished_ns = True, "".join(traceback.format_exception(type(e), e, tb)), self.now

    def _op_failed(self, proc: Proc, e: Exception) -> None:
        """A request of the application was refused (``e``): it ends, closed, with that one line."""
        proc.coro.close()
        proc.done, proc.finished_ns = True, self.now
        proc.error = f"{type(e).__name__}: {e}"

    def _dispatch(self, proc: Proc, op: Any) -> tuple[bool, Any]:
        """Carry out one request through the handler table; (True, value) if the app continues at
        once, (False, None) if something resumes it later."""
        handler = _HANDLERS.get(type(op))
        if handler is not None:
            return handler(self, proc, op)
        if isinstance(op, NicRequest):
            return self._op_nic(proc, op)
        raise TypeError(f"an application on {self.name} awaited {op!r}; only the host API "
                        "(send, recv, ping, sleep, compute, and the NIC's verbs) can be awaited in virtual time")

    def cpu_done(self, ns: int) -> int:
        """When ``ns`` of CPU work started now is done: now + ns, later by the detours it meets
        under OS noise (``host.noise``)."""
        return self.now + ns if self.noise is None else self.noise.finish(self.now, ns)

    def cpu_done_at(self, t: int, ns: int) -> int:
        """When ``ns`` of CPU work started at ``t`` is done (a NIC mechanism's host-side writes)."""
        return t + ns if self.noise is None else self.noise.finish(t, ns)

    def entry_skew_ns(self, rank: int) -> int:
        """How late this host, as rank ``rank``, enters a collective (``host.skew``)."""
        return entry_skew_ns(self.spec, getattr(self.nic, "seed", 0), getattr(self.nic, "node_id", 0), rank)

    def _busy(self, proc: Proc, ns: int, value: Any = None, done: int | None = None) -> tuple[bool, Any]:
        """The app spends ``ns`` of host CPU time, then continues with ``value`` (at ``done`` if
        given, else when the work is done, detours included)."""
        if ns == 0:
            return True, value
        proc.cpu_ns += ns
        proc.busy = True
        self.nic.at(self.cpu_done(ns) if done is None else done, self.resume, (proc, value))
        return False, None

    def _op_send(self, proc: Proc, op: Send) -> tuple[bool, Any]:
        o = self.spec.send_overhead_ns
        nic = self.nic
        done = nic.now + o if self.noise is None else self.noise.finish(nic.now, o)  # (cpu_done)
        core = native.CORE  # (a one-frame message in the compiled core: NicEngine.send_message's twin)
        vc = op.vc or self.spec.class_vc  # (a job's class on input-queued routers' VC groups: HostSpec.class_vc)
        out = None if core is not None and core.nic_send(nic, op.dst, op.tag, op.data, done, vc) else \
            nic.send_message(op.dst, op.tag, op.data, done, vc)
        if op.request:
            req = SendRequest(out)
        else:  # send: the buffer is the application's again when it returns
            req = None
            if out is not None:
                out.release()
        if o == 0:  # (_busy: no CPU time, the app goes on)
            return True, req
        return self._busy(proc, o, req, done=done)

    def _op_wait(self, proc: Proc, op: Wait) -> tuple[bool, Any]:
        for r in op.requests:
            r.release()
        return True, None

    def _op_recv(self, proc: Proc, op: Recv) -> tuple[bool, Any]:
        if not self._inbox:  # (most receives: the app waits)
            return False, None
        for i, m in enumerate(self._inbox):
            if op.matches(self.host_ids[m.src], m.tag):
                del self._inbox[i]
                return self._received(proc, m)
        return False, None

    def _op_try_recv(self, proc: Proc, op: TryRecv) -> tuple[bool, Any]:
        for i, m in enumerate(self._inbox):
            if op.matches(self.host_ids[m.src], m.tag):
                del self._inbox[i]
                return self._received(proc, m)
        return True, None  # nothing there: the app goes on at once

    def _op_compute(self, proc: Proc, op: Compute) -> tuple[bool, Any]:
        return self._busy(proc, op.ns)

    def _op_ping(self, proc: Proc, op: PingOp) -> tuple[bool, Any]:
        self._pings[self.nic.ping(op.dst)] = proc
        return False, None

    def _op_sleep(self, proc: Proc, op: Sleep) -> tuple[bool, Any]:
        self.nic.at(self.now + op.ns, self.resume, (proc, None))
        return False, None

    def _op_nic(self, proc: Proc, op: NicRequest) -> tuple[bool, Any]:
        """A request of a NIC mechanism: it costs the CPU time the mechanism says, then the app
        continues with its value, or when the mechanism calls back."""
        cpu, value = self.nic.request(op, self.now, lambda res: self.resume((proc, res)))
        if value is PENDING:
            proc.cpu_ns += cpu
            return False, None
        return self._busy(proc, cpu, value)

    def _received(self, proc: Proc, msg: Message) -> tuple[bool, Any]:
        """A receive matched ``msg`` now: the app continues after the receive overhead."""
        return self._busy(proc, self.spec.recv_overhead_ns, msg)

    def deliver(self, msg: Message) -> None:
        src = self.host_ids.get(msg.src, -1)
        tag = msg.tag
        for proc in self._procs:
            w = proc.waiting
            # (``Recv.matches``, inline: every message received asks it)
            if isinstance(w, Recv) and not proc.busy and (w.src is None or w.src == src) and \
                    (w.tag is None or w.tag == tag):
                ready, value = (True, msg) if self.spec.recv_overhead_ns == 0 else self._received(proc, msg)
                if ready:
                    self.resume((proc, value))
                else:
                    proc.waiting = None
                return
        self._inbox.append(msg)

    def take_ping(self, seq: int) -> Proc | None:
        """The application waiting for echo reply ``seq`` (None: no such ping)."""
        return self._pings.pop(seq, None)


# requests an application can await, dispatched by type (DESIGN.md principle 4)
_HANDLERS = {Send: Host._op_send, Recv: Host._op_recv, TryRecv: Host._op_try_recv, Compute: Host._op_compute,
             PingOp: Host._op_ping, Sleep: Host._op_sleep, Wait: Host._op_wait}
