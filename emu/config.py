"""Typed configuration, units in the names (DESIGN.md principle 7)."""

from __future__ import annotations

from dataclasses import dataclass


class ConfigError(ValueError):
    """A topology or parameter is refused before anything starts; the message names the fix."""


@dataclass(frozen=True)
class LinkSpec:
    """One full-duplex link; both directions have the same figures."""

    latency_ns: int = 100
    """Propagation delay of one direction, from the last bit out to the last bit in (ns). Must be
    >= 1: link latency plus element delay is the conservative synchroniser's lookahead."""
    bandwidth_bps: int = 100_000_000_000
    """Line rate of one direction (bit/s); a frame of B bytes occupies the port ceil(8 B / rate) ns."""

    def __post_init__(self) -> None:
        if not isinstance(self.latency_ns, int) or self.latency_ns < 1:
            raise ConfigError(f"LinkSpec.latency_ns must be an integer >= 1 ns, got {self.latency_ns!r}")
        if not isinstance(self.bandwidth_bps, int) or self.bandwidth_bps < 1_000:
            raise ConfigError(f"LinkSpec.bandwidth_bps must be an integer >= 1000 bit/s, got {self.bandwidth_bps!r}")

    def serialization_ns(self, nbytes: int) -> int:
        return -((-nbytes * 8 * 1_000_000_000) // self.bandwidth_bps)


@dataclass(frozen=True)
class SwitchSpec:
    """A switch or router."""

    processing_delay_ns: int = 50
    """Per-frame delay from a frame's arrival to its hand-off to the output port (ns)."""

    def __post_init__(self) -> None:
        if self.processing_delay_ns < 0:
            raise ConfigError(f"SwitchSpec.processing_delay_ns must be >= 0, got {self.processing_delay_ns}")


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
        for f in ("descriptor_ns", "queue_ns", "alu_ns", "completion_ns", "post_ns"):
            if getattr(self, f) < 0:
                raise ConfigError(f"NicSpec.{f} must be >= 0, got {getattr(self, f)}")
        if not 1 <= self.queue_capacity <= 4096:
            raise ConfigError(f"NicSpec.queue_capacity must be within 1..4096, got {self.queue_capacity}")
        if not 1 <= self.virtual_ports <= 64:
            raise ConfigError(f"NicSpec.virtual_ports must be within 1..64, got {self.virtual_ports}")


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
    max_message_bytes: int = 1 << 30
    """Largest message a host accepts; a segment announcing more is malformed (counted, dropped)."""
    nic: NicSpec = NicSpec()
    """The collective-offload engine of the NIC (spec 01)."""

    def __post_init__(self) -> None:
        if self.nic_delay_ns < 0:
            raise ConfigError(f"HostSpec.nic_delay_ns must be >= 0, got {self.nic_delay_ns}")
        for f in ("send_overhead_ns", "recv_overhead_ns", "reduce_ps_per_byte"):
            if getattr(self, f) < 0:
                raise ConfigError(f"HostSpec.{f} must be >= 0, got {getattr(self, f)}")
        if not 1 <= self.mtu_bytes <= 16_000:
            raise ConfigError(f"HostSpec.mtu_bytes must be within 1..16000, got {self.mtu_bytes}")


    def reduce_ns(self, nbytes: int) -> int:
        """Modelled host time to reduce ``nbytes`` of operands (ns)."""
        return -((-nbytes * self.reduce_ps_per_byte) // 1000)


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
    """Wall-clock wait for expected frames before asking senders to retransmit (recovery round)."""
    max_recovery_rounds: int = 50
    """Recovery rounds without progress before a loss is declared unrecoverable (run stops)."""
    realtime_ns_per_s: float | None = None
    """Real-time mode: pace virtual time to the wall clock at this many virtual ns per second
    (1e9 = real time). None: as fast as possible. Figures are the same either way."""
    socket_drop_rate: float = 0.0
    """Test hook: drop this fraction of datagrams just before sendto, as an overloaded OS would, to
    exercise recovery. The model never sees it; results must not change."""

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"RunConfig.seed must be an integer >= 0, got {self.seed!r}")
        if not 1 <= self.processes <= 64:
            raise ConfigError(f"RunConfig.processes must be within 1..64, got {self.processes}")
        if self.realtime_ns_per_s is not None and not self.realtime_ns_per_s > 0:
            raise ConfigError(f"RunConfig.realtime_ns_per_s must be > 0, got {self.realtime_ns_per_s}")
        if not 0.0 <= self.socket_drop_rate < 1.0:
            raise ConfigError(f"RunConfig.socket_drop_rate must be within [0, 1), got {self.socket_drop_rate}")
