"""How a cluster runs (not what it models): ``RunConfig``, and the address its sockets bind."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .base import ConfigError


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
    connect_timeout_s: float = 60.0
    """Wall-clock seconds the worker processes have, from their launch, to start Python, import and
    connect back before the run stops with an error naming the ones missing (raise it for runs under
    valgrind or on a very slow machine)."""
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


@functools.lru_cache(maxsize=64)
def is_loopback(address: str) -> bool:
    """Is ``address`` (as ``bind_address`` returns it) on loopback (127.0.0.0/8, ::1)? Off loopback
    every datagram carries a keyed tag (``emu.wire.outer.datagram_tag``). (Remembered: a domain asks
    before each window that waits for frames.)"""
    import ipaddress

    return ipaddress.ip_address(address).is_loopback
