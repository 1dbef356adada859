"""Make a topology real: engines, ports and elements for the nodes of one domain.

Both the main process and worker processes build their domain with :func:`build_domain`, from the
same pure-data description, so every process agrees on link ids, capture interface numbers and
which domain owns which node.

Engines reach the runtime through a registry (DESIGN.md principle 8): a module that defines an
engine kind calls :func:`register_engine` when it is imported; whoever builds a topology imports the
modules of the kinds it runs first (the front door, ``emu.Cluster``, imports the kinds that come with
the emulator). A node runs the kind named by ``node.info["engine"]``, else its ``kind``. The plan names
the modules that registered the kinds it uses, so that a worker process imports them too. Nothing
here imports ``nodes/``, ``switch/`` or ``topologies/``, nor knows their names: a topology is read
through the protocols of :mod:`emu.graph`.
"""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import plugins
from .batch import Batch
from .config import ConfigError, RunConfig, bind_address, is_loopback
from .domain import Domain
from .element import Element
from .graph import Node, Topology
from .partition import partition_used
from .buffers import BufferState, CreditState
from .pause import Ingress, PrioQueues
from .wire.pause import quanta_ns
from .port import InPort, OutPort
from .wire.framing import framing
from .wire.outer import tag_key


@dataclass(frozen=True)
class EngineKind:
    name: str
    factory: Callable[[Node, Topology, dict], Any]
    """``factory(node, topology, cache)`` -> the engine of ``node``; ``cache`` is one dict per domain
    for what the engines of a process may share (e.g. tables every host reads). The build puts there
    ``"seed"`` (the run's) and, where it made it for the ports' credits, ``"largest_frames"``
    (:func:`largest_frames` of the topology)."""
    min_delay: Callable[[Any], int]
    """``min_delay(node.spec)``: the least delay from an event to any frame the engine emits (ns);
    the lookahead is built on it before any engine exists."""

    @property
    def module(self) -> str:
        return self.factory.__module__


ENGINES: dict[str, EngineKind] = {}


def register_engine(name: str, factory: Callable[[Node, Topology, dict], Any],
                    min_delay: Callable[[Any], int]) -> None:
    """Make an engine kind available by name (see the module docstring)."""
    ENGINES[name] = EngineKind(name, factory, min_delay)


def engine_kind(node: Node) -> EngineKind:
    name = node.info.get("engine", node.kind)
    kind = ENGINES.get(name)
    if kind is None and plugins.load(plugins.ENGINES, name):  # an installed package registers it
        kind = ENGINES.get(name)
    if kind is None:
        raise ConfigError(f"node {node.name}: no engine kind {name!r} is registered (known: "
                          f"{', '.join(sorted(ENGINES)) or 'none'}); import the module that registers it "
                          "(emu.front.engines registers the kinds that come with the emulator)")
    return kind


@dataclass(frozen=True)
class Plan:
    """Everything every process must agree on (picklable)."""

    topology: Topology
    run: RunConfig
    cluster_id: int
    owner: dict[str, int]
    """Node name -> domain index."""
    iface_base: dict[str, int]
    """Node name -> capture interface number of its port 0."""
    lookahead_ns: int
    """The synchroniser's lookahead: the least virtual time from an event at one element to the
    arrival of a frame it causes at another, over every link direction (the sender's promised
    minimum output delay plus the link latency)."""
    engine_modules: tuple[str, ...] = ()
    """Modules that register the engine kinds this plan uses (a worker imports them)."""
    partition_used: str = ""
    """How the nodes were spread over the processes, in words (``emu.partition.partition_used``)."""

    @classmethod
    def make(cls, topology: Topology, run: RunConfig, cluster_id: int,
             known: tuple[dict[str, int], str] | None = None) -> "Plan":
        """``known``: the partition (``partition_used``'s), made already (by a worker process:
        ``emu.control.Launch.ask_partition``)."""
        names = list(topology.nodes)
        owner, used = known or partition_used(topology, run.processes, run.partition)  # balanced load, least traffic cut
        base, n = {}, 0
        for name in names:
            base[name] = n
            n += topology.nports(name)
        t = topology
        delay = {name: engine_kind(node).min_delay(node.spec) for name, node in t.nodes.items()}
        if not t.candidates and any(getattr(n.spec, "routing", "static") != "static" for n in t.switches):
            t.compute_candidates()  # the minimal next hops adaptive and dispersive routing choose from
        if any(finite_buffers(node) or queue_spec(node) is not None for node in t.nodes.values()):  # (class queues, PAUSE: as credits)
            # a credit arriving at t may start a frame at t, and a frame leaving a buffer at t sends
            # a credit at t: an event can cause an arrival one link latency later, no sooner
            lookahead = min(link.spec.latency_ns for link in t.links)
        else:
            lookahead = min(link.spec.latency_ns + min(delay[link.a], delay[link.b]) for link in t.links)
        modules = tuple(sorted({engine_kind(node).module for node in t.nodes.values()}))
        return cls(topology, run, cluster_id, owner, base, lookahead, modules, used)

    def interfaces(self) -> list[str]:
        """Capture interface names in interface-number order."""
        t = self.topology
        return [t.port_name(name, port) for name in t.nodes for port in range(t.nports(name))]


