"""The specs of a host: its NIC's timing, the collective-offload engine (spec 01), the QsNet
adapter (spec 03)."""

from __future__ import annotations

from dataclasses import dataclass

from .base import ConfigError, _check_delays
from .cc import CcParams


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
    counter_bits: int = 6
    """Bits of the count of children a reduce descriptor waits for: 6, the spec's CpCnt (word 0, bits
    41-36): at most 63 children a node, so 128 and 256 ranks get a second tree level; 7 or 8, a
    wider counter -- the source's flat test tree, a root counting 127 or 255 leaves -- which
    departs from the 6-bit field: the count is BranchDegree's (word 1, 8 bits), CpCnt is left 0
    when it cannot hold it (docs/nic-offload.md)."""

    def __post_init__(self) -> None:
        _check_delays("NicSpec", self, ("descriptor_ns", "queue_ns", "alu_ns", "completion_ns", "post_ns"))
        if not 6 <= self.counter_bits <= 8:
            raise ConfigError(f"NicSpec.counter_bits must be within 6..8 (6: the spec's CpCnt; 8: BranchDegree's "
                              f"width), got {self.counter_bits}")
        if not 1 <= self.queue_capacity <= 4096:
            raise ConfigError(f"NicSpec.queue_capacity must be within 1..4096, got {self.queue_capacity}")
        if not 1 <= self.virtual_ports <= 64:
            raise ConfigError(f"NicSpec.virtual_ports must be within 1..64, got {self.virtual_ports}")


ROUTE_PICKS = ("round_robin", "random")

INC_SCHEDULES = ("staggered", "rotated", "in order")
"""The orders hosts send an in-network allreduce's blocks in (``emu.wire.inc.send_order``); the
first, the source's, is the default."""


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
    inc_schedule: str = "staggered"
    """In-network allreduce (``--offload switch``): the order the adapter sends an allreduce's blocks
    in -- staggered (the source's), rotated or "in order" (``emu.wire.inc.send_order``);
    ``comm.inc_schedule`` overrides it for a communicator."""

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
        if self.inc_schedule not in INC_SCHEDULES:
            raise ConfigError(f"ElanSpec.inc_schedule {self.inc_schedule!r} is not one of {', '.join(INC_SCHEDULES)}")


TRANSPORTS = ("none", "reliable")
"""Host messaging's built-in end-to-end transports (``HostSpec.transport``; more by name from
installed packages: ``emu.nodes.nic.transport.transport_class``)."""
INJECT_VCS = ("most_credit", "free")
"""How a frame into an input-queued router takes its VC (``HostSpec.inject_vc``)."""


