"""Reading a topology file (``emu.topologies.files`` describes the format): the file read and parsed
(``emu.topologies.file_parse``), its sizes checked, every element and attribute checked, the links
laid in their order, then the routing checked (``emu.topologies.file_routes``). A bad file is
refused in one line naming the element and the attribute.

A file is data someone else wrote, so:

* it is read by ``emu.config.files.read``: a FIFO, a device or a directory (or a symlink to one) is
  refused before anything is read, and at most ``LIMITS["topology"]`` bytes are;
* every size it implies is checked against the limits a spec is checked against
  (``emu.topologies.estimate``: elements, routing-table entries, memory), and its links against
  memory too (:data:`BYTES_PER_LINK`), before anything is built;
* every number in it is range-checked, naming the element and the attribute: ports within
  0..:data:`MAX_PORT` (and a node may leave at most max(:data:`UNLINKED`, its links) ports unlinked:
  the run allocates every port up to the highest), ``index`` within the links, ``grid`` within the
  bounds of ``mesh:``/``torus:``, ``diameter`` and ``bisection`` within the nodes and links, the
  numbers in ``info`` and ``figures`` within 2**62; each spec field is checked by its spec;
* loading is linear in the file: the elements are read once, specs are shared among elements with
  the same attributes, links are placed by their ``index`` without sorting.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from difflib import get_close_matches
from operator import itemgetter

from emu.config import (MAX_INT, SECTIONS, ConfigError, ElanSpec, HostSpec, LinkSpec, NicSpec, PUSpec, QueueSpec, SwitchSpec,
                        _convert, _field_types, merge_settings)
from emu.config.files import parse_json, read

from .base import Topology
from .estimate import Estimate, check, limits
from .file_parse import MAX_NAME, MAX_PORT, TYPE_WORDS, Elements, graphml_elements, json_elements, ranged, show
from .file_routes import check_routing

NODE_SECTIONS = {"host": ("host", "nic", "elan"), "switch": ("switch", "pu", "queues")}
"""The settings sections whose fields a node of each kind may carry."""
GRAPH_ATTRS = ("name", "grid", "diameter", "bisection", "figures")
UNLINKED = 256
"""Ports a node may leave unlinked below its highest (a mesh's border routers leave some), or as many
as it has links if that is more."""
BYTES_PER_LINK = 12_000
"""A link at run time: its two ports' state and queues (measured: ``emu run --test pingall`` on two
switches joined by 4,000 parallel links peaks 47 MB above the same with one link)."""
MAX_VALUE = 256
"""Longest text value of a spec field (``switch.model=...``) a file may give, in characters."""
HINT = "a topology file ends in .json or .graphml"


def load_file(path: str, fmt: str, defaults: dict, settings: dict) -> Topology:
    """The topology of the file ``path`` in format ``fmt`` (``json`` or ``graphml``)."""
    what = f"--topo {path}"
    raw = read(path, what, "topology", HINT)
    lim = limits()
    max_links = max(1, lim["bytes"] // BYTES_PER_LINK)

    def too_many(things: str, limit: int):
        why = ("elements (one socket each; EMU_MAX_ELEMENTS raises it)" if things == "nodes" else
               f"links ({BYTES_PER_LINK:,} bytes each within half of the memory available, "
               f"{lim['bytes'] / 2**30:.1f} GiB)")
        raise ConfigError(f"{what}: more than {limit:,} {things}: over the limit of {limit:,} {why}; "
                          "choose a smaller topology")

    if fmt == "json":
        els = json_elements(raw, what)
    else:
        els = graphml_elements(raw, what, lim["elements"], max_links, too_many)
    del raw
    _check_size(what, els, lim)
    t, tables = _topology(path, els, defaults, settings)
    check_routing(path, t, tables)
    return t


def _check_size(what: str, els: Elements, lim: dict) -> None:
    """The limits of a spec (``estimate.check``) on the counts the file implies, and its links
    against memory."""
    switches = sum(1 for _name, a in els.nodes if a.get("kind") == "switch")
    hosts = len(els.nodes) - switches
    est = Estimate(hosts, switches, len(els.links), hosts * switches)
    check(what, est)
    need = est.bytes + est.links * BYTES_PER_LINK
    if need > lim["bytes"]:
        raise ConfigError(f"{what} would have {est.links:,} links and {est.elements:,} elements, about "
                          f"{need / 2**30:.1f} GiB at run time: over half of the memory available "
                          f"({lim['bytes'] / 2**30:.1f} GiB); choose a smaller topology")


# -- values ----------------------------------------------------------------------------------------
_TYPES: dict[str, dict[str, type]] = {}


def _types(section: str) -> dict[str, type]:
    """``_field_types`` of a section, once (it reads the dataclass's type hints: slow)."""
    ft = _TYPES.get(section)
    if ft is None:
        ft = _TYPES[section] = _field_types(SECTIONS[section])
    return ft


def _nearest(word: str, names) -> str:
    if len(word) > 64:
        return ""
    near = get_close_matches(word, list(names), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(near)}?" if near else ""


def _specs(path: str, where: str, attrs: dict, sections: tuple[str, ...], defaults: dict,
           settings: dict) -> dict[str, dict]:
    """The ``section.field`` attributes of an element as settings layers merged: --config < file < --set."""
    mine: dict[str, dict] = {}
    for key, value in attrs.items():
        section, dot, name = key.partition(".")
        kind = _types(section).get(name) if dot and section in sections else None
        if kind is None:
            valid = [f"{s}.{f}" for s in sections for f in _types(s)]
            takes = [s + ".*" for s in sections] + (["info", "routes"] if "link" not in sections else
                                                    ["source_port", "target_port", "index"])
            raise ConfigError(f"{path}: {where}: unknown attribute {show(key)}{_nearest(key, valid)} "
                              f"(a {where.split()[0]} takes {', '.join(takes)})")
        if isinstance(value, str) and len(value) > MAX_VALUE:
            raise ConfigError(f"{path}: {where}: attribute {key} is {len(value):,} characters long; a field's "
                              f"value has at most {MAX_VALUE}")
        if isinstance(value, (list, dict)):
            raise ConfigError(f"{path}: {where}: attribute {key} must be {TYPE_WORDS[kind]}, got {show(value)}")
        try:
            mine.setdefault(section, {})[name] = _convert(key, value, kind)
        except ConfigError as e:
            raise ConfigError(f"{path}: {where}: attribute {e}") from None
    return merge_settings({s: v for s, v in defaults.items() if s in sections}, mine,
                          {s: v for s, v in settings.items() if s in sections})


def _build_spec(path: str, where: str, make):
    try:
        return make()
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{path}: {where}: {e}") from None


def _json_attr(path: str, where: str, key: str, value):
    """A JSON value given as text (GraphML's values are scalars) parsed, bounded as a file is."""
    if isinstance(value, str):
        value = parse_json(value.encode("utf-8", "surrogatepass"), f"{path}: {where}: attribute {key!r}")
    return value


def _numbers(path: str, where: str, key: str, value) -> None:
    """Refuse a number in ``value`` (nested lists and objects) beyond 2**62, or not finite."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, float) and not math.isfinite(v) or isinstance(v, int) and not -MAX_INT <= v <= MAX_INT:
            raise ConfigError(f"{path}: {where}: attribute {key!r} holds {show(v)}: numbers in it must be finite "
                              "and within 2**62")


def _tuples(v):
    """JSON lists back to the tuples the families store (coordinates, wrap ports)."""
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    if isinstance(v, dict):
        return {k: _tuples(x) for k, x in v.items()}
    return v


def _object(path: str, where: str, key: str, value, what: str) -> dict:
    value = _json_attr(path, where, key, value)
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {where}: attribute {key!r} must be an object {what}")
    _numbers(path, where, key, value)
    return value


def _key(attrs: dict):
    """A hashable key of an element's attributes (None where a value is a list or an object)."""
    if not attrs:
        return ()
    key = tuple(sorted(attrs.items())) if len(attrs) > 1 else tuple(attrs.items())
    try:
        hash(key)
    except TypeError:
        return None
    return key


# -- the topology ----------------------------------------------------------------------------------
def _grid(path: str, grid, hosts: int) -> tuple[int, int, bool]:
    parts = grid.split(",") if isinstance(grid, str) else grid

    def num(x) -> int:
        if isinstance(x, bool) or not isinstance(x, (int, str)) or isinstance(x, str) and not x.strip().isascii():
            raise ValueError
        return int(x)

    try:
        k, n, wrap = parts
        k, n = num(k), num(n)
        wrap = {"1": True, "true": True, "0": False, "false": False}[str(wrap).strip().lower()]
    except (TypeError, ValueError, KeyError):
        raise ConfigError(f"{path}: graph attribute 'grid' must be k,n,wrap (e.g. 4,2,1), got {show(grid)}") from None
    if not (2 + wrap <= k <= 256 and 1 <= n <= 4) or k ** n > 65536:
        raise ConfigError(f"{path}: graph attribute 'grid' {show(grid)}: k must be within {2 + wrap}..256 and n "
                          "within 1..4 with k**n at most 65536, as for mesh: and torus:")
    if k ** n != hosts:
        raise ConfigError(f"{path}: graph attribute 'grid' {show(grid)}: a k-ary n-mesh or torus has k**n hosts")
    return k, n, wrap


def _graph(path: str, els: Elements, t: Topology, hosts: int) -> None:
    ga = {k: v for k, v in els.graph.items() if k not in ("edge_default", "node_default")}  # networkx's own
    name = ga.pop("name", None)
    if isinstance(name, bool) or not isinstance(name, (str, int, type(None))) or len(str(name or "")) > MAX_NAME:
        raise ConfigError(f"{path}: graph attribute 'name' must be a name of at most {MAX_NAME} characters, "
                          f"got {show(name)}")
    t.name = str(name or os.path.basename(path))
    if "grid" in ga:
        t.grid = _grid(path, ga.pop("grid"), hosts)
    for key, hi, what in (("diameter", len(els.nodes), "the nodes"), ("bisection", len(els.links), "the links")):
        if key in ga:
            setattr(t, key, ranged(path, "graph", key, ga.pop(key), 0, max(0, hi - 1 if key == "diameter" else hi),
                                   f" ({what} in the file)"))
    if "figures" in ga:
        t.figures = _object(path, "graph", "figures", ga.pop("figures"), "of figures")
    if ga:
        key = sorted(map(str, ga))[0]
        raise ConfigError(f"{path}: unknown graph attribute {show(key)}{_nearest(key, GRAPH_ATTRS)} "
                          f"(a graph takes {', '.join(GRAPH_ATTRS)})")


def _topology(path: str, els: Elements, defaults: dict, settings: dict) -> tuple[Topology, dict[str, object]]:
    """The topology's nodes and links, and the ``routes`` attributes as they are in the file."""
    t = Topology()
    hosts = sum(1 for _n, a in els.nodes if a.get("kind") == "host")
    _graph(path, els, t, hosts)
    cache: dict = {}
    tables: dict[str, object] = {}
    for name, attrs in els.nodes:
        kind = attrs.pop("kind", None)
        if kind != "host" and kind != "switch":
            raise ConfigError(f"{path}: node {name!r}: attribute 'kind' must be host or switch, got {show(kind)}")
        info = attrs.pop("info", None)
        if "routes" in attrs:
            tables[name] = attrs.pop("routes")
        key = _key(attrs)
        spec = cache.get((kind, key)) if key is not None else None
        if spec is None:
            where = f"{kind} {name!r}"
            fields = _specs(path, where, attrs, NODE_SECTIONS[kind], defaults, settings)
            if kind == "host":
                spec = _build_spec(path, where, lambda: HostSpec(**fields.get("host", {}), nic=NicSpec(**fields.get("nic", {})),
                                                                 elan=ElanSpec(**fields.get("elan", {}))))
            else:
                spec = _build_spec(path, where, lambda: SwitchSpec(**fields.get("switch", {}), pu=PUSpec(**fields.get("pu", {})),
                                                                          queues=QueueSpec(**fields.get("queues", {}))))
            if key is not None:
                cache[(kind, key)] = spec
        try:
            node = (t.add_host if kind == "host" else t.add_switch)(name, spec)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
        if info:
            node.info.update(_tuples(_object(path, f"{kind} {name!r}", "info", info, "(the family's facts)")))
    _links(path, els, t, defaults, settings)
    return t, tables


def _links(path: str, els: Elements, t: Topology, defaults: dict, settings: dict) -> None:
    n = len(els.links)
    placed: list = [None] * n   # by index
    rest = []                   # without one, in file order after them
    cache: dict = {}
    for a, b, attrs in els.links:
        index = ap = bp = None
        if attrs:
            attrs.pop("id", None)  # GraphML's own edge id
            index, ap, bp = attrs.pop("index", None), attrs.pop("source_port", None), attrs.pop("target_port", None)
            if index is not None and (type(index) is not int or not 0 <= index < n):
                index = ranged(path, f"link {a}-{b}", "index", index, 0, n - 1, " (its place among the links)")
            if ap is not None and (type(ap) is not int or not 0 <= ap <= MAX_PORT):
                ap = ranged(path, f"link {a}-{b}", "source_port", ap, 0, MAX_PORT)
            if bp is not None and (type(bp) is not int or not 0 <= bp <= MAX_PORT):
                bp = ranged(path, f"link {a}-{b}", "target_port", bp, 0, MAX_PORT)
        key = _key(attrs)
        spec = cache.get(key) if key is not None else None
        if spec is None:
            where = f"link {a}-{b}"
            fields = _specs(path, where, attrs, ("link",), defaults, settings)
            spec = _build_spec(path, where, lambda: LinkSpec(**fields.get("link", {})))
            if key is not None:
                cache[key] = spec
        if index is None:
            rest.append((a, b, ap, bp, spec))
        elif placed[index] is not None:
            raise ConfigError(f"{path}: link {a}-{b}: attribute 'index' {index} is link {placed[index][0]}-"
                              f"{placed[index][1]}'s too; give each link its own place")
        else:
            placed[index] = (a, b, ap, bp, spec)
    if rest:
        placed = [x for x in placed if x is not None] + rest
    add = t.add_link
    for a, b, ap, bp, spec in placed:
        try:
            add(a, b, spec, a_port=ap, b_port=bp)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    ends = Counter(map(itemgetter(0), placed))
    ends.update(map(itemgetter(1), placed))
    for name in t.nodes:
        deg, free = ends[name], t.nports(name) - ends[name]
        if free > UNLINKED and free > deg:
            raise ConfigError(f"{path}: {t.nodes[name].kind} {name!r}: its ports are numbered up to "
                              f"{t.nports(name) - 1:,} and {free:,} of them are unlinked; a node may leave at most "
                              f"max({UNLINKED}, its links) unlinked: number its ports from 0")