def finite_buffers(node: Node) -> bool:
    """Does this node's input side use credit flow control (finite buffers)? (The input-queued
    router always does.)"""
    return bool(getattr(node.spec, "vc_buffer_bytes", 0)) or input_queued(node)


def queue_spec(node: Node):
    """The output-queue mechanisms of a switch (``SwitchSpec.queues``) when any is on, else None."""
    q = getattr(node.spec, "queues", None)
    return q if q is not None and q.on else None


def pfc_on(node: Node) -> bool:
    """Does this switch send PFC PAUSE frames (``queues.pfc_classes``)?"""
    q = queue_spec(node)
    return q is not None and q.pfc_on


def input_queued(node: Node) -> bool:
    """Is this node an input-queued router (``SwitchSpec.model``), whose engine keeps its input
    buffers and its credits itself?"""
    return getattr(node.spec, "model", None) == "input_queued"


FRAME_OVERHEAD = 50
"""Bytes a host message frame adds to its payload on the wire: Ethernet 14, fabric 16, message
segment 16, FCS 4 (``HostSpec.mtu_bytes``)."""


def largest_frame(topology: Topology, node: str | None = None) -> int:
    """The largest host message frame (FCS included) in the framing of the links into ``node`` (the
    modelled length: what a VC buffer of an input-queued router must hold whole, in the bytes its
    flits count); without a node, on an Ethernet-framed link."""
    from .wire.fabric import PacketType
    from .wire.framing import frame_length

    mtus = [n.spec.mtu_bytes for n in topology.nodes.values() if n.kind == "host"]
    body = max(mtus, default=1024) + FRAME_OVERHEAD - 34  # its message segment header and data (34: Ethernet, fabric, FCS)
    names = {"ethernet"} if node is None else \
        {lk.spec.framing for lk in topology.links if node in (lk.a, lk.b)} or {"ethernet"}
    return max(frame_length(f, PacketType.MSG, body) for f in names)


def largest_frames(topology: Topology) -> dict[str, int]:
    """``largest_frame(topology, n)`` of every node n, in one pass over the links (not one per node)."""
    from .wire.fabric import PacketType
    from .wire.framing import frame_length

    mtus = [n.spec.mtu_bytes for n in topology.nodes.values() if n.kind == "host"]
    body = max(mtus, default=1024) + FRAME_OVERHEAD - 34  # (as largest_frame)
    names: dict[str, set] = {n: set() for n in topology.nodes}
    for lk in topology.links:
        names[lk.a].add(lk.spec.framing)
        names[lk.b].add(lk.spec.framing)
    size = {f: frame_length(f, PacketType.MSG, body) for f in set().union({"ethernet"}, *names.values())}
    return {n: max(size[f] for f in (fs or ("ethernet",))) for n, fs in names.items()}


