"""Reading a topology file (``emu.topologies.files`` describes the format): the file parsed, every
element and attribute checked, the links laid in their order, the routes carried in the file
checked (or computed), connectivity and deadlock freedom checked. A bad file is refused in one line
naming the element and the attribute.
"""

from __future__ import annotations

import json
import os
from collections import deque
from difflib import get_close_matches

from emu.config import (SECTIONS, ConfigError, ElanSpec, HostSpec, LinkSpec, NicSpec, PUSpec, SwitchSpec,
                        _convert, _field_types, merge_settings)

from .base import NO_ROUTE, Topology

NODE_SECTIONS = {"host": ("host", "nic", "elan"), "switch": ("switch", "pu")}
"""The settings sections whose fields a node of each kind may carry."""
ORDER = "_emu_file_order"
"""An edge's place in the file, added on reading (networkx hands edges out node by node)."""


def load_file(path: str, fmt: str, defaults: dict, settings: dict) -> Topology:
    """The topology of the file ``path`` in format ``fmt`` (``json`` or ``graphml``)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"--topo {path}: no such file (a topology file ends in .json or .graphml)") from None
    except OSError as e:
        raise ConfigError(f"--topo {path}: cannot be read ({e.strerror})") from None
    g = _parse(path, fmt, raw)
    return _topology(path, g, defaults, settings)


def _parse(path: str, fmt: str, raw: bytes):
    """A ``networkx.MultiDiGraph`` (directed only so that each edge keeps its source and target: the
    ports are named by them)."""
    import networkx as nx

    if fmt == "json":
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: not JSON ({e})") from None
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise ConfigError(f"{path}: a topology in JSON is node-link data: an object with \"nodes\" and "
                              "\"links\" lists (emu topo SPEC --format json writes one)")
        edges = "links" if "links" in data or "edges" not in data else "edges"
        if not isinstance(data.get(edges, []), list):
            raise ConfigError(f"{path}: \"{edges}\" must be a list of {{\"source\": ..., \"target\": ...}}")
        for i, n in enumerate(data["nodes"]):
            if not isinstance(n, dict) or "id" not in n:
                raise ConfigError(f"{path}: nodes[{i}] has no \"id\" (the node's name)")
        for i, e in enumerate(data.get(edges, [])):
            if not isinstance(e, dict) or "source" not in e or "target" not in e:
                raise ConfigError(f"{path}: {edges}[{i}] needs \"source\" and \"target\" (node names)")
        data = {**data, "directed": True, "multigraph": True, "graph": data.get("graph") or {},
                edges: [{**e, ORDER: i} for i, e in enumerate(data.get(edges, []))]}
        try:
            return nx.node_link_graph(data, edges=edges)
        except (KeyError, TypeError, ValueError, nx.NetworkXError) as e:
            raise ConfigError(f"{path}: not node-link data ({e})") from None
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        raise ConfigError(f"{path}: not GraphML (XML error: {e})") from None
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    root.insert(0, ET.Element(f"{ns}key", {"id": ORDER, "for": "edge", "attr.name": ORDER, "attr.type": "int"}))
    for graph in root.iter(f"{ns}graph"):
        if "edgedefault" in graph.attrib:
            graph.set("edgedefault", "directed")
    for i, edge in enumerate(root.iter(f"{ns}edge")):  # networkx gives edges by node; the file's order kept
        ET.SubElement(edge, f"{ns}data", {"key": ORDER}).text = str(i)
    try:
        g = nx.parse_graphml(ET.tostring(root, encoding="unicode"), force_multigraph=True)
    except (nx.NetworkXError, KeyError, ValueError, TypeError, ET.ParseError) as e:
        raise ConfigError(f"{path}: not GraphML networkx can read ({e})") from None
    if not g.is_directed():
        g = g.to_directed()
    return g


def _nearest(word: str, names) -> str:
    near = get_close_matches(word, list(names), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(near)}?" if near else ""


def _specs(path: str, where: str, attrs: dict, sections: tuple[str, ...], extra: tuple[str, ...],
           defaults: dict, settings: dict) -> dict[str, dict]:
    """The ``section.field`` attributes of an element as settings layers merged: --config < file < --set."""
    mine: dict[str, dict] = {}
    valid = [f"{s}.{f}" for s in sections for f in _field_types(SECTIONS[s])] + list(extra)
    for key, value in attrs.items():
        if key in extra:
            continue
        section, dot, name = key.partition(".")
        if not dot or section not in sections or name not in _field_types(SECTIONS[section]):
            takes = [s + ".*" for s in sections] + (["info", "routes"] if "link" not in sections else
                                                    ["source_port", "target_port", "index"])
            raise ConfigError(f"{path}: {where}: unknown attribute {key!r}{_nearest(key, valid)} "
                              f"(a {where.split()[0]} takes {', '.join(takes)})")
        try:
            mine.setdefault(section, {})[name] = _convert(key, value, _field_types(SECTIONS[section])[name])
        except ConfigError as e:
            raise ConfigError(f"{path}: {where}: attribute {e}") from None
    return merge_settings({s: v for s, v in defaults.items() if s in sections}, mine,
                          {s: v for s, v in settings.items() if s in sections})


def _build_spec(path: str, where: str, make):
    try:
        return make()
    except ConfigError as e:
        raise ConfigError(f"{path}: {where}: {e}") from None
    except TypeError as e:
        raise ConfigError(f"{path}: {where}: {e}") from None


def _json_attr(path: str, where: str, key: str, value):
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: {where}: attribute {key!r} is not JSON ({e})") from None
    return value


def _tuples(v):
    """JSON lists back to the tuples the families store (coordinates, wrap ports)."""
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    if isinstance(v, dict):
        return {k: _tuples(x) for k, x in v.items()}
    return v


def _int(path: str, where: str, key: str, value, lo: int = 0) -> int:
    try:
        v = _convert(key, value, int)
    except ConfigError:
        raise ConfigError(f"{path}: {where}: attribute {key!r} must be an integer, got {value!r}") from None
    if v < lo:
        raise ConfigError(f"{path}: {where}: attribute {key!r} must be >= {lo}, got {v}")
    return v


def _topology(path: str, g, defaults: dict, settings: dict) -> Topology:
    ga = {k: v for k, v in g.graph.items() if k not in ("edge_default", "node_default")}  # GraphML's own
    t = Topology(name=str(ga.pop("name", None) or os.path.basename(path)))
    if "grid" in ga:
        grid = ga.pop("grid")
        parts = grid.split(",") if isinstance(grid, str) else grid
        try:
            k, n, wrap = parts
            k, n = int(k), int(n)
            wrap = {"1": True, "true": True, "0": False, "false": False}[str(wrap).strip().lower()]
        except (TypeError, ValueError, KeyError):
            raise ConfigError(f"{path}: graph attribute 'grid' must be k,n,wrap (e.g. 4,2,1), got {grid!r}") from None
        if k < 2 or n < 1 or k ** n != sum(1 for _n, a in g.nodes(data=True) if a.get("kind") == "host"):
            raise ConfigError(f"{path}: graph attribute 'grid' {grid!r}: a k-ary n-mesh or torus has k**n hosts")
        t.grid = (k, n, bool(wrap))
    for key in ("diameter", "bisection"):
        if key in ga:
            setattr(t, key, _int(path, "graph", key, ga.pop(key)))
    if "figures" in ga:
        figs = _json_attr(path, "graph", "figures", ga.pop("figures"))
        if not isinstance(figs, dict):
            raise ConfigError(f"{path}: graph attribute 'figures' must be an object of figures")
        t.figures = figs
    if ga:
        key = sorted(ga)[0]
        raise ConfigError(f"{path}: unknown graph attribute {key!r}{_nearest(key, ['name', 'grid', 'diameter', 'bisection', 'figures'])} "
                          "(a graph takes name, grid, diameter, bisection, figures)")
    cache: dict = {}
    tables: dict[str, object] = {}
    for name, attrs in g.nodes(data=True):
        name = str(name)
        attrs = dict(attrs)
        kind = attrs.pop("kind", None)
        if kind not in ("host", "switch"):
            raise ConfigError(f"{path}: node {name!r}: attribute 'kind' must be host or switch, got {kind!r}")
        where = f"{kind} {name!r}"
        info = _tuples(_json_attr(path, where, "info", attrs.pop("info", {}) or {}))
        if not isinstance(info, dict):
            raise ConfigError(f"{path}: {where}: attribute 'info' must be an object")
        if "routes" in attrs:
            tables[name] = attrs.pop("routes")
        fields = _specs(path, where, attrs, NODE_SECTIONS[kind], (), defaults, settings)
        key = (kind, json.dumps(fields, sort_keys=True))
        spec = cache.get(key)
        if spec is None:
            if kind == "host":
                spec = _build_spec(path, where, lambda: HostSpec(**fields.get("host", {}), nic=NicSpec(**fields.get("nic", {})),
                                                                 elan=ElanSpec(**fields.get("elan", {}))))
            else:
                spec = _build_spec(path, where, lambda: SwitchSpec(**fields.get("switch", {}), pu=PUSpec(**fields.get("pu", {}))))
            cache[key] = spec
        (t.add_host if kind == "host" else t.add_switch)(name, spec, **info)
    _links(path, g, t, defaults, settings)
    _routes(path, t, tables)
    try:
        t.validate()
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    _connected(path, t)
    if t.diameter is None and len(t.hosts) <= 1024:  # beyond: a BFS per host costs seconds
        t.diameter = _diameter(t)
    _deadlock(path, t)
    return t


def _links(path: str, g, t: Topology, defaults: dict, settings: dict) -> None:
    edges = []
    for pos, (a, b, attrs) in enumerate(g.edges(data=True)):
        attrs = dict(attrs)
        attrs.pop("id", None)  # GraphML's own edge id
        where = f"link {a}-{b}"
        order = attrs.pop(ORDER, pos)
        index = _int(path, where, "index", attrs.pop("index")) if "index" in attrs else None
        ports = [_int(path, where, k, attrs.pop(k)) if k in attrs else None for k in ("source_port", "target_port")]
        fields = _specs(path, where, attrs, ("link",), (), defaults, settings)
        spec = _build_spec(path, where, lambda: LinkSpec(**fields.get("link", {})))
        edges.append((index if index is not None else len(g.edges) + order, str(a), str(b), ports, spec))
    edges.sort(key=lambda e: e[0])
    for _i, a, b, (ap, bp), spec in edges:
        try:
            t.add_link(a, b, spec, a_port=ap, b_port=bp)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None


def _routes(path: str, t: Topology, tables: dict) -> None:
    """Routes carried in the file, checked; none: shortest paths (``Topology.compute_routes``)."""
    if not tables:
        return
    switches = [s.name for s in t.switches]
    missing = [s for s in switches if s not in tables]
    if missing:
        raise ConfigError(f"{path}: switch {missing[0]!r} has no attribute 'routes' while others do; "
                          "give every switch its routes, or none (shortest-path routing)")
    nh = len(t.hosts)
    nb = {n: {p: peer for p, peer, _pp, _l in es} for n, es in t.neighbours().items()}
    for name, table in tables.items():
        where = f"{t.nodes[name].kind} {name!r}"
        items = table.split(",") if isinstance(table, str) else table
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{path}: {where}: attribute 'routes' must be a list of ports, one per host")
        row = [_int(path, where, "routes", x, lo=NO_ROUTE) for x in items]
        if len(row) != nh:
            raise ConfigError(f"{path}: {where}: attribute 'routes' has {len(row)} ports, one per host wanted ({nh})")
        bad = next((p for p in row if p != NO_ROUTE and p not in nb[name]), None)
        if bad is not None:
            raise ConfigError(f"{path}: {where}: attribute 'routes' names port {bad}, which has no link")
        t.routes[name] = row
    for dst in t.hosts:  # every switch a host can reach must lead to dst without a loop
        d = dst.id
        state: dict[str, int] = {}
        for s in switches:
            chain = []
            here = s
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
    h0 = t.hosts[0].name
    for h in t.hosts[1:]:
        try:
            t.route(h.name, h0)
        except ConfigError:
            raise ConfigError(f"{path}: host {h.name!r} cannot reach {h0}: the links do not connect them") from None


def _diameter(t: Topology) -> int:
    """Longest shortest path between two hosts, in links, through switches only."""
    nb = t.neighbours()
    best = 0
    for h in t.hosts:
        dist = {h.name: 0}
        q = deque([h.name])
        while q:
            u = q.popleft()
            if u != h.name and t.nodes[u].kind == "host":
                continue
            for _p, v, _vp, _l in nb[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    q.append(v)
        best = max([best] + [d for v, d in dist.items() if t.nodes[v].kind == "host"])
    return best


def _deadlock(path: str, t: Topology) -> None:
    """Refuse routing with a cyclic channel dependency where buffers are finite and no dateline VC
    policy breaks the cycle (where buffers are unbounded a cycle cannot block)."""
    finite = [s for s in t.switches if s.spec.model == "input_queued" or s.spec.vc_buffer_bytes > 0]
    if not finite or all(s.spec.vc_policy in ("dateline", "class_dateline") for s in finite):
        return
    from .deadlock import dependency_cycle

    cycle = dependency_cycle(t)
    if cycle:
        where = " -> ".join(t.port_name(n, p) for n, p in cycle[:6]) + (" -> ..." if len(cycle) > 6 else "")
        s = finite[0]
        raise ConfigError(f"{path}: the routing has a cyclic channel dependency ({where}) and switch {s.name!r} has "
                          f"finite buffers (switch.model={s.spec.model}): it can deadlock; carry deadlock-free "
                          "'routes' in the file, or use switch.model=output_queued")
