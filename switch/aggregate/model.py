"""The analytic model of a switch processing unit aggregating allreduce blocks (spec 04), with the
second reading's corrections: the model the emulated processing unit (``pu.py``) is checked against
and that reports print beside measurements.

Symbols (cycles; 1 cycle = 1 ns at the default 1 GHz): K cores, service time tau per packet, packets
arrive every delta, the packets of one block every delta_c (delta <= delta_c <= delta * Z / N), P
packets per block (one per child), S cores per block (hierarchical FCFS; S = K: plain FCFS).

* bandwidth = min(K / tau, 1 / delta) packets per cycle;
* delta_k = min(S * delta_c, K * delta) (with B buffers per block: B * delta_c in place of delta_c);
* the longest queue at a core Q = max(0, (P / S) * (1 - delta_k / tau));
* packets in the switch Qsw = (Q + 1) * K;
* block latency L_block = (P - 1) * delta_c + (Q + 1) * tau.

Service times by algorithm, for a handler cost L per packet (about 4 cycles per float32 element: 1 KiB
of float32 is L = 1024), c cores contending for a block's buffer (c = min(S, C) with C cores per
cluster):

* single buffer: tau = L when c = 1 or delta_c >= L, else L (c + 1) / 2 (the mean of i L over the c
  cores queued at the critical section; the spec's L (C - 1) / 2 gives 0 for one core);
* B buffers: tau = L (c_B + 1) / 2 + (B - 1) L / P, c_B = ceil(c / B) cores contending for each
  buffer (the single buffer's contention term with the c cores spread over B buffers; none when
  c_B = 1 or when a block's packets come B delta_c >= L apart), plus the fold of the other B - 1
  buffers by the last handler, spread over the block's P packets;
* tree: tau = copy + (P - 1) L / P (each packet copied to its own buffer -- a DMA copy, 64 cycles --
  and P - 1 pairwise combines spread over the block's P packets; no handler ever waits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    bandwidth: float
    """Packets per cycle."""
    delta_k: float
    queue: float
    """Q: the longest queue at a core (packets)."""
    in_switch: float
    """Packets in the switch, (Q + 1) K."""
    block_latency: float
    """Cycles from a block's first packet to its result."""


def model(K: int, tau: float, delta: float, delta_c: float, P: int, S: int = 1, B: int = 1) -> Model:
    if min(K, P, S, B) < 1 or tau <= 0 or delta <= 0 or delta_c < delta:
        raise ValueError("K, P, S, B >= 1, tau > 0, delta > 0 and delta_c >= delta")
    dk = min(S * B * delta_c, K * delta)
    q = max(0.0, (P / S) * (1 - dk / tau))
    return Model(min(K / tau, 1 / delta), dk, q, (q + 1) * K, (P - 1) * delta_c + (q + 1) * tau)


