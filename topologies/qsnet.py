"""``qsnet:nodes=1024[,bisection=0.5][,rails=2|links=2]``: a federated network of QsNet node switches and top switches.

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
  3 x 10-way; the top radix need not be a power of two); above it (8192 and 16384 nodes: four
  stages) the top switches are node-switch chassis used as 64- and 128-way switches, ``128 // N`` of
  them in one chassis.

**Carved top switches are port groups of one element** (spec 03, second reading): the router (or
top chassis) ``b`` is one element ``s{16 N + b}`` whose port ``g N + c`` is carved switch ``g``'s
port to chassis ``c``; top switch ``u`` is group ``u % per`` of box ``u // per``. A packet that
enters on one carved switch's link may leave on another's: every port of the box toward the
destination's chassis is a minimal next hop, and the adaptive policies choose among them. The
static table keeps a packet that came up by the static route in the carved switch it entered
(group ``u(d) % groups``, ``u(d)`` the top switch destination-mod-k routing sends ``d`` up to).
A top chassis's two router stages are crossed as one switch. ``info``: ``ports`` (the element's),
``radix`` (N), ``carved`` (its carved switches), ``router`` (``R{b}``) or ``chassis_of`` (``T{b}``).

Table I's conventions (``figures``): ``top_switches`` counts the carved switches (Table I's column),
``top_routers`` (or ``top_chassis``) the boxes they are carved from, which are the top stage's
elements; ``switches`` counts elements (16 per chassis plus the boxes); cable counts include the
nodes' own links and count every link between two chassis (or between a chassis and a top box);
links inside a chassis are its backplane. So cables = nodes + 128 N (N >= 3), nodes + 128 (N = 2),
nodes (N = 1).

**Multi-rail and multi-port** (spec 03: a node's several links may go to different routers or
chassis, the choice made at the last stage): ``rails=R`` builds R separate copies of the network
(separate routers and chassis), node ``h``'s port ``r`` on rail ``r``; ``links=L`` gives every node
L links into the one network, each to a different lower router: a chassis then holds ``128 // L``
nodes, node ``r`` of a chassis having link ``l`` on down slot ``l (128 // L) + r`` (lower router
``slot // 16``, port ``slot % 16``). The static tables take link 0 (or the link on the router a
packet is at); every router whose next hops include several of a node's links (the upper routers
of its chassis, the last stage that can still pick) offers them all to the adaptive policies.

Ports: lower router ``i`` of a chassis: 0..15 down to nodes, ``16 + 2j + q`` up to upper router
``j`` (its port ``2i + q``); upper router ``j``: ``16 + k`` up to top switch ``up j + k`` (or,
joined directly, to the other chassis's upper router ``j``, its port ``16 + k``). Static routing is
up*/down* with the up link chosen by the destination (destination-mod-k): a lower router goes up
on ``16 + d % 16``, an upper router on ``16 + (d // 16) % up``; down, the unique path (between an
upper and a lower router, the link ``2i + d % 2``).
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology

RADIX = 32
PER_CHASSIS = 128
ROUTERS = 8   # lower (and upper) routers per chassis
MAX_NODES = 16384  # 128 node switches: the largest row of Table I


def shape(nodes: int, bisection: float, links: int = 1) -> tuple[int, int, int]:
    """(chassis N, top switches T, routers or chassis the top switches are carved from); T = 0 where
    there is no top stage (one chassis, or two joined directly)."""
    n = -(-nodes // (PER_CHASSIS // links))
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


def figures(nodes: int, bisection: float = 1.0, rails: int = 1, links: int = 1) -> dict:
    """Table I's figures from the parameters (no build): node switches, top switches (carved) and
    the routers or chassis they are carved from, cables (counting the nodes' own links), and the
    elements (``switches``) and links of the emulated topology; with rails, totals over the rails."""
    n, tops, boxes = shape(nodes, bisection, links)
    between = n * tops if tops else (ROUTERS * up_links(bisection) if n == 2 else 0)
    out = {"node_switches": n * rails, "top_switches": tops * rails,
           "top_routers" if n <= RADIX else "top_chassis": boxes * rails,
           "cables": rails * (nodes * links + between), "switches": rails * (2 * ROUTERS * n + boxes),
           "links": rails * (nodes * links + 2 * ROUTERS * ROUTERS * n + between)}
    if rails > 1 or links > 1:
        out.update(rails=rails, links_per_node=links)
    return out


def _check(nodes, bisection, rails, links) -> None:
    for what, v, hi in (("rails", rails, 8), ("links", links, 8)):
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
            raise ConfigError(f"qsnet: {what} must be an integer within 1..{hi}, got {v!r}")
    if rails > 1 and links > 1:
        raise ConfigError("qsnet: rails and links cannot be combined; give one of them")
    top = MAX_NODES // links
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 2 <= nodes <= top:
        raise ConfigError(f"qsnet: nodes must be an integer within 2..{top} (128 node switches of "
                          f"{PER_CHASSIS // links}{f' with links={links}' if links > 1 else ''}), got {nodes!r}")
    if bisection not in (1.0, 0.5):
        raise ConfigError(f"qsnet: bisection must be 1 (full, 128 top switches) or 0.5 (64), got {bisection!r}")


def qsnet(nodes: int, bisection: float = 1.0, rails: int = 1, links: int = 1, *, link: LinkSpec | None = None,
          host: HostSpec | None = None, switch: SwitchSpec | None = None) -> Topology:
    _check(nodes, bisection, rails, links)
    per_ch = PER_CHASSIS // links
    n, tops, boxes = shape(nodes, bisection, links)
    up = up_links(bisection)
    t = Topology(f"qsnet:nodes={nodes}" + (",bisection=0.5" if bisection == 0.5 else "")
                 + (f",links={links}" if links > 1 else ""))
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
    box = [f"s{2 * ROUTERS * n + b}" for b in range(boxes)]
    carved = [min(per, tops - b * per) for b in range(boxes)]
    for b in range(boxes):
        where = {"router": f"R{b}"} if n <= RADIX else {"chassis_of": f"T{b}"}
        t.add_switch(box[b], switch, stage=3, index=b, top=True, ports=carved[b] * n, radix=n, carved=carved[b],
                     **where)
    for h in range(nodes):
        c, r = divmod(h, per_ch)
        for lk in range(links):
            slot = lk * per_ch + r
            t.add_link(f"h{h}", lower[c][slot // 16], link, a_port=lk, b_port=slot % 16)
    for c in range(n):
        for i in range(ROUTERS):
            for j in range(ROUTERS):
                for q in range(2):
                    t.add_link(lower[c][i], upper[c][j], link, a_port=16 + 2 * j + q, b_port=2 * i + q)
        for j in range(ROUTERS):
            for k in range(up if tops else 0):
                u = up * j + k
                t.add_link(upper[c][j], box[u // per], link, a_port=16 + k, b_port=(u % per) * n + c)
    if n == 2:  # joined directly: upper router j of chassis 0 to upper router j of chassis 1
        for j in range(ROUTERS):
            for k in range(up):
                t.add_link(upper[0][j], upper[1][j], link, a_port=16 + k, b_port=16 + k)
    _tables(t, nodes, n, up, per, links, lower, upper, box, carved)
    t.diameter = 6 if tops else (5 if n == 2 else (4 if min(nodes, per_ch) > 16 else 2))
    t.bisection = (tops * (n // 2) if tops else (ROUTERS * up if n == 2 else min(nodes, per_ch) // 2))
    t.figures = figures(nodes, bisection, 1, links)
    t.management = "out"  # routers report to the manager over their own Ethernet controllers
    if rails > 1:
        from .trees import _railed

        t = _railed(t, rails)
        t.figures = figures(nodes, bisection, rails, links)
    return t


def _tables(t: Topology, nodes: int, n: int, up: int, per: int, links: int, lower, upper, box, carved) -> None:
    """The static tables: up*/down*, destination-mod-k up, link 0 down (or the node's link on the
    router a packet is at); tables that come out equal are shared (read-only)."""
    per_ch = PER_CHASSIS // links
    d = np.arange(nodes)
    home, r = np.divmod(d, per_ch)
    for c in range(n):
        for i in range(ROUTERS):
            row = 16 + d % 16
            for lk in reversed(range(links)):  # link 0 wins where several of a node's links are here
                slot = lk * per_ch + r
                row = np.where((home == c) & (slot // 16 == i), slot % 16, row)
            t.routes[lower[c][i]] = row.tolist()
        same = np.where(home == c, 2 * (r // 16) + d % 2, 16 + (d // 16) % up).tolist()
        for j in range(ROUTERS):  # a chassis's upper routers route alike: one table, shared
            t.routes[upper[c][j]] = same
    u = up * ((d % 16) // 2) + (d // 16) % up  # the top switch destination-mod-k sends d up to
    shared: dict[int, list] = {}
    for b, name in enumerate(box):
        g = carved[b]
        if g not in shared:
            shared[g] = ((u % g) * n + home).tolist()
        t.routes[name] = shared[g]
