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
