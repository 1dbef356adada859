"""A domain: the elements that live in one OS process, and its side of the window protocol.

The synchroniser (:mod:`emu.sync`) sends each domain ``window(w, t0, t1, expected)``; the domain

1. waits until it has received exactly ``expected`` DATA frames *of earlier windows* (everything any
   element anywhere sent to it before this window; frames another process already sent in this
   window may be here too, and are told apart by the window number every record carries) -- draining its own sockets directly for frames sent inside the process,
   letting the element tasks read the others, and asking senders to retransmit if a datagram went
   missing;
2. runs every element that has an event before ``t1``;
3. reports what it sent to each domain, the earliest virtual time at which anything can happen next
   here (including the arrival of frames it just sent), and the latest event time it processed.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque

import trio

from . import native
from .config import RunConfig, is_loopback
from .domain_control import DomainControl
from .element import INF, Element
from .errors import FrameLossError

log = logging.getLogger(__name__)
STRETCH_MAX = 64
"""Windows run after a window without a round of the synchroniser (``Domain._following``), at most
(then the synchroniser's loop gets its turn: its checkpoints, its progress)."""


class Domain(DomainControl):
    __slots__ = ("index", "received", "_by_window", "sent_to", "_idx", "_at", "_heap", "max_time", "_local_rx",
                 "by_name", "batch")
    """The counts the compiled core keeps in place (their offsets, read at ``domain_setup``); the
    rest live in the instance's ``__dict__`` (DomainControl gives it one)."""

    def __init__(self, index: int, n_domains: int, run: RunConfig):
        self.index = index
        self.n_domains = n_domains
        self.run = run
        self.elements: list[Element] = []
        self.by_name: dict[str, Element] = {}
        self._idx: dict[Element, int] = {}
        self.received = 0
        """DATA frames accepted by this domain's elements since the start."""
        self._by_window: dict[int, int] = {}
        """Accepted frames per sending window (mod 2**16), for the windows still being counted."""
        self.sent_to = [0] * n_domains
        """DATA frames this domain's elements sent to each domain since the start."""
        self._local_rx: dict[Element, None] = {}
        """Elements of this domain sent frames by their own sockets (no batch), to read at ``_collect``."""
        self._heap: list[tuple[int, int]] = []
        self._at: list[int] = []
        """Per element: a time at or after which it has an entry in ``_heap`` (INF: none known), so
        that a burst of frames handed to it makes one entry, not one per batch."""
        self._wake = trio.Event()
        self.batch = None
        """The process's shared socket (``emu.batch.Batch``; ``emu.build`` makes it), or None: a socket per element."""
        self._history: deque[tuple[int, list[Element]]] = deque()
        self.max_time = 0
        self._runs: list[str] = []
        """Run files of recorded frames spilled to disk (sorted), oldest first."""
        self._spill_dir: str | None = None
        self.tracer = None
        """This process's ``emu.trace.Tracer`` when the run is traced (``emu.trace.attach``)."""
        self.cpu = {"window_s": 0.0, "drain_s": 0.0}
        """CPU seconds this process spent running windows and reading datagrams outside them (a cost
        figure for ``Cluster.cpu_times``: where a run over several processes spends its time)."""
        self.cpu_counting = False
        """``cpu`` counted: from the first ``rpc_cpu`` on (reading the process's CPU clock is a system
        call, two per window, a tenth of a small message's cost where system calls are dear)."""
        self.cpu_marks: list[float] | None = None
        """While recorded (``rpc_cpu_marks``): this process's CPU seconds at the start of each window."""
        self._with_links: set[Element] = set()
        """Elements that hold scheduled link changes (``rpc_schedule``)."""
        self.merged = 0
        """Windows the last ``window`` call ran after the one asked for (its ``stretch``)."""
        self._idle = (-1, INF)
        """(frames accepted, next activity) after the last window: a window in which nothing ran
        here and nothing came changes neither (an idle domain holding a far-off change need not
        look past it again). Reset by every call that changes the elements."""

    def add(self, el: Element) -> None:
        self._idx[el] = len(self.elements)
        self.elements.append(el)
        self._at.append(INF)
        self.by_name[el.name] = el
        if el.engine.timer is not None:  # an engine with work of its own from the start (link bring-up)
            self.schedule(el)

    # -- sockets --------------------------------------------------------------------------------
    async def serve_sockets(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Read every element's socket until cancelled; reports {element: socket address} once
        reading. One task for the whole domain (an epoll set of the sockets, where there is epoll):
        a wake-up drains every socket that has datagrams, not one task per element per datagram.
        The sockets close with it, also on error or cancellation."""
        import select

        if self.batch is not None:  # one socket for every element here
            try:
                task_status.started({el.name: el.addr for el in self.elements})
                await self.batch.serve(self.cpu)
            finally:
                self.batch.close()
            return
        if not hasattr(select, "epoll"):  # not Linux: a task per element
            async with trio.open_nursery() as nursery:
                addrs = {el.name: await nursery.start(el.serve) for el in self.elements}
                task_status.started(addrs)
            return
        by_fd = {el.sock.fileno(): el for el in self.elements}
        ep = select.epoll()
        try:
            for fd in by_fd:
                ep.register(fd, select.EPOLLIN)
            task_status.started({el.name: el.addr for el in self.elements})
            while True:
                await trio.lowlevel.wait_readable(ep)
                accepted = 0
                c0 = time.process_time()
                for fd, _ in ep.poll(0):
                    accepted += by_fd[fd].drain()
                self.cpu["drain_s"] += time.process_time() - c0
                if accepted:
                    self.wake()
        finally:
            ep.close()
            for el in self.elements:
                el.sock.close()

    def close_sockets(self) -> None:
        """Close the process's batch socket and every element's own (a build that failed)."""
        if self.batch is not None:
            self.batch.close()
        for el in self.elements:
            el.sock.close()

    # -- callbacks from elements ----------------------------------------------------------------
    def frames_sent(self, peer_domain: int, n: int, peer: str) -> None:
        self.sent_to[peer_domain] += n
        if self.batch is None and peer_domain == self.index:  # (with a batch, _collect reads its socket instead)
            self._local_rx[self.by_name[peer]] = None

    def frames_arrived(self, el: Element, n: int, first_ts: int, window: int) -> None:
        # an entry no later than the new frames suffices: the element's other events have theirs
        self.received += n
        self._by_window[window] = self._by_window.get(window, 0) + n
        i = self._idx[el]
        if first_ts < self._at[i]:
            self._at[i] = first_ts
            heapq.heappush(self._heap, (first_ts, i))

    def frames_local(self, el: Element, n: int, first_ts: int, window: int) -> None:
        """``n`` frames handed straight to ``el`` of this domain (no socket): sent and arrived."""
        self.sent_to[self.index] += n
        self.frames_arrived(el, n, first_ts, window)

    def wake(self) -> None:
        self._wake.set()

    def schedule(self, el: Element) -> None:
        t = el.next_time()
        i = self._idx[el]
        if t < self._at[i]:
            self._at[i] = t
            heapq.heappush(self._heap, (t, i))

    # -- the window -----------------------------------------------------------------------------
    def next_time(self) -> int:
        heap = self._heap
        while heap:
            t, i = heap[0]
            actual = self.elements[i].next_time()
            if actual == t:
                return t
            if actual < INF:
                heapq.heapreplace(heap, (actual, i))
                self._at[i] = actual
            else:
                heapq.heappop(heap)
                self._at[i] = INF  # (another entry of it may remain: harmless, it is checked like this one)
        return INF

    def next_activity(self) -> int:
        """The next event here other than a scheduled link change (INF: none). The synchroniser
        ends a run when no domain has one; changes scheduled later wait for the next run."""
        nt = self.next_time()
        if nt >= INF or not self._with_links:
            return nt
        for el in [el for el in self._with_links if not el.link_events]:
            self._with_links.discard(el)
        if not self._with_links or nt < min(el.link_events[0][0] for el in self._with_links):
            return nt
        return min(el.next_activity() for el in self.elements)  # the earliest event is a link change: look past it

    def _received_before(self, w: int) -> int:
        """Frames accepted that were sent in windows before ``w`` (another domain may already be
        sending in ``w``; nothing of ``w + 1`` can exist yet, since that needs our report of ``w``)."""
        return self.received - self._by_window.get(w & 0xFFFF, 0)

    async def window(self, w: int, t0: int, t1: int, expected: int, stretch: int = 0) -> tuple[list[int], int, int]:
        if not self.cpu_counting and self.cpu_marks is None:
            return await self._window(w, t0, t1, expected, stretch)
        c0 = time.process_time()
        if self.cpu_marks is not None:
            self.cpu_marks.append(c0)
        try:
            return await self._window(w, t0, t1, expected, 0)
        finally:
            self.cpu["window_s"] += time.process_time() - c0

    async def _window(self, w: int, t0: int, t1: int, expected: int, stretch: int = 0) -> tuple[list[int], int, int]:
        """Window ``w``; with ``stretch`` (the lookahead: the synchroniser's one domain, no scheduled
        link change, no pacing), the windows after it too (``_following``): they run here, numbered
        ``w + 1``, ... and placed as the synchroniser would place them, without a round each
        (``merged`` says how many)."""
        self.merged = 0
        if self._received_before(w) < expected:
            await self._collect(expected, w)
        self._check_count(w, expected)
        if len(self._by_window) > 1 or (self._by_window and w & 0xFFFF not in self._by_window):
            for old in [k for k in self._by_window if k != w & 0xFFFF]:
                del self._by_window[old]  # counted in `received`; no longer needed apart
        hist = self._history
        if hist and hist[0][0] <= w - 2:
            self._forget(w)
        batch = self.batch
        if batch is not None:
            batch.holding = True  # what the elements send now leaves as one datagram per destination
        sent: list[Element] = []
        first_arrival, active = await self._run(w, t0, t1, sent)
        ran = [active]  # (each run's elements: the windows' own and those of the stretch)
        if sent:
            hist.append((w, sent))
        if stretch and not self._with_links:
            # (a lone domain's links all in memory, as emu.build makes them with run.direct: none retains)
            retains = not self.run.direct or bool(self.run.socket_drop_rate)
            while self.merged < STRETCH_MAX:
                t = self._following_now(w + self.merged + 1, first_arrival)  # (no await unless one is needed)
                if t is None:
                    t = await self._following(w + self.merged + 1, first_arrival)
                if t >= INF:
                    break
                self.merged += 1
                if retains and hist and hist[0][0] <= w + self.merged - 2:  # (as the window's own round would)
                    self._forget(w + self.merged)
                sent = []
                first_arrival, more = await self._run(w + self.merged, t, t + stretch, sent)
                if sent:
                    hist.append((w + self.merged, sent))
                ran.append(more)
        if batch is not None:
            batch.flush()
            if batch.unsent:
                await batch.flush_unsent()
        if self.run.capture and any(el.capture for els in ran for el in els) and \
                sum(len(el.capture) for el in self.elements) > self.run.capture_spill_records:
            self._spill()
        if any(ran) or self.received != self._idle[0]:
            nt = self.next_activity()
            self._idle = (self.received, nt)
        else:
            nt = self._idle[1]
        return self.sent_to[:], (first_arrival if first_arrival < nt else nt), self.max_time

    def _forget(self, w: int) -> None:
        """At the start of window ``w``, every frame of this domain's ``received`` collected: what
        was sent two windows ago has been received everywhere (see emu.sync), so the links let its
        retained datagrams go (their buffers into the compiled core's pool, for the next ones)."""
        hist = self._history
        core = native.CORE
        while hist and hist[0][0] <= w - 2:
            old_w, els = hist.popleft()
            if core is not None:
                core.forget_elements(els, old_w)
            else:
                for el in els:
                    el.forget(old_w)

    async def _run(self, w: int, t0: int, t1: int, sent: list) -> tuple[int, list | dict]:
        """Run every element with an event before ``t1`` (window ``w`` from ``t0``): the earliest
        arrival of the frames they sent, and the elements that ran, each once (those that sent, in
        ``sent``). The compiled core's path is the twin of the pure-Python one below it (the
        specification): ``core.due`` its first loop, ``core.window`` its second."""
        heap = self._heap
        at = self._at
        core = native.CORE
        first_arrival = INF
        if core is not None and type(self) is Domain:  # the loops below in the compiled core
            act, k = core.due(heap, t1, at, self.elements), 0  # (the first loop below, its list)
            while True:  # (a static-table switch's window runs whole there)
                k, fa = core.window(self, act, k, t1, w, t0 + 1, sent)
                if fa < first_arrival:
                    first_arrival = fa
                if k >= len(act):
                    break
                await act[k].flush_unsent()  # (its datagrams waited for room in the socket)
                self.schedule(act[k])
                k += 1
            return first_arrival, act
        elements = self.elements
        active: dict[Element, None] = {}
        pop = heapq.heappop if core is None else core.heappop  # (the same heap, compared on its ints)
        while heap and heap[0][0] < t1:
            i = pop(heap)[1]
            at[i] = INF
            active[elements[i]] = None
        for el in active:
            fa = el.run_window(t1, w, t0 + 1)  # link changes only at the window start
            if fa < first_arrival:
                first_arrival = fa
            if fa < INF:
                sent.append(el)
            last = el.active_ns if el.active_ns > el.lost_until else el.lost_until
            if last > self.max_time:
                self.max_time = last
            if el.unsent:
                await el.flush_unsent()
            t = el.next_time()
            i = self._idx[el]
            if t < at[i]:
                at[i] = t
                heapq.heappush(heap, (t, i))
        return first_arrival, active

    def _check_count(self, w: int, expected: int) -> None:
        got = self._received_before(w)
        if got != expected:
            raise FrameLossError(f"domain {self.index}: {got} frames of windows before {w} accepted, but "
                                 f"{expected} were sent (a frame was counted twice: a bug)")

    def _following_now(self, w: int, first_arrival: int) -> int | None:
        """``_following`` where it need not wait (nothing waits for room in the socket, every frame
        this domain sent itself collected already): its answer; None: ``_following`` is to run (it
        does again what this did, which it may: the heap's head and a flushed batch stay as they are)."""
        nt = self.next_time()
        t = first_arrival if first_arrival < nt else nt
        if t >= INF:
            return INF
        batch = self.batch
        if batch is not None:
            if batch.pending:
                batch.flush()
            if batch.unsent:
                return None
        expected = self.sent_to[self.index]
        if self.received - self._by_window.get(w & 0xFFFF, 0) != expected:  # (_received_before(w))
            if self._received_before(w) < expected:
                return None
            self._check_count(w, expected)
        if batch is not None:
            batch.holding = True
        return t

    async def _following(self, w: int, first_arrival: int) -> int:
        """Where window ``w`` starts (INF: nowhere, the run is over), after window ``w - 1`` whose
        frames arrive from ``first_arrival`` on: what the synchroniser's next round would do with
        this one domain, done here without the round -- the start is the earlier of that arrival
        and the next event here (the report ``_window`` would make), then the frames sent so far
        leave (one datagram per destination) and are collected as the next round would collect
        them (``expected``: every frame this domain sent itself)."""
        nt = self.next_time()
        t = first_arrival if first_arrival < nt else nt
        if t >= INF:
            return INF
        batch = self.batch
        if batch is not None:
            if batch.pending:
                batch.flush()
            else:
                batch.holding = False  # (a recovery's requests to retransmit, and the answers, go at once)
            if batch.unsent:
                await batch.flush_unsent()
        expected = self.sent_to[self.index]
        if self.received - self._by_window.get(w & 0xFFFF, 0) != expected:  # (_received_before(w))
            if self._received_before(w) < expected:
                await self._collect(expected, w)
            self._check_count(w, expected)
        if batch is not None:
            batch.holding = True
        return t

    async def _collect(self, expected: int, w: int) -> None:
        if self.batch is not None:
            if self.n_domains == 1:  # what it sent itself is all there is
                self.batch.drain_own()
            else:
                self.batch.drain()
        else:
            for el in self._local_rx:
                el.drain()
        self._local_rx.clear()
        if self._received_before(w) >= expected:  # (nearly always: all there)
            return
        rounds = 0
        # fast retransmit: every datagram of earlier windows was sent before this window was asked
        # for, and on loopback sendto delivers at once, so a shortfall that lasts recovery_first_s
        # is a loss; the wait doubles, up to stall_timeout_s, while nothing comes. Off loopback
        # (machines of an MPI job) datagrams may still be on their way: the full wait from the start.
        loopback = not self.elements or is_loopback(self.elements[0].addr[0])
        first = min(self.run.recovery_first_s if loopback else self.run.stall_timeout_s, self.run.stall_timeout_s)
        wait = first
        while self._received_before(w) < expected:
            before = self._received_before(w)
            self._wake = trio.Event()
            with trio.move_on_after(wait):
                await self._wake.wait()
            if self._received_before(w) > before:
                rounds = 0
                wait = first
                continue
            rounds += 1
            wait = min(2 * wait, self.run.stall_timeout_s)
            if rounds > self.run.max_recovery_rounds:
                raise FrameLossError(f"domain {self.index}: {expected - self._received_before(w)} frame(s) never arrived "
                                     f"after {rounds - 1} recovery rounds")
            log.info("domain %d: waiting for %d frame(s); recovery round %d: asking senders to retransmit",
                     self.index, expected - self._received_before(w), rounds)
            if self.batch is not None:
                self.batch.drain()
            for el in self.elements:
                if self.batch is None:
                    el.drain()
                for inp in el.in_ports:
                    el.send_nack(inp)

    # -- control (called by the synchroniser, locally or over the worker's RPC) ----------------
    async def rpc_window(self, w: int, t0: int, t1: int, expected: int):
        return await self.window(w, t0, t1, expected)


if native.CORE is not None:  # the compiled core keeps a Domain's frame counts inline, in place (frames_local)
    try:
        native.CORE.domain_setup(Domain)
    except (TypeError, AttributeError) as e:
        native.disable(str(e))
