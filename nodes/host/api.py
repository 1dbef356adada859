"""What an application running on an emulated host sees.

Applications are ``async def app(host, *args)`` coroutines. They run in *virtual* time: every
``await`` on the host API is a request to the host's engine, which resumes the coroutine at the
virtual time the request completes. They must not await trio (or anything else): a trio sleep would
run on the wall clock and break determinism. Use ``await host.sleep(ns)`` instead.

Example::

    async def echo(host, peer):
        await host.send(peer, b"hello")
        msg = await host.recv(src=peer)
        return msg.data, host.now
"""

from __future__ import annotations

from typing import Any, Protocol

from emu.config.base import HORIZON_NS
from emu.nodes.nic.interface import MECHANISMS, Message, Op
from emu.trace import NO_SPAN

__all__ = ["Compute", "HostAPI", "Message", "Op", "PingOp", "Recv", "Send", "SendRequest", "Sleep", "TryRecv", "Wait"]


_new_op = object.__new__


class Send(Op):
    __slots__ = ("dst", "data", "tag", "vc", "request")

    def __init__(self, dst: int, data: bytes, tag: int, vc: int = 0, request: bool = False):
        self.dst, self.data, self.tag, self.vc, self.request = dst, data, tag, vc, request

    def describe(self, names) -> str:
        return f"{'isend' if self.request else 'send'}(dst={names[self.dst]}, {len(self.data)} bytes, tag={self.tag})"


class SendClass(Send):
    """A send on a traffic class of its own (``send(..., prio=)``): the frames' ``prio``."""

    __slots__ = ("prio",)

    def __init__(self, dst: int, data: bytes, tag: int, vc: int = 0, request: bool = False, prio: int = 0):
        super().__init__(dst, data, tag, vc, request)
        self.prio = prio


