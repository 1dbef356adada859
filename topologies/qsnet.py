"""``qsnet:nodes=1024[,bisection=0.5]``: a federated network of QsNet node switches and top switches.

Built as the source builds them (spec 03, Table I): radix-32 routers; a **node switch** is a chassis
of two router stages -- 8 lower routers with 16 links down to nodes and 16 up, 8 upper routers with
16 links down (two to each lower router) and 16 up -- so 128 links down to nodes and 128 up.

* up to 128 nodes: one node switch, no top stage;
* 129..256 nodes: two node switches **joined directly** (no top switch): up link ``k`` of upper
  router ``j`` of one chassis is cabled to up link ``k`` of upper router ``j`` of the other (128
  cables, 64 with ``bisection=0.5``);
* 257..16384 nodes: ``N`` node switches joined by ``T`` **top switches** of radix ``N`` (128 for full
  bisection, 64 with ``bisection=0.5``), top switch ``u`` taking up link ``u`` of every chassis. Where
  ``N`` is at most the router radix, one router provides ``32 // N`` top switches (e.g. 6 x 5-way or
  3 x 10-way; the top radix need not be a power of two) and ``info["router"]`` names it; above it
  (8192 and 16384 nodes: four stages) the top switches are node-switch chassis used as 64- and
  128-way switches, ``128 // N`` of them in one chassis, and ``info["chassis_of"]`` names it. Each top
  switch is one element: a carved router's or a top chassis's own stages are not modelled apart (a
  top chassis's two router stages are crossed as one switch).

Table I's conventions (``figures``): its cable counts include the nodes' own links and count every
link between two chassis (or between a chassis and a top router); links inside a chassis are its
backplane, not cables. So cables = nodes + 128 N (N >= 3), nodes + 128 (N = 2), nodes (N = 1).

Ports: lower router ``i`` of a chassis: 0..15 down to nodes ``128c + 16i + p``, ``16 + 2j + q`` up
to upper router ``j`` (its port ``2i + q``); upper router ``j``: ``16 + k`` up to top switch
``up j + k`` (or, joined directly, to the other chassis's upper router ``j``, its port ``16 + k``);
top switch: port ``c`` to chassis ``c``. Static routing is up*/down* with the up link chosen by the
destination (destination-mod-k): a lower router goes up on ``16 + d % 16``, an upper router on
``16 + (d // 16) % up``; down, the unique path (between an upper and a lower router, the link
``2i + d % 2``).
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology

RADIX = 32
PER_CHASSIS = 128
ROUTERS = 8   # lower (and upper) routers per chassis
MAX_NODES = 16384  # 128 node switches: the largest row of Table I


def shape(nodes: int, bisection: float) -> tuple[int, int, int]:
    """(chassis N, top switches T, routers or chassis the top switches are carved from); T = 0 where
    there is no top stage (one chassis, or two joined directly)."""
    n = -(-nodes // PER_CHASSIS)
    if n <= 2:
        return n, 0, 0
    tops = PER_CHASSIS if bisection == 1.0 else PER_CHASSIS // 2
    per = per_box(n)
    return n, tops, -(-tops // per)


def per_box(n: int) -> int:
    """Top switches of radix ``n`` one router (n <= 32) or one node-switch chassis (n > 32) provides."""
    return max(1, RADIX // n) if n <= RADIX else max(1, PER_CHASSIS // n)


def up_links(bisection: float) -> int:
    """Up links used per upper router."""
    return (PER_CHASSIS if bisection == 1.0 else PER_CHASSIS // 2) // ROUTERS


def figures(nodes: int, bisection: float = 1.0) -> dict:
    """Table I's figures from the parameters (no build): node switches, top switches (and the routers
    or chassis they are carved from), cables (counting the nodes' own links), and the elements and
    links of the emulated topology."""
    n, tops, boxes = shape(nodes, bisection)
    between = n * tops if tops else (ROUTERS * up_links(bisection) if n == 2 else 0)
    return {"node_switches": n, "top_switches": tops,
            "top_routers" if n <= RADIX else "top_chassis": boxes,
            "cables": nodes + between, "switches": 2 * ROUTERS * n + tops,
            "links": nodes + 2 * ROUTERS * ROUTERS * n + between}


def qsnet(nodes: int, bisection: float = 1.0, *, link: LinkSpec | None = None, host: HostSpec | None = None,
          switch: SwitchSpec | None = None) -> Topology:
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 2 <= nodes <= MAX_NODES:
        raise ConfigError(f"qsnet: nodes must be an integer within 2..{MAX_NODES} (128 node switches of 128), "
                          f"got {nodes!r}")
    if bisection not in (1.0, 0.5):
        raise ConfigError(f"qsnet: bisection must be 1 (full, 128 top switches) or 0.5 (64), got {bisection!r}")
    n, tops, _ = shape(nodes, bisection)
    up = up_links(bisection)
    t = Topology(f"qsnet:nodes={nodes}" + (",bisection=0.5" if bisection == 0.5 else ""))
    for h in range(nodes):
        t.add_host(f"h{h}", host)
    lower = [[f"s{c * 2 * ROUTERS + i}" for i in range(ROUTERS)] for c in range(n)]
    upper = [[f"s{c * 2 * ROUTERS + ROUTERS + j}" for j in range(ROUTERS)] for c in range(n)]
    for c in range(n):
        for i in range(ROUTERS):
            t.add_switch(lower[c][i], switch, chassis=c, stage=1, index=i, top=False)
        for j in range(ROUTERS):
            t.add_switch(upper[c][j], switch, chassis=c, stage=2, index=j, top=n <= 2)
    per = per_box(n)
    top = [f"s{2 * ROUTERS * n + u}" for u in range(tops)]
    for u in range(tops):
        box = {"router": f"R{u // per}"} if n <= RADIX else {"chassis_of": f"T{u // per}"}
        t.add_switch(top[u], switch, stage=3, index=u, top=True, ports=n, **box)
    for h in range(nodes):
        c, r = divmod(h, PER_CHASSIS)
        t.add_link(f"h{h}", lower[c][r // 16], link, a_port=0, b_port=r % 16)
    for c in range(n):
        for i in range(ROUTERS):
            for j in range(ROUTERS):
                for q in range(2):
                    t.add_link(lower[c][i], upper[c][j], link, a_port=16 + 2 * j + q, b_port=2 * i + q)
        for j in range(ROUTERS):
            for k in range(up if tops else 0):
                t.add_link(upper[c][j], top[up * j + k], link, a_port=16 + k, b_port=c)
    if n == 2:  # joined directly: upper router j of chassis 0 to upper router j of chassis 1
        for j in range(ROUTERS):
            for k in range(up):
                t.add_link(upper[0][j], upper[1][j], link, a_port=16 + k, b_port=16 + k)
    d = np.arange(nodes)
    for c in range(n):
        for i in range(ROUTERS):
            t.routes[lower[c][i]] = np.where(d // 16 == c * ROUTERS + i, d % 16, 16 + d % 16).tolist()
        same = np.where(d // PER_CHASSIS == c, 2 * ((d % PER_CHASSIS) // 16) + d % 2, 16 + (d // 16) % up).tolist()
        for j in range(ROUTERS):  # a chassis's upper routers route alike: one table, shared
            t.routes[upper[c][j]] = same
    if tops:
        shared = (d // PER_CHASSIS).tolist()  # every top switch routes alike: one table, shared
        for u in range(tops):
            t.routes[top[u]] = shared
    t.diameter = 6 if tops else (5 if n == 2 else (4 if nodes > 16 else 2))
    t.bisection = (tops * (n // 2) if tops else (ROUTERS * up if n == 2 else min(nodes, PER_CHASSIS) // 2))
    t.figures = figures(nodes, bisection)
    return t
