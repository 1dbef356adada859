"""Make a topology real: engines, ports and elements for the nodes of one domain.

Both the main process and worker processes build their domain with :func:`build_domain`, from the
same pure-data description, so every process agrees on link ids, capture interface numbers and
which domain owns which node.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.host import HostEngine
from switch.forward import SwitchEngine
from topologies.base import Topology

from .config import ConfigError, RunConfig
from .domain import Domain
from .element import Element
from .port import InPort, OutPort


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

    @classmethod
    def make(cls, topology: Topology, run: RunConfig, cluster_id: int) -> "Plan":
        names = list(topology.nodes)
        p = run.processes
        owner = {name: (i * p) // len(names) for i, name in enumerate(names)}
        base, n = {}, 0
        for name in names:
            base[name] = n
            n += topology.nports(name)
        t = topology
        lookahead = min(link.spec.latency_ns + min(min_output_delay(t, link.a), min_output_delay(t, link.b))
                        for link in t.links)
        return cls(topology, run, cluster_id, owner, base, lookahead)

    def interfaces(self) -> list[str]:
        """Capture interface names in interface-number order."""
        t = self.topology
        return [t.port_name(name, port) for name in t.nodes for port in range(t.nports(name))]


def min_output_delay(topology: Topology, name: str) -> int:
    """The delay every frame a node emits has at least, from the event that caused it (ns)."""
    node = topology.nodes[name]
    return node.spec.nic_delay_ns if node.kind == "host" else node.spec.processing_delay_ns


def make_engine(topology: Topology, name: str, shared: tuple[dict[str, int], list[str]] | None = None):
    """The engine of one node; ``shared`` (host ids and names) avoids a copy per host."""
    node = topology.nodes[name]
    routes = topology.routes.get(name)
    if node.kind == "host":
        if shared is None:
            shared = host_tables(topology)
        return HostEngine(name, node.id, node.spec, routes, shared[0], shared[1])
    return SwitchEngine(name, node.id, node.spec, routes)


def host_tables(topology: Topology) -> tuple[dict[str, int], list[str]]:
    names = topology.host_names()
    return {n: i for i, n in enumerate(names)}, names


def build_domain(plan: Plan, index: int) -> Domain:
    t = plan.topology
    raise_open_file_limit(sum(1 for n in t.nodes if plan.owner[n] == index) + 256)
    dom = Domain(index, plan.run.processes, plan.run)
    outs: dict[str, list[OutPort]] = {n: [] for n in t.nodes if plan.owner[n] == index}
    ins: dict[str, list[InPort]] = {n: [] for n in outs}
    for i, link in enumerate(t.links):
        for (src, sport, dst, dport), link_id in (((link.a, link.a_port, link.b, link.b_port), 2 * i),
                                                  ((link.b, link.b_port, link.a, link.a_port), 2 * i + 1)):
            if src in outs:
                outs[src].append(OutPort(sport, t.port_name(src, sport), plan.iface_base[src] + sport, link_id,
                                         dst, t.port_name(dst, dport), link.spec.latency_ns,
                                         link.spec.bandwidth_bps, peer_domain=plan.owner[dst]))
            if dst in ins:
                ins[dst].append(InPort(dport, t.port_name(dst, dport), plan.iface_base[dst] + dport, link_id,
                                       src, t.port_name(src, sport), peer_domain=plan.owner[src]))
    shared = host_tables(t)
    for name in outs:
        o: list = [None] * t.nports(name)
        n: list = [None] * t.nports(name)
        for p in outs[name]:
            o[p.index] = p
        for p in ins[name]:
            n[p.index] = p
        node = t.nodes[name]
        dom.add(Element(name, make_engine(t, name, shared), cluster_id=plan.cluster_id, domain=dom, outs=o, ins=n,
                        capture=plan.run.capture, seed=plan.run.seed * 1_000_003 + node.id,
                        lookahead_ns=plan.lookahead_ns,
                        drop_rate=plan.run.socket_drop_rate))
    return dom


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
