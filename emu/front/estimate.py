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
* a host software collective: the messages of a dry run of the algorithm
  (:mod:`emu.nodes.collectives.dryrun`), each cut into frames of the hosts' MTU;
* open-loop traffic: one frame per packet, the loads' sum per host per cycle (an upper bound where a
  pattern leaves hosts idle).

It is exact on the cases the tests measure, but it is an estimate and says "about": runs with
operands over 64 MiB in all are counted on a scaled-down copy (rounding), and counting stops at
50,000 messages (then it says "at least").
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
    from emu.nodes.collectives.dryrun import count_messages

    m = await count_messages(name, ranks, o.count, o.dtype, o.op, o.algo, o.root)
    if m is None:
        return None
    return Estimate(name, m.frames(spec.mtu_bytes), f"{m.algo}, {len(m.sizes):,} messages", not m.complete)


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