@dataclass(frozen=True)
class HostSpec(CcParams):
    """A host and its NIC (its congestion control's settings: :class:`emu.config.cc.CcParams`)."""

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
    mpi_poll_ns: int = 100
    """``emu mpirun``: host CPU time of an MPI test or probe that finds nothing (``Iprobe``,
    ``Test``... -- one pass of the library's progress engine), so that a program spinning on one
    lets virtual time, and the messages it waits for, advance. 0: no time (a spin never ends)."""
    reduce_ps_per_byte: int = 250
    """Host CPU time to combine one byte of reduction operands, in picoseconds (250 ps/B = 4 GB/s);
    a reduction of B bytes costs ceil(B * this / 1000) ns."""
    xor_ns: int = 1
    """Network-coded broadcast: the NIC's time to XOR two packets (encode or decode one chain link), ns (1 cycle at
    1 GHz by default; the source swept 0-35 cycles)."""
    eager_limit_bytes: int = 16384
    """``emu mpirun``'s point-to-point protocol: a message of at most this many bytes goes eagerly (at
    once, buffered at the receiver if no receive matches it yet); a longer one by rendezvous
    (request-to-send, clear-to-send once a receive matched it, then the data: the send completes
    when its data went, ``emu.wire.mpi``). 16 KiB (bytes): the eager limit MPICH's ch4:ofi meets with
    libfabric's verbs and tcp providers through ofi_rxm, whose eager buffer (FI_OFI_RXM_BUFFER_SIZE)
    is 16 KiB by default -- the low end of the 16-64 KiB that MPICH's ch4 devices use; UCX's
    rendezvous threshold on InfiniBand is of the same order."""
    max_message_bytes: int = 1 << 30
    """Largest message a host accepts; a segment announcing more is malformed (counted, dropped)."""
    inject_vc: str = "most_credit"
    """Into an input-queued router, which VC of its group a frame takes: most_credit (chosen as it is
    handed to the port, the VC with the most credit not yet spoken for; frames then wait per VC) or
    free (BookSim's source: frames wait in one queue per group, and the one at its head takes, when
    it starts, the next VC round robin with credit for it)."""
    transport: str = "none"
    """Host messaging end to end: none (each frame sent once, as ns-3's UDP; a frame lost to a fault
    is never recovered) or reliable (the receiver acknowledges each whole message; the sender sends
    again one not acknowledged ``rto_ns`` after its last frame left, the wait doubling, up to
    ``max_tries`` sends; duplicates are dropped). ``emu run`` picks reliable for a run with --fault or
    --manager unless this is set."""
    rto_ns: int = 1_000_000
    """reliable: the retransmission timeout before the host has measured a round trip, and the
    most it ever is (ns). From the first acknowledgement on, the timeout follows the measured round
    trip (Jacobson/Karn, as RFC 6298 and RDMA transports): one estimate per host for all its peers
    (every path of these fabrics is a few hops; per pair, a collective's partners would seldom have
    a sample before they need one), sampled from each message acknowledged after its first send --
    from when its frames were handed to the port to its acknowledgement -- as ``srtt`` and ``rttvar``
    (gains 1/8 and 1/4), and the timeout is ``srtt + 4 * rttvar`` held within ``rto_min_ns`` (or
    this, if lower) and this; the messages still waiting on the initial value when the first sample
    comes take the measured one. A message waits the timeout at its first send, counted from when its last frame left the
    port (while frames still wait at the host's own port, the wait starts again when they left),
    doubling with each send after (the estimate itself is not backed off: other peers' messages
    keep the measured one). 1 ms, as InfiniBand's local ACK timeouts of a few ms: a healthy run,
    which never waits that long, has the same figures whatever the estimate."""
    rto_min_ns: int = 200_000
    """reliable: the floor of the measured timeout (ns). It covers the queueing a message can meet
    on a healthy lossless fabric beyond what the round trips before it showed, so that no healthy
    run sends a message twice: measured, a message of a 16 KiB alltoall on ``qsnet:nodes=32`` waits
    up to 211 us for its acknowledgement (on ``fattree:k=4,n=2`` at 256 KiB, 24 us), after round
    trips of a few us -- a floor of 20 or 100 us sends some of them again. 200 us: a message lost
    to a failing link is sent again after about a fifth of the 1 ms it waited before (TCP's floor
    is 200 ms on round trips of ms; RDMA NICs' timeouts are a few us to hundreds of ms)."""
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
    """The length of one detour (ns); 0: no detours, the figures of ``noise=none`` (a sweep of the
    duration may start at zero noise)."""
    noise_phase: str = "random"
    """periodic: each host's first detour at a phase drawn from the seed (random) or at 0 on every host (aligned)."""
    skew: str = "none"
    """Lateness of each rank at a collective's entry: none, fixed (rank x ``skew_ns``), uniform (in
    [0, ``skew_ns``]) or exponential (mean ``skew_ns``), drawn per host from the seed."""
    skew_ns: int = 0
    """The skew's scale (ns)."""
    traffic_class: int = 0
    """The fabric header's ``prio`` on this host's message frames, 0..7 (the switches' traffic classes:
    ``[queues]``). A port without class queues has two levels: a frame of prio > 0 overtakes the
    prio-0 frames waiting there (strict priority, ``LinkSpec.priority``); a switch's class queues serve
    the eight by strict priority or by weights (``queues.arbiter``). ``emu run --job NAME:...,class=K``
    sets it on the job's hosts, through ``queues.class_map`` (docs/jobs.md)."""
    class_vc: int = 0
    """The VC byte of this host's messages its program sends on VC 0 (``send``/``isend``'s default):
    a job's class on input-queued routers with ``switch.classes`` > 1 and ``vc_policy=by_class``, so
    the job's frames have VC buffers of their own there (``emu run --job ...,class=K``). 0: as sent."""
    nic: NicSpec = NicSpec()
    """The collective-offload engine of the NIC (spec 01)."""
    elan: ElanSpec = ElanSpec()
    """The QsNet adapter of the NIC (spec 03): reliable packets, put/get, atomics."""

    def __post_init__(self) -> None:
        _check_delays("HostSpec", self, ("nic_delay_ns", "send_overhead_ns", "recv_overhead_ns", "reduce_ps_per_byte",
                                         "xor_ns"))
        if self.traffic_class not in range(8) or isinstance(self.traffic_class, bool):
            raise ConfigError(f"HostSpec.traffic_class must be within 0..7 (the fabric header's prio: the switches' "
                              f"traffic classes), got {self.traffic_class!r}")
        if not isinstance(self.class_vc, int) or isinstance(self.class_vc, bool) or not 0 <= self.class_vc <= 255:
            raise ConfigError(f"HostSpec.class_vc must be within 0..255 (the fabric header's vc), got {self.class_vc!r}")
        if not isinstance(self.eager_limit_bytes, int) or isinstance(self.eager_limit_bytes, bool) \
                or not 0 <= self.eager_limit_bytes <= 1 << 30:
            raise ConfigError(f"HostSpec.eager_limit_bytes must be an integer within 0..2**30 bytes, got "
                              f"{self.eager_limit_bytes!r}")
        if not isinstance(self.max_message_bytes, int) or not 1 <= self.max_message_bytes <= 0xFFFFFFFF:
            raise ConfigError(f"HostSpec.max_message_bytes must be within 1..2**32-1 (the segment header's "
                              f"32-bit total), got {self.max_message_bytes!r}")
        if not 1 <= self.mtu_bytes <= 16_000:
            raise ConfigError(f"HostSpec.mtu_bytes must be within 1..16000, got {self.mtu_bytes}")
        if self.inject_vc not in INJECT_VCS:
            raise ConfigError(f"HostSpec.inject_vc must be one of {', '.join(INJECT_VCS)}, got {self.inject_vc!r}")
        if not isinstance(self.transport, str) or not self.transport.isidentifier():
            raise ConfigError(f"HostSpec.transport must be the name of a transport ({', '.join(TRANSPORTS)}, or one "
                              f"an installed package registers), got {self.transport!r}")
        if not isinstance(self.rto_ns, int) or not 1 <= self.rto_ns <= 10**12:
            raise ConfigError(f"HostSpec.rto_ns must be within 1..10**12 ns, got {self.rto_ns!r}")
        if not isinstance(self.rto_min_ns, int) or not 1 <= self.rto_min_ns <= 10**12:
            raise ConfigError(f"HostSpec.rto_min_ns must be within 1..10**12 ns, got {self.rto_min_ns!r}")
        if not isinstance(self.max_tries, int) or not 1 <= self.max_tries <= 64:
            raise ConfigError(f"HostSpec.max_tries must be within 1..64, got {self.max_tries!r}")
        self._check_noise()
        self._check_cc()

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
        if self.noise == "periodic" and not 0 <= self.noise_duration_ns < self.noise_interval_ns:
            raise ConfigError(f"host.noise=periodic needs 0 <= host.noise_duration_ns < host.noise_interval_ns, got "
                              f"{self.noise_duration_ns} and {self.noise_interval_ns}: set both (e.g. 2500 every 100000)")
        if self.noise == "random" and not self.noise_interval_ns > 0:
            raise ConfigError(f"host.noise=random needs host.noise_interval_ns > 0 (the mean gap between detours), "
                              f"got {self.noise_interval_ns}")


    def reduce_ns(self, nbytes: int) -> int:
        """Modelled host time to reduce ``nbytes`` of operands (ns)."""
        return -((-nbytes * self.reduce_ps_per_byte) // 1000)