class SendRequest:
    """What ``isend`` returns (as MPI_Isend's request): whether the NIC still reads the sender's
    buffer. A long message's frames are made from that buffer as the port sends them, so it must
    not change until :attr:`done` or ``await host.wait(request)``."""

    __slots__ = ("_out",)

    def __init__(self, out: Any = None):
        self._out = out
        """The NIC's message on its way out (``emu.nodes.nic.outgoing.Outgoing``), None: taken whole."""

    @property
    def done(self) -> bool:
        """The buffer is free: every frame of the message is made (or it was taken whole)."""
        return self._out is None or self._out.done

    def release(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            out.release()

    def __repr__(self) -> str:
        return f"SendRequest(done={self.done})"


class Wait(Op):
    __slots__ = ("requests",)

    def __init__(self, requests: tuple):
        self.requests = requests

    def describe(self, names) -> str:
        return f"wait({len(self.requests)} send request(s))"


class Recv(Op):
    __slots__ = ("src", "tag")

    def __init__(self, src: int | None, tag: int | None):
        self.src, self.tag = src, tag

    def matches(self, src: int, tag: int) -> bool:
        return (self.src is None or self.src == src) and (self.tag is None or self.tag == tag)

    def describe(self, names) -> str:
        src = "any" if self.src is None else names[self.src]
        tag = "any" if self.tag is None else self.tag
        return f"recv(src={src}, tag={tag})"


class TryRecv(Recv):
    """A receive that does not wait: the message if one is there, else None at once."""

    __slots__ = ()

    def describe(self, names) -> str:
        return "try_" + super().describe(names)


class PingOp(Op):
    __slots__ = ("dst",)

    def __init__(self, dst: int):
        self.dst = dst

    def describe(self, names) -> str:
        return f"ping({names[self.dst]})"


class Sleep(Op):
    __slots__ = ("ns",)

    def __init__(self, ns: int):
        self.ns = ns

    def describe(self, names) -> str:
        return f"sleep({self.ns} ns)"


class Compute(Op):
    __slots__ = ("ns",)

    def __init__(self, ns: int):
        self.ns = ns

    def describe(self, names) -> str:
        return f"compute({self.ns} ns)"


class HostCore(Protocol):
    """What the API reads of the host engine (``emu.nodes.host.engine.Host``)."""

    name: str
    now: int
    spec: Any
    host_ids: dict[str, int]
    current: Any
    """The application being stepped (``cpu_ns``)."""
    nic: Any
    """The host's NIC: ``verb_owner(name)``, ``verb_names()``, ``loaded``."""

    def resolve(self, host: str | int) -> int: ...

    def entry_skew_ns(self, rank: int) -> int: ...


class HostAPI:
    """The handle an application gets: ``host.send``, ``host.recv``, ``host.ping``, ``host.sleep``,
    ``host.compute``; and the verbs of the NIC mechanisms loaded on this node (``host.nic_post``,
    ``host.put``, ``host.inc_request``, ``host.nc_run``, ...: each mechanism's ``verbs``,
    :mod:`emu.nodes.nic.interface`). A verb of a registered mechanism that is not loaded on this
    node is refused in one line naming the mechanisms loaded; any other unknown name is Python's own
    AttributeError (with its "Did you mean" hint)."""

    def __init__(self, engine: HostCore):
        self._engine = engine
        self._recv_any = Recv(None, None)
        """What every ``recv()`` returns (a request holds no state of its own: one serves them all)."""
        _offer_verbs(engine.nic.verb_names())
        for cls in tuple(MECHANISMS.values()):  # (a registered mechanism not loaded here: its verbs refused in one line)
            _offer_verbs(cls.verbs)

    def _refusal(self, name: str) -> str:
        e = self._engine
        return (f"the host API has no {name!r}: not a host call, nor a verb of the NIC mechanisms "
                f"loaded on {e.name} ({', '.join(e.nic.loaded)})")

    @property
    def name(self) -> str:
        return self._engine.name

    @property
    def now(self) -> int:
        """Current virtual time (ns)."""
        return self._engine.now

    @property
    def cpu_ns(self) -> int:
        """Host CPU time this application has spent so far (modelled: send and receive overheads,
        computation); time spent waiting is not CPU time."""
        proc = self._engine.current
        return proc.cpu_ns if proc is not None else 0

    @property
    def spec(self):
        """The host's ``HostSpec`` (overheads, reduction cost, MTU)."""
        return self._engine.spec

    @property
    def hosts(self) -> list[str]:
        """Names of every host in the cluster, in address order."""
        return list(self._engine.host_ids)

    def _addr(self, host: str | int) -> int:
        return self._engine.resolve(host)

    def address(self, host: str | int) -> int:
        """The fabric address of host ``host`` (a name, or an address checked)."""
        return self._engine.resolve(host)

    def __dir__(self):
        """The host calls and the verbs of the mechanisms loaded here (not the other mechanisms'
        verbs, whose descriptors the class holds): built without ``self.__dict__``, which would turn
        the instance's inline attributes into a dict for good (and its attribute loads unspecialised)."""
        offered = set(self._engine.nic.verb_names())
        return sorted({n for n in dir(type(self)) if n not in _VERB_NAMES or n in offered} | offered
                      | {"_engine", "_recv_any"})

    def span(self, name: str, **args):
        """A span on this host's rank track of the run's trace, for a ``with`` block around awaits
        (``with host.span("phase 1", bytes=n): ...``): it begins now and ends when the block does,
        in virtual time. Nothing when the run is not traced (``RunConfig.trace``, ``--trace``)."""
        e = self._engine
        tr = e.nic.tracer
        if tr is None:
            return NO_SPAN
        return tr.span(e.name, name, lambda: e.now, args or None)

    def arrived_ns(self, tag: int | None = None) -> int | None:
        """When the oldest message already here and not yet received (with ``tag`` if given) was
        available, or None: a look that takes no time and takes no message (a progress engine
        choosing between its next operation and the messages that came first)."""
        for m in self._engine._inbox:
            if tag is None or m.tag == tag:
                return m.t_ns
        return None

    def span_done(self, name: str, start_ns: int, **args) -> None:
        """A span that began at ``start_ns`` and ends now, on this host's ``ops`` tracks of the run's
        trace (operations that overlap, as a replayed schedule's do); nothing when the run is not traced."""
        e = self._engine
        tr = e.nic.tracer
        if tr is not None:
            tr.complete(e.name, name, start_ns, e.now, args or None)

    def send(self, dst: str | int, data: bytes, tag: int = 0, vc: int = 0, prio: int | None = None) -> Send:
        """Send ``data`` (any size) to host ``dst``; returns once the NIC has the message (``data`` is
        free then: see :meth:`isend` to send a long message without a copy). ``vc``: carried in every
        frame's VC byte; routers map it to their virtual channels (``switch.vc_policy``,
        ``switch.classes``). ``prio``: the message's traffic class 0..7, every frame's ``prio`` byte
        (class queues, PFC, DRR weights, a port's overtaking); None: the host's own
        (``host.traffic_class``, a job's class)."""
        if prio is not None:
            if not isinstance(prio, int) or isinstance(prio, bool) or not 0 <= prio <= 7:
                raise ValueError(f"send: prio must be a traffic class 0..7, got {prio!r}")
            op = self.send(dst, data, tag, vc)
            return SendClass(op.dst, op.data, op.tag, op.vc, False, prio)
        if vc.__class__ is not int or not 0 <= vc <= 255:  # (the common case: one test)
            if not isinstance(vc, int) or isinstance(vc, bool) or not 0 <= vc <= 255:
                raise ValueError(f"send: vc must be an integer within 0..255, got {vc!r}")
        if data.__class__ is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"send: data must be bytes, got {type(data).__name__}")
            # no copy here: the NIC makes the frames (``isend``: from this very buffer, as its port sends them)
            if not isinstance(data, bytes):
                data = memoryview(data).cast("B")
        if not 0 <= tag <= 0xFFFFFFFF:
            raise ValueError(f"send: tag must fit in 32 bits, got {tag}")
        addr = self._engine.host_ids.get(dst) if dst.__class__ is str else None  # (a name: ``_addr`` without its calls)
        # Send(addr, data, tag, vc) without calling a class with a Python __init__ (CPython 3.11 runs that in
        # a C-level call of its own): one per message sent
        op = _new_op(Send)
        op.dst, op.data, op.tag, op.vc, op.request = self._addr(dst) if addr is None else addr, data, tag, vc, False
        return op

    def isend(self, dst: str | int, data: bytes, tag: int = 0, vc: int = 0, prio: int | None = None) -> Send:
        """Send ``data`` to host ``dst`` as :meth:`send` does (the same virtual time: the NIC takes
        the message after the send overhead), without a copy: returns a :class:`SendRequest`, and
        ``data`` must stay as it is until the request is done or ``await host.wait(request)``
        returned (the NIC makes a long message's frames from it as its port sends them)."""
        op = self.send(dst, data, tag, vc, prio)
        op.request = True
        return op

    def wait(self, *requests: SendRequest) -> Wait:
        """Have the buffers of ``requests`` (``isend``) back: what the NIC has not yet sent of them
        it keeps a copy of. Takes no virtual time (the NIC took each message when ``isend`` returned)."""
        for r in requests:
            if not isinstance(r, SendRequest):
                raise TypeError(f"wait: give the requests isend returned, not {type(r).__name__}")
        return Wait(requests)

    def recv(self, src: str | int | None = None, tag: int | None = None) -> Recv:
        """Wait for a whole message (from ``src`` / with ``tag`` if given); returns a :class:`Message`."""
        if src is None and tag is None:
            return self._recv_any
        return Recv(None if src is None else self._addr(src), tag)

    def try_recv(self, src: str | int | None = None, tag: int | None = None) -> TryRecv:
        """A message already there (from ``src`` / with ``tag`` if given), or None without waiting
        (what ``MPI_Test`` and ``MPI_Iprobe`` need); a message found costs the receive overhead."""
        op = _new_op(TryRecv)  # (TryRecv(src, tag) without its Python __init__, as send's)
        op.src, op.tag = None if src is None else self._addr(src), tag
        return op

    def ping(self, dst: str | int) -> PingOp:
        """Echo request to ``dst``; returns the virtual round-trip time in ns."""
        return PingOp(self._addr(dst))

    def compute(self, ns: int) -> Compute:
        """Spend ``ns`` of host CPU time (counted in ``cpu_ns``)."""
        if ns < 0:
            raise ValueError(f"compute: ns must be >= 0, got {ns}")
        return Compute(self._before_horizon("compute", int(ns)))

    def reduce_cost(self, nbytes: int) -> Compute:
        """Spend the modelled CPU time to combine ``nbytes`` of reduction operands."""
        return Compute(self._engine.spec.reduce_ns(nbytes))

    def entry_skew_ns(self, rank: int) -> int:
        """How late this host, as rank ``rank``, enters a collective (``host.skew``, ``host.skew_ns``;
        seeded, deterministic)."""
        return self._engine.entry_skew_ns(rank)

    def sleep(self, ns: int) -> Sleep:
        """Let ``ns`` nanoseconds of virtual time pass."""
        if ns.__class__ is int and 0 <= ns < HORIZON_NS - self._engine.now:  # (the common case: the checks below, at once)
            op = _new_op(Sleep)  # (Sleep(ns) without its Python __init__: one per sleep, as send's)
            op.ns = ns
            return op
        if ns < 0:
            raise ValueError(f"sleep: ns must be >= 0, got {ns}")
        return Sleep(self._before_horizon("sleep", int(ns)))

    def _before_horizon(self, what: str, ns: int) -> int:
        """``ns``, refused when it would end at or past the end of virtual time (an event there never
        happens: the run would end in a deadlock at ``now`` instead)."""
        now = self._engine.now
        if now + ns >= HORIZON_NS:
            raise ValueError(f"{what}({ns} ns) at {now} ns would end at {now + ns} ns, at or past the end of "
                             f"virtual time (2**62 = {HORIZON_NS} ns); give a shorter time")
        return ns


