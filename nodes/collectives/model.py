"""Closed-form (alpha-beta, LogP-style) costs of host collectives, for checking the emulator.

Valid on contention-free configurations: every rank pair ``h`` switches apart, every link
direction carrying at most one message at a time (e.g. a star, where every path crosses one switch),
and no message queued behind another at its sender's port. Under those conditions the emulator's
virtual completion times equal these formulas to the nanosecond (``tests/test_collectives.py``).

Point to point, a message of ``m`` bytes cut into frames of ``s_1..s_F`` bytes on the wire (data
+ 46 header bytes + the 4-byte FCS) crosses ``h + 1`` links and ``h`` switches in

    T(m) = nic + sum(ser(s_i)) + h * max(ser(s_i)) + (h + 1) * L + h * d_sw + nic

(a pipeline of h + 1 FIFO ports of equal rate), and costs the sender ``o_s`` before the NIC takes
it and the receiver ``o_r`` after it arrived.
"""

from __future__ import annotations

from emu.config import HostSpec, LinkSpec, SwitchSpec
from emu.wire import FCS_LEN

HEADERS = 46 + FCS_LEN
"""Bytes a frame carries besides message data: Ethernet 14, fabric 16, message segment 16, FCS 4."""


def frame_sizes(nbytes: int, mtu: int) -> list[int]:
    if nbytes == 0:
        return [HEADERS]
    full, last = divmod(nbytes, mtu)
    return [mtu + HEADERS] * full + ([last + HEADERS] if last else [])


def p2p_ns(nbytes: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec, hops: int = 1) -> int:
    """T(m): from the NIC taking the message to the receiver having all of it (no overheads)."""
    sers = [link.serialization_ns(s) for s in frame_sizes(nbytes, host.mtu_bytes)]
    return (2 * host.nic_delay_ns + sum(sers) + hops * max(sers) + (hops + 1) * link.latency_ns
            + hops * switch.processing_delay_ns)


def _step(nbytes, host, link, switch, hops) -> int:
    return host.send_overhead_ns + p2p_ns(nbytes, host, link, switch, hops) + host.recv_overhead_ns


def ring_allreduce_ns(n: int, nbytes: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec,
                      hops: int = 1) -> int:
    """Ring allreduce of ``nbytes`` split into n equal chunks (nbytes divisible by n elements):
    n-1 reduce-scatter steps (exchange + reduce a chunk) and n-1 allgather steps."""
    c = nbytes // n
    step = _step(c, host, link, switch, hops)
    return (n - 1) * (2 * step + host.reduce_ns(c))


def recursive_doubling_allreduce_ns(n: int, nbytes: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec,
                                    hops: int = 1) -> int:
    """Recursive doubling on a power-of-two n: log2(n) exchanges of the whole vector, each reduced."""
    assert n & (n - 1) == 0, "the closed form is for a power-of-two number of ranks"
    return (n.bit_length() - 1) * (_step(nbytes, host, link, switch, hops) + host.reduce_ns(nbytes))


def binomial_bcast_ns(n: int, nbytes: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec,
                      hops: int = 1) -> int:
    """Binomial broadcast from rank 0: a rank forwards to its children, largest subtree first, one
    send overhead apart; completion is when the last rank has the data or has finished sending."""
    t_msg = p2p_ns(nbytes, host, link, switch, hops) + host.recv_overhead_ns
    have = {0: 0}
    finish = {}
    for v in range(n):  # parents have smaller relative ranks than their children
        low = v & -v if v else 1 << n.bit_length()
        children = [v + m for m in (1 << k for k in range(low.bit_length() - 2, -1, -1)) if v + m < n]
        for i, c in enumerate(children, 1):
            have[c] = have[v] + i * host.send_overhead_ns + t_msg
        finish[v] = have[v] + len(children) * host.send_overhead_ns
    return max(finish.values())
