"""The routing of a topology read from a file, checked (``emu.topologies.files`` describes it):
routes carried in the file are made lists of ports and checked -- every switch leads every host's
frames to it without a loop -- or, without any, shortest paths are computed; then every host must
reach the first, the diameter is measured (up to 1024 hosts, where the file gives none) and the
channel dependencies are checked for a cycle where buffers are finite (``file_deadlock``).

Each step is linear in the routing tables (vectorised over destinations): the loop check follows
every switch's next hop toward every destination at once, doubling the hops followed each round
(log2(switches) rounds), instead of walking each switch's chain per destination.
"""

from __future__ import annotations

import warnings

import numpy as np

from emu.config import ConfigError

from .base import NO_ROUTE, Topology
from .file_deadlock import check_deadlock
from .file_parse import MAX_PORT, ranged

CHUNK = 1 << 22
"""Table entries followed at once by the loop check (bounds its temporaries: 4M entries, 16 MiB)."""


def check_routing(path: str, t: Topology, tables: dict[str, object]) -> None:
    """Routes from ``tables`` (node -> its ``routes`` attribute) checked into ``t.routes``, or shortest
    paths; then ``t`` validated, connected, its diameter measured and its deadlock freedom checked."""
    _routes(path, t, tables)
    try:
        t.validate()
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    _connected(path, t)
    hosts = t.hosts
    if t.diameter is None and len(hosts) <= 1024:  # beyond: a host-by-host matrix is large
        t.diameter = diameter(t)
    check_deadlock(path, t)


_PORT_CHARS = b"0123456789,-"
"""What a ``routes`` attribute as GraphML carries it is written with, for the fast path (else: item
by item)."""


def _row(path: str, where: str, table, nh: int) -> tuple[np.ndarray, list | None]:
    """A ``routes`` attribute (a list, or comma-separated text) as an array of ports, range-checked,
    and the list itself when it is one of plain integers (kept as the table: no copy)."""
    text = isinstance(table, str)
    if not text and not isinstance(table, (list, tuple)):
        raise ConfigError(f"{path}: {where}: attribute 'routes' must be a list of ports, one per host")
    count = (table.count(",") + 1 if table.strip() else 0) if text else len(table)
    if count != nh:
        raise ConfigError(f"{path}: {where}: attribute 'routes' has {count} ports, one per host wanted ({nh})")
    row, plain = None, None
    if text:
        if table.isascii() and not table.encode().translate(None, _PORT_CHARS):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    row = np.fromstring(table, dtype=np.int64, sep=",")
                except (ValueError, DeprecationWarning):
                    row = None
    elif set(map(type, table)) <= {int}:
        try:
            row = np.array(table, dtype=np.int64)
            plain = table if isinstance(table, list) else None
        except OverflowError:
            row = None
    if row is None or len(row) != nh or (row.size and (row.min() < NO_ROUTE or row.max() > MAX_PORT)):
        items = table.split(",") if text else table
        row = np.array([ranged(path, where, "routes", x.strip() if isinstance(x, str) else x, NO_ROUTE, MAX_PORT,
                               f" (entry {i}; -1: no route)") for i, x in enumerate(items)], dtype=np.int64)
        plain = None
    return row, plain


def _routes(path: str, t: Topology, tables: dict[str, object]) -> None:
    """``tables`` checked into ``t.routes`` (identical rows shared); none: left to ``validate``'s
    shortest paths."""
    if not tables:
        return
    switches = t.switches
    missing = [s.name for s in switches if s.name not in tables]
    if missing:
        raise ConfigError(f"{path}: switch {missing[0]!r} has no attribute 'routes' while others do; "
                          "give every switch its routes, or none (shortest-path routing)")
    S, hosts = len(switches), t.hosts
    nh = len(hosts)
    code = {s.name: i for i, s in enumerate(switches)}
    code.update((h.name, S + h.id) for h in hosts)
    # per node, the peer at each port (a switch's index, S + a host's address; -1: unlinked), and one
    # slot more, -2, read by NO_ROUTE (-1) entries
    peer = {name: np.full(t.nports(name) + 1, -1, dtype=np.int32) for name in tables}
    for lk in t.links:
        if lk.a in peer:
            peer[lk.a][lk.a_port] = code[lk.b]
        if lk.b in peer:
            peer[lk.b][lk.b_port] = code[lk.a]
    for p in peer.values():
        p[-1] = -2
    nexts: dict[str, np.ndarray] = {}
    shared: dict[bytes, list[int]] = {}
    parsed: dict[str, tuple] = {}  # the same text, read once (GraphML: the rows switches share)
    for name, table in tables.items():
        where = f"{t.nodes[name].kind} {name!r}"
        got = parsed.get(table) if isinstance(table, str) else None
        row, plain = got if got is not None else _row(path, where, table, nh)
        if isinstance(table, str):
            parsed[table] = (row, plain)
        n = t.nports(name)
        nxt = peer[name][np.minimum(row, n)]
        bad = (row >= n) | (nxt == -1)
        if bad.any():
            raise ConfigError(f"{path}: {where}: attribute 'routes' names port {int(row[bad.argmax()])}, which has no link")
        key = row.tobytes()
        t.routes[name] = shared.get(key) or shared.setdefault(key, plain if plain is not None else row.tolist())
        if name in code and code[name] < S:
            nexts[name] = nxt
    _loops(path, t, switches, [nexts[s.name] for s in switches], S, nh)


