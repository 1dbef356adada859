"""Conservative synchronisation by global windows (SST-style), and the RPC that reaches domains.

Why it is safe. Every engine promises a minimum delay ``d`` between an event it handles at ``t`` and
the hand-off of any frame that event causes to an output port (the NIC or switch processing delay);
the element checks the promise. A frame so caused arrives at the peer at
``t + d + queueing + serialisation + latency >= t + L``, where ``L``, the lookahead, is the least
``d + latency`` over every link direction (``emu.build.Plan.lookahead_ns``). The
synchroniser computes ``t0``, the global minimum over every domain of the next event time *and* of
the arrival time of every frame still in flight (each sender reports the earliest arrival of what
it sent), and lets every element process all its events in ``[t0, t0 + L)``. Nothing processed in
that window can produce a frame that arrives inside it, so no element can receive, later, a frame
stamped earlier than what it has already processed. Idle stretches cost nothing: ``t0`` jumps to the
next event.

Why nothing is lost. Each domain reports, cumulatively, how many DATA frames it sent to each domain.
Before window ``w`` runs, a domain waits until it has accepted exactly as many frames as were sent
to it (retransmission takes care of datagrams the OS dropped). Hence window ``w`` starts only after
every frame of window ``w - 1`` was received everywhere, and a sender may forget what it sent in
window ``w - 2`` when window ``w`` starts.

Why it is deterministic. Inside a window each element orders its events by (time, port, sequence);
elements do not interact within a window; the window boundaries depend only on virtual times. Wall
clock, scheduling order and CPU load change how long a run takes, never its results.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import logging
import os
import pickle
import struct
import time
from typing import Any, Callable

import trio

from .element import INF
from .errors import EmuError, FrameLossError, leaves

log = logging.getLogger(__name__)


class LocalHandle:
    """A domain in this process: calls go straight to it."""

    def __init__(self, domain):
        self.domain = domain
        self.index = domain.index

    async def call(self, method: str, *args: Any) -> Any:
        return await getattr(self.domain, "rpc_" + method)(*args)

    async def close(self) -> None:
        pass


class MsgStream:
    """Length-prefixed messages over a trio stream on 127.0.0.1. Used only after ``emu.control``'s
    handshake has authenticated the peer: nothing from a stranger is unpickled.

    A message is an 8-byte header -- its kind in the top byte, the payload's length in the others --
    and the payload. Kind 0: a pickle, anything. The synchroniser's two messages of every window,
    sent to and from every worker, go packed instead, as 64-bit integers read by ``struct`` (no
    pickle either way; what is read is what a pickle would have given): kind 1, a window request
    ``("window", (w, t0, t1, expected))``; kind 2, a window's answer ``("ok", (sent_to, next_time,
    max_time))``. Anything else, or integers that do not fit, goes pickled.

    On a socket, messages go out and come in with one non-blocking system call each when they can
    (a window's are a few dozen bytes: they always can, but for the wait for a message that has
    not come): trio's ``send_all`` and ``receive_some`` visit its scheduler up to three times for
    each: with 7 workers the main process's coordination took 1.40 M instructions per window, now
    0.42 M (``scripts/bench_coordination.py``; at 8 processes the main process had been the busiest
    in most windows). Cancellation is still honoured at every call, and every ``CHECKPOINT_EVERY``
    calls let trio's other tasks run."""

    _LEN = struct.Struct("!Q")
    _KIND = 56
    _MASK = (1 << 56) - 1
    _REQ = struct.Struct("<4q")
    CHECKPOINT_EVERY = 64

    def __init__(self, stream: trio.abc.Stream):
        self.stream = stream
        self._buf = bytearray()
        self._sock = getattr(stream, "socket", None)
        """The socket under ``stream`` (a trio socket stream), read and written directly; None
        otherwise. (Its ``fileno()`` is asked at every use: -1 once closed.)"""
        self._quick = 0
        self._busy = False

    @classmethod
    def encode(cls, obj: Any) -> bytes:
        """A message's bytes, header included."""
        try:
            if type(obj) is tuple and len(obj) == 2:
                head, body = obj
                if type(head) is not str:
                    pass
                elif head == "window" and type(body) is tuple and len(body) == 4 and all(type(x) is int for x in body):
                    return cls._LEN.pack(1 << cls._KIND | 32) + cls._REQ.pack(*body)
                elif head == "ok" and type(body) is tuple and len(body) == 3 and type(body[0]) is list:
                    ints = [*body[0], body[1], body[2]]
                    if all(type(x) is int for x in ints):
                        return cls._LEN.pack(2 << cls._KIND | 8 * len(ints)) + struct.pack(f"<{len(ints)}q", *ints)
        except struct.error:  # (an integer beyond 64 bits)
            pass
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > cls._MASK:
            raise EmuError(f"a control message of {len(data):,} bytes: more than a header can say")
        return cls._LEN.pack(len(data)) + data

    def _take(self) -> tuple[bool, Any]:
        """The next whole message in the buffer, taken off it: (True, message), or (False, None)."""
        buf = self._buf
        if len(buf) < 8:
            return False, None
        (head,) = self._LEN.unpack_from(buf)
        kind, n = head >> self._KIND, head & self._MASK
        if len(buf) < 8 + n:
            return False, None
        if kind == 0:
            obj = pickle.loads(buf[8:8 + n])
        elif kind == 1 and n == 32:
            obj = ("window", self._REQ.unpack_from(buf, 8))
        elif kind == 2 and n >= 16 and n % 8 == 0:
            ints = list(struct.unpack_from(f"<{n // 8}q", buf, 8))
            obj = ("ok", (ints[:-2], ints[-2], ints[-1]))
        else:
            raise EmuError(f"a control message of unknown kind {kind} ({n} bytes): the peer is not this emulator")
        del buf[:8 + n]
        return True, obj

    async def _yield_now_and_then(self) -> None:
        self._quick += 1
        if self._quick >= self.CHECKPOINT_EVERY:
            self._quick = 0
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()

    async def send(self, obj: Any) -> None:
        data = self.encode(obj)
        fd = self._sock.fileno() if self._sock is not None and not self._busy else -1
        if fd >= 0:
            try:
                n = os.write(fd, data)
            except OSError:  # (full, or broken: trio's send_all waits, or says how it broke)
                n = 0
            if n == len(data):
                await self._yield_now_and_then()
                return
            data = data[n:]
        self._busy = True  # (no direct write may come between the parts of this one)
        try:
            await self.stream.send_all(data)
        finally:
            self._busy = False

    async def recv(self) -> Any:
        done, obj = self._take()
        if done:
            await self._yield_now_and_then()
            return obj
        while True:
            fd = self._sock.fileno() if self._sock is not None else -1
            chunk = None
            if fd >= 0:
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(fd)
                    continue
                except OSError:
                    chunk = None  # (trio's receive_some says how it broke)
                if chunk is not None:
                    await self._yield_now_and_then()
            if chunk is None:
                chunk = await self.stream.receive_some(1 << 20)
            if not chunk:
                raise EOFError("control connection closed")
            self._buf += chunk
            done, obj = self._take()
            if done:
                return obj

    def ready(self) -> bool:
        """Has (a part of) a message come that ``recv`` has not read? Without waiting."""
        if self._buf:
            return True
        if self._sock is None:
            return False
        import select

        return bool(select.select([self._sock.fileno()], [], [], 0)[0])

    async def aclose(self) -> None:
        await self.stream.aclose()


