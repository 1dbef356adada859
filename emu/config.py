"""Typed configuration, units in the names (DESIGN.md principle 7)."""

from __future__ import annotations

from dataclasses import dataclass


class ConfigError(ValueError):
    """A topology or parameter is refused before anything starts; the message names the fix."""


MAX_DELAY_NS = 10**12
"""Largest delay a spec may give (1000 s of virtual time): far from overflowing 64-bit time stamps."""


def _check_delays(cls: str, spec, names: tuple[str, ...]) -> None:
    for f in names:
        v = getattr(spec, f)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_DELAY_NS:
            raise ConfigError(f"{cls}.{f} must be an integer within 0..10**12, got {v!r}")


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

    def serialization_ns(self, nbytes: int) -> int:
        return -((-nbytes * 8 * 1_000_000_000) // self.bandwidth_bps)

    def frame_bytes(self, ptype: int, body: int) -> int:
        """The modelled length on this link of a frame of fabric ``ptype`` whose body (mechanism
        header(s) and payload) is ``body`` bytes (``emu.wire.framing.frame_length``)."""
        from .wire.framing import frame_length
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
    below ``adaptive_threshold`` pending frames, picked by ``adaptive_pick``; none: the least loaded)."""
    adaptive_threshold: int = 2
    """Pending frames on a link below which it counts as lightly loaded (``routing=qsnet``): frames
    on the line plus those waiting for credit; 0: no link is, always the least loaded."""
    adaptive_pick: str = "first_free"
    """How ``routing=qsnet`` picks among the lightly loaded links: first_free (the lowest-numbered),
    next_free (round robin per switch) or random (seeded per switch)."""
    adaptive_load: str = "pending"
    """What ``routing=qsnet`` compares against ``adaptive_threshold``: pending (QsNet's measure: the
    operations this router sent out of a link whose ACK has not come back through it; the token
    retraces its packet's route, ``emu.switch.routing.pending``) or queue (frames on the line plus
    those waiting for credit: the output queue, a local stand-in)."""
    pending_expiry_ns: int = 1_000_000
    """``adaptive_load=pending``: an operation whose ACK has not come back this long after it was
    routed (lost with its packet or on the way back) leaves the count."""
    vc_policy: str = "by_class"
    """How a switch picks the VC on the next link: by_class (the frame's own vc), dateline (tori:
    VC 0 until the frame crosses a dimension's wrap-around link, then 1; back to 0 in a new dimension),
    class_dateline (tori: a pair of VCs per traffic class 2c, 2c + 1, the dateline bit as above)."""
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
    pu: PUSpec = PUSpec()
    """Its processing unit for in-network aggregation (spec 04)."""

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
        if self.vc_policy not in VC_POLICIES:
            raise ConfigError(f"SwitchSpec.vc_policy {self.vc_policy!r} is not one of {', '.join(VC_POLICIES)}")
        if not isinstance(self.adaptive_threshold, int) or isinstance(self.adaptive_threshold, bool) \
                or not 0 <= self.adaptive_threshold <= 1 << 20:
            raise ConfigError(f"SwitchSpec.adaptive_threshold must be an integer within 0..2**20 pending frames, "
                              f"got {self.adaptive_threshold!r}")
        if self.adaptive_pick not in ("first_free", "next_free", "random"):  # switch.routing.qsnet.PICKS
            raise ConfigError(f"SwitchSpec.adaptive_pick {self.adaptive_pick!r} is not one of "
                              "first_free, next_free, random")
        if self.adaptive_load not in ADAPTIVE_LOADS:
            raise ConfigError(f"SwitchSpec.adaptive_load {self.adaptive_load!r} is not one of {', '.join(ADAPTIVE_LOADS)}")
        if not isinstance(self.pending_expiry_ns, int) or isinstance(self.pending_expiry_ns, bool) \
                or not 1 <= self.pending_expiry_ns <= MAX_DELAY_NS:
            raise ConfigError(f"SwitchSpec.pending_expiry_ns must be an integer within 1..{MAX_DELAY_NS} ns, "
                              f"got {self.pending_expiry_ns!r}")

    def _check_router(self) -> None:
        if self.model not in ROUTER_MODELS:
            raise ConfigError(f"SwitchSpec.model {self.model!r} is not one of {', '.join(ROUTER_MODELS)}")
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
VC_POLICIES = ("by_class", "dateline", "class_dateline")
ROUTER_MODELS = ("output_queued", "input_queued")
ALLOCATORS = ("round_robin", "islip")


@dataclass(frozen=True)
class NicSpec:
    """Timing and sizes of the collective-offload NIC of spec 01 (triggered descriptors)."""

    descriptor_ns: int = 40
    """Request send unit: to turn a posted or triggered descriptor into one request message."""
    queue_ns: int = 10
    """One write or read of the request receive queue."""
    alu_ns: int = 4
    """One ALU operation (one operand pair combined)."""
    completion_ns: int = 150
    """Writing a completion (status and result) to host memory."""
    post_ns: int = 80
    """Host CPU time to post one 128-byte descriptor to the NIC."""
    queue_capacity: int = 64
    """Request receive queue entries, shared by all virtual ports (must hold a branch degree)."""
    virtual_ports: int = 64
    """Virtual ports (the descriptor's VP fields have 6 bits)."""

    def __post_init__(self) -> None:
        _check_delays("NicSpec", self, ("descriptor_ns", "queue_ns", "alu_ns", "completion_ns", "post_ns"))
        if not 1 <= self.queue_capacity <= 4096:
            raise ConfigError(f"NicSpec.queue_capacity must be within 1..4096, got {self.queue_capacity}")
        if not 1 <= self.virtual_ports <= 64:
            raise ConfigError(f"NicSpec.virtual_ports must be within 1..64, got {self.virtual_ports}")


ROUTE_PICKS = ("round_robin", "random")


@dataclass(frozen=True)
class ElanSpec:
    """The QsNet adapter of spec 03: reliable packets, put/get, atomics (``[elan]`` settings)."""

    packet_bytes: int = 1024
    """Data bytes per packet of a put or get (the 24-byte transaction header rides with them; the
    payload may reach 4096 bytes): 1 KiB is the source's typical packet."""
    mem_write_ns: int = 350
    """Writing a packet's data to host memory at the target (the source: 300-400 ns)."""
    issue_ns: int = 100
    """Host CPU time to hand a put, get or atomic command to the adapter."""
    window: int = 32
    """Packets the adapter may have outstanding (sent, not yet acknowledged) on its link."""
    retransmit_ns: int = 50_000
    """A packet not acknowledged this long after it left is sent again (the ACK or the packet was
    lost); a NACK resends at once."""
    max_tries: int = 8
    """Sends of one packet before its transfer fails (reported, never a hang)."""
    routes: int = 1
    """Routes the adapter spreads a destination's packets over (dispersive source routing when the
    switches run ``routing=dispersive``; 1: the switches choose). A resent packet always takes the
    next route id."""
    route_pick: str = "round_robin"
    """How the adapter picks a packet's route among ``routes``: round_robin or random (seeded)."""
    vc: int = 0
    """Virtual channel of bulk packets (ACK tokens and small control packets use ``vc + 1``)."""
    poll_ns: int = 1000
    """The polled barrier: how long the root's adapter waits after a conditional came back false
    before it sends the next."""

    def __post_init__(self) -> None:
        _check_delays("ElanSpec", self, ("mem_write_ns", "issue_ns", "retransmit_ns", "poll_ns"))
        if not isinstance(self.packet_bytes, int) or not 8 <= self.packet_bytes <= 4096 - 24:
            raise ConfigError(f"ElanSpec.packet_bytes must be within 8..4072 (a packet carries at most 4 KiB "
                              f"with its 24-byte transaction header), got {self.packet_bytes!r}")
        if not 1 <= self.window <= 32:
            raise ConfigError(f"ElanSpec.window must be within 1..32 outstanding packets, got {self.window}")
        if not 1 <= self.max_tries <= 1000:
            raise ConfigError(f"ElanSpec.max_tries must be within 1..1000, got {self.max_tries}")
        if self.retransmit_ns < 1:
            raise ConfigError("ElanSpec.retransmit_ns must be >= 1 ns")
        if not 1 <= self.routes <= 256:
            raise ConfigError(f"ElanSpec.routes must be within 1..256 (an 8-bit route id), got {self.routes}")
        if self.route_pick not in ROUTE_PICKS:
            raise ConfigError(f"ElanSpec.route_pick {self.route_pick!r} is not one of {', '.join(ROUTE_PICKS)}")
        if not 0 <= self.vc <= 30:
            raise ConfigError(f"ElanSpec.vc must be within 0..30, got {self.vc}")


TRANSPORTS = ("none", "reliable")
"""Host messaging's end-to-end transports (``HostSpec.transport``)."""


@dataclass(frozen=True)
class HostSpec:
    """A host and its NIC."""

    nic_delay_ns: int = 100
    """Per-frame NIC processing delay, on transmit (hand-off to the port) and on receive (ns)."""
    mtu_bytes: int = 1024
    """Largest message payload carried by one frame; the frame adds 46 header bytes (Ethernet 14,
    fabric 16, message segment 16) and the 4-byte frame check sequence on the wire. Messages
    longer than this are segmented and reassembled."""
    send_overhead_ns: int = 300
    """Host CPU time the messaging software spends per message sent (LogP's o on the sender):
    the application continues, and the NIC gets the message, this long after ``send``."""
    recv_overhead_ns: int = 300
    """Host CPU time per message received: ``recv`` returns this long after the message is there."""
    reduce_ps_per_byte: int = 250
    """Host CPU time to combine one byte of reduction operands, in picoseconds (250 ps/B = 4 GB/s);
    a reduction of B bytes costs ceil(B * this / 1000) ns."""
    xor_ns: int = 1
    """Network-coded broadcast: the NIC's time to XOR two packets (encode or decode one chain link), ns (1 cycle at
    1 GHz by default; the source swept 0-35 cycles)."""
    max_message_bytes: int = 1 << 30
    """Largest message a host accepts; a segment announcing more is malformed (counted, dropped)."""
    transport: str = "none"
    """Host messaging end to end: none (each frame sent once, as ns-3's UDP; a frame lost to a fault
    is never recovered) or reliable (the receiver acknowledges each whole message; the sender sends
    again one not acknowledged ``rto_ns`` after its last frame left, the wait doubling, up to
    ``max_tries`` sends; duplicates are dropped). ``emu run`` picks reliable for a run with --fault or
    --manager unless this is set."""
    rto_ns: int = 1_000_000
    """reliable: how long after a message's last frame left the sender waits for its acknowledgement
    before it sends the message again (ns); doubled after each try. Longer than any queue its frames
    meet on the way, or they are sent again needlessly (duplicates, dropped, but counted in the
    figures): 1 ms, as InfiniBand's local ACK timeouts of a few ms."""
    max_tries: int = 8
    """reliable: sends of one message before the sender gives up on it (logged and counted; the run
    then ends saying so, never a hang)."""
    noise: str = "none"
    """OS noise on the host CPU (``emu.nodes.host.noise``): none, periodic (a detour of
    ``noise_duration_ns`` every ``noise_interval_ns``) or random (exponential gaps of mean
    ``noise_interval_ns`` between detours). CPU work the host charges does not progress during a detour."""
    noise_interval_ns: int = 0
    """periodic: the period of the detours; random: the mean gap between one detour and the next (ns)."""
    noise_duration_ns: int = 0
    """The length of one detour (ns)."""
    noise_phase: str = "random"
    """periodic: each host's first detour at a phase drawn from the seed (random) or at 0 on every host (aligned)."""
    skew: str = "none"
    """Lateness of each rank at a collective's entry: none, fixed (rank x ``skew_ns``), uniform (in
    [0, ``skew_ns``]) or exponential (mean ``skew_ns``), drawn per host from the seed."""
    skew_ns: int = 0
    """The skew's scale (ns)."""
    nic: NicSpec = NicSpec()
    """The collective-offload engine of the NIC (spec 01)."""
    elan: ElanSpec = ElanSpec()
    """The QsNet adapter of the NIC (spec 03): reliable packets, put/get, atomics."""

    def __post_init__(self) -> None:
        _check_delays("HostSpec", self, ("nic_delay_ns", "send_overhead_ns", "recv_overhead_ns", "reduce_ps_per_byte",
                                         "xor_ns"))
        if not isinstance(self.max_message_bytes, int) or not 1 <= self.max_message_bytes <= 0xFFFFFFFF:
            raise ConfigError(f"HostSpec.max_message_bytes must be within 1..2**32-1 (the segment header's "
                              f"32-bit total), got {self.max_message_bytes!r}")
        if not 1 <= self.mtu_bytes <= 16_000:
            raise ConfigError(f"HostSpec.mtu_bytes must be within 1..16000, got {self.mtu_bytes}")
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"HostSpec.transport must be one of {', '.join(TRANSPORTS)}, got {self.transport!r}")
        if not isinstance(self.rto_ns, int) or not 1 <= self.rto_ns <= 10**12:
            raise ConfigError(f"HostSpec.rto_ns must be within 1..10**12 ns, got {self.rto_ns!r}")
        if not isinstance(self.max_tries, int) or not 1 <= self.max_tries <= 64:
            raise ConfigError(f"HostSpec.max_tries must be within 1..64, got {self.max_tries!r}")
        self._check_noise()

    def _check_noise(self) -> None:
        for f in ("noise_interval_ns", "noise_duration_ns", "skew_ns"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 10**12:
                raise ConfigError(f"HostSpec.{f} must be an integer within 0..10**12 ns, got {v!r}")
        if self.noise not in ("none", "periodic", "random"):
            raise ConfigError(f"HostSpec.noise must be none, periodic or random, got {self.noise!r}")
        if self.noise_phase not in ("random", "aligned"):
            raise ConfigError(f"HostSpec.noise_phase must be random or aligned, got {self.noise_phase!r}")
        if self.skew not in ("none", "fixed", "uniform", "exponential"):
            raise ConfigError(f"HostSpec.skew must be none, fixed, uniform or exponential, got {self.skew!r}")
        if self.noise == "periodic" and not 0 < self.noise_duration_ns < self.noise_interval_ns:
            raise ConfigError(f"host.noise=periodic needs 0 < host.noise_duration_ns < host.noise_interval_ns, got "
                              f"{self.noise_duration_ns} and {self.noise_interval_ns}: set both (e.g. 2500 every 100000)")
        if self.noise == "random" and not (self.noise_duration_ns > 0 and self.noise_interval_ns > 0):
            raise ConfigError(f"host.noise=random needs host.noise_duration_ns > 0 and host.noise_interval_ns > 0 "
                              f"(the mean gap), got {self.noise_duration_ns} and {self.noise_interval_ns}")


    def reduce_ns(self, nbytes: int) -> int:
        """Modelled host time to reduce ``nbytes`` of operands (ns)."""
        return -((-nbytes * self.reduce_ps_per_byte) // 1000)


MIN_REALTIME_NS_PER_S = 1e3
"""Slowest real-time pace: 1 us of virtual time per wall-clock second (slower paces a short run over hours)."""


@dataclass(frozen=True)
class RunConfig:
    """How a cluster runs (not what it models)."""

    seed: int = 0
    """Seeds every element's random generator (per element: seed and node id)."""
    processes: int = 1
    """OS processes the elements are spread over (1 = all in this process)."""
    capture: bool = False
    """Record every frame at every port for a pcapng capture."""
    stall_timeout_s: float = 0.2
    """Longest wall-clock wait for expected frames before asking senders to retransmit (recovery
    round); the first wait is ``recovery_first_s``, doubled each round nothing arrives."""
    recovery_first_s: float = 0.001
    """First wall-clock wait for missing frames before the senders are asked to retransmit (fast
    retransmit: what a window waits for was sent before it started, so a short wait suffices).
    On loopback only; off it (``bind``) the first wait is ``stall_timeout_s``."""
    max_recovery_rounds: int = 50
    """Recovery rounds without progress before a loss is declared unrecoverable (run stops)."""
    realtime_ns_per_s: float | None = None
    """Real-time mode: pace virtual time to the wall clock at this many virtual ns per second
    (1e9 = real time). None: as fast as possible. Figures are the same either way."""
    socket_drop_rate: float = 0.0
    """Test hook: drop this fraction of datagrams just before sendto, as an overloaded OS would, to
    exercise recovery. The model never sees it; results must not change."""
    capture_spill_records: int = 200_000
    """With capture on: a process writes its recorded frames to a sorted run file on disk whenever it
    holds more than this many, so a capture takes bounded memory whatever the run's length; the
    runs are merged into the pcapng file at the end (the same bytes as an all-in-memory capture)."""
    capture_dir: str | None = None
    """Where the spilled runs go: a ``Cluster`` makes one folder for them in it (None: the system's
    temporary folder) and removes that folder when it ends, however it ends -- also after a worker
    process was killed."""
    worker_timeout_s: float | None = 8.0
    """Wall-clock seconds a worker process may leave a call unanswered while using no CPU (stopped,
    SIGSTOP, or hung) before the run stops with an error naming its domain and pid, and the worker
    is killed. None: wait for it forever."""
    direct: bool = False
    """False (the default): every link carries real UDP datagrams, also between two elements of one
    process (a live capture of the loopback interface sees them all). True (``emu run --direct``,
    for large runs): frames between two elements of one process go from the sender's port to the
    receiver's input queue in memory, without a socket round trip -- the same records, sequence
    numbers, figures and capture bytes; what the model sees is unchanged. Frames between processes
    always travel as datagrams, and a socket drop rate puts every link on UDP whatever this says."""
    batch: bool = True
    """True (the default): the elements of a process share one UDP socket, and what they send in a
    window goes as one datagram per destination process (up to 60 KB each; ``emu.batch``) -- every
    frame still a record in a real datagram, checked per record against the socket at the other end
    of its link. False: every element has a socket of its own and every port's frames of a window
    are a datagram of their own (many more system calls; the same figures and capture bytes)."""
    bind: str = "127.0.0.1"
    """Where the elements' sockets listen: an IPv4 address or a network interface's name (each
    process resolves a name to its own address: one spec for every machine of an MPI run).
    Loopback unless the user names another; frames between processes travel there."""
    partition: str = "metis"
    """How nodes are spread over processes: ``metis`` (balanced expected load, least expected
    traffic between processes; ``emu.partition``) or ``order`` (contiguous blocks of the node
    order). Figures and captures are the same either way; only the wall-clock time differs."""
    mpi: bool = False
    """The processes are the ranks of the MPI job this runs in (``mpiexec -n N``; ``processes``
    must be N): rank d hosts domain d, the window barrier is an MPI collective (``emu.mpi``)."""
    trace: str | None = None
    """Write the run's timeline to this file as Chrome trace-event JSON (``emu.trace``); None: off."""
    trace_limit_bytes: int = 256 << 20
    """Size limit of the trace: past it nothing more is written, and the trace says what it left out."""
    trace_bin_ns: int = 1000
    """Width of the trace's link-load bins (ns)."""

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError(f"RunConfig.seed must be an integer within 0..2**63-1, got {self.seed!r}")
        if not 1 <= self.processes <= 64:
            raise ConfigError(f"RunConfig.processes must be within 1..64, got {self.processes}")
        if self.realtime_ns_per_s is not None and not self.realtime_ns_per_s >= MIN_REALTIME_NS_PER_S:
            raise ConfigError(f"RunConfig.realtime_ns_per_s must be at least {MIN_REALTIME_NS_PER_S:g}, "
                              f"got {self.realtime_ns_per_s}")
        if not isinstance(self.capture_spill_records, int) or self.capture_spill_records < 1:
            raise ConfigError(f"RunConfig.capture_spill_records must be a positive integer, got {self.capture_spill_records!r}")
        if not 0.0 <= self.socket_drop_rate < 1.0:
            raise ConfigError(f"RunConfig.socket_drop_rate must be within [0, 1), got {self.socket_drop_rate}")
        if self.partition not in PARTITIONS:
            raise ConfigError(f"RunConfig.partition {self.partition!r} is not one of {', '.join(PARTITIONS)}")
        if not isinstance(self.bind, str) or not self.bind:
            raise ConfigError(f"RunConfig.bind must name an IPv4 address or an interface, got {self.bind!r}")
        _refuse_wildcard(self.bind)
        if not isinstance(self.trace_limit_bytes, int) or self.trace_limit_bytes < 4096:
            raise ConfigError(f"RunConfig.trace_limit_bytes must be an integer of at least 4096, got {self.trace_limit_bytes!r}")
        if not isinstance(self.trace_bin_ns, int) or self.trace_bin_ns < 1:
            raise ConfigError(f"RunConfig.trace_bin_ns must be a positive integer, got {self.trace_bin_ns!r}")


PARTITIONS = ("metis", "order")


def bind_address(spec: str) -> str:
    """The IPv4 address this process binds for ``RunConfig.bind``: ``spec`` itself if it is an
    address, else the address of the interface of that name here. Refused with a ConfigError
    naming the fix when neither."""
    import ipaddress
    import socket

    _refuse_wildcard(spec)
    try:
        return str(ipaddress.IPv4Address(spec))
    except ValueError:
        pass
    names = [n for _, n in socket.if_nameindex()] if hasattr(socket, "if_nameindex") else []
    if spec not in names:
        raise ConfigError(f"--bind {spec!r} is neither an IPv4 address nor a network interface here "
                          f"(interfaces: {', '.join(names) or 'none found'}); name one of them or an address")
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("256s", spec.encode()[:15])
            return socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])  # SIOCGIFADDR
    except (OSError, ImportError):
        raise ConfigError(f"--bind {spec!r}: the interface has no IPv4 address here; give an address "
                          "instead") from None


def _refuse_wildcard(spec: str) -> None:
    """``--bind 0.0.0.0`` (or ``::``): a socket bound there has no one address its peers could be
    told, and a link's frames are checked against the address of the socket at its other end."""
    import ipaddress

    try:
        wildcard = ipaddress.ip_address(spec).is_unspecified
    except ValueError:
        return
    if wildcard:
        raise ConfigError(f"--bind {spec} is a wildcard address: every element needs one address its peers "
                          "send to and check; name the interface (e.g. --bind eth0) or its own address")


def is_loopback(address: str) -> bool:
    """Is ``address`` (as ``bind_address`` returns it) on loopback (127.0.0.0/8, ::1)? Off loopback
    every datagram carries a keyed tag (``emu.wire.outer.datagram_tag``)."""
    import ipaddress

    return ipaddress.ip_address(address).is_loopback


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


# -- settings: every field of the specs, from the CLI (--set) and from TOML files (--config) ------
SECTIONS: dict[str, type] = {"link": LinkSpec, "host": HostSpec, "nic": NicSpec, "elan": ElanSpec,
                             "switch": SwitchSpec, "manager": ManagerSpec, "pu": PUSpec}
"""Settable sections by name; a later spec registers its own with :func:`register_section`."""
MAX_INT = 1 << 62
"""Largest integer a setting may take: virtual times are 64-bit on the wire."""


def register_section(name: str, cls: type) -> None:
    SECTIONS[name] = cls


def _field_types(cls: type) -> dict[str, type]:
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if hints[f.name] in (int, float, bool, str)}


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a spec dataclass (the first sentence: up to a full stop
    followed by a capital, so that "e.g. 4" or "i.e. 512" does not end it)."""
    import ast
    import re
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body
    docs = {}
    for a, b in zip(body, body[1:]):
        if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
            text = " ".join(b.value.value.split())
            docs[a.target.id] = re.split(r"(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z`(])", text, maxsplit=1)[0].rstrip(".") + "."
    return docs


def settable_fields() -> list[tuple[str, str, object, str]]:
    """(section.field, type name, default, doc) of every settable field, for help texts."""
    out = []
    for section, cls in SECTIONS.items():
        docs = field_docs(cls)
        defaults = cls()
        for name, kind in _field_types(cls).items():
            out.append((f"{section}.{name}", kind.__name__, getattr(defaults, name), docs.get(name, "")))
    return out


def _convert(where: str, value: object, kind: type) -> object:
    """A setting's value as the field's type (strings from the CLI, TOML values from a file)."""
    if isinstance(value, str) and kind is not str:
        text = value.strip().replace("_", "")
        if not text.isascii():  # int() and float() take any script's digits: '٤' would be 4
            raise ConfigError(f"{where} must be written in ASCII (digits 0-9), got {value!r}")
        try:
            if kind is bool:
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                value = text.lower() in ("true", "1", "yes")
            elif kind is int:
                value = int(text, 0) if not any(c in text.lower() for c in ".e") or text.lower().startswith("0x") \
                    else _int_from_float(where, float(text))
            else:
                value = float(text)
        except ValueError:
            raise ConfigError(f"{where} must be {'an integer' if kind is int else 'a number' if kind is float else 'true or false'}, "
                              f"got {value!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is int and isinstance(value, float):
        value = _int_from_float(where, value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where} must be of type {kind.__name__}, got {value!r}")
    if kind is int and not -MAX_INT <= value <= MAX_INT:
        raise ConfigError(f"{where}={value} is out of range (at most 2**62); use a smaller value")
    if kind is float:
        import math

        if not math.isfinite(value) or abs(value) > MAX_INT:
            raise ConfigError(f"{where}={value} must be a finite number of at most 2**62")
    return value


def _int_from_float(where: str, v: float) -> int:
    import math

    if not math.isfinite(v) or v != int(v):
        raise ConfigError(f"{where} must be an integer, got {v!r}")
    return int(v)


def parse_settings(items: list[str]) -> dict[str, dict[str, object]]:
    """``["host.send_overhead_ns=435", "link.latency_ns=100"]`` -> {section: {field: value}},
    each value converted and checked against its field (ConfigError names the fix)."""
    out: dict[str, dict[str, object]] = {}
    for item in items:
        key, eq, value = (x.strip() for x in str(item).partition("="))
        section, dot, name = key.partition(".")
        if not eq or not dot or not value:
            raise ConfigError(f"--set {item!r} is not SECTION.FIELD=VALUE, e.g. --set host.send_overhead_ns=435")
        _check_key(section, name, f"--set {key}")
        out.setdefault(section, {})[name] = _convert(key, value, _field_types(SECTIONS[section])[name])
    return out


def _check_key(section: str, name: str, where: str) -> None:
    cls = SECTIONS.get(section)
    if cls is None:
        raise ConfigError(f"{where}: unknown section {section!r}; sections: {', '.join(SECTIONS)}")
    if name not in _field_types(cls):
        raise ConfigError(f"{where}: {section} has no field {name!r}; fields: {', '.join(_field_types(cls))}")


def load_settings(path: str) -> dict[str, dict[str, object]]:
    """A TOML file of sections (``[link]``, ``[host]``, ``[nic]``, ``[switch]``) of fields."""
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"--config {path}: cannot be read as TOML ({e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"--config {path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                          "TOML files are UTF-8: save it as UTF-8") from None
    out: dict[str, dict[str, object]] = {}
    for section, fields in data.items():
        if not isinstance(fields, dict):
            raise ConfigError(f"--config {path}: {section} = ... must be a [section] of fields "
                              f"(sections: {', '.join(SECTIONS)})")
        for name, value in fields.items():
            _check_key(section, name, f"--config {path}")
            out.setdefault(section, {})[name] = _convert(f"{section}.{name}", value, _field_types(SECTIONS[section])[name])
    return out


def merge_settings(*layers: dict[str, dict[str, object]] | None) -> dict[str, dict[str, object]]:
    """Later layers win, field by field."""
    out: dict[str, dict[str, object]] = {}
    for layer in layers:
        for section, fields in (layer or {}).items():
            out.setdefault(section, {}).update(fields)
    return out
