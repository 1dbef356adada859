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


def frame_sizes(nbytes: int, mtu: int, link: LinkSpec | None = None) -> list[int]:
    """The modelled lengths of the frames of an ``nbytes`` message (``HEADERS`` each on an
    Ethernet-framed link; the link's framing otherwise, ``LinkSpec.frame_bytes``)."""
    size = (lambda d: d + HEADERS) if link is None or link.framing == "ethernet" else \
        (lambda d: link.frame_bytes(1, 16 + d))  # ptype MSG: a 16-byte message segment header
    if nbytes == 0:
        return [size(0)]
    full, last = divmod(nbytes, mtu)
    return [size(mtu)] * full + ([size(last)] if last else [])


def p2p_ns(nbytes: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec, hops: int = 1) -> int:
    """T(m): from the NIC taking the message to the receiver having all of it (no overheads)."""
    sers = [link.serialization_ns(s) for s in frame_sizes(nbytes, host.mtu_bytes, link)]
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


# -- spec 03's hardware barriers on a star (every rank one switch from every other) ---------------
def _qs_frames(link: LinkSpec):
    from emu.wire import PacketType
    from emu.wire.qsnet import ACK_LEN, TXN_LEN, packet_bytes

    def frame(data: int) -> int:
        """Modelled bytes of a QsNet packet carrying ``data`` bytes after its transaction header."""
        return link.frame_bytes(PacketType.QPKT, packet_bytes(TXN_LEN + data))
    return frame, link.frame_bytes(PacketType.QACK, ACK_LEN)


def hw_polled_barrier_ns(enter: list[int], host: HostSpec, link: LinkSpec, switch: SwitchSpec) -> list[int]:
    """When each rank leaves a polled hardware barrier (``emu.nodes.nic.qsbarrier``) entered at the
    virtual times ``enter`` (rank 0 the root), on a star.

    The root's adapter calls a conditional at c = enter[0] + issue; it reaches every member at
    a = c + nic + 2 ser(cond) + 2 L + d_sw, which reads its ready word then; the switch combines
    the members' ACKs (sent mem_write later) and the root learns the answer at c + R, R = 2 nic +
    2 ser(cond) + 4 L + 2 d_sw + mem_write + 2 ser(ack). False (a member entered after a): the next
    call at c + R + poll_ns. True: the root leaves, and broadcasts done, which each member has
    nic + 2 ser(done) + 2 L + d_sw + mem_write later."""
    frame, ack = _qs_frames(link)
    e = host.elan
    ser = link.serialization_ns
    L, d, nic = link.latency_ns, switch.processing_delay_ns, host.nic_delay_ns
    reach = nic + 2 * ser(frame(8)) + 2 * L + d
    r = 2 * nic + 2 * ser(frame(8)) + 4 * L + 2 * d + e.mem_write_ns + 2 * ser(ack)
    c = enter[0] + e.issue_ns
    while any(t > c + reach for t in enter[1:]):
        c += r + e.poll_ns
    root = max(c + r, enter[0] + e.issue_ns)
    done = root + nic + 2 * ser(frame(8)) + 2 * L + d + e.mem_write_ns
    return [root] + [max(done, t + e.issue_ns) for t in enter[1:]]


def hw_tree_barrier_ns(enter: list[int], branch: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec,
                       nbytes: int = 0) -> list[int]:
    """When each rank leaves a tree hardware barrier (reducing ``nbytes`` per rank) entered at
    ``enter``, on a star: a small recurrence, not a closed form, because the children's EVENTs
    queue at the switch port toward their parent, and an adapter's EVENT up queues behind the ACK
    it sends its last child.

    Rank v counts its own entry at enter[v] and each child's EVENT when its tail arrives; full at
    the last of them, it sends its EVENT up at (full + nic), after the last child's ACK if that
    child was last (the ACK left first), or at enter[v] + issue + nic if it was. The root, full,
    leaves and broadcasts done (with the result) the same way; a member has it nic + 2 ser(done)
    + 2 L + d_sw + mem_write after it left the root's port (FIFO ports: ``start = max(at, free)``)."""
    frame, ack = _qs_frames(link)
    e = host.elan
    ser = link.serialization_ns
    L, d, nic = link.latency_ns, switch.processing_delay_ns, host.nic_delay_ns
    n = len(enter)
    ev = ser(frame(12 + nbytes))
    up_start: dict[int, int] = {}
    full: dict[int, int] = {}
    for v in range(n - 1, -1, -1):  # children have higher positions than their parents
        kids = [c for c in range(branch * v + 1, branch * v + branch + 1) if c < n]
        free, arrivals = 0, []
        for a, c in sorted((up_start[c] + ev + L, c) for c in kids):  # the switch port toward v
            start = max(a + d, free)
            free = start + ev
            arrivals.append(start + ev + L)
        full[v] = max([enter[v]] + arrivals)
        # v's uplink: an ACK per child at arrival + nic, then the EVENT up (or the root's broadcast)
        sends = sorted([(t + nic, 0, ser(ack)) for t in arrivals]
                       + [(full[v] + nic if arrivals and full[v] > enter[v] else enter[v] + e.issue_ns + nic, 1, 0)])
        free = 0
        for at, kind, s in sends:
            start = max(at, free)
            if kind:
                up_start[v] = start
                break
            free = start + s
    bcast = ser(frame(8 + nbytes))  # the done word and the result
    arrive = up_start[0] + 2 * bcast + 2 * L + d + e.mem_write_ns
    root = max(full[0], enter[0] + e.issue_ns)
    return [root] + [max(arrive, enter[v] + e.issue_ns) for v in range(1, n)]
