"""The dragonfly (Kim, Dally, Scott and Abts, ISCA 2008): groups of routers fully connected inside,
groups joined by global links.

``dragonfly:p=2,a=4,h=2,g=9``: ``p`` hosts per router, ``a`` routers per group (every two joined by
a *local* link), ``h`` *global* links per router, ``g`` groups. The balanced default is a = 2p = 2h
(``dragonfly:p=2`` is ``p=2,a=4,h=2``) and g = a*h + 1 (every two groups joined by one global link).
With fewer groups, g - 1 must divide a*h: every two groups are then joined by m = a*h / (g - 1)
global links.

Router ``r`` of group ``G`` is ``g{G}r{r}`` (router number ``G*a + r``); its ports are the hosts
0..p-1 (host ``h{(G*a + r)*p + k}`` on port k), the local links p..p+a-2 (to routers 0..a-1 of its
group in order, itself left out) and the global links p+a-1..p+a+h-2. A group's global ports are
numbered j = r*h + k (router r, its k-th global port), 0..a*h-1. ``arrangement`` says which group
each one leads to (q = j mod (g-1), the m-th link to that group with m = j div (g-1))::

    absolute   port j of every group leads to the q-th *other* group, counted from group 0:
               G0: j=0->G1 j=1->G2 j=2->G3 ...      (Kim et al.; BookSim's dragonflynew)
               G1: j=0->G0 j=1->G2 j=2->G3 ...
               G2: j=0->G0 j=1->G1 j=2->G3 ...
    relative   port j leads q + 1 groups on (mod g): the same offsets from every group
               G0: j=0->G1 j=1->G2 ...   G1: j=0->G2 j=1->G3 ...   ("palm tree", Camarero et al.)
    circulant  ports in pairs of opposite offsets: q even -> +(q/2 + 1), q odd -> -(q/2 + 1)
               G0: j=0->G1 j=1->G8 j=2->G2 j=3->G7 ...  (g = 9: offsets +1 -1 +2 -2 +3 -3 +4 -4)

The far end of each link is the port of the other group that leads back by the same rule, so every
link is counted once. Each link's figures: host links ``link.latency_ns`` / ``bandwidth_bps``;
local and global links ``link.local_*`` and ``link.global_*`` where set (0: the host links').

Routing tables are minimal (at most one local, one global and one local hop: l-g-l): toward
another group, the router's own global link to it, else the local link to the router of its group
that has one; with m > 1 links between two groups, the (destination router mod m)-th.

Figures: diameter 5 links host to host (l-g-l and the two host links); ``bisection`` the global links
between the first g//2 groups and the rest, (g//2)(g - g//2) m -- a cut along groups, not an exact
halving of the hosts when g is odd, and an upper bound on the width; cables by kind (host, local,
global).
"""

from __future__ import annotations

from dataclasses import replace

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import NO_ROUTE, Topology
from .trees import _check_int

ARRANGEMENTS = ("absolute", "relative", "circulant")


def peer_group(G: int, j: int, g: int, arrangement: str) -> tuple[int, int]:
    """(the group global port ``j`` of group ``G`` leads to, the global port number there)."""
    n = g - 1
    q, m = j % n, j // n
    if arrangement == "absolute":
        t = q if q < G else q + 1
        back = G if G < t else G - 1
    elif arrangement == "relative":
        t = (G + q + 1) % g
        back = n - 1 - q
    else:  # circulant
        d = q // 2 + 1 if q % 2 == 0 else -(q // 2 + 1)
        t = (G + d) % g
        back = q if (2 * d) % g == 0 else (q + 1 if q % 2 == 0 else q - 1)
    return t, m * n + back


def split_links(link: LinkSpec) -> tuple[LinkSpec, LinkSpec, LinkSpec]:
    """(host, local, global) link specs from one ``LinkSpec`` and its ``local_*`` / ``global_*`` fields."""
    base = replace(link, local_latency_ns=0, local_bandwidth_bps=0, global_latency_ns=0, global_bandwidth_bps=0)
    local = replace(base, latency_ns=link.local_latency_ns or link.latency_ns,
                    bandwidth_bps=link.local_bandwidth_bps or link.bandwidth_bps)
    glob = replace(base, latency_ns=link.global_latency_ns or link.latency_ns,
                   bandwidth_bps=link.global_bandwidth_bps or link.bandwidth_bps)
    return base, local, glob