_PYTHON = {name: HostAPI.__dict__[name] for name in ("send", "sleep", "recv", "try_recv", "arrived_ns", "now")}
"""The specification of the host calls the compiled core stands in for when it is built
(``emu/csrc/hostapi.h``, installed by ``emu.nodes.nic.engine``: their plain cases in C, anything else
handed to these): send, sleep, recv, try_recv, arrived_ns and the ``now`` property, as written here."""


class _Verb:
    """``host.<verb>``: the verb ``name`` of the NIC mechanism that offers it on this host (``host.put``
    is the QsNet adapter's), else the API's one-line refusal (an AttributeError).

    A descriptor on :class:`HostAPI` rather than a ``__getattr__``: a class with ``__getattr__`` gets
    CPython's ``slot_tp_getattr_hook`` as its attribute lookup, and 3.11 then specialises none of the
    attribute loads on its instances (``host.send``, ``host.recv``: ~900 instructions each per call).
    Non-data (no ``__set__``), and only for names no host call has: host calls win, as they did over
    ``__getattr__``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, api, cls=None):
        if api is None:
            return self
        name = self.name
        owner = api._engine.nic.verb_owner(name)
        if owner is None:
            raise AttributeError(api._refusal(name), name=name, obj=api)
        return getattr(owner, name)


_VERB_NAMES: set[str] = set()
"""Names :func:`_offer_verbs` gave :class:`HostAPI` a :class:`_Verb` for."""


def _offer_verbs(names) -> None:
    """Give :class:`HostAPI` a :class:`_Verb` for each of ``names`` it has none for yet (once per name
    in the process: which mechanism answers is looked up per host at each access). A name beginning
    with ``_`` or naming a host call gets none (``host._x`` is Python's AttributeError; ``host.send``
    is the host's own)."""
    for name in names:
        if name in _VERB_NAMES or name.startswith("_") or any(name in c.__dict__ for c in HostAPI.__mro__):
            continue
        _VERB_NAMES.add(name)
        setattr(HostAPI, name, _Verb(name))