def service_time(algo: str, L: float, P: int, *, contending: int = 1, delta_c: float = 0, B: int = 1,
                 copy: float = 64) -> float:
    """tau for an aggregation algorithm (``single``, ``multi``, ``tree``)."""
    if algo == "single":
        return L if contending <= 1 or delta_c >= L else L * (contending + 1) / 2
    if algo == "multi":
        per = -(-contending // max(1, B))
        wait = L if per <= 1 or B * delta_c >= L else L * (per + 1) / 2
        return wait + (B - 1) * L / P
    if algo == "tree":
        return copy + (P - 1) * L / P
    raise ValueError(f"unknown aggregation algorithm {algo!r}")


def handler_cycles(elements: int, cycles_per_element: float = 4.0) -> float:
    """L: a handler's cost for a packet of ``elements`` (about 4 cycles per element)."""
    return elements * cycles_per_element


def buffers_for(bandwidth_pkts_per_cycle: float, block_latency: float, P: int, M: int = 1) -> int:
    """Little's law: R = M B L / P aggregation buffers keep a host's blocks flowing (M buffers per
    block, B packets per cycle, L cycles per block, P packets per block)."""
    return max(1, int(-(-M * bandwidth_pkts_per_cycle * block_latency // P)))


def stagger_spacing(algo: str, L: float, P: int, S: int, B: int = 1, tau: float = 0.0) -> float:
    """delta_c the staggered schedule must keep between two consecutive ranks' packets of one block
    so that no handler waits (cycles): at the block's buffer, single L (its critical section), B
    buffers L / B (B handlers at once), the tree 0 (no handler ever waits); at the block's S cores,
    when its P packets outnumber them, tau / (S B) (then delta_k = S B delta_c >= tau: Q = 0)."""
    buffer = {"single": L, "multi": L / max(1, B)}.get(algo, 0.0)
    cores = tau / (S * max(1, B)) if P > S else 0.0
    return max(buffer, cores)


def contention_limits(algo: str, L: float, P: int, S: int, C: int, K: int, delta: float, B: int = 1,
                      copy: float = 64) -> bool:
    """Whether the unit, a block's packets coming together (delta_c = delta, min(S, C, P) handlers
    contending for its buffer), aggregates fewer packets a cycle than its links bring: K / tau below
    1 / delta. Only then is spreading a block's packets worth its cost -- a block completes only when
    its last rank sent it, so the spread adds to every block's latency."""
    tau = service_time(algo, L, P, contending=min(S, C, P), delta_c=delta, B=B, copy=copy)
    return K / max(tau, 1e-9) < 1 / delta


def last_handler(algo: str, L: float, P: int, B: int = 1, contending: int = 1, copy: float = 64) -> float:
    """The time of a block's last handler, from its packet's arrival to the result (cycles): single,
    the critical sections of the ``contending`` handlers before it and its own, contending x L; B
    buffers, ceil(contending / B) L and the fold of the other B - 1; the tree, a copy and the
    ceil(log2 P) combines it climbs. (The spec's block latency counts (Q + 1) tau, the mean service
    time: the tree's mean, copy + (P - 1) L / P, is its throughput, not its critical path.)"""
    c = max(1, contending)
    if algo == "single":
        return c * L
    if algo == "multi":
        return -(-c // max(1, B)) * L + (max(1, B) - 1) * L
    return copy + max(1, (P - 1).bit_length()) * L


def switch_spacing(algo: str, L: float, P: int, S: int, C: int, K: int, slot: float, B: int = 1,
                   copy: float = 64) -> float:
    """The spacing a switch of P children each sending a packet per ``slot`` asks of the staggered
    schedule: ``stagger_spacing`` where ``contention_limits`` says its unit cannot keep up with a
    block's packets together, else 0."""
    if not contention_limits(algo, L, P, S, C, K, slot / P, B, copy):
        return 0.0
    return stagger_spacing(algo, L, P, S, B, service_time(algo, L, P, B=B, copy=copy))


def block_time(algo: str, L: float, P: int, S: int, C: int, K: int, slot: float, spacing: float, B: int = 1,
               copy: float = 64) -> float:
    """A block's time at a switch from its last packet's arrival, its packets ``spacing`` apart (at
    least slot / P): Q tau (``model``'s queue, tau by ``service_time`` with min(S, C, P) handlers
    contending when they come closer than a buffer is held) and its last handler (``last_handler``)."""
    dc = max(spacing, slot / P)
    c = 1 if dc >= {"single": L, "multi": L / max(1, B)}.get(algo, 0.0) else min(S, C, P)
    tau = max(1e-3, service_time(algo, L, P, contending=c, delta_c=dc, B=B, copy=copy))
    return model(K, tau, slot / P, dc, P, S, B).queue * tau + last_handler(algo, L, P, B, c, copy)


@dataclass(frozen=True)
class Window:
    """A host's blocks in flight by Little's law (``little_window``)."""

    window: int
    """W: blocks a host may have in flight (the switches give it M W buffers)."""
    group: int
    """G: the narrowest group of blocks the ranks' starting blocks spread over (what the grant says)."""
    width: int
    """The widest group the vector is sent in (``emu.wire.inc.group_widths``)."""
    latency_ns: float
    """L: a block's time in flight, from its first rank's send to its result back."""
    little: int
    """ceil(L / slot), before the group's floor and the memory share's cap."""


def stagger_group(ranks: int, slot_ns: float, spacing_ns: float) -> int:
    """G: the narrowest group that keeps consecutive ranks' packets of a block ``spacing_ns`` apart
    (rank r starts floor(r G / ranks) blocks in, one block a slot): ceil(ranks spacing / slot)."""
    return 1 if spacing_ns <= 0 else max(1, math.ceil(ranks * spacing_ns / slot_ns - 1e-9))


def little_window(blocks: int, ranks: int, slot_ns: float, spacing_ns: float, path_ns: float, share: int) -> Window:
    """Blocks in flight by Little's law, R = M B L / P buffers: a switch whose P children each send
    one packet per ``slot_ns`` gets B = P / slot packets a ns, so a host needs R / M = B L / P = L / slot
    blocks in flight (M buffers each), L the block's latency: the staggered spread -- rank r of
    ``ranks`` starts floor(r w / ranks) blocks into a group of w, so the last rank sends a block
    floor((ranks - 1) w / ranks) slots after the first -- plus ``path_ns`` (up the tree, the
    handlers, down again). The groups are ``stagger_group`` wide or a little wider, to split
    ``blocks`` into equal groups; the window is at least a group (a rank must reach every block of a
    group before the group can complete) and at most ``share`` (the memory the switches gave)."""
    from emu.wire.inc import group_widths

    share = max(1, share)
    g = stagger_group(ranks, slot_ns, spacing_ns)
    width = min(max(group_widths(max(1, blocks), g, share)), share)
    latency = (ranks - 1) * width // max(1, ranks) * slot_ns + path_ns
    little = max(1, math.ceil(latency / slot_ns - 1e-9))
    return Window(min(share, max(width, little)), g, width, latency, little)