def dragonfly(p: int, a: int | None = None, h: int | None = None, g: int | None = None,
              arrangement: str = "absolute", *, link: LinkSpec | None = None, host: HostSpec | None = None,
              switch: SwitchSpec | None = None) -> Topology:
    """``dragonfly:p=2,a=4,h=2,g=9`` (see the module's text)."""
    _check_int("dragonfly", "p", p, 1, 64)
    a = 2 * p if a is None else a
    h = p if h is None else h
    _check_int("dragonfly", "a", a, 1, 128)
    _check_int("dragonfly", "h", h, 1, 64)
    g = a * h + 1 if g is None else g
    _check_int("dragonfly", "g", g, 2, a * h + 1)
    if (a * h) % (g - 1):
        raise ConfigError(f"dragonfly: g - 1 = {g - 1} must divide a*h = {a * h} (every two groups joined by the "
                          f"same number of global links); give g = {a * h + 1} or another g with g - 1 dividing {a * h}")
    if arrangement not in ARRANGEMENTS:
        raise ConfigError(f"dragonfly: arrangement must be one of {', '.join(ARRANGEMENTS)}, got {arrangement!r}")
    if g * a * p > 65536:
        raise ConfigError(f"dragonfly: g*a*p = {g * a * p} hosts exceeds 65536; lower p, a or g")
    hl, ll, gl = split_links(link or LinkSpec())
    m = a * h // (g - 1)
    t = Topology(f"dragonfly:p={p},a={a},h={h},g={g}" + (f",arrangement={arrangement}" if arrangement != "absolute" else ""))
    R = g * a
    for i in range(R * p):
        t.add_host(f"h{i}", host, group=i // (a * p))
    name = [f"g{i // a}r{i % a}" for i in range(R)]
    gbase = p + a - 1
    for i in range(R):
        G, r = divmod(i, a)
        t.add_switch(name[i], switch, group=G, index=r, dragonfly=(p, a, h, g), host_ports=p,
                     global_ports=tuple(range(gbase, gbase + h)))
    for i in range(R * p):
        t.add_link(f"h{i}", name[i // p], hl, a_port=0, b_port=i % p)
    for G in range(g):
        for r in range(a):
            for s in range(r + 1, a):
                t.add_link(name[G * a + r], name[G * a + s], ll, a_port=p + s - 1, b_port=p + r)
    for G in range(g):
        for j in range(a * h):
            T, back = peer_group(G, j, g, arrangement)
            if (T, back) < (G, j):
                continue
            t.add_link(name[G * a + j // h], name[T * a + back // h], gl, a_port=gbase + j % h, b_port=gbase + back % h)
    # minimal tables: gate[G][T] = the m (router, global port) pairs of group G toward group T
    gate = [[[] for _ in range(g)] for _ in range(g)]
    for G in range(g):
        for j in range(a * h):
            T, _b = peer_group(G, j, g, arrangement)
            gate[G][T].append((j // h, gbase + j % h))
    for i in range(R):
        G, r = divmod(i, a)
        row = [NO_ROUTE] * (R * p)
        for d in range(R * p):
            rd = d // p
            Gd, xd = divmod(rd, a)
            if rd == i:
                row[d] = d % p
            elif Gd == G:
                row[d] = p + (xd if xd < r else xd - 1)
            else:
                gr, gp = gate[G][Gd][rd % m]
                row[d] = gp if gr == r else p + (gr if gr < r else gr - 1)
        t.routes[name[i]] = row
    # router-to-router links of the longest minimal route: l-g-l (a local hop each side when a > 1)
    t.diameter = 2 + ((1 if a > 1 else 0) if g == 1 else 1 + 2 * (a > 1))
    t.bisection = (g // 2) * (g - g // 2) * m
    t.figures = {"groups": g, "routers_per_group": a, "cables_host": R * p, "cables_local": g * a * (a - 1) // 2,
                 "cables_global": g * a * h // 2, "global_links_per_group_pair": m}
    return t

