"""``qsnet:nodes=1024[,bisection=0.5]``: a federated network of QsNet node switches and top switches.

Built as the source builds them (spec 03, Table I): radix-32 routers; a **node switch** is a chassis
of two router stages -- 8 lower routers with 16 links down to nodes and 16 up, 8 upper routers with
16 links down (two to each lower router) and 16 up -- so 128 links down to nodes and 128 up. ``N``
node switches are joined by ``T`` **top switches** of radix ``N`` (128 for full bisection, 64 with
``bisection=0.5``), top switch ``u`` taking up link ``u`` of every chassis. Where ``N`` is below the
router radix, one router provides several top switches (``32 // N`` of them; the top radix need
not be a power of two): each carved top switch is its own element, ``info["router"]`` names the
router it is carved from. Up to 128 nodes a single node switch suffices and there is no top stage.

Ports: lower router ``i`` of a chassis: 0..15 down to nodes ``128c + 16i + p``, ``16 + 2j + q`` up
to upper router ``j`` (its port ``2i + q``); upper router ``j``: ``16 + k`` up to top switch
``16j + k``; top switch: port ``c`` to chassis ``c``. Static routing is up*/down* with the up link
chosen by the destination (destination-mod-k): a lower router goes up on ``16 + d % 16``, an upper
router on ``16 + (d // 16) % up``; down, the unique path (between an upper and a lower router, the
link ``2i + d % 2``).
"""

from __future__ import annotations

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology

RADIX = 32
PER_CHASSIS = 128
ROUTERS = 8   # lower (and upper) routers per chassis


def shape(nodes: int, bisection: float) -> tuple[int, int, int]:
    """(chassis N, top switches T, routers the top switches are carved from)."""
    n = -(-nodes // PER_CHASSIS)
    if n == 1:
        return 1, 0, 0
    tops = PER_CHASSIS if bisection == 1.0 else PER_CHASSIS // 2
    per_router = max(1, RADIX // n)
    return n, tops, -(-tops // per_router)


def qsnet(nodes: int, bisection: float = 1.0, *, link: LinkSpec | None = None, host: HostSpec | None = None,
          switch: SwitchSpec | None = None) -> Topology:
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 2 <= nodes <= 4096:
        raise ConfigError(f"qsnet: nodes must be an integer within 2..4096 (32 node switches of 128), got {nodes!r}")
    if bisection not in (1.0, 0.5):
        raise ConfigError(f"qsnet: bisection must be 1 (full, 128 top switches) or 0.5 (64), got {bisection!r}")
    n, tops, routers = shape(nodes, bisection)
    up = tops // ROUTERS  # up links used per upper router
    t = Topology(f"qsnet:nodes={nodes}" + (",bisection=0.5" if bisection == 0.5 else ""))
    for h in range(nodes):
        t.add_host(f"h{h}", host)
    lower = [[f"s{c * 2 * ROUTERS + i}" for i in range(ROUTERS)] for c in range(n)]
    upper = [[f"s{c * 2 * ROUTERS + ROUTERS + j}" for j in range(ROUTERS)] for c in range(n)]
    for c in range(n):
        for i in range(ROUTERS):
            t.add_switch(lower[c][i], switch, chassis=c, stage=1, index=i, top=False)
        for j in range(ROUTERS):
            t.add_switch(upper[c][j], switch, chassis=c, stage=2, index=j, top=n == 1)
    per_router = max(1, RADIX // n)
    top = [f"s{2 * ROUTERS * n + u}" for u in range(tops)]
    for u in range(tops):
        t.add_switch(top[u], switch, stage=3, index=u, top=True, router=f"R{u // per_router}", ports=n)
    for h in range(nodes):
        c, r = divmod(h, PER_CHASSIS)
        t.add_link(f"h{h}", lower[c][r // 16], link, a_port=0, b_port=r % 16)
    for c in range(n):
        for i in range(ROUTERS):
            for j in range(ROUTERS):
                for q in range(2):
                    t.add_link(lower[c][i], upper[c][j], link, a_port=16 + 2 * j + q, b_port=2 * i + q)
        for j in range(ROUTERS):
            for k in range(up):
                t.add_link(upper[c][j], top[up * j + k], link, a_port=16 + k, b_port=c)
    for c in range(n):
        for i in range(ROUTERS):
            t.routes[lower[c][i]] = [(d % 16 if d // 16 == c * ROUTERS + i else 16 + d % 16) for d in range(nodes)]
        for j in range(ROUTERS):
            t.routes[upper[c][j]] = [(2 * ((d % PER_CHASSIS) // 16) + d % 2 if d // PER_CHASSIS == c
                                      else 16 + (d // 16) % up) for d in range(nodes)]
    for u in range(tops):
        t.routes[top[u]] = [d // PER_CHASSIS for d in range(nodes)]
    t.diameter = 6 if n > 1 else (4 if nodes > 16 else 2)
    t.bisection = (tops * (n // 2) if n > 1 else min(nodes, PER_CHASSIS) // 2)
    return t
