"""Topologies are pure data: named nodes, links between their ports, and routing tables.

Nothing here opens a socket; ``emu.Cluster(topology)`` makes a topology real (DESIGN.md principle 9).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

NodeKind = Literal["host", "switch"]


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind
    id: int
    """Fabric address: the value of the routing header's src/dst fields for this node."""
    spec: HostSpec | SwitchSpec


@dataclass(frozen=True)
class Link:
    """A full-duplex link between port ``a_port`` of node ``a`` and port ``b_port`` of node ``b``."""

    a: str
    a_port: int
    b: str
    b_port: int
    spec: LinkSpec


@dataclass
class Topology:
    name: str = "custom"
    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    routes: dict[str, dict[int, int]] = field(default_factory=dict)
    """Per node: destination host id -> output port (filled by ``compute_routes``)."""
    _ports: dict[str, int] = field(default_factory=dict)

    # -- building -------------------------------------------------------------------------------
    def add_host(self, name: str, spec: HostSpec | None = None) -> Node:
        return self._add(name, "host", spec or HostSpec())

    def add_switch(self, name: str, spec: SwitchSpec | None = None) -> Node:
        return self._add(name, "switch", spec or SwitchSpec())

    def _add(self, name: str, kind: NodeKind, spec) -> Node:
        if name in self.nodes:
            raise ConfigError(f"node name {name!r} is used twice; give every node a unique name")
        node = Node(name, kind, len(self.nodes), spec)
        self.nodes[name] = node
        self._ports[name] = 0
        return node

    def add_link(self, a: str, b: str, spec: LinkSpec | None = None) -> Link:
        for n in (a, b):
            if n not in self.nodes:
                raise ConfigError(f"link {a}<->{b}: unknown node {n!r}; add it before linking it")
        if a == b:
            raise ConfigError(f"link {a}<->{b}: a node cannot be linked to itself")
        link = Link(a, self._ports[a], b, self._ports[b], spec or LinkSpec())
        self._ports[a] += 1
        self._ports[b] += 1
        self.links.append(link)
        return link

    # -- queries --------------------------------------------------------------------------------
    @property
    def hosts(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "host"]

    @property
    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "switch"]

    def nports(self, name: str) -> int:
        return self._ports[name]

    def port_name(self, name: str, port: int) -> str:
        """Capture interface name of a port: ``h7-nic0`` for hosts, ``s3-p2`` for switches."""
        return f"{name}-nic{port}" if self.nodes[name].kind == "host" else f"{name}-p{port}"

    def neighbours(self) -> dict[str, list[tuple[int, str, int, Link]]]:
        """node -> [(port, peer, peer_port, link)] sorted by port."""
        nb: dict[str, list[tuple[int, str, int, Link]]] = {n: [] for n in self.nodes}
        for link in self.links:
            nb[link.a].append((link.a_port, link.b, link.b_port, link))
            nb[link.b].append((link.b_port, link.a, link.a_port, link))
        for v in nb.values():
            v.sort(key=lambda e: e[0])
        return nb

    @property
    def min_latency_ns(self) -> int:
        return min(link.spec.latency_ns for link in self.links)

    # -- routing --------------------------------------------------------------------------------
    def compute_routes(self) -> None:
        """Shortest-path routing: per node, destination host -> output port.

        Ties are broken by the lowest port number, so the tables are deterministic. Hosts are
        end points: a route never passes through a host. Topology families with their own routing
        (up*/down*, dimension order) overwrite this.
        """
        nb = self.neighbours()
        self.routes = {n: {} for n in self.nodes}
        for dst in self.hosts:
            dist = {dst.name: 0}
            q = deque([dst.name])
            while q:
                u = q.popleft()
                if u != dst.name and self.nodes[u].kind == "host":
                    continue
                for _, v, _, _ in nb[u]:
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        q.append(v)
            for n, entries in nb.items():
                if n == dst.name or n not in dist:
                    continue
                best = min((dist[v], port) for port, v, _, _ in entries if v in dist)
                self.routes[n][dst.id] = best[1]

    def validate(self) -> None:
        """Refuse a topology that cannot run, naming the problem."""
        if not self.hosts:
            raise ConfigError(f"topology {self.name!r} has no hosts")
        if not self.links:
            raise ConfigError(f"topology {self.name!r} has no links")
        nb = self.neighbours()
        for n, entries in nb.items():
            if not entries:
                raise ConfigError(f"topology {self.name!r}: node {n!r} has no links; link it or remove it")
        if not self.routes:
            self.compute_routes()
        for h in self.hosts:
            missing = [d.name for d in self.hosts if d is not h and d.id not in self.routes[h.name]]
            if missing:
                raise ConfigError(f"topology {self.name!r}: host {h.name!r} cannot reach {missing[:5]}; "
                                  "connect the graph")
