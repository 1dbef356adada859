"""Where the non-minimal policies go: the routers of a dragonfly, HyperX or Slim Fly and the minimal
next hop from any router toward any other (or toward a dragonfly group), read from the topology.

One :class:`RouteModel` per topology and process (built when the first switch's policy asks for it,
``cache["route_model"]``), shared by every switch there and by the deadlock check
(:mod:`.deadlock`), so that both follow the very same routes.

* **Dragonfly** (switches with ``info["group"]``): an intermediate is a *group* (or, with
  ``switch.ugal_intermediate=router``, a router, as BookSim's ``dragonflynew`` draws a node: the
  detour then ends at that router, often one local hop past the group's entry); the minimal route
  toward a router of another group is l-g-l -- the router's own global link to that group, else the
  local link to the router of its group that has one (with m links between two groups, the
  (``key`` mod m)-th, ``key`` the final destination router, as the family's tables choose); toward
  a group, the same without the last local hop.
* **Any other graph** (HyperX, Slim Fly): an intermediate is a *router*; the minimal next hop toward
  a router is the lowest-numbered port on a shortest path (on a HyperX: dimension order, as the
  tables are).

Routers are numbered in the topology's switch order (the manager left out); ``of_host[addr]`` is the
router a host hangs on and ``host_port[addr]`` its port there.
"""

from __future__ import annotations

from collections import deque

from emu.config import ConfigError

MAX_INTERMEDIATES = 256
"""A frame carries its intermediate in the fabric header's one-byte ``rsvd``."""


class RouteModel:
    def __init__(self, t) -> None:
        sw = [s for s in t.switches if s.info.get("engine") != "manager"]
        self.names = [s.name for s in sw]
        self.index = {n: i for i, n in enumerate(self.names)}
        R = self.R = len(sw)
        nb = t.neighbours()
        self.peer: list[dict[int, int]] = [{} for _ in range(R)]  # router -> {port: next router}
        self.peer_port: list[dict[int, int]] = [{} for _ in range(R)]  # router -> {port: the port it reaches}
        self.routes = [t.routes.get(n) for n in self.names]
        self.of_host = [0] * len(t.hosts)
        self.host_port = [0] * len(t.hosts)
        for i, s in enumerate(sw):
            for port, v, vport, _lk in nb[s.name]:
                if v in self.index:
                    self.peer[i][port] = self.index[v]
                    self.peer_port[i][port] = vport
                elif t.nodes[v].kind == "host" and vport == 0:
                    a = t.nodes[v].id
                    self.of_host[a], self.host_port[a] = i, port
        self.dragonfly = all("group" in s.info for s in sw)
        if self.dragonfly:
            self.group = [s.info["group"] for s in sw]
            self.ngroups = max(self.group) + 1
            self.gates: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (group, to group) -> [(router, port)]
            for i in range(R):
                for port, j in sorted(self.peer[i].items()):
                    if self.group[j] != self.group[i]:
                        self.gates.setdefault((self.group[i], self.group[j]), []).append((i, port))
            self.local = [{self.peer[i][p]: p for p in self.peer[i] if self.group[self.peer[i][p]] == self.group[i]}
                          for i in range(R)]
            self.by_router = bool(sw) and getattr(sw[0].spec, "ugal_intermediate", "group") == "router"
            self.inters = R if self.by_router else self.ngroups
        else:
            self.by_router = True
            self.dist, self.next = self._shortest()
            self.inters = R
        if self.inters > MAX_INTERMEDIATES:
            raise ConfigError(f"{t.name}: {self.inters} {'groups' if self.dragonfly else 'routers'} are more intermediates "
                              f"than a frame's one-byte field names ({MAX_INTERMEDIATES}); non-minimal routing needs a "
                              "smaller network")

    def _shortest(self):
        """All-pairs hop counts and the lowest-port minimal next hop (BFS from every target)."""
        R = self.R
        back: list[list[int]] = [[] for _ in range(R)]
        for i in range(R):
            for j in self.peer[i].values():
                back[j].append(i)
        dist = [[-1] * R for _ in range(R)]
        nxt = [[-1] * R for _ in range(R)]
        for tgt in range(R):
            d = dist[tgt]  # d[i]: hops from i to tgt (the graph is undirected: BFS from tgt)
            d[tgt] = 0
            q = deque([tgt])
            while q:
                u = q.popleft()
                for v in back[u]:
                    if d[v] < 0:
                        d[v] = d[u] + 1
                        q.append(v)
        for i in range(R):
            for tgt in range(R):
                if i != tgt and dist[tgt][i] > 0:
                    nxt[i][tgt] = min(p for p, j in self.peer[i].items() if dist[tgt][j] == dist[tgt][i] - 1)
        return dist, nxt

    # -- minimal routes ----------------------------------------------------------------------------
    def toward(self, i: int, target: int, key: int) -> int:
        """The minimal next port from router ``i`` toward router ``target`` (!= i)."""
        if not self.dragonfly:
            return self.next[i][target]
        G, T = self.group[i], self.group[target]
        if G == T:
            return self.local[i][target]
        return self.toward_group(i, T, key)

    def toward_group(self, i: int, T: int, key: int) -> int:
        """Dragonfly: the minimal next port from router ``i`` toward group ``T`` (not its own)."""
        gates = self.gates[(self.group[i], T)]
        r, port = gates[key % len(gates)]
        return port if r == i else self.local[i][r]

    def arrived(self, i: int, inter: int) -> bool:
        """Has a frame at router ``i`` reached its intermediate (group, or router)?"""
        return (i if self.by_router else self.group[i]) == inter

    def step(self, i: int, inter: int | None, target: int) -> int:
        """The next port at ``i`` toward ``inter`` (not yet arrived) on the way to router ``target``."""
        if not self.dragonfly:
            return self.next[i][inter]
        return self.toward(i, inter, target) if self.by_router else self.toward_group(i, inter, target)

    def path(self, i: int, inter: int | None, dst: int) -> list[tuple[int, int]]:
        """[(router, out port)] from router ``i`` to host address ``dst`` via ``inter``: the
        intermediate by :meth:`step`, then the routing tables, as the switches route."""
        out = []
        target = self.of_host[dst]
        for _ in range(4 * self.R + 4):
            if inter is not None and self.arrived(i, inter):
                inter = None
            p = self.routes[i][dst] if inter is None else self.step(i, inter, target)
            out.append((i, p))
            if p not in self.peer[i]:
                return out
            i = self.peer[i][p]
        raise ConfigError(f"the routes from {self.names[out[0][0]]} to host {dst} loop")

    def hops(self, i: int, inter: int | None, dst: int) -> int:
        """Router-to-router links of :meth:`path`."""
        return len(self.path(i, inter, dst)) - 1

    def intermediate_useful(self, src: int, inter: int, dst: int) -> bool:
        """Is ``inter`` a detour from ``src`` to ``dst`` (not where they already are)?"""
        if self.dragonfly:  # (a router of the source's or the destination's group is no detour either)
            g = self.group[inter] if self.by_router else inter
            return g != self.group[src] and g != self.group[dst]
        return inter != src and inter != dst


def route_model(t, cache: dict | None = None) -> RouteModel:
    """The topology's :class:`RouteModel`, once per ``cache`` (a domain's engine cache)."""
    if cache is None:
        return RouteModel(t)
    m = cache.get("route_model")
    if m is None:
        m = cache["route_model"] = RouteModel(t)
    return m
