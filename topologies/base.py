"""Topologies are pure data: named nodes, links between their ports, and routing tables.

Nothing here opens a socket; ``emu.Cluster(topology)`` makes a topology real (DESIGN.md principle 9).

Addresses: host ``i`` (in the order hosts were added) has fabric address ``i``; switches have
``SWITCH_ID_BASE + j``, a separate range, so that routing tables are plain lists indexed by the
destination host's address (``-1``: no route). Multicast group ids (:meth:`Topology.add_group`)
are a third space, told apart by the fabric header's BCAST flag rather than by value.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .paths import candidate_rows

NodeKind = Literal["host", "switch"]
SWITCH_ID_BASE = 0x80000
NO_ROUTE = -1
MGMT_LINK = LinkSpec(latency_ns=1000, bandwidth_bps=1_000_000_000)
"""An out-of-band management link (a router's own Ethernet controller to the manager): an assumption,
the source gives no figure."""


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind
    id: int
    """Fabric address: the value of the routing header's src/dst fields for this node."""
    spec: HostSpec | SwitchSpec
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Family-specific facts: stage, coordinates, the physical router a switch is carved from..."""


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
    routes: dict[str, list[int]] = field(default_factory=dict)
    """Switch name -> output port per destination host address (``NO_ROUTE`` where none). Hosts
    without an entry send everything on their port 0."""
    candidates: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    """Switch name -> every minimal next-hop port per destination host address (adaptive and
    dispersive routing choose among them); filled by :meth:`compute_candidates` when a routing
    policy needs them. ``routes`` stays the deterministic default choice."""
    groups: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Multicast group id -> member hosts (:meth:`add_group`)."""
    group_ports: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    """Switch name -> group id -> the ports of the group's tree at this switch."""
    group_roots: dict[int, str] = field(default_factory=dict)
    """Multicast group id -> the switch its tree is rooted at."""
    manager: str | None = None
    """The network manager element's node name (:meth:`add_manager`), or None."""
    manager_ports: dict[str, int] = field(default_factory=dict)
    """Switch -> its port toward the manager (the manager tree: traps go up it, commands down; out of
    band: its own link to the manager)."""
    management: str = "in"
    """How this family's routers reach a network manager by default (``ManagerSpec.band=auto``): in
    (a manager tree over the data links) or out (their own Ethernet controllers: QsNet)."""
    cabling_plan: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    """(node, port) -> (peer, peer port) the operator meant to cable, where it differs from the
    links as built: link bring-up checks each link against it (mis-cabling detection)."""
    diameter: int | None = None
    """Longest route between two hosts, in links (set by the family, checked by tests)."""
    bisection: int | None = None
    """Bisection width in links (the family's closed form)."""
    grid: tuple[int, int, bool] | None = None
    """A direct network's (k, n, wrap) (``emu.topologies.grid.Grid``); None for other families."""
    figures: dict[str, int] = field(default_factory=dict)
    """A family's own figures beside hosts, switches and links (``emu topo --json``): QsNet's Table I
    (node switches, top switches, cables counting the nodes' own links)."""
    _ports: dict[str, int] = field(default_factory=dict)
    _used: set[tuple[str, int]] = field(default_factory=set)
    _nhosts: int = 0
    _nswitches: int = 0
    _portmap: dict | None = None

    # -- building -------------------------------------------------------------------------------
    def add_host(self, name: str, spec: HostSpec | None = None, **info: Any) -> Node:
        node = self._add(name, "host", self._nhosts, spec or HostSpec(), info)
        self._nhosts += 1
        return node

    def add_switch(self, name: str, spec: SwitchSpec | None = None, **info: Any) -> Node:
        node = self._add(name, "switch", SWITCH_ID_BASE + self._nswitches, spec or SwitchSpec(), info)
        self._nswitches += 1
        return node

    def _add(self, name: str, kind: NodeKind, nid: int, spec, info) -> Node:
        if name in self.nodes:
            raise ConfigError(f"node name {name!r} is used twice; give every node a unique name")
        node = Node(name, kind, nid, spec, info)
        self.nodes[name] = node
        self._ports[name] = 0
        return node

    def add_link(self, a: str, b: str, spec: LinkSpec | None = None, *, a_port: int | None = None,
                 b_port: int | None = None) -> Link:
        """Link two nodes; ports are the next free ones unless given (families with fixed port
        roles, such as meshes, give them and may leave some unused)."""
        for n in (a, b):
            if n not in self.nodes:
                raise ConfigError(f"link {a}<->{b}: unknown node {n!r}; add it before linking it")
        if a == b:
            raise ConfigError(f"link {a}<->{b}: a node cannot be linked to itself")
        ap = self._ports[a] if a_port is None else a_port
        bp = self._ports[b] if b_port is None else b_port
        for n, p in ((a, ap), (b, bp)):
            if (n, p) in self._used:
                raise ConfigError(f"link {a}<->{b}: port {p} of {n} is already linked")
            self._used.add((n, p))
            self._ports[n] = max(self._ports[n], p + 1)
        link = Link(a, ap, b, bp, spec or LinkSpec())
        self.links.append(link)
        self._portmap = None
        return link

    # -- queries --------------------------------------------------------------------------------
    @property
    def hosts(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "host"]

    @property
    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "switch"]

    def nports(self, name: str) -> int:
        """Ports of a node, numbered 0..nports-1 (some may be unlinked)."""
        return self._ports[name]

    def port_name(self, name: str, port: int) -> str:
        """Capture interface name of a port: ``h7-nic0`` for hosts, ``s3-p2`` for switches."""
        return f"{name}-nic{port}" if self.nodes[name].kind == "host" else f"{name}-p{port}"

    def link_names(self) -> list[str]:
        """Each link's name, by index in ``links``, as ``emu topo --links`` lists it and ``--fault
        link=`` takes it: ``A-B``; where several links join the same two nodes (parallel links,
        e.g. ``qsnet:`` chassis joined up link to up link), ``A-B.0``, ``A-B.1``, ... in link order."""
        pairs: dict[frozenset, list[int]] = {}
        for i, lk in enumerate(self.links):
            pairs.setdefault(frozenset((lk.a, lk.b)), []).append(i)
        names = [f"{lk.a}-{lk.b}" for lk in self.links]
        for idx in pairs.values():
            if len(idx) > 1:
                for k, i in enumerate(idx):
                    names[i] += f".{k}"
        return names

    def links_named(self, a: str, b: str) -> list[int]:
        """The indices of the links ``link=a-b`` names (either way round): every link between ``a``
        and ``b`` (all the parallel ones), or, with ``b`` written ``B.N``, the N-th of them only
        (``link_names``); [] when there is none."""
        both = [i for i, lk in enumerate(self.links) if {lk.a, lk.b} == {a, b}]
        if both or b in self.nodes:
            return both
        stem, dot, k = b.rpartition(".")
        if not dot or not k.isdigit() or stem not in self.nodes:
            return []
        both = [i for i, lk in enumerate(self.links) if {lk.a, lk.b} == {a, stem}]
        return [both[int(k)]] if len(both) > 1 and int(k) < len(both) else []

    def neighbours(self) -> dict[str, list[tuple[int, str, int, Link]]]:
        """node -> [(port, peer, peer_port, link)] sorted by port."""
        nb: dict[str, list[tuple[int, str, int, Link]]] = {n: [] for n in self.nodes}
        for link in self.links:
            nb[link.a].append((link.a_port, link.b, link.b_port, link))
            nb[link.b].append((link.b_port, link.a, link.a_port, link))
        for v in nb.values():
            v.sort(key=lambda e: e[0])
        return nb

    def host_names(self) -> list[str]:
        """Host names in address order (address i is ``host_names()[i]``)."""
        return [n.name for n in self.hosts]

    def route(self, src: str, dst: str) -> list[str]:
        """The nodes a frame from host ``src`` to host ``dst`` visits, following the tables.

        Raises ConfigError on a missing route or a loop."""
        nb = self.peers()
        d = self.nodes[dst].id
        path = [src]
        here, port = src, self.out_port(src, d)
        for _ in range(2 * len(self.nodes) + 2):
            if port == NO_ROUTE or port not in nb[here]:
                raise ConfigError(f"{self.name}: no route from {src} to {dst} at {here} (port {port})")
            here = nb[here][port][0]
            path.append(here)
            if here == dst:
                return path
            if self.nodes[here].kind == "host":
                raise ConfigError(f"{self.name}: route from {src} to {dst} reaches host {here}")
            port = self.out_port(here, d)
        raise ConfigError(f"{self.name}: route from {src} to {dst} loops: {' '.join(path[:12])}...")

    def peers(self) -> dict[str, dict[int, tuple[str, int]]]:
        """Per node, per linked port: the node and port at its other end (kept until a link is added)."""
        nb = self._portmap
        if nb is None or len(nb) != len(self.nodes):
            nb = self._portmap = {n: {p: (peer, pp) for p, peer, pp, _ in e} for n, e in self.neighbours().items()}
        return nb

    def out_port(self, name: str, dst_addr: int) -> int:
        table = self.routes.get(name)
        if table is None:
            return 0 if self.nodes[name].kind == "host" else NO_ROUTE
        return table[dst_addr] if 0 <= dst_addr < len(table) else NO_ROUTE

    # -- routing --------------------------------------------------------------------------------
    def compute_candidates(self) -> None:
        """Every minimal next hop per switch and destination host: ``candidates[switch][address]``
        is the tuple of ports (increasing) on a shortest path that passes through no other host.

        Vectorised over destinations (``emu.topologies.paths``); rows and tuples that repeat are shared,
        so treat them as read-only. ``routes`` is left as it is: the family's deterministic choice,
        which is always one of the candidates."""
        self.candidates = candidate_rows(self)

    def add_group(self, gid: int, members, avoid=()) -> None:
        """A multicast group: a frame whose fabric ``dst`` is ``gid`` and whose ``flags`` has BCAST
        set reaches every member but its sender, once each (spec 03's hardware broadcast).

        Group ids are their own space, 0..2**32-1: the BCAST flag, not the value, tells a group
        from a host address (0..hosts-1) or a switch address (``SWITCH_ID_BASE`` + j), so group 3
        and host 3 never meet. Defining a gid again replaces its tree.

        The tree is :meth:`spanning_tree`'s (rooted at the lowest-numbered live switch high enough to
        span the members; ``avoid``: switches and links that are down). A switch replicates a group
        frame on every port of the tree but the one it came in on, so whichever member sends, the
        copies go up to the root and down the tree's unique paths, and nothing loops.
        ``group_roots[gid]`` names the root."""
        if not isinstance(gid, int) or isinstance(gid, bool) or not 0 <= gid < 2**32:
            raise ConfigError(f"group id must be an integer within 0..2**32-1, got {gid!r}")
        members = list(members)
        root, tree = self.spanning_tree(members, avoid, what=f"group {gid}")
        for table in self.group_ports.values():
            table.pop(gid, None)
        self.groups[gid] = tuple(sorted(members, key=lambda m: self.nodes[m].id))
        self.group_roots[gid] = root
        for node, (parent, children) in tree.items():
            self.group_ports.setdefault(node, {})[gid] = tuple(sorted(children + ((parent,) if parent is not None else ())))

    def spanning_tree(self, members, avoid=(), what: str = "tree") -> tuple[str, dict[str, tuple[int | None, tuple[int, ...]]]]:
        """The tree over switches that reaches every member host (spec 03's broadcast tree, spec
        04's reduction tree): rooted at a switch high enough to span them -- among the live switches
        whose farthest member is nearest (on a fat tree: the members' least common ancestors; the
        whole machine: the top switches), the lowest-numbered -- and down from it on shortest paths
        (ties by port), over switches and the members' port 0. ``avoid`` names switches and links
        that are down or full -- a link as ``--fault link=`` names it (``("s4", "s9")``: every link
        between them; ``("s0", "s8.1")``: the second of the parallel ones only, ``links_named``): the root moves to the next live one and the tree
        goes around, or it is refused (ConfigError) if a member cannot be reached.

        Returns (root, {switch: (port toward the parent or None at the root, ports toward the
        children, in port order)})."""
        members = list(members)
        bad = [m for m in members if m not in self.nodes or self.nodes[m].kind != "host"]
        if bad or len(set(members)) != len(members) or len(members) < 2:
            raise ConfigError(f"{what}: members must be two or more distinct hosts of {self.name}, got {members}")
        dead = {a for a in avoid if isinstance(a, str)}
        unknown: list = sorted(a for a in dead if a not in self.nodes)
        dead_links: set[int] = set()  # (id of each Link avoided: a pair's every parallel link, or ``B.N``'s one)
        for a in avoid:
            if not isinstance(a, str):
                named = self.links_named(*a) if len(a) == 2 else []
                if not named:
                    unknown.append(tuple(a))
                dead_links.update(id(self.links[i]) for i in named)
        if unknown:
            raise ConfigError(f"{what}: avoid names {unknown}, neither nodes nor links of {self.name}")
        if self.manager in self.nodes:
            dead.add(self.manager)  # the manager's links are not part of any tree
        members.sort(key=lambda m: self.nodes[m].id)
        nb = self.neighbours()

        def hops(u: str):  # (port, peer, peer port) the tree may use from u
            for port, v, vport, lk in nb[u]:
                if v not in dead and id(lk) not in dead_links:
                    yield port, v, vport

        leaf: dict[str, str] = {}
        for m in members:
            up = [v for port, v, _vp in hops(m) if port == 0 and self.nodes[v].kind == "switch"]
            if not up:
                raise ConfigError(f"{what}: {m}'s link (port 0) leads to no live switch")
            leaf[m] = up[0]
        far: dict[str, int] = {}   # switch -> hops to its farthest member's switch
        reach: dict[str, int] = {}
        for sw in sorted(set(leaf.values())):
            dist = {sw: 0}
            q = deque([sw])
            while q:
                u = q.popleft()
                for _p, v, _vp in hops(u):
                    if v not in dist and self.nodes[v].kind == "switch":
                        dist[v] = dist[u] + 1
                        q.append(v)
            for v, d in dist.items():
                far[v] = max(far.get(v, 0), d)
                reach[v] = reach.get(v, 0) + 1
        spans = [v for v, c in reach.items() if c == len(set(leaf.values()))]
        if not spans:
            raise ConfigError(f"{what}: no live switch reaches every member"
                              + (f" (avoiding {sorted(map(str, avoid))})" if avoid else ""))
        root = min(spans, key=lambda v: (far[v], self.nodes[v].id))
        hosts = set(members)
        parent: dict[str, tuple[str, int, int]] = {}   # node -> (parent node, port here, port there)
        seen = {root}
        q = deque([root])
        while q:
            u = q.popleft()
            if u in hosts:
                continue
            for port, v, vport in hops(u):
                if v in seen or (self.nodes[v].kind == "host" and (v not in hosts or vport != 0)):
                    continue
                seen.add(v)
                parent[v] = (u, vport, port)
                q.append(v)
        up_port: dict[str, int | None] = {root: None}
        down: dict[str, set[int]] = {root: set()}
        for m in members:
            if m not in parent:
                raise ConfigError(f"{what}: {m} cannot be reached from {root} over live switches")
            v = m
            while v != root:
                u, vport, uport = parent[v]
                if self.nodes[v].kind == "switch":
                    up_port[v] = vport
                down.setdefault(u, set()).add(uport)
                v = u
        return root, {sw: (up_port.get(sw), tuple(sorted(down.get(sw, ())))) for sw in up_port}

    def add_manager(self, name: str = "mgr", attach: str | None = None, spec=None, link: LinkSpec | None = None) -> Node:
        """Attach spec 03's network manager element (``emu.switch.manager``). ``spec``: ``ManagerSpec``;
        its ``band`` (``auto``: this family's ``management``) says how:

        * ``in`` -- by one link to switch ``attach`` (default: the lowest-numbered top switch, or the
          first switch), with the manager tree (``manager_ports``): each switch's port toward the
          manager, breadth first over switches. Routers send their traps up that tree; the manager's
          commands come down it, and a router takes commands only from its port toward the manager.
        * ``out`` -- out of band (spec 03, second reading): every router's own Ethernet controller is
          linked to the manager (``link``, default ``MGMT_LINK``: 1 Gbit/s, 1 us), on a port after its
          data ports; traps and commands never cross a data link, so no data-link fault cuts the
          manager off. These links carry no data: routes, candidates and trees ignore the manager."""
        from emu.config import ManagerSpec

        if self.manager is not None:
            raise ConfigError(f"{self.name} has a network manager already ({self.manager})")
        switches = self.switches
        if not switches:
            raise ConfigError(f"{self.name} has no switches for a network manager to manage")
        if attach is None:
            tops = [s for s in switches if s.info.get("top")]
            attach = (tops or switches)[0].name
        if attach not in self.nodes or self.nodes[attach].kind != "switch":
            raise ConfigError(f"add_manager: {attach!r} is not a switch of {self.name}")
        spec = spec or ManagerSpec()
        band = self.management if spec.band == "auto" else spec.band
        node = self._add(name, "switch", SWITCH_ID_BASE + self._nswitches,
                         SwitchSpec(processing_delay_ns=self.nodes[attach].spec.processing_delay_ns),
                         {"engine": "manager", "manager": spec, "band": band})
        self._nswitches += 1
        if self.routes:
            self.routes[name] = [0] * len(self.hosts)
        self.manager = name
        self.manager_ports = {}
        if band == "out":
            for s in switches:
                lk = self.add_link(name, s.name, link or MGMT_LINK)
                self.manager_ports[s.name] = lk.b_port
            return node
        self.add_link(name, attach, link or self.links[0].spec)
        nb = self.neighbours()
        q = deque([name])
        seen = {name}
        while q:
            u = q.popleft()
            for _p, v, vport, _ in nb[u]:
                if v not in seen and self.nodes[v].kind == "switch":
                    seen.add(v)
                    self.manager_ports[v] = vport
                    q.append(v)
        return node

    def to_networkx(self):
        """The topology as a ``networkx.MultiGraph`` (nodes: kind, id, info; edges: ports, latency,
        bandwidth) for users' own analysis."""
        import networkx as nx

        g = nx.MultiGraph(name=self.name)
        for n in self.nodes.values():
            g.add_node(n.name, kind=n.kind, id=n.id, info=dict(n.info))
        for link in self.links:
            g.add_edge(link.a, link.b, ports={link.a: link.a_port, link.b: link.b_port},
                       latency_ns=link.spec.latency_ns, bandwidth_bps=link.spec.bandwidth_bps)
        return g

    def compute_routes(self) -> None:
        """Shortest-path routing for any graph: per switch, destination host -> output port.

        Ties are broken by the lowest port number (the first candidate), so the tables are
        deterministic. Hosts are end points: a route never passes through a host. Families with
        their own routing (up*/down*, dimension order) fill ``routes`` themselves instead.
        """
        firsts: dict[int, list[int]] = {}
        self.routes = {}
        for name, row in candidate_rows(self).items():
            table = firsts.get(id(row))
            if table is None:
                table = firsts[id(row)] = [c[0] if c else NO_ROUTE for c in row]
            self.routes[name] = table

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
        nh = len(self.hosts)
        for s in self.switches:
            table = self.routes.get(s.name)
            if table is None or len(table) != nh:
                raise ConfigError(f"topology {self.name!r}: switch {s.name} has no routing table for all {nh} hosts")
