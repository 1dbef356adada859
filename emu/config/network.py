"""The specs of the network: links, switches and their processing units, the network manager."""

from __future__ import annotations

from dataclasses import dataclass

from .base import MAX_DELAY_NS, ConfigError, _check_delays
from .queues import QueueSpec


@dataclass(frozen=True)
class LinkSpec:
    """One full-duplex link; both directions have the same figures."""

    latency_ns: int = 100
    """Propagation delay of one direction, from the last bit out to the last bit in (ns). Must be
    >= 1: link latency plus element delay is the conservative synchroniser's lookahead."""
    bandwidth_bps: int = 100_000_000_000
    """Line rate of one direction (bit/s); a frame of B bytes occupies the port ceil(8 B / rate) ns."""
    priority: bool = True
    """A frame of priority > 0 (ACK tokens, traps, management) overtakes priority-0 frames waiting
    at the port, and a QsNet packet on the line at its next 256-byte segment boundary (QsNet);
    false: strict FIFO. Not with credit flow control (finite buffers), which stays FIFO per VC."""
    framing: str = "ethernet"
    """What a frame costs on this link's wire (its modelled length, ``emu.wire.framing``): ``ethernet``
    (the frame and its FCS, as on the socket; the generic families), ``qsnet`` (QsNet packets: segment
    headers, CRCs and payload; ``qsnet:``), ``flit`` (mechanism header and payload behind an 8-byte
    head-flit header; ``mesh:``, ``torus:``). The socket and the capture carry the same bytes whatever it is."""
    local_latency_ns: int = 0
    """A dragonfly's local links (inside a group): their latency; 0: ``latency_ns``."""
    local_bandwidth_bps: int = 0
    """A dragonfly's local links: their line rate; 0: ``bandwidth_bps``."""
    global_latency_ns: int = 0
    """A dragonfly's global links (between groups): their latency; 0: ``latency_ns``."""
    global_bandwidth_bps: int = 0
    """A dragonfly's global links: their line rate; 0: ``bandwidth_bps``."""

    def __post_init__(self) -> None:
        if self.framing not in ("ethernet", "qsnet", "flit"):
            raise ConfigError(f"LinkSpec.framing must be ethernet, qsnet or flit, got {self.framing!r}")
        if not isinstance(self.priority, bool):
            raise ConfigError(f"LinkSpec.priority must be true or false, got {self.priority!r}")
        if not isinstance(self.latency_ns, int) or not 1 <= self.latency_ns <= MAX_DELAY_NS:
            raise ConfigError(f"LinkSpec.latency_ns must be an integer within 1..10**12 ns, got {self.latency_ns!r}")
        if not isinstance(self.bandwidth_bps, int) or not 1_000 <= self.bandwidth_bps <= 10**16:
            raise ConfigError(f"LinkSpec.bandwidth_bps must be an integer within 1000..10**16 bit/s, "
                              f"got {self.bandwidth_bps!r}")
        for f in ("local_latency_ns", "global_latency_ns"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_DELAY_NS:
                raise ConfigError(f"LinkSpec.{f} must be 0 (as latency_ns) or an integer within 1..10**12 ns, got {v!r}")
        for f in ("local_bandwidth_bps", "global_bandwidth_bps"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not (v == 0 or 1_000 <= v <= 10**16):
                raise ConfigError(f"LinkSpec.{f} must be 0 (as bandwidth_bps) or an integer within 1000..10**16 bit/s, "
                                  f"got {v!r}")

    def serialization_ns(self, nbytes: int) -> int:
        return -((-nbytes * 8 * 1_000_000_000) // self.bandwidth_bps)

    def frame_bytes(self, ptype: int, body: int) -> int:
        """The modelled length on this link of a frame of fabric ``ptype`` whose body (mechanism
        header(s) and payload) is ``body`` bytes (``emu.wire.framing.frame_length``)."""
        from ..wire.framing import frame_length
        return frame_length(self.framing, ptype, body)


PU_SCHEDULERS = ("hfcfs", "fcfs")


@dataclass(frozen=True)
class PUSpec:
    """A switch's processing unit for in-network aggregation (spec 04; ``[pu]`` settings): clusters
    of RISC-V cores running a handler per packet (the sPIN model)."""

    clusters: int = 64
    """Clusters of cores (the full design: 64, i.e. 512 cores)."""
    cores_per_cluster: int = 8
    """Cores in each cluster (the full design: 8, i.e. 512 cores in 64 clusters)."""
    ghz: float = 1.0
    """Core clock: a cycle is 1/ghz ns."""
    packet_memory_bytes: int = 4 << 20
    """L2 packet memory: packets waiting for or in a handler; full -> the packet is dropped (counted)
    and the hosts' retransmission recovers."""
    working_memory_bytes: int = 4 << 20
    """Handler memory for partial aggregates (the aggregation buffers of every allreduce)."""
    cycles_per_byte: float = 1.0
    """Handler cost per byte of data aggregated (about 4 cycles per float32 element: a 1 KiB packet
    costs L = 1024 cycles; small types are vectorised, so the cost goes by bytes)."""
    copy_cycles: int = 64
    """A DMA copy of a packet into a buffer (the tree algorithm)."""
    scan_cycles_per_byte: float = 0.125
    """Scanning a sparse block's dense array for its non-zeros when the block leaves (vectorised:
    8 bytes a cycle): the array store's cost that the hash store does not pay."""
    remote_factor: float = 25.0
    """A handler on a core outside the cluster holding its block's buffer pays this many times the
    cycles (remote scratchpad; plain FCFS scatters a block's packets over every cluster)."""
    scheduler: str = "hfcfs"
    """fcfs: any free core takes the next packet; hfcfs: a block's packets go to one subset of
    ``subset`` cores of a cluster (local memory), blocks spread over the subsets."""
    subset: int = 8
    """S: cores per block with hfcfs (within one cluster)."""
    max_allreduces: int = 4
    """Concurrent allreduces the memory is partitioned among; another is refused (FULL)."""

    def __post_init__(self) -> None:
        for f in ("clusters", "cores_per_cluster", "subset", "max_allreduces", "copy_cycles"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not (0 if f == "copy_cycles" else 1) <= v <= 1 << 16:
                raise ConfigError(f"PUSpec.{f} must be an integer within {0 if f == 'copy_cycles' else 1}..65536, got {v!r}")
        for f in ("packet_memory_bytes", "working_memory_bytes"):
            v = getattr(self, f)
            if not isinstance(v, int) or not 1024 <= v <= 1 << 34:
                raise ConfigError(f"PUSpec.{f} must be within 1 KiB..16 GiB, got {v!r}")
        for f in ("ghz", "cycles_per_byte", "remote_factor", "scan_cycles_per_byte"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or not 0 < v < 1e6:
                raise ConfigError(f"PUSpec.{f} must be a positive number, got {v!r}")
        if self.scheduler not in PU_SCHEDULERS:
            raise ConfigError(f"PUSpec.scheduler {self.scheduler!r} is not one of {', '.join(PU_SCHEDULERS)}")
        if self.subset > self.cores_per_cluster:
            raise ConfigError(f"PUSpec.subset {self.subset} exceeds the {self.cores_per_cluster} cores of a cluster")

    @property
    def cores(self) -> int:
        return self.clusters * self.cores_per_cluster


@dataclass(frozen=True)
class SwitchSpec:
    """A switch or router."""

    processing_delay_ns: int = 50
    """Per-frame delay from a frame's arrival to its hand-off to the output port (ns)."""
    vcs: int = 1
    """Virtual channels per input port (a frame's VC is its fabric header's vc modulo this), 1..32
    (QsNet's segment header has a 5-bit VC field)."""
    vc_buffer_bytes: int = 0
    """Input buffer per port and VC, in bytes; 0: unbounded (no flow control, today's figures). Finite
    buffers turn on credit flow control on every link into this switch: a sender transmits only
    with credit for the bytes, returned when the frame leaves the buffer (starts on its way out)."""
    pool_bytes: int = 0
    """A shared pool per input port, used by a frame whose VC buffer is full (with finite buffers). On
    the input-queued router (``emu.switch.iqpool``) a frame's first ``vc_buffer_bytes`` go into its VC
    buffer and the rest into the pool, or the whole frame into the pool when its VC buffer is not free
    for that."""
    credit_delay_ns: int = 0
    """From a frame leaving the input buffer to its credit leaving for the sender (ns)."""
    routing: str = "static"
    """Routing policy by name: static (the table's port), adaptive (the least-loaded minimal next
    hop), dispersive (a seeded random minimal next hop), qsnet (QsNet's rule: a minimal next hop
    below ``adaptive_threshold`` pending frames, picked by ``adaptive_pick``; none: the least loaded);
    on dragonflies, HyperX and Slim Flies minimal, valiant, ugal_l, ugal_g (an oracle) and par; ecmp (a
    hash of the flow: source, destination, packet type, entropy byte) and spray (per packet, in turn)."""
    adaptive_threshold: int = 2
    """Pending frames on a link below which it counts as lightly loaded (``routing=qsnet``): frames
    on the line plus those waiting for credit; 0: no link is, always the least loaded."""
    adaptive_pick: str = "first_free"
    """How ``routing=qsnet`` picks among the lightly loaded links: first_free (the lowest-numbered
    free one), next_free (round robin per switch) or random (seeded per switch)."""
    adaptive_free: str = "now"
    """What ``routing=qsnet``'s pick counts as a free link: now (nothing on its line and nothing waiting
    for it in the router; none free: those with the fewest bytes ahead, the first to free) or light
    (every lightly loaded link, by port order alone: the reading before issue 44)."""
    adaptive_heavy: str = "pick"
    """What ``routing=qsnet`` does when no candidate link is lightly loaded: pick (the same pick over
    every live candidate: the threshold ranks no heavy link above another), least_loaded (the link
    with the fewest pending operations, ties to the packet's route) or route (the packet's own route --
    the table's port, or the one its source chose; a route that is down or out of service gives way
    to the least loaded)."""
    adaptive_load: str = "pending"
    """What ``routing=qsnet`` compares against ``adaptive_threshold``: pending (QsNet's measure: the
    operations this router sent out of a link whose ACK has not come back through it; the token
    retraces its packet's route, ``emu.switch.routing.pending``) or queue (frames on the line plus
    those waiting for credit: the output queue, a local stand-in)."""
    pending_expiry_ns: int = 1_000_000
    """``adaptive_load=pending``: an operation whose ACK has not come back this long after it was
    routed (lost with its packet or on the way back) leaves the count."""
    ugal_threshold_bytes: int = 0
    """``routing=ugal_l|ugal_g|par``: the source takes the non-minimal route only when the minimal one's
    queue depth x hops exceeds the non-minimal one's by more than this (bytes x hops)."""
    ugal_intermediate: str = "group"
    """``routing=valiant|ugal_l|ugal_g|par`` on a dragonfly: the intermediate the source draws -- group
    (a random group: the detour ends where it enters it; Kim et al.) or router (a random router, as
    BookSim's ``dragonflynew`` draws a node: mostly one local hop more in that group, and a local-to-local
    turn there, which the ``dragonfly`` VC policy gives a class of its own). HyperX and Slim Fly: always
    a router."""
    ugal_queue: str = "depth"
    """What ``routing=ugal_l|ugal_g|par`` counts as a port's queue: depth (the bytes on its line or
    waiting for it in this router's input buffers, plus the credit it holds of the next router's buffer)
    or credits (that credit alone, every VC: BookSim's ``GetUsedCredit``, bounded by the next router's
    buffers; the input-queued router's only)."""
    vc_policy: str = "by_class"
    """How a switch picks the VC on the next link: by_class (the frame's own vc), dateline (tori:
    VC 0 until the frame crosses a dimension's wrap-around link, then 1; back to 0 in a new dimension),
    class_dateline (tori: a pair of VCs per traffic class 2c, 2c + 1, the dateline bit as above), dragonfly
    (VC 0 from the host, one more after each global link and at a re-decided local-to-local turn: 2
    classes for minimal routes, 3 for Valiant and UGAL, 4 for PAR), hops (VC 0 from the host, one more
    per router-to-router hop: HyperX, Slim Fly); the last two put each class on a VC of its own, the
    classes past ``vcs - 1`` on the last one."""
    cut_through: bool = False
    """Virtual cut-through: a frame's head leaves ``processing_delay_ns`` (the header's route and
    allocation cycles) after it arrived, before its tail is in, when the output port is free -- its
    tail never leaves before it arrived. Unbounded buffers only: with credit flow control a switch
    stores the whole frame first (store-and-forward, the default)."""
    model: str = "output_queued"
    """The router's model: output_queued (a frame goes from its input straight into its output
    port's FIFO after ``processing_delay_ns``: an ideal switch, the figures equal to ns-3's) or
    input_queued (``emu.switch.iq``: per-input, per-VC buffers with credits, VC and switch allocation,
    head-of-line blocking within a VC, a pipeline of settable stages)."""
    flit_bytes: int = 64
    """Input-queued router: the flow-control unit. Buffers and credits count whole flits; a frame
    of n bytes (FCS included) takes ceil(n / flit_bytes) of them. Its head (first flit) is what
    reaches the router first: with ``cut_through`` the router routes it while the rest arrives."""
    classes: int = 1
    """Input-queued router: traffic classes (VC groups) with ``vc_policy=by_class``: a frame on VC v
    is of class v mod classes and is given a free VC of its class at the next hop."""
    route_ns: int = -1
    """Input-queued router: route computation stage (ns); -1: ``processing_delay_ns``."""
    vc_alloc_ns: int = 0
    """Input-queued router: VC allocation stage (ns)."""
    sw_alloc_ns: int = 0
    """Input-queued router: switch allocation stage (ns)."""
    traversal_ns: int = 0
    """Input-queued router: switch (crossbar) traversal stage (ns)."""
    allocator: str = "round_robin"
    """Input-queued router: the switch allocator, round_robin (separable, input first: each input
    picks one of its VCs, then each output one of its requesting inputs, both by rotating priority)
    or islip (request, grant, accept; pointers move on first-iteration accepts only)."""
    iterations: int = 1
    """Input-queued router: iterations of the islip allocator per allocation round."""
    vc_release: str = "tail_granted"
    """Input-queued router: when an output VC may be given to another packet: tail_granted (its tail
    flit has won switch allocation: BookSim's iq router, ``wait_for_tail_credit=0``), tail_sent (its
    tail has left on the line) or tail_credit (the receiver's credit for its tail is back and the VC
    is empty there: BookSim's ``wait_for_tail_credit=1``)."""
    credit_release: str = "tail_left"
    """Input-queued router: when a frame's room in an input buffer is credited back: tail_left (one
    credit for the frame when its tail has left the buffer), per_flit (a credit per flit as each flit
    leaves: BookSim's; one credit frame per flit on the wire) or head_left (the whole frame's credit
    when its head leaves: the earliest, as if the rest followed without stopping)."""
    eject_vcs: bool = False
    """Input-queued router: allocate VCs at a port to a host too (as BookSim's ejection port does:
    ``vcs`` VCs, one packet each at a time, released by ``vc_release``; the host still takes every
    flit at once, so no credit). False: a host is an unbounded sink, no VC to allocate."""
    pu: PUSpec = PUSpec()
    """Its processing unit for in-network aggregation (spec 04)."""
    queues: QueueSpec = QueueSpec()
    """Its output-queue mechanisms (``[queues]`` settings, ``switch/queues``): all off by default."""

    def __post_init__(self) -> None:
        _check_delays("SwitchSpec", self, ("processing_delay_ns", "credit_delay_ns"))
        if not isinstance(self.vcs, int) or isinstance(self.vcs, bool) or not 1 <= self.vcs <= 32:
            raise ConfigError(f"SwitchSpec.vcs must be within 1..32 (QsNet's 32 VCs), got {self.vcs!r}")
        for f in ("vc_buffer_bytes", "pool_bytes"):
            v = getattr(self, f)
            if not isinstance(v, int) or not 0 <= v <= 1 << 30:
                raise ConfigError(f"SwitchSpec.{f} must be within 0..2**30 bytes, got {v!r}")
        if self.pool_bytes and not self.vc_buffer_bytes:
            raise ConfigError("SwitchSpec.pool_bytes needs finite VC buffers: set vc_buffer_bytes too")
        if not isinstance(self.cut_through, bool):
            raise ConfigError(f"SwitchSpec.cut_through must be true or false, got {self.cut_through!r}")
        self._check_router()
        self.queues.check_switch(self)
        if self.vc_policy not in VC_POLICIES:
            raise ConfigError(f"SwitchSpec.vc_policy {self.vc_policy!r} is not one of {', '.join(VC_POLICIES)}")
        if not isinstance(self.adaptive_threshold, int) or isinstance(self.adaptive_threshold, bool) \
                or not 0 <= self.adaptive_threshold <= 1 << 20:
            raise ConfigError(f"SwitchSpec.adaptive_threshold must be an integer within 0..2**20 pending frames, "
                              f"got {self.adaptive_threshold!r}")
        if self.adaptive_pick not in ("first_free", "next_free", "random"):  # switch.routing.qsnet.PICKS
            raise ConfigError(f"SwitchSpec.adaptive_pick {self.adaptive_pick!r} is not one of "
                              "first_free, next_free, random")
        if self.adaptive_heavy not in ADAPTIVE_HEAVY:
            raise ConfigError(f"SwitchSpec.adaptive_heavy {self.adaptive_heavy!r} is not one of {', '.join(ADAPTIVE_HEAVY)}")
        if self.adaptive_free not in ADAPTIVE_FREE:
            raise ConfigError(f"SwitchSpec.adaptive_free {self.adaptive_free!r} is not one of {', '.join(ADAPTIVE_FREE)}")
        if self.adaptive_load not in ADAPTIVE_LOADS:
            raise ConfigError(f"SwitchSpec.adaptive_load {self.adaptive_load!r} is not one of {', '.join(ADAPTIVE_LOADS)}")
        if not isinstance(self.ugal_threshold_bytes, int) or isinstance(self.ugal_threshold_bytes, bool) \
                or not 0 <= self.ugal_threshold_bytes <= 1 << 40:
            raise ConfigError(f"SwitchSpec.ugal_threshold_bytes must be an integer within 0..2**40, "
                              f"got {self.ugal_threshold_bytes!r}")
        if self.ugal_intermediate not in ("group", "router"):
            raise ConfigError(f"SwitchSpec.ugal_intermediate {self.ugal_intermediate!r} is not one of group, router")
        need = {"valiant": 4, "ugal_l": 4, "ugal_g": 4, "par": 5}.get(self.routing, 0)
        if self.ugal_intermediate == "router" and self.vc_policy == "dragonfly" and self.vcs < need:
            raise ConfigError(f"routing={self.routing} with ugal_intermediate=router takes {need} VC classes on a "
                              f"dragonfly (a local-to-local turn at the intermediate router), switch.vcs={self.vcs}: "
                              f"set switch.vcs={need}")
        if self.ugal_queue not in UGAL_QUEUES:
            raise ConfigError(f"SwitchSpec.ugal_queue {self.ugal_queue!r} is not one of {', '.join(UGAL_QUEUES)}")
        if self.ugal_queue == "credits" and self.model != "input_queued":
            raise ConfigError("SwitchSpec.ugal_queue=credits reads the credits of the next router's buffers: it "
                              "needs switch.model=input_queued")
        if not isinstance(self.pending_expiry_ns, int) or isinstance(self.pending_expiry_ns, bool) \
                or not 1 <= self.pending_expiry_ns <= MAX_DELAY_NS:
            raise ConfigError(f"SwitchSpec.pending_expiry_ns must be an integer within 1..{MAX_DELAY_NS} ns, "
                              f"got {self.pending_expiry_ns!r}")

    def _check_router(self) -> None:
        if self.model not in ROUTER_MODELS:
            raise ConfigError(f"SwitchSpec.model {self.model!r} is not one of {', '.join(ROUTER_MODELS)}")
        if self.vc_release not in VC_RELEASES:
            raise ConfigError(f"SwitchSpec.vc_release {self.vc_release!r} is not one of {', '.join(VC_RELEASES)}")
        if self.credit_release not in CREDIT_RELEASES:
            raise ConfigError(f"SwitchSpec.credit_release {self.credit_release!r} is not one of "
                              f"{', '.join(CREDIT_RELEASES)}")
        if not isinstance(self.eject_vcs, bool):
            raise ConfigError(f"SwitchSpec.eject_vcs must be true or false, got {self.eject_vcs!r}")
        if self.allocator not in ALLOCATORS:
            raise ConfigError(f"SwitchSpec.allocator {self.allocator!r} is not one of {', '.join(ALLOCATORS)}")
        for f, lo, hi in (("flit_bytes", 1, 1 << 16), ("classes", 1, 16), ("iterations", 1, 16),
                          ("route_ns", -1, MAX_DELAY_NS), ("vc_alloc_ns", 0, MAX_DELAY_NS),
                          ("sw_alloc_ns", 0, MAX_DELAY_NS), ("traversal_ns", 0, MAX_DELAY_NS)):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ConfigError(f"SwitchSpec.{f} must be an integer within {lo}..{hi}, got {v!r}")
        if self.model == "input_queued":
            if self.vc_buffer_bytes and self.vc_buffer_bytes % self.flit_bytes:
                raise ConfigError(f"SwitchSpec.vc_buffer_bytes {self.vc_buffer_bytes} is not a whole number of "
                                  f"{self.flit_bytes}-byte flits: give a multiple of flit_bytes")
            if self.pool_bytes % self.flit_bytes:
                raise ConfigError(f"SwitchSpec.pool_bytes {self.pool_bytes} is not a whole number of "
                                  f"{self.flit_bytes}-byte flits: give a multiple of flit_bytes")

    @property
    def finite(self) -> bool:
        return self.vc_buffer_bytes > 0 or self.model == "input_queued"

    def buffer_bytes(self, largest_frame: int) -> int:
        """Bytes per input VC buffer: ``vc_buffer_bytes``, or for the input-queued router when it
        is 0, room for two of the largest frames (FCS included) in whole flits."""
        if self.vc_buffer_bytes or self.model != "input_queued":
            return self.vc_buffer_bytes
        return 2 * -(-largest_frame // self.flit_bytes) * self.flit_bytes

    @property
    def vc_groups(self) -> int:
        """Input-queued router: VC groups -- a frame on VC v is of group v mod this; the policy picks
        the group at the next hop (by_class: ``classes``; dateline: 2; class_dateline: 2 per class)."""
        if self.vc_policy in ("dragonfly", "hops"):
            return self.vcs
        return {"dateline": 2, "class_dateline": 2 * self.classes}.get(self.vc_policy, self.classes)

    @property
    def input_queued(self) -> bool:
        return self.model == "input_queued"

    @property
    def stages_ns(self) -> tuple[int, int, int, int]:
        """Input-queued router: (route, VC allocation, switch allocation, traversal) in ns."""
        rc = self.processing_delay_ns if self.route_ns < 0 else self.route_ns
        return rc, self.vc_alloc_ns, self.sw_alloc_ns, self.traversal_ns


ADAPTIVE_LOADS = ("pending", "queue")
UGAL_QUEUES = ("depth", "credits")
ADAPTIVE_HEAVY = ("pick", "least_loaded", "route")
ADAPTIVE_FREE = ("now", "light")
VC_POLICIES = ("by_class", "dateline", "class_dateline", "dragonfly", "hops")
ROUTER_MODELS = ("output_queued", "input_queued")
ALLOCATORS = ("round_robin", "islip")
VC_RELEASES = ("tail_granted", "tail_sent", "tail_credit")
CREDIT_RELEASES = ("tail_left", "per_flit", "head_left")

MANAGER_ACTIONS = ("rewrite", "reset", "none")
MANAGER_BANDS = ("auto", "out", "in")


@dataclass(frozen=True)
class ManagerSpec:
    """The network manager element of spec 03 (``[manager]`` settings; ``emu run --manager``)."""

    persist_ns: int = 20_000
    """A link fault the manager hears of (trap) is acted on if it still stands this long after
    the trap; a link back up meanwhile cancels it."""
    action: str = "rewrite"
    """What the manager does about a link fault that persists (QsNet): rewrite (new routing tables,
    and multicast trees, for the routers that would send into the dead end, and back when the link
    returns), reset (reset the links of the router that can no longer reach the destinations
    behind the dead link: its neighbours take their ports to it out of service, so no traffic flows
    that way and adaptive routing goes round it; back in service when the link returns), or none
    (count and log traps only)."""
    band: str = "auto"
    """How traps and commands travel: out (out of band: every router's own link to the manager), in
    (a manager tree over the data links), auto (the topology family's: out on ``qsnet:``, else in)."""
    retry_ns: int = 20_000
    """A command to a router not answered this long is sent again."""
    max_tries: int = 5
    """Sends of one command before the manager gives up on that router (logged, counted)."""
    bringup: bool = False
    """Bring every switch-to-switch link up in three steps before it joins the tables:
    connectivity, cabling against the topology, a pseudo-random test pattern at line rate."""
    test_frames: int = 64
    """Frames of the bring-up test pattern each end sends on each link."""
    test_bytes: int = 1024
    """Bytes of each test-pattern frame."""
    max_error_rate: float = 0.01
    """A link whose test pattern lost or damaged more than this share of frames is taken out of
    the tables where the network has another way (kept, and reported, where it is the only one)."""

    def __post_init__(self) -> None:
        _check_delays("ManagerSpec", self, ("persist_ns", "retry_ns"))
        if self.action not in MANAGER_ACTIONS:
            raise ConfigError(f"ManagerSpec.action {self.action!r} is not one of {', '.join(MANAGER_ACTIONS)}")
        if self.band not in MANAGER_BANDS:
            raise ConfigError(f"ManagerSpec.band {self.band!r} is not one of {', '.join(MANAGER_BANDS)}")
        if not 1 <= self.max_tries <= 1000:
            raise ConfigError(f"ManagerSpec.max_tries must be within 1..1000, got {self.max_tries}")
        if self.retry_ns < 1:
            raise ConfigError("ManagerSpec.retry_ns must be >= 1 ns")
        if not 1 <= self.test_frames <= 32_767:
            raise ConfigError(f"ManagerSpec.test_frames must be within 1..32767 (a trap counts the errors of both "
                              f"ways in 16 bits), got {self.test_frames}")
        if not 16 <= self.test_bytes <= 9000:
            raise ConfigError(f"ManagerSpec.test_bytes must be within 16..9000, got {self.test_bytes}")
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise ConfigError(f"ManagerSpec.max_error_rate must be within 0..1, got {self.max_error_rate}")
