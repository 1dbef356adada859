"""The host: the applications that run on it, their requests and their CPU time (sans-I/O).

Applications are coroutines (``nodes.host.api``); each ``await`` on the host API is a request the
host carries out through a handler table (DESIGN.md principle 4), resuming the coroutine at the
virtual time the request completes. The host owns no port: what goes on the wire goes through its
NIC (``nodes.nic.engine.NicEngine``, the node's engine), which calls back ``deliver`` (a message
arrived), ``resume`` (an echo reply) and ``completion`` (the offload unit wrote to host memory).

Timing (all virtual): ``send`` costs ``send_overhead_ns`` of CPU, after which the NIC takes the
message and the application continues (local completion); ``recv`` returns ``recv_overhead_ns``
after the message was there; ``ping`` ends when the reply reached the host.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from emu.wire.coll import ErrBit
from nodes.nic.coll import Completion

from .api import (BarrierEnter, Compute, HostAPI, IncReq, Message, NcRun, NicOpen, NicPost, NicWait, Op, PingOp, QsOpReq,
                  Recv, Send, Sleep, WaitArrivals, WaitWord)

if TYPE_CHECKING:
    from nodes.nic.engine import NicEngine

log = logging.getLogger(__name__)


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


class Host:
    def __init__(self, nic: "NicEngine"):
        self.nic = nic
        self.name = nic.name
        self.spec = nic.spec
        self.host_ids = nic.host_ids
        self.names = nic.names
        self._procs: list[Proc] = []
        self._inbox: list[Message] = []
        self._pings: dict[int, Proc] = {}
        self._nic_done: dict[tuple[int, int], list[Completion]] = {}
        self._nic_waiters: dict[tuple[int, int], tuple[Proc, NicWait, int]] = {}
        self.current: Proc | None = None
        """The application being stepped (for ``HostAPI.cpu_ns``)."""
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
        self._nic_waiters = {}
        return out

    def resume(self, arg: tuple[Proc, Any]) -> None:
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
        self.nic.at(self.now + ns, self.resume, (proc, value))
        return False, None

    def _op_send(self, proc: Proc, op: Send) -> tuple[bool, Any]:
        o = self.spec.send_overhead_ns
        self.nic.send_message(op.dst, op.tag, op.data, self.now + o)
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
        self._pings[self.nic.ping(op.dst)] = proc
        return False, None

    def _op_sleep(self, proc: Proc, op: Sleep) -> tuple[bool, Any]:
        self.nic.at(self.now + op.ns, self.resume, (proc, None))
        return False, None

    def _op_nic_open(self, proc: Proc, op: NicOpen) -> tuple[bool, Any]:
        self.nic.coll.open_vp(op.vp)
        return True, None

    def _op_nic_post(self, proc: Proc, op: NicPost) -> tuple[bool, Any]:
        cost = self.spec.nic.post_ns * len(op.posted)
        self.nic.coll.post(op.vp, op.posted, self.now + cost)
        return self._busy(proc, cost)

    def _op_nic_wait(self, proc: Proc, op: NicWait) -> tuple[bool, Any]:
        key = (op.vp, op.region)
        done = self._nic_done.get(key, [])
        if len(done) >= op.count:
            self._nic_done[key] = done[op.count:]
            return True, done[:op.count]
        tid = self.nic.at(self.now + op.timeout_ns, self._nic_timeout, (proc, op))
        self._nic_waiters[key] = (proc, op, tid)
        return False, None

    def _op_qs(self, proc: Proc, op: QsOpReq) -> tuple[bool, Any]:
        from emu.wire.qsnet import QsOp

        qs = self.nic.qs
        t = self.now + qs.spec.issue_ns
        proc.cpu_ns += qs.spec.issue_ns
        done = lambda res: self.resume((proc, res))  # noqa: E731
        if op.kind == "put":
            qs.put(op.rank, op.a, op.b, op.n, t, done)
        elif op.kind == "get":
            qs.get(op.rank, op.a, op.b, op.n, t, done)
        elif op.kind == "bcast":
            qs.bcast(op.rank, op.m, op.a, op.b, op.n, t, done)
        else:
            qs.atomic(QsOp.FADD if op.kind == "fadd" else QsOp.COND, op.rank, op.a, op.b, t, done)
        return False, None

    def _op_wait_arrivals(self, proc: Proc, op: WaitArrivals) -> tuple[bool, Any]:
        qs = self.nic.qs
        if len(qs.arrivals) >= op.count:
            got, qs.arrivals[:] = qs.arrivals[:op.count], qs.arrivals[op.count:]
            return True, got
        state = {"done": False, "timer": None}

        def check(_a=None) -> None:
            if not state["done"] and len(qs.arrivals) >= op.count:
                state["done"] = True
                qs.on_arrival = None
                self.nic.timers.cancel(state["timer"])
                got, qs.arrivals[:] = qs.arrivals[:op.count], qs.arrivals[op.count:]
                self.resume((proc, got))

        def timeout(_a) -> None:
            if not state["done"]:
                state["done"] = True
                qs.on_arrival = None
                got, qs.arrivals[:] = list(qs.arrivals), []
                self.resume((proc, got))

        qs.on_arrival = check
        state["timer"] = self.nic.at(self.now + op.timeout_ns, timeout, None)
        return False, None

    def _op_barrier_enter(self, proc: Proc, op: BarrierEnter) -> tuple[bool, Any]:
        qs = self.nic.qs
        cost = qs.spec.issue_ns
        qs.barriers.enter(op.spec, op.seq, op.data, self.now + cost)
        return self._busy(proc, cost)

    def _op_wait_word(self, proc: Proc, op: WaitWord) -> tuple[bool, Any]:
        qs = self.nic.qs
        state: dict[str, Any] = {"timer": None, "w": None}

        def woken(why: str | None) -> None:
            if state["timer"] is not None:
                self.nic.timers.cancel(state["timer"])
            self.nic.at(self.now, self.resume, (proc, why))

        def timeout(_a) -> None:
            qs.unwatch(state["w"])
            self.resume((proc, f"word {op.addr:#x} still {qs.mem.read_u64(op.addr)} < {op.at_least} after "
                               f"{op.timeout_ns} ns"))

        state["w"] = qs.watch(op.addr, op.at_least, woken)
        if state["w"] in qs.watchers:
            state["timer"] = self.nic.at(self.now + op.timeout_ns, timeout, None)
        return False, None

    def _op_inc(self, proc: Proc, op: IncReq) -> tuple[bool, Any]:
        inc = self.nic.inc
        cost = self.spec.elan.issue_ns
        proc.cpu_ns += cost
        done = lambda res: self.resume((proc, res))  # noqa: E731
        if op.kind == "request":
            *args, algo, span = op.args
            inc.request(*args, self.now + cost, done, algo, span)
        elif op.kind == "release":
            inc.release(op.args[0], self.now + cost, done)
        elif op.kind == "sparse":
            grant, index, values, length, span, rank, timeout_ns = op.args
            inc.allreduce_sparse(grant, index, values, length, span, rank, self.now + cost, done, timeout_ns=timeout_ns)
        else:
            grant, x, rank, timeout_ns = op.args
            inc.allreduce(grant, x, rank, self.now + cost, done, timeout_ns=timeout_ns)
        return False, None

    def _op_nc(self, proc: Proc, op: NcRun) -> tuple[bool, Any]:
        self.nic.nc.start(op.plan, op.data, self.now, lambda res: self.resume((proc, res)))
        return False, None

    def _received(self, proc: Proc, msg: Message) -> tuple[bool, Any]:
        """A receive matched ``msg`` now: the app continues after the receive overhead."""
        return self._busy(proc, self.spec.recv_overhead_ns, msg)

    def deliver(self, msg: Message) -> None:
        src = self.host_ids.get(msg.src, -1)
        for proc in self._procs:
            if isinstance(proc.waiting, Recv) and proc.waiting.matches(src, msg.tag):
                ready, value = self._received(proc, msg)
                if ready:
                    self.resume((proc, value))
                else:
                    proc.waiting = None
                return
        self._inbox.append(msg)

    def completion(self, c: Completion) -> None:
        """The NIC wrote a completion to host memory."""
        key = (c.vp, c.region)
        done = self._nic_done.setdefault(key, [])
        done.append(c)
        w = self._nic_waiters.get(key)
        if w is not None and len(done) >= w[1].count:
            proc, op, tid = self._nic_waiters.pop(key)
            self.nic.timers.cancel(tid)
            self._nic_done[key] = done[op.count:]
            self.resume((proc, done[:op.count]))

    def _nic_timeout(self, arg) -> None:
        proc, op = arg
        key = (op.vp, op.region)
        w = self._nic_waiters.get(key)
        if w is None or w[0] is not proc:
            return
        del self._nic_waiters[key]
        self.nic.coll.abort(op.vp, op.region)
        done = self._nic_done.pop(key, [])
        done.append(Completion(op.region, -1, ErrBit.TIMEOUT, None, None, self.now, op.vp))
        self.resume((proc, done))

    def take_ping(self, seq: int) -> Proc | None:
        """The application waiting for echo reply ``seq`` (None: no such ping)."""
        return self._pings.pop(seq, None)


# requests an application can await, dispatched by type (DESIGN.md principle 4)
_HANDLERS = {Send: Host._op_send, Recv: Host._op_recv, Compute: Host._op_compute,
             PingOp: Host._op_ping, Sleep: Host._op_sleep, NicOpen: Host._op_nic_open,
             NicPost: Host._op_nic_post, NicWait: Host._op_nic_wait, QsOpReq: Host._op_qs,
             WaitArrivals: Host._op_wait_arrivals, BarrierEnter: Host._op_barrier_enter,
             WaitWord: Host._op_wait_word, IncReq: Host._op_inc,
             NcRun: Host._op_nc}
