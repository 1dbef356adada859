"""``--drain global`` (``emu.front.traffic_checks``): BookSim2's drain. Every source injects its
schedule's draws until every measured packet (created inside the window) anywhere has arrived; from
then on no source injects, and the run ends when every packet sent has arrived. The count is kept by
the harness, out of band -- a :class:`Ledger` in this process that every host's application reads
and writes, no count frames -- as BookSim's ``_PacketsOutstanding`` and ``_empty_network`` keep it
(``src/trafficmanager.cpp``, ``_SingleSim`` and ``Run``).

Deterministic in virtual time, whatever the order of the elements inside a synchroniser window
(``emu.sync``: a window is ``lag`` = the lookahead long, and its elements run one after another):

* From the window's end on, each host looks at what has arrived for it at every cycle (``try_recv``,
  which takes no time) and counts the measured packets in the ledger with the time it counted them
  (the ledger keeps the latest: ``last``).
* A source injects at ``now`` only while not ``Ledger.stopped(now)``: every measured packet counted,
  the last at ``last``, and ``now >= last + lag``. Such a ``now`` runs in a window after the one of
  ``last`` (which is ``lag`` long), so every count was made before any host asks; and a host that
  asks earlier injects whatever the ledger says. So every source stops at the same time, the first
  cycle at least ``lag`` after the cycle the last measured packet was counted in (BookSim stops the
  cycle after: with a lookahead of one cycle, the same).
* Every packet is sent before ``last + lag``; at ``last + 2 lag`` or later (a later window than any
  send) ``Ledger.sent`` holds how many went to each host: each host then receives until it has them.

The ledger is one object in one process: ``--processes`` > 1 is refused (:data:`ONE_PROCESS`)."""

from __future__ import annotations

import struct

from .traffic_draws import DRAW_CYCLES, HEAD, TAG, receiver

ONE_PROCESS = ("--drain global keeps its count in one process: leave out --processes (and mpiexec) "
               "or use --drain measured")


class Ledger:
    """One load point's count under ``--drain global`` (shared by every host's application of the
    run). ``total``: the packets created in the window anywhere; ``count``: those counted so far;
    ``last``: when the latest was counted (no earlier than the window's end); ``lag``: the
    synchroniser's window length, a bound on what a host may not see yet; ``sent[d]``: the packets
    sent to host d so far; ``t0``: the run's start (the applications')."""

    __slots__ = ("total", "count", "last", "lag", "sent", "t0")

    def __init__(self, total: int, n: int, lag: int):
        if lag < 1:
            raise ValueError(f"Ledger: lag {lag} ns, the window's length, must be >= 1")
        self.total, self.count, self.last, self.lag = total, 0, 0, lag
        self.sent = [0] * n
        self.t0: int | None = None

    def stopped(self, now: int) -> bool:
        """Injection is over at ``now``: every measured packet counted, the last ``lag`` or more ago."""
        return self.count == self.total and self.last + self.lag <= now


async def global_app(host, cycle_ns: int, when: list, dst: list, size: int, window: tuple[int, int],
                     names: list[str] | None, more, ledger: Ledger):
    """A host's application under ``--drain global``: send each packet at its cycle (``when``:
    the window's and those before; ``more``: the draws past it, ``DRAW_CYCLES`` at a time) while the
    ledger lets it; count the measured packets that arrived here at every cycle from the window's
    end; then receive every packet sent here. Returns ``traffic_app``'s (latencies and sources of
    the packets created in the window, packets that arrived in the window, packets received out of
    order) and the latest creation time of a packet received here (ns)."""
    t0 = host.now
    ledger.t0 = t0
    names = host.hosts if names is None else names
    me = names.index(host.name)
    w0, w1 = t0 + window[0] * cycle_ns, t0 + window[1] * cycle_ns
    if ledger.last < w1:
        ledger.last = w1  # (every host writes the same: the count is complete no earlier than the window's end)
    lat, src = [], []
    state = [0, 0, -1]  # packets that arrived in the window, late packets, the newest creation time
    take = receiver(w0, w1, lat, src, state)

    pack = struct.Struct(f"<qI{size - HEAD.size}x").pack
    send, sleep, arrived_ns, try_recv = host.send, host.sleep, host.arrived_ns, host.try_recv
    sent = ledger.sent
    got = 0
    seq = 0
    now = t0  # (``host.now``, kept: read again after an await that may have let time pass)
    spec = host.spec
    send_waits, recv_waits = spec.send_overhead_ns > 0, spec.recv_overhead_ns > 0  # (else those awaits take no time)
    for c, d in zip(when, dst):  # the warm-up and the window: inject, receive nothing yet
        t = t0 + c * cycle_ns
        if now < t:
            await sleep(t - now)
            now = t  # (a sleep ends at its time exactly)
        sent[d] += 1  # (counted before the send's await: with a send overhead it returns later than ``t``)
        await send(names[d], pack(t, seq), TAG)
        if send_waits:
            now = host.now
        seq += 1
    pw: list = []
    pd: list = []
    k = nw = 0
    drawing = more is not None  # (``more`` may have draws left)
    stopped = ledger.stopped
    c = window[1]
    t = t0 + c * cycle_ns
    while True:  # from the window's end: every cycle, count what arrived, then inject if the ledger lets it
        if now < t:
            await sleep(t - now)
            now = t  # (a sleep ends at its time exactly)
        if arrived_ns(TAG) is not None:
            measured = 0
            while True:
                m = await try_recv(None, TAG)
                if m is None:
                    break
                measured += take(m)
                got += 1
                if arrived_ns(TAG) is None:
                    break
            if recv_waits:
                now = host.now  # (later by the receive overhead)
            if measured:
                ledger.count += measured
                if now > ledger.last:
                    ledger.last = now
        if stopped(now):
            break
        if k >= nw and drawing:
            if more.done:
                drawing = False
            else:
                pw, pd = more.upto(more.next + DRAW_CYCLES)
                k, nw = 0, len(pw)
        if k < nw and pw[k] == c:
            d = pd[k]
            sent[d] += 1
            await send(names[d], pack(t, seq), TAG)
            if send_waits:
                now = host.now  # (later by the send overhead)
            seq += 1
            k += 1
        c += 1
        t += cycle_ns
    end = ledger.last + 2 * ledger.lag  # (every send was before last + lag: in a window before this one)
    now = host.now
    if now < end:
        await sleep(end - now)
    recv = host.recv
    for _ in range(sent[me] - got):
        take(await recv(tag=TAG))
    return lat, src, state[0], state[1], state[2]
