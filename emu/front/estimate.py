"""How many frames a run of ``emu run`` will move, estimated before it starts.

A run that is predicted to move more than :data:`LARGE_RUN_FRAMES` frames says so on stderr before
the cluster starts (the emulator moves some thousands of frames per second of wall clock, so such
a run takes a while). The estimate counts the frames the hosts inject, as ``frames`` in the results:

* ``pingall``: a request and a reply per pair, one frame each;
* an allreduce (reduce) offloaded to the NICs: one message per tree edge up and one down (up
  only), per 48-byte part, one frame each;
* in the QsNet network hardware (``--offload hw``), per block of one packet (``ElanSpec.packet_bytes``;
  an allreduce's block is what an EVENT carries, ``max_reduce_bytes``): the tree (allreduce, tree
  barrier) sends an EVENT and its ACK per tree edge, then the root's broadcast of the result and an
  ACK from every other member; a broadcast, the broadcast packet and an ACK from every other member;
  a polled barrier, the network conditional and the done broadcast, each acknowledged by every other
  member (at least: a false conditional is polled again);
* offloaded to the switches: one packet per block per rank;
* a host software collective: the messages of its algorithm, each cut into frames of the hosts' MTU:
  counted in closed form for the algorithms this emulator comes with (:func:`message_sizes`, tested
  equal to the dry run for each), else by a dry run of the algorithm (:mod:`emu.nodes.collectives.dryrun`:
  the whole collective on every rank, a tenth of a second or more of start-up on 256 ranks);
* open-loop traffic: one frame per packet, the loads' sum per host per cycle (an upper bound where a
  pattern leaves hosts idle).

It is exact on the cases the tests measure, but it is an estimate and says "about": where a dry run
counts, runs with operands over 64 MiB in all are counted on a scaled-down copy (rounding), and
counting stops at 50,000 messages (then it says "at least").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emu.config import ConfigError

LARGE_RUN_FRAMES = 50_000
"""Above this many frames (all tests of the command together) ``emu run`` says that the run is large."""


@dataclass(frozen=True)
class Estimate:
    test: str
    frames: int
    how: str
    """What the count rests on, e.g. 'ring, 130,560 messages'."""
    at_least: bool = False
    """True when ``frames`` is a lower bound: counting stopped early, or a polled barrier may poll again."""


async def estimate(name: str, topo, extra: dict[str, Any], options=None) -> Estimate | None:
    """The frames test ``name`` will make the hosts inject on ``topo`` (None: no estimate known)."""
    from .checks import Options, collective_options

    options = options or Options()
    hosts = topo.host_names()
    n = len(hosts)
    if name == "pingall":
        pairs = n * (n - 1) if n <= options.pingall_full_max_hosts else n * min(options.pingall_peers, n - 1)
        return Estimate(name, 2 * pairs, f"{pairs:,} pairs, a request and a reply each")
    from .traffic_checks import PATTERNS, traffic_options

    if name in PATTERNS:  # open-loop traffic: a frame per packet, R per source per cycle, over 2 warm-ups + the window
        o = traffic_options(extra, topo)
        cycles = 2 * o.warmup + o.measure
        return Estimate(name, round(n * cycles * sum(o.loads)),
                        f"{n} hosts x {cycles:,} cycles x the loads' sum {sum(o.loads):g}")
    from emu.nodes.collectives.run import OPERATIONS

    if name not in OPERATIONS:
        return None
    spec = topo.hosts[0].spec
    o = collective_options(name, extra, hosts, spec.nic.queue_capacity)
    ranks = len(o.ranks) if o.ranks else n
    from emu.nodes.collectives.offloads import offload_named

    counted = offload_named(o.offload).estimate(name, o, ranks, spec)  # the offload's own count (None: host software's)
    if counted is not None:
        return Estimate(name, *counted)
    from emu.topologies.grid import grid_of

    grid = grid_of(topo)
    coded = ("nc", "nc_every", "nc_recursive", "combine", "all_at_once_coded")
    algo = (o.algo or "tree").replace("-", "_")
    if name in ("mcast", "mcast_all") and algo in coded and o.ranks and o.ranks != hosts:
        raise ConfigError(f"{name} --algo {o.algo} (network-coded broadcast) runs over every node of the network: "
                          "leave out --ranks")
    on_nics = ("tree", "all_at_once") + coded if grid is not None else coded
    if name in ("mcast", "mcast_all") and not o.ranks and algo in on_nics:
        from emu.nodes.collectives.coding import Scheme, plan
        from emu.nodes.collectives.coding.indirect import default_shape, line

        # spec 02: the NICs run a plan (on an indirect network, on the hosts' rank line); it lists the unicasts
        shape = None if grid is not None else default_shape(len(topo.hosts))
        p = plan(grid or line(len(topo.hosts)), Scheme(algo, shape, sources=(o.root,) if name == "mcast" else None))
        return Estimate(name, p.unicasts, f"{p.scheme.algo}: {p.unicasts:,} unicasts")
    m = counted_messages(name, ranks, o.count, o.dtype, o.op, o.algo)
    if m is None:  # (an algorithm of a plug-in, a coded scheme over --ranks: run without a network)
        from emu.nodes.collectives.dryrun import count_messages

        m = await count_messages(name, ranks, o.count, o.dtype, o.op, o.algo, o.root)
    if m is None:
        return None
    return Estimate(name, m.frames(spec.mtu_bytes), f"{m.algo}, {m.messages:,} messages", not m.complete)


async def large_run_note(names: list[str], topo, extra: dict[str, Any], seed: int = 0,
                         direct: bool = False) -> str | None:
    """What to tell a person before a run predicted to move more than LARGE_RUN_FRAMES frames (with
    sockets on every link, the default: that ``--direct`` hands frames over in memory, faster)."""
    from .checks import Options

    found = [e for name in names if (e := await estimate(name, topo, extra, Options(seed=seed))) is not None]
    total = sum(e.frames for e in found)
    if total <= LARGE_RUN_FRAMES:
        return None
    more = "at least" if any(e.at_least for e in found) else "about"
    parts = "; ".join(f"{e.test}: {'at least ' if e.at_least else ''}{e.frames:,} ({e.how})" for e in found)
    faster = ("" if direct else "; --direct hands the frames between elements of one process over in memory "
              "instead of as UDP datagrams: the same figures, 2-3x faster in the benchmarks")
    return (f"a large run: {more} {total:,} frames to move ({parts}); it may take a while "
            f"(Ctrl-C stops it and tears the cluster down){faster}")


# -- host software collectives in closed form ----------------------------------------------------------


@dataclass(frozen=True)
class Counted:
    """The messages of a host software collective, as ``dryrun.Messages`` counts them, by size."""

    algo: str
    sizes: dict[int, int]
    """{bytes of a message: how many messages of that size}."""
    complete: bool = True

    @property
    def messages(self) -> int:
        return sum(self.sizes.values())

    def frames(self, mtu_bytes: int) -> int:
        """Frames the hosts inject: a message of m bytes is cut into frames of at most ``mtu_bytes``
        of data (an empty message still takes one), as ``dryrun.Messages.frames``."""
        return sum(k * max(1, -(-m // mtu_bytes)) for m, k in self.sizes.items())


def counted_messages(operation: str, ranks: int, count: int, dtype: str = "float32", op: str = "sum",
                     algo: str | None = None) -> Counted | None:
    """The messages ``operation`` on ``ranks`` ranks of ``count`` elements of ``dtype`` sends in host
    software with ``algo`` (None: the default choice by size, as ``Comm`` makes it), counted from the
    algorithm's schedule without running it; None where this has no closed form for the algorithm."""
    import numpy as np

    from emu.nodes.collectives.operations import OPERATIONS
    from emu.nodes.collectives.select import canonical, choose
    from emu.reduce import get_op

    dt = np.dtype(dtype)
    nbytes = count * dt.itemsize * (ranks if OPERATIONS[operation].per_rank_operand else 1)
    algo = algo or choose(operation, nbytes, ranks)
    if operation in ("allreduce", "reduce", "reduce_scatter"):  # (minloc/maxloc: (value, rank) pairs)
        dt = get_op(op).wire_dtype(dt)
    sizes = message_sizes(operation, canonical(operation, algo), ranks, count)
    if sizes is None:
        return None
    return Counted(algo, {m * dt.itemsize: k for m, k in sizes.items() if k})