class RemoteHandle:
    """A domain in a worker process, reached over its control connection."""

    def __init__(self, index: int, chan: MsgStream):
        self.index = index
        self.chan = chan
        self._lock = trio.Lock()
        self.broken: str | None = None
        """Why the control connection can no longer be trusted (a call was cut off mid-way)."""
        self.pid: int | None = None
        """The worker's process id, where it runs on this machine (``emu.watchdog`` watches it)."""
        self.answered = 0
        """Replies read so far: a call left unanswered keeps it still."""

    async def call(self, method: str, *args: Any) -> Any:
        async with self._lock:
            await self._request(method, args)
            status, value = await self._reply(method)
        if status == "err":
            raise value
        return value

    async def request(self, method: str, *args: Any) -> None:
        """Send a call without waiting for its answer (then :meth:`reply`, from the same task):
        the synchroniser's window requests go out before the main process runs its own window."""
        try:  # (free, as it nearly always is: taken without a visit to trio's scheduler)
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            await self._request(method, args)
        except BaseException:
            self._lock.release()
            raise

    async def reply(self, method: str) -> Any:
        try:
            status, value = await self._reply(method)
        finally:
            self._lock.release()
        if status == "err":
            raise value
        return value

    async def _request(self, method: str, args: tuple) -> None:
        if self.broken:
            raise EmuError(f"domain {self.index}: {self.broken}; the cluster cannot go on, start a new one")
        try:
            await self.chan.send((method, args))
        except BaseException as e:
            self._broke(method, e)
            raise

    async def _reply(self, method: str) -> tuple[str, Any]:
        try:
            reply = await self.chan.recv()
        except BaseException as e:
            self._broke(method, e)
            raise
        self.answered += 1
        return reply

    def _broke(self, method: str, e: BaseException) -> None:
        if isinstance(e, (EOFError, trio.BrokenResourceError, trio.ClosedResourceError)):
            self.broken = f"the worker process went away during {method}"
            raise EmuError(f"worker process of domain {self.index} went away during {method}: {e}") from None
        # cancelled (or failed) between request and reply: the reply may still come and would be
        # taken for the answer to the next call
        self.broken = f"a {method} call was interrupted before its reply"

    async def close(self) -> None:
        if not self.broken:
            try:
                with trio.move_on_after(2):
                    await self.chan.send(("stop", ()))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        await self.chan.aclose()  # a worker whose connection closes stops too