def _loops(path: str, t: Topology, switches, nexts: list[np.ndarray], S: int, nh: int) -> None:
    """Every switch must lead frames for every host to it: no missing route, no other host, no loop.
    ``nexts[i][d]``: the peer code switch i sends frames for host d to."""
    if not S:
        return
    arrived, bad = S, S + 1
    dst = np.arange(nh, dtype=np.int64)
    step = max(1, CHUNK // (S + 2))
    rounds = int(np.ceil(np.log2(S + 1))) + 1
    for lo in range(0, nh, step):
        hi = min(nh, lo + step)
        c = np.stack([nx[lo:hi] for nx in nexts]).astype(np.int64)
        j = np.empty((S + 2, hi - lo), dtype=np.int64)  # state per (switch, destination); two absorbing rows
        j[:S] = np.where(c >= S, np.where(c == S + dst[lo:hi], arrived, bad), np.where(c < 0, bad, c))
        j[S], j[S + 1] = arrived, bad
        del c
        for _ in range(rounds):  # after r rounds, the state 2**r hops on
            if (j[:S] >= S).all():
                break
            j = np.take_along_axis(j, j, axis=0)
        wrong = (j[:S] != arrived).any(axis=0)
        if wrong.any():
            _walk(path, t, switches, lo + int(wrong.argmax()))
            raise ConfigError(f"{path}: attribute 'routes' does not lead every switch to host "
                              f"{t.hosts[lo + int(wrong.argmax())].name}")  # not reached: _walk names it


def _walk(path: str, t: Topology, switches, d: int) -> None:
    """Follow every switch's route toward host ``d`` one hop at a time, refusing the first problem (what
    the vectorised check found, named)."""
    dst = t.hosts[d]
    nb = {s.name: {} for s in switches}
    for lk in t.links:
        if lk.a in nb:
            nb[lk.a][lk.a_port] = lk.b
        if lk.b in nb:
            nb[lk.b][lk.b_port] = lk.a
    state: dict[str, int] = {}
    for s in switches:
        chain = []
        here = s.name
        while here not in state and t.nodes[here].kind == "switch":
            chain.append(here)
            state[here] = 1
            p = t.routes[here][d]
            if p == NO_ROUTE:
                raise ConfigError(f"{path}: switch {here!r}: attribute 'routes' has no port for host {dst.name} "
                                  f"(entry {d})")
            nxt = nb[here][p]
            if state.get(nxt) == 1:
                raise ConfigError(f"{path}: switch {here!r}: attribute 'routes' loops toward host {dst.name}: "
                                  f"{' -> '.join(chain + [nxt])}")
            if t.nodes[nxt].kind == "host" and nxt != dst.name:
                raise ConfigError(f"{path}: switch {here!r}: attribute 'routes' sends frames for {dst.name} "
                                  f"to host {nxt}")
            here = nxt
        for c in chain:
            state[c] = 2


def _connected(path: str, t: Topology) -> None:
    """Every host reaches the first: its first hop toward it is the first host, or a switch with a
    route to it (the switches' routes are checked to arrive, or are shortest paths)."""
    hosts = t.hosts
    h0, d0, routes, nodes = hosts[0], hosts[0].id, t.routes, t.nodes
    first = {h.name: t.out_port(h.name, d0) for h in hosts} if any(h.name in routes for h in hosts) else \
        dict.fromkeys((h.name for h in hosts), 0)
    at = {}  # host -> the node its first hop toward h0 leads to
    for lk in t.links:
        if first.get(lk.a) == lk.a_port:
            at[lk.a] = lk.b
        if first.get(lk.b) == lk.b_port:
            at[lk.b] = lk.a
    for h in hosts[1:]:
        nxt = at.get(h.name)
        if nxt == h0.name:
            continue
        table = routes.get(nxt) if nxt is not None and nodes[nxt].kind == "switch" else None
        if table is None or table[d0] == NO_ROUTE:
            raise ConfigError(f"{path}: host {h.name!r} cannot reach {h0.name}: the links do not connect them")


def diameter(t: Topology) -> int:
    """Longest shortest path between two hosts, in links, through switches only (a host by host
    matrix: for a few thousand hosts at most)."""
    from .paths import INF, host_distances

    nb = t.neighbours()
    names, index, dist, column = host_distances(t, nb)
    hosts = t.hosts
    col = np.array(column, dtype=np.int64)
    per_col = np.full((dist.shape[1], dist.shape[1]), INF, dtype=np.int64)
    done = set()
    for h, c in zip(hosts, column):
        if c in done:
            continue
        done.add(c)
        rows = sorted({index[v] for _p, v, _vp, _l in nb[h.name] if v in index})
        if rows:
            per_col[c] = dist[rows].min(axis=0).astype(np.int64) + 1
    d = per_col[col[:, None], col[None, :]]
    host_at = {h.name: i for i, h in enumerate(hosts)}
    for lk in t.links:  # hosts linked to each other: one link apart
        if lk.a in host_at and lk.b in host_at:
            d[host_at[lk.a], host_at[lk.b]] = d[host_at[lk.b], host_at[lk.a]] = 1
    np.fill_diagonal(d, 0)
    reached = d[d < INF]
    return int(reached.max()) if reached.size else 0
