"""Slim Fly (Besta and Hoefler, SC 2014): the McKay-Miller-Siran (MMS) graphs, diameter 2 with about
as many routers as the Moore bound allows.

``slimfly:q=5`` (q a prime, q = 4w + d with d = 1 or -1; ``p``: hosts per router, default
ceil(k/2) of the network radix k = (3q - d)/2): 2 q**2 routers ``(s, x, y)``, s in {0, 1}, x, y in
the field of q elements, ``xi`` a primitive element of it and

* d = 1:  X = {1, xi**2, ..., xi**(q-3)} (the even powers), X' = {xi, xi**3, ..., xi**(q-2)};
* d = -1: X = {1, xi**2, ..., xi**(2w-2)} + {xi**(2w-1), xi**(2w+1), ..., xi**(4w-3)},
          X' = {xi, xi**3, ..., xi**(2w-1)} + {xi**(2w), xi**(2w+2), ..., xi**(4w-2)};

(0, x, y) ~ (0, x, y') when y - y' is in X; (1, m, c) ~ (1, m, c') when c - c' is in X';
(0, x, y) ~ (1, m, c) when y = m x + c. Router ``(s, x, y)`` is ``s{s*q*q + x*q + y}``; its hosts
on ports 0..p-1, its neighbours on the next ports in increasing router number. The builder checks
the graph: every router of degree k, diameter 2.

Routing tables are shortest paths, the lowest port first (at most two router-to-router links: the
diameter is 4 links host to host). A Slim Fly has no closed-form bisection: ``bisection`` is the
cut of a seeded Kernighan-Lin bisection of the routers (networkx), an upper bound on the width.
"""

from __future__ import annotations

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology
from .trees import _check_int


def _prime(q: int) -> bool:
    return q >= 2 and all(q % f for f in range(2, int(q ** 0.5) + 1))


def _primitive(q: int) -> int:
    for xi in range(2, q):
        if len({pow(xi, e, q) for e in range(q - 1)}) == q - 1:
            return xi
    return 1  # q = 2 (refused before)


def generators(q: int) -> tuple[set[int], set[int]]:
    """(X, X') of the MMS construction for prime q (see the module's text)."""
    xi = _primitive(q)
    if q % 4 == 1:
        X = {pow(xi, e, q) for e in range(0, q - 2, 2)}
        Xp = {pow(xi, e, q) for e in range(1, q - 1, 2)}
    else:
        w = (q + 1) // 4
        X = {pow(xi, e, q) for e in range(0, 2 * w - 1, 2)} | {pow(xi, e, q) for e in range(2 * w - 1, 4 * w - 2, 2)}
        Xp = {pow(xi, e, q) for e in range(1, 2 * w, 2)} | {pow(xi, e, q) for e in range(2 * w, 4 * w - 1, 2)}
    return X, Xp


def mms_edges(q: int) -> list[tuple[int, int]]:
    """The router pairs (i < j) of the MMS graph of q."""
    X, Xp = generators(q)
    qq = q * q
    edges = set()
    for x in range(q):
        for y in range(q):
            for z in range(q):
                if (y - z) % q in X:
                    edges.add((x * q + min(y, z), x * q + max(y, z)))
                if (y - z) % q in Xp:
                    edges.add((qq + x * q + min(y, z), qq + x * q + max(y, z)))
    for x in range(q):
        for m in range(q):
            for c in range(q):
                edges.add((x * q + (m * x + c) % q, qq + m * q + c))
    return sorted(edges)


def slimfly(q: int, p: int | None = None, *, link: LinkSpec | None = None, host: HostSpec | None = None,
            switch: SwitchSpec | None = None) -> Topology:
    """``slimfly:q=5`` (see the module's text)."""
    import networkx as nx

    _check_int("slimfly", "q", q, 3, 29)
    if not _prime(q) or q % 4 not in (1, 3):
        raise ConfigError(f"slimfly: q must be an odd prime (4w+1 or 4w-1), got {q}; e.g. slimfly:q=5 or q=7")
    delta = 1 if q % 4 == 1 else -1
    k = (3 * q - delta) // 2
    p = -(-k // 2) if p is None else p
    _check_int("slimfly", "p", p, 1, 64)
    n = 2 * q * q
    edges = mms_edges(q)
    g = nx.Graph(edges)
    degrees = {d for _, d in g.degree()}
    if degrees != {k} or g.number_of_nodes() != n or nx.diameter(g) != 2:  # a wrong construction: ours to fix
        raise ConfigError(f"slimfly: the MMS graph of q={q} came out with degrees {sorted(degrees)} and "
                          f"{g.number_of_nodes()} routers, not a diameter-2 graph of degree {k}")
    link = link or LinkSpec()
    t = Topology(f"slimfly:q={q}" + (f",p={p}" if p != -(-k // 2) else ""))
    for i in range(n * p):
        t.add_host(f"h{i}", host)
    for i in range(n):
        s, rest = divmod(i, q * q)
        t.add_switch(f"s{i}", switch, mms=(s, rest // q, rest % q), slimfly=(q, p), host_ports=p)
    for i in range(n * p):
        t.add_link(f"h{i}", f"s{i // p}", link, a_port=0, b_port=i % p)
    nbr = {i: sorted(g[i]) for i in range(n)}
    for i, j in edges:
        t.add_link(f"s{i}", f"s{j}", link, a_port=p + nbr[i].index(j), b_port=p + nbr[j].index(i))
    t.compute_routes()
    t.diameter = 4
    a, b = nx.algorithms.community.kernighan_lin_bisection(g, seed=0)
    t.bisection = sum(1 for u, v in edges if (u in a) != (v in a))
    t.figures = {"network_radix": k, "cables_host": n * p, "cables_router": len(edges)}
    return t