class Pacer:
    """Real-time mode: hold each window back until the wall clock has caught up with it.

    ``virtual_ns_per_s`` virtual nanoseconds pass per wall-clock second (1e9: real time; 1e3: a
    microsecond of the model takes a second, slow enough to watch). The same engines run, window by
    window; only *when* a window starts changes, so every figure stays the same. The clock and the
    sleep are injectable so that tests can check the pacing without waiting for it."""

    def __init__(self, virtual_ns_per_s: float, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], Any] = trio.sleep):
        if not virtual_ns_per_s > 0:
            raise ValueError(f"real-time rate must be > 0 virtual ns per second, got {virtual_ns_per_s}")
        self.rate = virtual_ns_per_s
        self.clock = clock
        self.sleep = sleep
        self.origin: tuple[int, float] | None = None

    async def wait_for(self, t_ns: int) -> None:
        if self.origin is None:
            self.origin = (t_ns, self.clock())
        v0, w0 = self.origin
        ahead = w0 + (t_ns - v0) / self.rate - self.clock()
        if ahead > 0:
            await self.sleep(ahead)


class Synchroniser:
    def __init__(self, handles: list, lookahead_ns: int, progress: Callable[[int, int], None] | None = None,
                 pacer: Pacer | None = None):
        if lookahead_ns < 1:
            raise ValueError("lookahead must be >= 1 ns")
        self.handles = handles
        self.lookahead = lookahead_ns
        self.n = len(handles)
        self.sent = [[0] * self.n for _ in range(self.n)]
        self.next_times = [INF] * self.n
        self.window = 0
        self.rounds = 0
        """Windows the synchroniser started (``window`` also counts those the one domain ran after
        one of them, ``Domain._following``)."""
        self.max_time = 0
        self.faults: list[int] = []
        """Times of scheduled link changes not yet reached (a heap): a window starts at the next
        one while anything else is left to do; a run ends without them when nothing is."""
        self.fault_max = 0
        """The latest scheduled change reached: the next run starts no earlier."""
        self.progress = progress
        self.pacer = pacer
        self.broken: str | None = None
        """Set when a window was cut off half-way (cancelled, or an error): the model state is no
        longer consistent, so nothing more may run."""

    def expected(self, d: int) -> int:
        return sum(row[d] for row in self.sent)

    async def run_until_quiet(self) -> None:
        """Run windows until no event is left anywhere and nothing is in flight."""
        if self.broken:
            raise EmuError(f"the cluster cannot run any more: {self.broken}; start a new one")
        freeze_startup()
        with young_collections_batched():
            await self._windows()

    async def _windows(self) -> None:
        handles = self.handles
        last_yield = time.perf_counter()
        # one domain, in this process: its window called straight (no RPC layer, no sums)
        alone = handles[0].domain if self.n == 1 and isinstance(handles[0], LocalHandle) else None
        look = self.window + 0x100  # (the progress and a checkpoint every 256 windows, merged ones counted)
        while True:
            t0 = window_start(self.next_times, self.faults, self.max_time)
            if t0 >= INF:
                return
            t1 = t0 + self.lookahead
            if self.pacer is not None:
                await self.pacer.wait_for(t0)
            self.window = w = self.window + 1
            self.rounds += 1
            try:
                if alone is not None:  # (windows of one element alone after it, without a round each)
                    stretch = self.lookahead if self.pacer is None and not self.faults else 0
                    reports = [await alone.window(w, t0, t1, self.sent[0][0], stretch)]
                    self.window = w = w + alone.merged
                elif self.n == 1:
                    reports = [await handles[0].call("window", w, t0, t1, self.expected(0))]
                else:
                    reports = await self._window_everywhere(w, t0, t1)
            except BaseException as e:
                self.broken = f"window {w} was interrupted ({type(e).__name__})"
                loss = find_exception(e, FrameLossError)
                if loss is None:
                    raise
                await self._diagnose_loss(loss)
                raise loss from None
            for d, (sent_to, nt, mt) in enumerate(reports):
                self.sent[d] = sent_to
                self.next_times[d] = nt
                if mt > self.max_time:
                    self.max_time = mt
            if self.faults and self.faults[0] <= t0:
                self.fault_max = max(self.fault_max, faults_reached(self.faults, t0 + 1))
            if w >= look:
                look = w + 0x100
                now = time.perf_counter()
                if now - last_yield > 0.05:
                    last_yield = now
                    if self.progress is not None:
                        self.progress(w, t0)
                await trio.lowlevel.checkpoint()

    async def _window_everywhere(self, w: int, t0: int, t1: int) -> list:
        """Every worker is asked first, then this process runs its own window, then the answers are
        read: the processes work at once. (Tasks in a nursery would not ensure it: trio may run the
        local window, which need not yield, before the requests go out.)"""
        reports: list = [None] * self.n
        remote = [h for h in self.handles if not isinstance(h, LocalHandle)]
        expected = [sum(col) for col in zip(*self.sent)]  # (every domain's ``expected`` in one pass)
        for h in remote:
            await h.request("window", w, t0, t1, expected[h.index])
        errors: list[BaseException] = []
        for h in self.handles:
            if isinstance(h, LocalHandle):
                try:
                    reports[h.index] = await h.call("window", w, t0, t1, expected[h.index])
                except Exception as e:  # the workers' answers are read all the same
                    errors.append(e)
        for h in remote:
            try:
                reports[h.index] = await h.reply("window")
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0] if len(errors) == 1 else BaseExceptionGroup("window failed", errors)
        return reports

    async def _diagnose_loss(self, err: FrameLossError) -> None:
        """Name the links whose frames were lost: compare senders' and receivers' sequence numbers."""
        outs: dict[int, tuple[str, int]] = {}
        ins: dict[int, tuple[str, int]] = {}
        for h in self.handles:
            try:
                seqs = await h.call("link_seqs")
            except Exception:  # a domain that cannot answer does not hide the others' answers
                continue
            outs.update(seqs["out"])
            ins.update(seqs["in"])
        bad = [f"{name} (sent up to seq {outs[l][1]}, delivered up to {seq})"
               for l, (name, seq) in sorted(ins.items()) if l in outs and outs[l][1] != seq]
        if bad:
            err.args = (f"{err.args[0]}; frames lost on link(s): " + ", ".join(bad[:10]),)