def message_sizes(operation: str, algo: str, n: int, c: int) -> dict[int, int] | None:
    """{elements a message carries: how many such messages} of host software ``operation`` by
    ``algo`` on ``n`` ranks, each rank's operand ``c`` elements (alltoall: ``c`` per destination;
    reduce_scatter: ``c`` in all, ``c / n`` per rank's part), read off the schedules of
    ``emu.nodes.collectives`` (``allreduce``, ``rooted``, ``exchange``); None: no closed form."""
    out: dict[int, int] = {}

    def add(elements: int, times: int) -> None:
        out[elements] = out.get(elements, 0) + times

    pof2 = 1 << (n.bit_length() - 1)
    rem, steps = n - pof2, pof2.bit_length() - 1  # (ranks folded into a neighbour; log2 of the power of two)
    q, r = divmod(c, n)  # chunk_bounds(c, n): the first r chunks one element longer

    def span(lo: int, hi: int, q: int = q, r: int = r) -> int:  # elements of chunks lo..hi-1
        return (hi - lo) * q + max(0, min(hi, r) - lo)

    key = (operation, algo)
    if key == ("allreduce", "recursive_doubling"):  # fold in, log2 exchanges of the whole vector, fold out
        add(c, 2 * rem + pof2 * steps)
    elif key == ("allreduce", "ring"):  # 2(n-1) steps; in each, every chunk once
        for i in range(n if n > 1 else 0):
            add(span(i, i + 1), 2 * (n - 1))
    elif key == ("allreduce", "rabenseifner"):  # fold in/out; halving then doubling over the pof2 chunks
        add(c, 2 * rem)
        pq, pr = divmod(c, pof2)
        m = 1
        while m < pof2:  # at distance m each aligned block of m chunks goes m times each way
            for i in range(pof2 // m):
                add(span(i * m, (i + 1) * m, pq, pr), 2 * m)
            m <<= 1
    elif key in (("allreduce", "binomial"),):  # a binomial reduce, then a binomial broadcast
        add(c, 2 * (n - 1))
    elif key in (("reduce", "binomial"), ("reduce", "flat"), ("bcast", "binomial"), ("bcast", "flat"),
                 ("mcast", "tree"), ("mcast", "all_at_once")):  # every rank but the root once
        add(c, n - 1)
    elif key == ("bcast", "scatter_allgather"):  # a binomial scatter of the chunks, then a ring allgather
        for v in range(1, n):
            add(span(v, min(v + (v & -v), n)), 1)
            add(span(v, v + 1), n - 1)
        if n > 1:
            add(span(0, 1), n - 1)
    elif key == ("barrier", "dissemination"):
        add(0, n * (n - 1).bit_length())
    elif key == ("barrier", "tree"):
        add(0, 2 * (n - 1))
    elif key in (("allgather", "ring"), ("alltoall", "pairwise"), ("alltoall", "flat"),
                 ("mcast_all", "binomial"), ("mcast_all", "tree"), ("mcast_all", "all_at_once")):
        add(c, n * (n - 1))  # every rank to every other, once
    elif key == ("allgather", "recursive_doubling") and rem == 0:
        for s in range(steps):
            add(c << s, n)
    elif key == ("reduce_scatter", "ring"):
        add(c // n, n * (n - 1))
    elif key == ("reduce_scatter", "recursive_halving") and rem == 0:
        for s in range(steps):
            add((c // n) << s, n)
    else:
        return None
    return out
