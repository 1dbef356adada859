"""Deadlock freedom of a loaded file's routing, checked in time linear in its tables.

``emu.topologies.deadlock.dependency_cycle`` follows the routes one destination and one switch at a
time in Python (QsNet of 4096 nodes: 24 s). Here the same channel dependency graph -- per
destination, from the first switch of every other host, following the tables -- is built vectorised
over destinations: a frontier of (switch, destination) pairs advances one hop a round and each pair
is visited once; its edges are deduplicated, and Kahn's algorithm tells whether they hold a cycle.
Only then is ``dependency_cycle`` asked for the cycle itself, to name it.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from emu.config import ConfigError

from .base import Topology

CHUNK = 1 << 22
"""Table entries handled at once (bounds the temporaries)."""


def acyclic(t: Topology) -> bool:
    """Whether the routing of ``t`` (``t.routes``: one port per switch and destination) has no cyclic
    channel dependency: ``dependency_cycle(t) == []``."""
    switches = [s.name for s in t.switches]
    S, hosts = len(switches), t.hosts
    H = len(hosts)
    if not S or not H:
        return True
    index = {name: i for i, name in enumerate(switches)}
    host_id = {h.name: h.id for h in hosts}
    nports = np.array([t.nports(name) for name in switches], dtype=np.int64)
    base = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(nports, out=base[1:])
    channels = int(base[-1])
    peer = np.full(channels, -1, dtype=np.int64)   # the switch at each switch port (-1: a host, unlinked)
    first = np.full(H, -1, dtype=np.int64)         # the switch at each host's port 0
    for lk in t.links:
        ia, ib = index.get(lk.a), index.get(lk.b)
        if ia is not None and ib is not None:
            peer[base[ia] + lk.a_port], peer[base[ib] + lk.b_port] = ib, ia
        elif ib is not None and lk.a_port == 0 and lk.a in host_id:
            first[host_id[lk.a]] = ib
        elif ia is not None and lk.b_port == 0 and lk.b in host_id:
            first[host_id[lk.b]] = ia
    hosts_at = np.bincount(first[first >= 0], minlength=S)
    rows: dict[int, np.ndarray] = {}
    table = [rows.setdefault(id(r), np.asarray(r, dtype=np.int64)) for r in (t.routes.get(n, [-1] * H) for n in switches)]
    step = max(1, CHUNK // S)
    edges = []
    for lo in range(0, H, step):
        hi = min(H, lo + step)
        C = hi - lo
        R = np.stack([r[lo:hi] for r in table])                              # (switch, destination): port
        nxt = np.where(R >= 0, peer[np.maximum(base[:S, None] + R, 0)], -1)  # ... the switch it leads to
        # starts: switches some host other than the destination enters the network at
        own = first[lo:hi][None, :] == np.arange(S)[:, None]
        start = hosts_at[:, None] > own
        active = start.copy()
        u, c = np.nonzero(start)
        found = []
        while u.size:
            v = nxt[u, c]
            keep = v >= 0
            u, c, v = u[keep], c[keep], v[keep]
            rv = R[v, c]
            dep = rv >= 0
            found.append((base[u[dep]] + R[u[dep], c[dep]]) * channels + base[v[dep]] + rv[dep])
            new = ~active[v, c]
            pair = np.unique(v[new] * C + c[new])
            u, c = np.divmod(pair, C)
            active[u, c] = True
        if found:
            edges.append(np.unique(np.concatenate(found)))
    if not edges:
        return True
    code = np.unique(np.concatenate(edges))
    return _dag(code // channels, code % channels, channels)


def _dag(src: np.ndarray, dst: np.ndarray, n: int) -> bool:
    """Kahn's algorithm over the edges src -> dst among n nodes: True when every edge is consumed."""
    order = np.argsort(src, kind="stable")
    out = dst[order].tolist()
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=start[1:])
    start = start.tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    q = deque(i for i in set(src.tolist()) if indeg[i] == 0)
    seen = 0
    while q:
        i = q.popleft()
        for j in out[start[i]:start[i + 1]]:
            seen += 1
            indeg[j] -= 1
            if indeg[j] == 0:
                q.append(j)
    return seen == len(out)


VC_CLASS_CHECK: list = []
"""The check of routing over (router, port, VC) classes (``switch.vc_policy=dragonfly|hops``):
``(detours, cycle)``, registered by the switches' side (``emu.switch.routing.deadlock``, on import),
since a topology knows no switch code. The front door imports it before it reads a file."""


def check_deadlock(path: str, t: Topology) -> None:
    """Refuse routing with a cyclic channel dependency where buffers are finite and no dateline VC
    policy breaks the cycle (where buffers are unbounded a cycle cannot block)."""
    finite = [s for s in t.switches if s.spec.model == "input_queued" or s.spec.vc_buffer_bytes > 0]
    if not finite or all(s.spec.vc_policy in ("dateline", "class_dateline") for s in finite) or acyclic(t):
        return
    if all(s.spec.vc_policy in ("dragonfly", "hops") for s in finite):  # VC classes: the check over (port, VC)
        if not VC_CLASS_CHECK:
            raise ConfigError(f"{path}: its switches' vc_policy={finite[0].spec.vc_policy} needs the routing's "
                              "deadlock check; import emu.switch first (the emu command does)")
        DETOURS, vc_cycle = VC_CLASS_CHECK[0]
        routing = finite[0].spec.routing
        found = vc_cycle(t, routing if routing in DETOURS else "minimal")
        if found:
            where = " -> ".join(f"{t.port_name(n, p)}/vc{v}" for n, p, v in found[:6]) + (" -> ..." if len(found) > 6 else "")
            raise ConfigError(f"{path}: routing={routing} with vc_policy={finite[0].spec.vc_policy} has a cyclic channel "
                              f"dependency ({where}): it can deadlock; give the switches more VCs (switch.vcs)")
        return
    from .deadlock import dependency_cycle

    cycle = dependency_cycle(t)
    if cycle:
        where = " -> ".join(t.port_name(n, p) for n, p in cycle[:6]) + (" -> ..." if len(cycle) > 6 else "")
        s = finite[0]
        raise ConfigError(f"{path}: the routing has a cyclic channel dependency ({where}) and switch {s.name!r} has "
                          f"finite buffers (switch.model={s.spec.model}): it can deadlock; carry deadlock-free "
                          "'routes' in the file, or use switch.model=output_queued")
