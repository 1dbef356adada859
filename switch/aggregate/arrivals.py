"""Host packet arrivals for the processing-unit experiments of spec 04, and a driver that feeds them
to a :class:`ProcessingUnit` (sans-I/O, virtual time).

``P`` hosts (one per switch port) each send ``blocks`` packets, packet b of every host making up
reduction block b. A host sends one packet per slot of ``slot_ns`` (its link's packet time) at most,
and keeps at most ``window`` of its blocks in flight (sent, their result not yet back: the spec's
data plane; results are taken to reach the hosts the moment the switch completes them -- the way
down is not modelled here). The arrival process, settable (``ARRIVALS``):

* ``staggered`` (the default) -- the source's staggered sending: within each group of blocks (the
  window, or ``group``: the manager's, ``model.little_window``) the hosts' starting blocks spread
  evenly over it, host i of P starting at block floor(i * width / P)
  and going on in order, wrapping around (``emu.wire.inc.send_order``, what the emulated hosts
  do): the packets of one block arrive width / P slots apart (delta_c = slot * width / P; hosts
  sharing a starting block when the window is narrower than P send it in the same slot);
* ``rotated`` -- the hosts one block apart: host i sends, in the window starting at block w, the
  blocks w + (i + j) mod window, so the packets of one block arrive one slot apart from
  consecutive hosts (delta_c = slot, shorter than a 1 KiB handler at 100 Gbit/s: they contend);
* ``lockstep`` -- every host sends block j in slot j: the P packets of a block arrive together
  (a burst; delta_c = 0 within it);
* ``exponential`` -- the source's processing-unit runs: each host's gaps between packets are drawn
  from an exponential distribution of mean ``slot_ns`` (seeded; a draw may be shorter than a slot:
  the link's packet time is the mean, not a floor, as in the source's model), blocks in order.

A host blocked by its window sends as soon as one of its blocks completes (never earlier than its
next slot). A packet that would not fit in the L2 packet memory is held back by a congestion signal
(the spec's alternative to a drop: the host retries when the unit next frees memory), so the
offered load may exceed what the unit aggregates and the measurement is the unit's bandwidth.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from emu.wire.inc import group_widths, send_order

ARRIVALS = ("staggered", "rotated", "lockstep", "exponential")


def order(process: str, host: int, blocks: int, window: int, hosts: int = 1, group: int = 0) -> list[int]:
    """The blocks host ``host`` of ``hosts`` sends, in its order (``group``: the staggered schedule's
    group, 0: the window)."""
    schedule = process if process in ("staggered", "rotated") else "in order"
    return send_order(blocks, window, host, hosts, schedule, group)[1]


def spacing(process: str, blocks: int, window: int, hosts: int, group: int = 0) -> float:
    """The packet slots between two packets of one block from two hosts (the model's delta_c over
    the slot; 0: together, a burst) -- in the narrowest group."""
    width = max(1, min(window, blocks))
    if process == "staggered":
        width = min(group_widths(blocks, group or width, width))
        return width / hosts if width >= hosts else 0.0
    return 1.0 if process == "rotated" and width > 1 else 0.0


@dataclass
class Result:
    first_ns: int
    last_ns: int
    blocks: int
    packets: int
    results: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    @property
    def span_ns(self) -> int:
        return self.last_ns - self.first_ns


def drive(pu, P: int, blocks: int, values, *, process: str = "staggered", slot_ns: float, window: int,
          algo: str = "single", B: int = 1, combine=np.add, seed: int = 0, key=lambda b: ("a", b),
          keep: bool = False, group: int = 0) -> Result:
    """Feed the ``P`` hosts' packets (``values(host, block)``: the packet's elements) to ``pu`` as
    ``process`` says; run until every block completed. ``keep``: keep the results by block;
    ``group``: the staggered schedule's group (``emu.wire.inc.send_order``; 0: the window)."""
    if process not in ARRIVALS:
        raise ValueError(f"arrival process {process!r}; known: {', '.join(ARRIVALS)}")
    if window < 1:
        raise ValueError("window must be >= 1")
    rng = np.random.default_rng([seed, P, blocks])
    seq = [order(process, h, blocks, window, P, group) for h in range(P)]
    pos = [0] * P                      # next packet of each host (index into its order)
    ready = [0.0] * P                  # the earliest time of its next send (pacing)
    outstanding = [0] * P              # its blocks sent and not completed
    senders: dict = {}                 # block -> hosts that sent it
    heap = []                          # (time, host): unblocked hosts' next sends

    def gap() -> float:
        return float(rng.exponential(slot_ns)) if process == "exponential" else slot_ns

    for h in range(P):
        ready[h] = gap() if process == "exponential" else 0.0  # the first send: a draw from 0
        heapq.heappush(heap, (round(ready[h]), h))
    out: dict = {}
    done = 0
    first = last = None

    def taken(completed) -> None:
        nonlocal done, last
        for t, k, res in completed:
            b = k[-1]
            done += 1
            last = t
            if keep:
                out[b] = res
            for h in senders.pop(b):
                outstanding[h] -= 1
                if outstanding[h] == window - 1 and pos[h] < blocks:  # it was blocked: send now
                    heapq.heappush(heap, (max(t, round(ready[h])), h))

    packets = paused = 0
    while done < blocks:
        t_pu = pu.next_time()
        t_host = heap[0][0] if heap else None
        if t_pu is None and t_host is None:
            raise RuntimeError(f"the processing unit stalled with {blocks - done} blocks open (packets dropped?)")
        if t_host is None or (t_pu is not None and t_pu < t_host):
            taken(pu.advance(t_pu))
            continue
        t, h = heapq.heappop(heap)
        b = seq[h][pos[h]]
        x = values(h, b)
        taken(pu.advance(t))
        if pu.mem + x.nbytes > pu.spec.packet_memory_bytes:  # the congestion signal: wait, do not drop
            paused += 1
            nxt = pu.next_time()
            if nxt is None:
                raise RuntimeError(f"packet memory full at {t} ns with nothing in progress")
            heapq.heappush(heap, (max(t, nxt), h))
            continue
        if not pu.arrive(t, key(b), h, x, P=P, algo=algo, combine=combine, B=B):
            raise RuntimeError(f"packet dropped at {t} ns")
        first = t if first is None else first
        packets += 1
        senders.setdefault(b, []).append(h)
        pos[h] += 1
        outstanding[h] += 1
        ready[h] = max(ready[h], t) + gap()
        if pos[h] < blocks and outstanding[h] < window:
            heapq.heappush(heap, (round(ready[h]), h))
    return Result(first or 0, last or 0, blocks, packets, out, dict(pu.stats, paused=paused))
