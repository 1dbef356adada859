"""The one interface between a host and its NIC, and the plug-in mechanisms the NIC loads by name.

The host (``emu.nodes.host``) runs applications; everything that reaches the wire goes through its
NIC (``emu.nodes.nic.engine.NicEngine``). They meet here, and only here:

* **requests**: an application awaits an :class:`Op`. The host carries out its own (send, recv,
  compute, sleep, ping: ``emu.nodes.host.api``); any :class:`NicRequest` it hands to the NIC with
  ``nic.request(req, now, done)``, which returns ``(cpu_ns, value)``: the host CPU time the request
  costs, and the value the application continues with once that time has passed, or
  :data:`PENDING` when the mechanism will call ``done(value)`` later (a completion);
* **mechanisms**: each NIC mechanism (spec 01's triggered descriptors, spec 02's coding endpoints,
  spec 03's QsNet adapter, spec 04's in-network client) is a :class:`Mechanism` subclass in a module
  of its own, registered by name with :func:`register_mechanism`. It owns its request types (the
  ``requests`` it handles), the packet types it receives (``frames``), its counters, and the
  host-API verbs it adds (``verbs``: ``host.put``, ``host.nic_post``, ...). It sees the NIC only
  through :class:`NicCore`, never the host's internals.

Adding a mechanism is one new file (a :class:`Mechanism` subclass with its request types) and one
registration line; see ``docs/architecture.md`` for a complete 30-line example.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generator, NamedTuple, Protocol


class Message(NamedTuple):
    src: str
    """Name of the sending host."""
    tag: int
    data: bytes
    """The message (a ``bytearray`` for one over 1 MiB: the reassembly buffer, not copied)."""
    t_ns: int
    """Virtual time the whole message was available to the receiver, on the cluster's clock (ns since
    the cluster started, as ``net.now``; a run's ``completion_ns`` counts from ``net.metrics.start_ns``)."""
    hops: int
    """Switches crossed by the message's last frame."""


class Op:
    """A request from an application to its host; awaiting it yields it to the engine."""

    __slots__ = ()

    def __await__(self) -> Generator["Op", Any, Any]:
        return (yield self)

    def describe(self, names) -> str:
        return type(self).__name__


class NicRequest(Op):
    """A request carried out by a NIC mechanism: the mechanism that lists its type in ``requests``."""

    __slots__ = ()


PENDING = object()
"""What a request handler returns as its value when it will call ``done(value)`` later."""


class NicCore(Protocol):
    """What a mechanism may use of the NIC that loads it (``emu.nodes.nic.engine.NicEngine``)."""

    name: str
    node_id: int
    now: int
    spec: Any
    """The host's ``HostSpec`` (``nic``, ``elan``, ``nic_delay_ns``, ...)."""
    host_ids: dict[str, int]
    names: list[str]
    seed: int
    rails: int
    grid: tuple | None
    manager: int | None
    timers: Any

    def at(self, t: int, fn: Callable, arg: Any) -> int: ...

    def resolve(self, host: str | int) -> int: ...

    def emit(self, dst: int, ptype: int, body: bytes, at: int, *, vc: int = 0, prio: int = 0, flags: int = 0,
             rsvd: int = 0, port: int | None = None) -> None: ...

    def mechanism(self, name: str) -> "Mechanism": ...


Handler = Callable[[NicRequest, int, Callable[[Any], None]], tuple[int, Any]]
"""``handler(request, now, done) -> (cpu_ns, value or PENDING)``."""


class Mechanism:
    """A NIC mechanism: subclass it, fill the class attributes, register it by name.

    * ``name``: the name the NIC loads it by (``NicEngine(mechanisms=(...))``);
    * ``stats_key``: under which name its ``stats`` appear in ``Cluster.stats`` (default ``name``);
    * ``frames``: ``{packet type: method name}``, each ``method(frame, src, port, now)`` for a frame
      addressed to this node (malformed: raise ``emu.wire.DecodeError``, the NIC counts and drops it);
    * ``any_destination``: packet types handed to it whatever their destination field says, before
      the NIC counts them (frames that come hop by hop, as spec 04's results);
    * ``requests``: ``{request type: method name}``, each a :data:`Handler`;
    * ``verbs``: names of this object's attributes the host API offers applications (``host.<verb>``).
    """

    name: ClassVar[str] = ""
    stats_key: ClassVar[str] = ""
    frames: ClassVar[dict[int, str]] = {}
    any_destination: ClassVar[frozenset[int]] = frozenset()
    requests: ClassVar[dict[type, str]] = {}
    verbs: ClassVar[tuple[str, ...]] = ()
    passes_damaged: ClassVar[Callable[[bytes], bool] | None] = None
    """A predicate: frames it matches reach the NIC even when they fail the link's FCS (the
    mechanism checks them itself, as QsNet adapters check their packets' CRCs)."""

    def __init__(self, nic: NicCore):
        self.nic = nic
        self.stats: dict[str, int] = {}

    def apps_ended(self) -> None:
        """The run's applications ended: forget what waits for them (their coroutines are closed)."""


MECHANISMS: dict[str, type[Mechanism]] = {}


def register_mechanism(cls: type[Mechanism]) -> type[Mechanism]:
    """Make ``cls`` loadable by its ``name`` (usable as a class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a NIC mechanism needs a name")
    MECHANISMS[cls.name] = cls
    return cls
