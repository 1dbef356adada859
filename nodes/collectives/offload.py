"""Allreduce and reduce offloaded to the NIC with triggered descriptors (spec 01), host side.

Communicator setup computes a reduction tree of any branch degree (rank ``v``'s children are
``k*v + 1 .. k*v + k``, ranks taken relative to the root) and opens a virtual port. Each call then
posts, per 48-byte part of the message, a **reduce descriptor** (to the parent; leaves execute at
once, inner nodes wait for their children's messages; the root's targets itself) and, for an
allreduce, a **broadcast descriptor** triggered by one CP arrival (the root's own reduce message or
the parent's broadcast) that swaps in the result and forwards it to the node's children. The host
pays only for posting; the NICs do the rest and write the result to host memory.

An allreduce of several parts is pipelined through the tree over **lanes**: part s goes on virtual
port ``vp + s % L``. A VP's posted queue executes in order from its head, so within a lane the
parts run one after another (a part's reduce goes up, its broadcast comes down, then the lane's
next part goes up), while the L lanes, each with its own queue, register and ``CP_Counter``, keep
L parts in flight on every level at once. The NIC bounds L twice (:func:`lanes`): by its virtual
ports (those the communicator opened), and by its request receive queue, which a parent shares
among its lanes: each lane may have one message from each of the ``branch`` children waiting
there, so ``L <= queue_capacity // branch``. The process unit and the request send unit stay one
per NIC: lanes add no compute, they only stop one part's round trip from holding up the next. The
host writes the descriptors in the order the parts need them: the reduces of the first L parts,
then each part's broadcast followed by the reduce of part s + L. An offloaded reduce has no
broadcast to hold the parts back: they are all in flight at once on one VP, so a parent's receive
queue must hold branch x parts messages (checked before it runs).

Without a branch degree, :func:`default_branch` takes, for one part, the shallowest tree the
receive queue allows (a level costs a fabric crossing each way, a child only tens of ns at its
parent); for several parts, the degree the pipeline model (``emu.nodes.collectives.nicmodel``)
predicts fastest: a wide tree is shallow but its parents reduce and broadcast k messages per part
and hold fewer parts in flight.
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError
from emu.wire.coll import ErrBit, Head

from ..nic import alu
from ..nic.coll import Posted
from emu.reduce import get_op

DEFAULT_VP = 1
MAX_CPCNT = 63
"""CpCnt is 6 bits (word 0, bits 41-36, as the spec's figure reads). The source's driver writes the
number of children (``coll_counter``) there, which a flat tree on 256 nodes makes 255: by default
(``nic.counter_bits = 6``) such a tree is refused before anything runs rather than read from the 10
bits of CollRegion (spec 01 leaves the choice open). A reduce descriptor carries its child count in
CpCnt as the driver does; this NIC counts the child messages by Rcnt against BranchDegree (word 1,
8 bits), which holds the same number. ``nic.counter_bits = 7`` or ``8`` is the other reading, the
source's flat test tree: a wider counter, BranchDegree's, up to 255 children (CpCnt left 0 when it
cannot hold the count): a departure from the 6-bit field, said in the algorithm's name."""
MAX_BRANCH = 255
"""BranchDegree has 8 bits: no counter reading goes past it."""


def max_children(counter_bits: int = 6) -> int:
    """The most children a node's reduce descriptor may count with a counter of ``counter_bits``."""
    return min(MAX_BRANCH, (1 << counter_bits) - 1)


def reading(counter_bits: int = 6) -> str:
    """Which reading of the counter ran, for the algorithm's name and the reports."""
    if counter_bits <= 6:
        return "CpCnt 6 bits"
    return f"wide counter {counter_bits} bits, not the spec's 6-bit CpCnt"
TIMEOUT_NS_PER_PART = 10_000_000
"""How long a host waits for the NIC, per 48-byte part, before it declares the operation failed.
Generous on purpose: virtual time costs nothing while idle, and a healthy run must never hit it."""


def validate(operation: str, dtype: np.dtype, op: str, branch: int, count: int | None = None,
             queue_capacity: int | None = None, counter_bits: int = 6) -> None:
    """Refuse an offload request the NIC cannot carry out, before anything runs (the offload ``nic``:
    ``emu.nodes.collectives.offloads.nic``)."""
    if operation not in ("allreduce", "reduce"):
        raise ConfigError(f"{operation} cannot be offloaded to the NIC; allreduce and reduce can")
    alu.type_code(np.dtype(dtype))
    alu.op_code(op, np.dtype(dtype))
    most = max_children(counter_bits)
    if branch > MAX_BRANCH:
        raise ConfigError(f"branch degree {branch}: BranchDegree has 8 bits (at most {MAX_BRANCH})")
    if branch > most:
        raise ConfigError(f"branch degree {branch} needs CpCnt = {branch}, but CpCnt has 6 bits (at most {MAX_CPCNT}): "
                          f"a flat tree on {branch + 1} ranks cannot be posted; use a branch degree of {MAX_CPCNT} or less, "
                          f"or the wider counter of the source's flat test tree (--set nic.counter_bits=8)")
    if not 1 <= branch:
        raise ConfigError(f"branch degree must be within 1..{most}, got {branch}")
    if count is None:
        return
    nseg = parts(count, np.dtype(dtype))
    if nseg > 255:
        raise ConfigError(f"{count} {np.dtype(dtype).name} operands need {nseg} descriptors; at most 255 per "
                          f"call (Seg is 8 bits): at most {255 * alu.per_descriptor(np.dtype(dtype))} operands")
    if queue_capacity is None:
        return
    if branch > queue_capacity:
        raise ConfigError(f"branch degree {branch} exceeds the NIC's request receive queue of {queue_capacity} "
                          "entries; the queue must hold a branch degree of messages (raise NicSpec.queue_capacity)")
    if operation == "reduce" and branch * nseg > queue_capacity:
        raise ConfigError(f"an offloaded reduce keeps all its {nseg} parts in flight: a parent may hold "
                          f"{branch} x {nseg} messages, over its queue of {queue_capacity}; use allreduce (parts one "
                          "after another), a smaller branch degree or size, or a larger NicSpec.queue_capacity")


def parts(count: int, dtype: np.dtype) -> int:
    """Descriptors (48-byte parts) an operation on ``count`` operands needs."""
    return max(1, -(-count // alu.per_descriptor(np.dtype(dtype))))


def lanes(kind: str, branch: int, nseg: int, queue_capacity: int, vps: int) -> int:
    """Virtual ports an offloaded ``kind`` of ``nseg`` parts spreads them over (see the module's
    docstring): one for a reduce (its parts need no lanes: nothing holds them back); for an
    allreduce, as many as there are parts, the communicator has VPs (``vps``), and a parent's
    receive queue holds one message per lane from each of its ``branch`` children."""
    if kind != "allreduce":
        return 1
    return max(1, min(nseg, vps, queue_capacity // max(1, branch)))


def depth(n: int, k: int) -> int:
    """Levels below the root of the k-ary tree on ``n`` ranks (the shape :func:`kary_tree` builds)."""
    levels, reached, width = 0, 1, 1
    while reached < n:
        width *= k
        reached += width
        levels += 1
    return levels


def default_branch(operation: str, ranks: int, nseg: int, queue_capacity: int, host=None, link=None,
                   cross=None, operands: int = 6, counter_bits: int | None = None) -> int:
    """The branch degree an offload uses when none is given.

    One part (and every reduce): the shallowest tree the NIC allows and, of the degrees that
    reach that depth, the smallest (the most even tree). Why shallow: every level costs a crossing
    of the fabric up and another down (NIC pipelines, links, switches: about a microsecond per
    level on the default specs), while a child costs its parent only a queue access and an ALU pass
    on the way up and one descriptor on the way down (tens of ns). What bounds the degree: a
    parent's receive queue must hold a branch degree of messages (branch x parts for a reduce,
    which keeps all its parts in flight; :func:`validate`), and the Branch field has 8 bits.
    Allreduce of 48 bytes of doubles on binary fat trees, default specs, completion in ns
    (software / this default / the best of the degrees tried / degree 2; tried: 2, 4, 8, 16, 32,
    63, 64 up to 64 ranks, 8, 11, 12, 16, 32, 64 on 128 and 8, 16, 32, 64 on 256): 8 ranks 4,182 /
    3,106 (7) / same / 5,592; 64 ranks 11,208 / 8,472 (63) / 7,598 (16) / 16,716; 128 ranks 14,182 /
    9,572 (11) / 9,130 (16) / -; 256 ranks 17,472 / 10,890 (16) / same / - (measured before the
    host's descriptors reached the NIC one by one, which took 80 ns off each).

    An allreduce of several parts: the degree the pipeline model predicts fastest
    (``emu.nodes.collectives.nicmodel.allreduce_ns`` with ``operands`` per part, ``host`` and
    ``link`` specs, default specs if None, and ``cross``, the crossing between two relative
    ranks, default one switch apart). A wide tree is shallow, but its parents reduce and broadcast
    k messages per part, and it has fewer lanes (queue_capacity // k): at 4 KiB of doubles on 32
    ranks of a binary fat tree the model picks 2 (measured 39.4 us), where 31 took 224 us."""
    cap = queue_capacity // max(1, nseg) if operation == "reduce" else queue_capacity
    if counter_bits is None:
        counter_bits = host.nic.counter_bits if host is not None else 6
    widest = max(1, min(max_children(counter_bits), cap, ranks - 1))  # 1 when nothing fits: validate then says why
    if operation == "allreduce" and nseg > 1:
        from emu.config import HostSpec, LinkSpec, SwitchSpec

        from . import nicmodel

        host = HostSpec() if host is None else host
        link = LinkSpec() if link is None else link
        cross = nicmodel.uniform(1, host, link, SwitchSpec()) if cross is None else cross
        vps = host.nic.virtual_ports - DEFAULT_VP

        def predicted(k: int) -> int:
            return nicmodel.allreduce_ns(ranks, k, nseg, operands, lanes(operation, k, nseg, queue_capacity, vps),
                                         host, link, cross).total_ns
        return min(range(1, widest + 1), key=lambda k: (predicted(k), k))
    shallowest = depth(ranks, widest)
    return next(k for k in range(1, widest + 1) if depth(ranks, k) == shallowest)


def predict(topology, members: list[str], branch: int, count: int, dtype, vp: int = DEFAULT_VP):
    """The pipeline model (``nicmodel.Prediction``) of an offloaded allreduce of ``count``
    elements of ``dtype`` over ``members`` of ``topology`` (rank order, root first) on a
    ``branch``-ary tree, its lanes from VP ``vp`` on, on the topology's routes."""
    from . import nicmodel

    host = topology.nodes[members[0]].spec
    per = alu.per_descriptor(np.dtype(dtype))
    nseg = parts(count, np.dtype(dtype))
    nlanes = lanes("allreduce", branch, nseg, host.nic.queue_capacity, host.nic.virtual_ports - vp)
    link = next(e[3].spec for e in topology.neighbours()[members[0]])
    return nicmodel.allreduce_ns(len(members), branch, nseg, min(count, per) or 1, nlanes, host, link,
                                 nicmodel.on_topology(topology, members))


def predict_reduce(topology, members: list[str], branch: int, count: int, dtype) -> int:
    """The model's completion (ns) of a one-part offloaded reduce of ``count`` elements of
    ``dtype`` (``nicmodel.reduce_ns``) over ``members`` (root first) on the topology's routes."""
    from . import nicmodel

    if parts(count, np.dtype(dtype)) != 1:
        raise ValueError("the reduce model covers one part (48 bytes)")
    host = topology.nodes[members[0]].spec
    return nicmodel.reduce_ns(len(members), branch, max(1, count), host, nicmodel.on_topology(topology, members))


def kary_tree(n: int, k: int) -> tuple[list[int], list[list[int]]]:
    """Parents (-1 for the root) and children of relative ranks 0..n-1 in a k-ary tree."""
    if k < 1:
        raise ConfigError(f"branch degree must be >= 1, got {k}")
    from ..nic.qsbarrier import tree_links  # the adapters' barrier tree is this tree too

    links = [tree_links(n, k, v) for v in range(n)]
    return [-1 if p is None else p for p, _c in links], [list(c) for _p, c in links]


def errors_text(err_vec: int) -> str:
    return "|".join(b.name.lower() for b in ErrBit if err_vec & b) or "ok"


async def setup(comm, vp: int = DEFAULT_VP, count: int | None = None) -> None:
    """Communicator setup on this rank: open the virtual ports the offloaded collectives use,
    ``vp`` and the ``count - 1`` after it (default: every VP from ``vp`` on), the lanes of a
    pipelined allreduce (``comm.nic_lanes``)."""
    last = comm.host.spec.nic.virtual_ports
    count = last - vp if count is None else count
    if not 1 <= count <= last - vp:
        raise ConfigError(f"{count} virtual ports from {vp} on: the NIC has VPs 0..{last - 1}")
    for p in range(vp, vp + count):
        await comm.host.nic_open(p)
    comm.nic_lanes = count


def opened_lanes(comm, vp: int) -> int:
    """The VPs from ``vp`` on this communicator's offloads may use: what :func:`setup` opened, or
    (a communicator set up by another ``Comm`` object of the same members) what it opens by default."""
    return getattr(comm, "nic_lanes", comm.host.spec.nic.virtual_ports - vp)


def _region(comm) -> int:
    return (comm.id * 37 + comm._seq) & 0x3FF


def descriptors(comm, kind: str, x: np.ndarray, op: str, root: int, branch: int, vp: int
                ) -> tuple[int, int, list[Posted]]:
    """This rank's descriptors for one offloaded ``allreduce`` or ``reduce``: (region, parts, posted)."""
    validate(kind, x.dtype, op, branch, x.size, comm.host.spec.nic.queue_capacity, comm.host.spec.nic.counter_bits)
    o = get_op(op)
    dtype = x.dtype
    rdtype, rbit = alu.type_code(dtype)
    rop = alu.op_code(op, dtype)
    vals = np.ascontiguousarray(x).ravel()
    if o.name in ("land", "lor", "lxor"):
        vals = (vals != 0).astype(dtype)
    n, per = comm.size, alu.per_descriptor(dtype)
    nseg = parts(len(vals), dtype)
    nlanes = lanes(kind, branch, nseg, comm.host.spec.nic.queue_capacity, opened_lanes(comm, vp))
    comm._seq += 1
    region = _region(comm)
    v = (comm.rank - root) % n
    parents, children = kary_tree(n, branch)
    addr = [comm.host.address(comm.members[(r + root) % n]) for r in range(n)]
    me, par = addr[v], (addr[parents[v]] if parents[v] >= 0 else None)
    kids = [addr[c] for c in children[v]]
    pbranch = len(children[parents[v]]) if parents[v] >= 0 else 0
    is_root = par is None
    reduces, bcasts = [], []
    for s in range(nseg):
        lane = vp + s % nlanes
        part = vals[s * per:(s + 1) * per]
        data, loc = alu.pack(part, np.full(len(part), comm.rank))
        common = dict(coll_region=region, rop=rop, rdtype=rdtype, rbit=rbit, seg=s, nseg=nseg, src_vp=lane,
                      dest_vp=lane, data_num=len(part), err_vec=0, err=0, fen=0, rint=0, nocnct=0, rsvd=0,
                      **{f"data{i}": data[i] for i in range(7)}, **{f"loc{i}": loc[i] for i in range(7)})
        reduce_desc = dict(common, head=Head.REDUCE, type=1, sm=0, inst=1 if not children[v] else 0,
                           swpmp=0 if is_root else 1, swpflag=1 if is_root else 0,
                           cpcnt=len(children[v]) if len(children[v]) <= MAX_CPCNT else 0,
                           lint=1 if kind == "reduce" else 0, node_id=(me if is_root else par) & 0xFFFFF,
                           branch=len(children[v]), pbranch=pbranch, rflag=1, bflag=0)
        dests = [(me, lane)] if is_root and kind == "allreduce" else ([] if is_root else [(par, lane)])
        reduces.append(Posted(reduce_desc, dests, completion=s))
        if kind == "allreduce":
            bcast_desc = dict(common, head=Head.BCAST, type=1, sm=1 if len(kids) > 1 else 0, inst=0, swpmp=0,
                              swpflag=1, cpcnt=1, lint=1, node_id=(kids[0] if kids else me) & 0xFFFFF,
                              branch=0, pbranch=0, rflag=0, bflag=1, data_num=0,
                              **{f"data{i}": 0 for i in range(7)}, **{f"loc{i}": 0 for i in range(7)})
            bcasts.append(Posted(bcast_desc, [(k, lane) for k in kids], completion=s))
    if kind != "allreduce":
        return region, nseg, reduces
    posted = reduces[:nlanes]  # in the order the NIC needs them: part s + L goes up after s came down
    for s in range(nseg):
        posted += [bcasts[s]] + reduces[s + nlanes:s + nlanes + 1]
    return region, nseg, posted


def assemble(comm, done: list, nseg: int, count: int, op: str, dtype: np.dtype) -> np.ndarray | None:
    """The result from the completions the NIC wrote (None, with ``last_status`` set, on error)."""
    status = 0
    for c in done:
        status |= c.err_vec
    by_seg = {c.seg: c for c in done if c.seg >= 0}
    if status or len(by_seg) != nseg or any(by_seg[s].values is None for s in range(nseg)):
        comm.last_status = status or ErrBit.TIMEOUT
        return None
    comm.last_status = 0
    out_vals = np.concatenate([by_seg[s].values for s in range(nseg)])[:count]
    o = get_op(op)
    if o.paired:
        out = np.empty(count, o.wire_dtype(dtype))
        out["value"] = out_vals
        out["index"] = np.concatenate([by_seg[s].locations for s in range(nseg)])[:count]
        return out
    return out_vals


class OffloadRequest:
    """An offloaded reduce or allreduce in flight (``Comm.ireduce`` / ``Comm.iallreduce``): the
    descriptors are on the NIC, which reduces (and broadcasts) without the host; the host may
    compute meanwhile, then :meth:`wait` for the completions the NIC wrote to host memory."""

    def __init__(self, comm, kind: str, x: np.ndarray, op: str, root: int, region: int, nseg: int, nlanes: int,
                 vp: int, timeout_ns: int):
        self.comm, self.kind, self.x, self.op, self.root = comm, kind, x, op, root
        self.region, self.nseg, self.nlanes, self.vp, self.timeout_ns = region, nseg, nlanes, vp, timeout_ns
        self.done = False
        self.result: np.ndarray | None = None

    async def wait(self) -> np.ndarray | None:
        """The result (None on a non-root rank of a reduce, and on error: ``comm.last_status``)."""
        if self.done:
            return self.result
        got = []
        for lane in range(self.nlanes):  # one completion per part, on the part's lane
            got += await self.comm.host.nic_wait(self.region, len(range(lane, self.nseg, self.nlanes)),
                                                 self.timeout_ns, self.vp + lane)
        result = assemble(self.comm, got, self.nseg, self.x.size, self.op, self.x.dtype)
        self.done = True
        self.result = None if self.kind == "reduce" and self.comm.rank != self.root else result
        return self.result


async def start(comm, kind: str, x: np.ndarray, op: str, root: int, branch: int, vp: int,
                timeout_ns: int) -> OffloadRequest:
    """Post this rank's descriptors (the host pays ``post_ns`` each) and return at once."""
    region, nseg, posted = descriptors(comm, kind, x, op, root, branch, vp)
    await comm.host.nic_post(None, posted)  # each descriptor on its lane's VP
    nlanes = len({p.desc["src_vp"] for p in posted})
    return OffloadRequest(comm, kind, x, op, root, region, nseg, nlanes, vp, timeout_ns)


async def offloaded(comm, kind: str, x: np.ndarray, op: str, root: int, branch: int, vp: int,
                    timeout_ns: int) -> np.ndarray | None:
    """Post this rank's descriptors, wait for the NIC's completions, assemble the result."""
    return await (await start(comm, kind, x, op, root, branch, vp, timeout_ns)).wait()