_frozen = False
_until_run = False


def freeze_until_run() -> None:
    """A program's start-up (``emu run``, as it starts): what is there now (the interpreter's and the
    emulator's modules, most of the heap) is left out of the cyclic collector's passes; the first
    run's ``freeze_startup`` then freezes what was made since (the cluster) with it. The start-up makes
    objects by the hundred thousand (the topology, the plan, the elements), and each full collection
    they set off traversed the modules too (fattree:k=4,n=4: its elements 0.22 -> 0.08 CPU s).
    Workers forked after it inherit it (and copy fewer of the parent's pages: a collection writes to
    every object it traverses). Nothing when objects were frozen already. Nothing in the model
    depends on it."""
    global _until_run
    if not _frozen and not _until_run and not gc.get_freeze_count():
        gc.freeze()
        _until_run = True


def freeze_startup() -> None:
    """Once per process, before its first run: what exists then (the interpreter's modules -- scapy,
    numpy, the emulator --, the first cluster) collected once and left out of the cyclic
    collector's later passes (``gc.freeze``), so that a full collection during a run traverses what
    runs made, not the whole heap. Frozen objects are still freed when nothing refers to them; only
    a reference cycle among them that dies later stays (once, bounded). Nothing is done when the
    program froze objects itself. Nothing in the model depends on it.

    After ``freeze_until_run`` (``emu run``) the start-up's freeze stays, and what was made since --
    the topology, the plan, the elements, nearly all of it living as long as the cluster -- is
    frozen with it without a pass, as a worker process freezes what it built: a full pass over
    everything, the modules again included, took the main process 0.04-0.11 CPU s at the start of
    the run's first window while every worker waited (fattree:k=4,n=4; it found a few hundred
    objects of garbage, which now stay, once)."""
    global _frozen, _until_run
    if _until_run:
        _until_run = False
        _frozen = True
        gc.freeze()
        return
    if _frozen or gc.get_freeze_count():
        return
    _frozen = True
    gc.collect()
    gc.freeze()


