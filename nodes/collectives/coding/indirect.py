"""Spec 02 on an indirect network (hosts on switches: star, fat tree, Clos, a topology file): the same
plans, on the hosts' ranks laid out on a line, with the XOR done at a host.

The source argues that coding still pays where routers cannot code: the intermediate node is a host,
which takes its group's packets in, XORs them and sends the chain out (three packet transfers per
coded pair where a router that codes needs two). Here the plans of ``plan`` run unchanged on the
*rank line* -- ``Grid(N, 1)``: groups are blocks of consecutive ranks (on a fat tree, the hosts of a
leaf switch, which hold consecutive addresses), the tree multicast halves the rank range, the IN is
the group's rank nearest the middle of the line -- and the NICs of the hosts send, relay, encode and
decode real frames as on a mesh. Hops (switch-to-switch links) and time are measured from the
network the frames cross; the model (``timing.model``) walks the topology's own routes
(``route_links``) instead of dimension-order paths.

Default group size: the smallest divisor of N that is at least sqrt(N) (on ``fattree:k=4,n=2``, 4: the
hosts of one leaf switch); ``comm.nc_shape = (M,)`` sets another.
"""

from __future__ import annotations

import math

from emu.config import ConfigError
from emu.topologies.grid import Grid


def line(n: int) -> Grid:
    """The rank line of ``n`` hosts (the plans' coordinates off a mesh or torus)."""
    return Grid(n, 1, False)


def default_shape(n: int) -> tuple[int]:
    """The group size on the rank line: the smallest divisor of ``n`` at least sqrt(n)."""
    for m in range(math.isqrt(n - 1) + 1, n):
        if n % m == 0:
            return (m,)
    raise ConfigError(f"coded broadcast on {n} hosts: {n} has no divisor between 2 and {n - 1}, so the hosts cannot "
                      "be cut into 2 groups or more of 2 or more; use a host count that is not prime (e.g. star:n=16)")


def route_links(topology):
    """``(a, b) -> [(switch, switch)]``: the switch-to-switch links a unicast from host rank a to host
    rank b crosses on ``topology``'s routes (its hops; the host links at either end are not hops)."""
    names = topology.host_names()
    cache: dict[tuple[int, int], list] = {}

    def walk(a: int, b: int) -> list:
        p = cache.get((a, b))
        if p is None:
            nodes = topology.route(names[a], names[b])[1:-1]  # the switches, in order
            p = cache[(a, b)] = list(zip(nodes, nodes[1:]))
        return p
    return walk


def hops(topology, plan) -> int:
    """The plan's hops on ``topology``: every unicast's switch-to-switch links (the model's count, set
    beside the hops measured from the frames)."""
    walk = route_links(topology)
    return sum(len(walk(s, dst)) for s, rs in plan.rules.items() for lst in rs.values() for _st, _l, dst, _r in lst)