def make_engine(topology: Topology, name: str, cache: dict | None = None):
    """The engine of one node, by its registered kind; pass one ``cache`` for every engine of a
    process so that they share what they can."""
    node = topology.nodes[name]
    return engine_kind(node).factory(node, topology, {} if cache is None else cache)


def build_domain(plan: Plan, index: int, secret: bytes | None = None) -> Domain:
    """Domain ``index`` of ``plan``, its elements' sockets bound. ``secret``: what every process
    of the run holds and nobody else (the MPI job key, the cluster secret of worker processes):
    off loopback, the key of the datagram tags is made from it (``emu.wire.outer``)."""
    for module in plan.engine_modules:  # registers the engine kinds (a no-op where already imported)
        importlib.import_module(module)
    t = plan.topology
    raise_open_file_limit(sum(1 for n in t.nodes if plan.owner[n] == index) + 256)
    dom = Domain(index, plan.run.processes, plan.run)
    address = bind_address(plan.run.bind)  # this process's own (an interface's address differs per machine)
    key = None if is_loopback(address) else _tag_key(plan, secret)
    try:
        _build_elements(dom, plan, index, address, key)
    except BaseException:  # nobody else holds the sockets made so far: they close here
        dom.close_sockets()
        raise
    return dom


def _build_elements(dom: Domain, plan: Plan, index: int, address: str, key: bytes | None) -> None:
    """The sockets, ports and elements of domain ``index`` (``build_domain``)."""
    t = plan.topology
    if plan.run.batch and any(plan.owner[n] == index for n in t.nodes):  # one socket for the process, one
        # datagram per destination per window (emu.batch); a process with no element has nothing to read
        dom.batch = Batch(address, key, plan.cluster_id)
    outs: dict[str, list[OutPort]] = {n: [] for n in t.nodes if plan.owner[n] == index}
    largest: dict[str, int] = {}
    # per node once, not per link direction: its output-queue mechanisms, PFC, router model, buffers
    qspec = {n: queue_spec(node) for n, node in t.nodes.items()}
    pfc = {n: q is not None and q.pfc_on for n, q in qspec.items()}
    iq = {n: input_queued(node) for n, node in t.nodes.items()}
    finite = {n: finite_buffers(node) for n, node in t.nodes.items()}
    ins: dict[str, list[InPort]] = {n: [] for n in outs}
    port_name, owner, base = t.port_name, plan.owner, plan.iface_base
    cache: dict = {"seed": plan.run.seed}
    for i, link in enumerate(t.links):
        spec = link.spec
        fr = framing(spec.framing)
        name_a, name_b = port_name(link.a, link.a_port), port_name(link.b, link.b_port)  # (each end's, once)
        for (src, sport, src_name, dst, dport, dst_name), link_id in (
                ((link.a, link.a_port, name_a, link.b, link.b_port, name_b), 2 * i),
                ((link.b, link.b_port, name_b, link.a, link.a_port, name_a), 2 * i + 1)):
            rx = t.nodes[dst]
            if src in outs:
                op = OutPort(sport, src_name, base[src] + sport, link_id,
                             dst, dst_name, spec.latency_ns,
                             spec.bandwidth_bps, peer_domain=owner[dst], priority=spec.priority,
                             framing=fr)
                if iq[dst]:  # the router takes a frame as its head arrives; priority: at the port's
                    op.head_bytes = rx.spec.flit_bytes  # credit queues and in the routers' allocators
                if finite[dst] and not iq[src]:  # (an input-queued router's engine keeps credits)
                    if not largest:
                        largest = cache["largest_frames"] = largest_frames(t)
                    big = largest[dst]
                    unit = rx.spec.flit_bytes if iq[dst] else 1
                    op.flow = CreditState(rx.spec.vcs, [rx.spec.buffer_bytes(big)] * rx.spec.vcs,
                                          rx.spec.pool_bytes, unit=unit,
                                          groups=rx.spec.vc_groups if iq[dst] else 0, framing=op.framing,
                                          vc_bytes=rx.spec.buffer_bytes(big) if iq[dst] and rx.spec.pool_bytes else 0)
                    src_spec = t.nodes[src].spec
                    if iq[dst] and getattr(src_spec, "inject_vc", "") == "free":
                        op.flow.late = True  # BookSim's source: the VC picked as the frame starts
                elif not iq[src] and (qspec[src] is not None or pfc[dst]):  # a queue per class (emu.pause)
                    op.flow = PrioQueues(framing=op.framing)
                    qs = qspec[src]
                    if qs is not None:
                        op.flow.quanta = qs.quanta  # (None: strict priority)
                outs[src].append(op)
            if dst in ins:
                ip = InPort(dport, dst_name, base[dst] + dport, link_id,
                            src, src_name, peer_domain=owner[src],
                            latency_ns=spec.latency_ns, bandwidth_bps=spec.bandwidth_bps,
                            framing=fr)
                if iq[dst]:
                    ip.head_bytes = rx.spec.flit_bytes
                elif finite[dst]:
                    ip.buf = BufferState(rx.spec.vcs, rx.spec.vc_buffer_bytes, rx.spec.pool_bytes,
                                         rx.spec.credit_delay_ns)
                if pfc[dst]:  # PFC at this ingress; PAUSE frames come in where the sender has PFC
                    ip.buf = Ingress(rx.spec.queues, quanta_ns(rx.spec.queues.pause_quanta, spec.bandwidth_bps))
                elif pfc[src] and ip.buf is None and not iq[dst]:
                    ip.buf = Ingress()
                ins[dst].append(ip)
    for name in outs:
        o: list = [None] * t.nports(name)
        n: list = [None] * t.nports(name)
        for p in outs[name]:
            o[p.index] = p
        for p in ins[name]:
            n[p.index] = p
        node = t.nodes[name]
        dom.add(Element(name, make_engine(t, name, cache), cluster_id=plan.cluster_id, domain=dom, outs=o, ins=n,
                        capture=plan.run.capture, seed=plan.run.seed * 1_000_003 + node.id,
                        lookahead_ns=plan.lookahead_ns,
                        drop_rate=plan.run.socket_drop_rate, node_id=node.id, bind=address, tag_key=key,
                        batch=dom.batch))
    for el in dom.elements:  # a switch's output-queue mechanisms take their ports (switch.queues)
        attach = getattr(el.engine, "attach_queues", None)
        if attach is not None:
            attach(el.outs, plan.run.seed)
    if dom.batch is not None:
        dom.batch.index(dom.elements)
    direct = plan.run.direct and not plan.run.socket_drop_rate  # in-process links skip the socket
    for el in dom.elements:
        for p in el.out_ports:
            peer = dom.by_name.get(p.peer)
            if direct and peer is not None:
                p.local = (peer, peer.in_by_link[p.link_id])
            # handed over in memory, nobody sees the FCS: no CRC-32 per hop (a frame on a socket keeps its
            # FCS: the whole frame crosses it, and leaving it off measured no faster there);
            # credit flow control keeps its own path, and a receiver whose buffers count the frame's
            # bytes needs them all; a fault or an overtaking frame puts the FCS back (OutPort.restore_fcs)
            p.defer_fcs = (direct and peer is not None and not plan.run.capture and p.flow is None
                           and (iq[p.peer] or not finite[p.peer]))
    if plan.run.trace:  # the run's timeline (emu.trace): every element, engine and port gets the tracer
        from .trace import attach

        attach(dom, plan)


def _tag_key(plan: Plan, secret: bytes | None) -> bytes:
    if secret is None:
        if plan.run.processes > 1:
            raise ConfigError(f"--bind {plan.run.bind} is not loopback: the processes of a run need their shared "
                              "secret to tag their datagrams (build_domain(plan, index, secret))")
        secret = secrets.token_bytes(32)  # one process: its datagrams go to itself only
    return tag_key(secret, plan.cluster_id)


def raise_open_file_limit(needed: int) -> None:
    """Every element holds a socket: make sure the process may open enough of them."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < needed:
            raise ConfigError(f"{needed} open files are needed but the hard limit is {hard}; raise it "
                              "(ulimit -Hn) or spread the cluster over more processes")