RUN_GEN0 = 10_000
"""The cyclic collector's first-generation threshold while a run goes (CPython's default: 700)."""


def run_thresholds() -> tuple[int, ...]:
    """The collector's thresholds for running windows: the youngest generation's at least
    ``RUN_GEN0``, the others as they are."""
    now = gc.get_threshold()
    return (max(now[0], RUN_GEN0), *now[1:])


@contextlib.contextmanager
def young_collections_batched():
    """While a run goes, the youngest generation is collected every ``RUN_GEN0`` new objects rather
    than every 700: a run makes and drops frames, records and messages by the hundred thousand, and
    each young collection promotes survivors that full collections then traverse (the 256-host
    allreduce: collector time 0.19-0.36 s -> 0.10-0.17 s). The thresholds the run found are put back
    after it -- unless the program changed them meanwhile. Nothing in the model depends on it."""
    before = gc.get_threshold()
    during = run_thresholds()
    gc.set_threshold(*during)
    try:
        yield
    finally:
        if gc.get_threshold() == during:
            gc.set_threshold(*before)


def window_start(next_times: list[int], faults: list[int], max_time: int) -> int:
    """Where the next window starts: at the earliest event anywhere, a scheduled link change
    included -- while the change falls within the run: before some event still to come, or at or
    before the latest one processed (``max_time``). INF: the run is over; later changes wait for
    the next run, so where its windows happen to fall never decides whether a change is reached."""
    t = min(next_times)
    if faults and faults[0] < t and (t < INF or faults[0] <= max_time):
        return faults[0]
    return t


def faults_reached(faults: list[int], t1: int) -> int:
    """Take the scheduled changes before ``t1`` off the heap ``faults``; returns the latest."""
    last = 0
    while faults and faults[0] < t1:
        last = heapq.heappop(faults)
    return last


def find_exception(e: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first ``kind`` in ``e`` or, if ``e`` is an exception group, among its leaves."""
    return next((x for x in leaves(e) if isinstance(x, kind)), None)


async def call_everywhere(handles: list, method: str, args_of: Callable[[int], tuple] = lambda d: ()) -> list:
    """``method`` of every domain in ``handles`` (the ``d``-th with ``args_of(d)``) at once, as the
    synchroniser's windows go: every worker is asked first, then this process answers its own, then
    the workers' answers are read (one call after another, a worker's work would wait for the
    others': with N processes the calls that start a run took N - 1 times a worker's part). The
    answers in the order of ``handles``; an error is raised once every answer is in."""
    answers: list = [None] * len(handles)
    errors: list[BaseException] = []
    remote = [(d, h) for d, h in enumerate(handles) if not isinstance(h, LocalHandle)]
    for d, h in remote:
        await h.request(method, *args_of(d))
    for d, h in enumerate(handles):
        if isinstance(h, LocalHandle):
            try:
                answers[d] = await h.call(method, *args_of(d))
            except Exception as e:  # the workers' answers are read all the same
                errors.append(e)
    for d, h in remote:
        try:
            answers[d] = await h.reply(method)
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0] if len(errors) == 1 else BaseExceptionGroup(f"{method} failed", errors)
    return answers
