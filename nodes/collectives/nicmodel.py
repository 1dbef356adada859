"""An analytic pipeline model of the NIC-offloaded allreduce (spec 01), for the report and the
choice of the branch degree.

One part (one 48-byte descriptor) is a critical path over the tree, computed level by level
(:func:`one_part_ns`): the host writes the part's reduce descriptor (``post_ns``); a leaf's request
send unit builds the message (``descriptor_ns``), it crosses the NIC's transmit pipeline, the fabric
(:func:`crossing_ns`) and the parent's receive pipeline; the parent's process unit writes and reads
it in the receive queue (2 ``queue_ns``) and folds it into the register (``alu_ns`` per operand, but
not for the first), one message at a time in order of arrival; after the last child it folds its own
data in and fires up. The root's message to itself costs a send and a queue access and triggers the
broadcast, which the send unit builds once per child, one after another, down every level; each
rank's completion reaches host memory ``completion_ns`` after its broadcast fired.

P parts on L lanes (``emu.nodes.collectives.offload``): a lane carries parts l, l + L, ...; a
lane's next part goes up once the previous one came back down through the leaves. The host writes
the reduces of the first L parts, then each part's broadcast followed by the reduce of part s + L
(``post_ns`` each; :func:`write_order`), so a part can go up no earlier than its reduce is written,
and come down no earlier than its broadcast is. Serial resources of the NICs space the parts by
``beta`` (:func:`per_part_ns`: a parent's process unit reads its k children's messages and folds
k operand sets in, its send unit builds k + 1 messages, its link carries k + 1 frames). With D
the one-part time from the root's trigger to the end (the way down and the completion write),
part s starts (relative to part 0) at

    start(s) = max(wR(s) - wR(0), start(s - 1) + beta, end(s - L) - completion_ns - post_ns)
    end(s)   = max(T1 + start(s), wB(s) + D)

and the allreduce ends at the latest end(s).

Not modelled: contention of frames in the fabric (a descriptor frame is 162 bytes, 13 ns at 100
Gbit/s) and parts of different lanes meeting at a process or send unit out of step. Exact for one
part; within 3 % of the emulator on stars and binary fat trees of 8 to 32 ranks up to 4 KiB
(``tests/test_nic_pipeline.py``, ``scripts/nic_offload_sweep.py`` prints both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from emu.config import HostSpec, LinkSpec, SwitchSpec
from emu.wire import DESC, FCS_LEN, HDR_LEN

FRAME_BYTES = HDR_LEN + DESC.size + FCS_LEN
"""A descriptor message on the wire: Ethernet and fabric headers, the 128-byte descriptor, FCS."""


def crossing_ns(switches: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec) -> int:
    """From a descriptor message leaving the send unit to its arrival at the destination's
    process logic: both NIC pipelines, ``switches + 1`` links (store and forward of one frame),
    ``switches`` switch delays."""
    ser = link.serialization_ns(FRAME_BYTES)
    return (2 * host.nic_delay_ns + (switches + 1) * (ser + link.latency_ns)
            + switches * switch.processing_delay_ns)


def kary(n: int, k: int) -> list[list[int]]:
    """Children of relative ranks 0..n-1 in the k-ary tree (``offload.kary_tree``)."""
    return [[c for c in range(k * v + 1, k * v + k + 1) if c < n] for v in range(n)]


def _up(n: int, k: int, operands: int, host: HostSpec, cross: Callable[[int, int], int]) -> list[int]:
    """When each rank's reduce message of one part is built (leaves: once written; the root: its
    message to itself), all ranks entering at 0."""
    nic = host.nic
    kids = kary(n, k)
    alu = nic.alu_ns * operands
    fired = [0] * n  # when rank v's reduce message is built (leaves: once written)
    for v in range(n - 1, -1, -1):  # children have higher ranks than their parents
        if not kids[v]:
            fired[v] = nic.post_ns + nic.descriptor_ns
            continue
        t = 0
        arrivals = sorted(fired[c] + cross(c, v) for c in kids[v])
        for i, a in enumerate(arrivals):
            t = max(a + nic.queue_ns, t) + nic.queue_ns + (alu if i else 0)
        fired[v] = t + alu + nic.descriptor_ns
    return fired


def reduce_ns(n: int, k: int, operands: int, host: HostSpec, cross: Callable[[int, int], int]) -> int:
    """Completion of a one-part offloaded reduce (no broadcast): every rank's reduce descriptor
    writes its completion once it fired; the root's fires to no one, so it completes right after
    folding its own data in (:func:`_up` without the root's ``descriptor_ns``)."""
    fired = _up(n, k, operands, host, cross)
    root = fired[0] - (host.nic.descriptor_ns if n > 1 else 0)
    return max([root] + fired[1:]) + host.nic.completion_ns


def one_part_ns(n: int, k: int, operands: int, host: HostSpec, cross: Callable[[int, int], int],
                trigger: bool = False):
    """Completion of a one-part allreduce on ``n`` ranks, ``k``-ary tree, ``operands`` per part,
    all ranks entering at 0; ``cross(u, v)``: :func:`crossing_ns` from relative rank u to v. With
    ``trigger``: (completion, when the root's broadcast is triggered)."""
    nic = host.nic
    kids = kary(n, k)
    fired = _up(n, k, operands, host, cross)
    done = [0] * n
    down = [0] * n  # when rank v's broadcast is triggered
    down[0] = fired[0] + nic.queue_ns
    for v in range(n):
        t = down[v]
        for c in kids[v]:
            t += nic.descriptor_ns
            down[c] = t + cross(v, c)
        done[v] = t + nic.completion_ns
    return (max(done), down[0]) if trigger else max(done)


def per_part_ns(k: int, operands: int, host: HostSpec, link: LinkSpec) -> int:
    """The least spacing of parts on the NICs: the busiest serial resource per part."""
    nic = host.nic
    alu = nic.alu_ns * operands
    return max(k * (nic.queue_ns + alu),                            # a parent's process unit: k reads, k folds
               (k + 1) * nic.descriptor_ns,                         # a parent's send unit
               (k + 1) * link.serialization_ns(FRAME_BYTES))        # a parent's link, either way


def write_order(parts: int, lanes: int) -> tuple[list[int], list[int]]:
    """When (in descriptors written, 1-based) the host has written each part's reduce and broadcast
    descriptor, in the order of ``offload.descriptors``."""
    order = [("R", s) for s in range(min(lanes, parts))]
    for s in range(parts):
        order += [("B", s)] + ([("R", s + lanes)] if s + lanes < parts else [])
    at = {d: i + 1 for i, d in enumerate(order)}
    return [at[("R", s)] for s in range(parts)], [at[("B", s)] for s in range(parts)]


@dataclass(frozen=True)
class Prediction:
    total_ns: int
    one_part_ns: int
    round_trip_ns: int
    beta_ns: int
    lanes: int
    parts: int
    last_start_ns: int

    def explain(self) -> str:
        return (f"one part T1 {self.one_part_ns} ns; {self.parts} parts on {self.lanes} lanes, spaced by beta "
                f"{self.beta_ns} ns, a lane free again R {self.round_trip_ns} ns after its part went up, broadcasts "
                f"as the host writes them: {self.total_ns} ns")


def allreduce_ns(n: int, k: int, parts: int, operands: int, lanes: int, host: HostSpec, link: LinkSpec,
                 cross: Callable[[int, int], int]) -> Prediction:
    """The model's completion of an offloaded allreduce of ``parts`` parts on ``lanes`` lanes."""
    nic = host.nic
    t1, down = one_part_ns(n, k, operands, host, cross, trigger=True)
    r = t1 - nic.post_ns - nic.completion_ns
    beta = per_part_ns(k, operands, host, link)
    w_r, w_b = write_order(parts, lanes)
    start, end = [0] * parts, [0] * parts
    for s in range(parts):
        if s:
            start[s] = max((w_r[s] - w_r[0]) * nic.post_ns, start[s - 1] + beta,
                           end[s - lanes] - nic.completion_ns - nic.post_ns if s >= lanes else 0)
        end[s] = max(t1 + start[s], w_b[s] * nic.post_ns + t1 - down)
    return Prediction(max(end), t1, r, beta, lanes, parts, start[-1])


def uniform(switches: int, host: HostSpec, link: LinkSpec, switch: SwitchSpec) -> Callable[[int, int], int]:
    """Every tree edge ``switches`` switches long (the branch choice without a topology at hand)."""
    c = crossing_ns(switches, host, link, switch)
    return lambda u, v: c


def on_topology(topology, members: list[str], root: int = 0) -> Callable[[int, int], int]:
    """:func:`crossing_ns` between the hosts of relative ranks u and v, along the topology's routes
    (every link and switch as its own spec says)."""
    n = len(members)
    spec_of = {(x, peer): link.spec for x, edges in topology.neighbours().items() for _p, peer, _pp, link in edges}

    def cross(u: int, v: int) -> int:
        a, b = members[(u + root) % n], members[(v + root) % n]
        path = topology.route(a, b)
        host = topology.nodes[a].spec
        t = 2 * host.nic_delay_ns
        for x, y in zip(path, path[1:]):
            spec = spec_of[(x, y)]
            t += spec.serialization_ns(FRAME_BYTES) + spec.latency_ns
            if y != b:
                t += topology.nodes[y].spec.processing_delay_ns
        return t
    return cross

