"""Topologies in and out of files: node-link JSON and GraphML (written through networkx, read by
``emu.topologies.file_load``, which treats a file as data someone else wrote).

One attribute scheme serves both formats (docs/topologies.md has a hand-written example):

* graph: ``name``; optional ``grid`` (a mesh or torus: ``k,n,wrap``), ``diameter``, ``bisection``,
  ``figures`` (the family's own figures, JSON).
* node: ``kind`` (``host`` or ``switch``; required); any settable field of the node's specs, named as
  ``--set`` names it: ``host.nic_delay_ns``, ``nic.alu_ns``, ``elan.window`` on hosts,
  ``switch.processing_delay_ns``, ``switch.model``, ``pu.clusters`` on switches; optional ``info``
  (the family's facts: stage, coordinates..., JSON) and ``routes`` (a switch's output port per
  destination host, in the order the hosts appear, ``-1`` for none). Host ``i`` in file order has
  fabric address ``i``; a name has at most 256 characters.
* edge: optional ``source_port`` and ``target_port`` (0..65535; default: the next free port of each
  end), any ``link.*`` field (``link.latency_ns``, ``link.bandwidth_bps``, ``link.priority``),
  optional ``index`` (the link's place in the topology's link list, each its own, below the number
  of links; links without one follow those with one, in file order).

A field a file leaves out takes its default, under ``--config`` and ``--set`` as for a spec's own
parameters: the ``--config`` file, then the file's values, then ``--set``. A file without
``routes`` is routed by shortest paths (lowest port first), as every generic family is; routes
carried in the file (an export carries them) are checked: every host reaches every other, with no
loop. Either way the routing's channel dependencies are checked for a cycle
(``emu.topologies.deadlock``): a cycle with finite buffers (an input-queued router or
``switch.vc_buffer_bytes``) and no dateline VC policy is refused. A bad file is refused in one line
naming the element and the attribute; so is a file past the limits a spec is held to
(``emu.topologies.estimate``), before anything is built. In GraphML a key's ``<default>`` applies to
the elements without a ``<data>`` for it; a DOCTYPE, a nested graph and a hyperedge are refused.
"""

from __future__ import annotations

import functools
import json
import os

from emu.config import SECTIONS, ConfigError, _field_types

from .base import Topology

FORMATS = ("json", "graphml")
SUFFIXES = {".json": "json", ".graphml": "graphml", ".xml": "graphml"}
ALWAYS = {"link": ("latency_ns", "bandwidth_bps"), "switch": ("processing_delay_ns", "model")}
"""Fields written even at their default value (what a reader of the file wants to see)."""


def is_file_spec(spec: object) -> bool:
    """Whether ``--topo`` names a topology file (by its suffix) rather than a family spec."""
    return isinstance(spec, str) and os.path.splitext(spec.strip())[1].lower() in SUFFIXES


# -- out -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _section(cls: type) -> tuple[tuple[str, ...], object]:
    """A spec class's settable fields and its default instance (reading type hints is slow: once)."""
    return tuple(_field_types(cls)), cls()


def _fields(section: str, obj, all_fields: bool, memo: dict | None = None) -> dict[str, object]:
    key = (section, id(obj), all_fields)
    if memo is not None and key in memo:
        return memo[key][1]
    names, default = _section(SECTIONS[section])
    out = {}
    for name in names:
        value = getattr(obj, name)
        if all_fields or value != getattr(default, name) or name in ALWAYS.get(section, ()):
            out[f"{section}.{name}"] = value
    if memo is not None:
        memo[key] = (obj, out)  # obj kept: its id stays its own while the memo lives
    return out


def node_attributes(node, all_fields: bool = False, memo: dict | None = None) -> dict[str, object]:
    """A node's spec fields as ``section.field`` attributes (those that differ from the default, and
    the few in ``ALWAYS``; every one with ``all_fields``). ``memo``: a dict to share the work among
    nodes with the same spec objects (one per export)."""
    spec = node.spec
    if node.kind == "host":
        return {**_fields("host", spec, all_fields, memo), **_fields("nic", spec.nic, all_fields, memo),
                **_fields("elan", spec.elan, all_fields, memo)}
    return {**_fields("switch", spec, all_fields, memo), **_fields("pu", spec.pu, all_fields, memo),
            **_fields("queues", spec.queues, all_fields, memo)}


def link_name(link) -> str:
    """A link's name as ``--fault link=A-B`` takes it."""
    return f"{link.a}-{link.b}"


def to_graph(t: Topology, fmt: str = "json", routes: bool = True, all_fields: bool = False):
    """``t`` as a ``networkx.MultiDiGraph`` with the file attributes (module docstring): dicts and lists
    as they are for JSON, as JSON text / comma-separated text for GraphML (whose values are scalars).
    Directed only so that each link keeps its orientation -- its name ``A-B`` and which end
    ``source_port`` is; every link is full duplex (``g.to_undirected()`` for analysis)."""
    import networkx as nx

    text = fmt == "graphml"
    g = nx.MultiDiGraph()
    memo: dict = {}
    g.graph["name"] = t.name
    if t.grid is not None:
        k, n, wrap = t.grid
        g.graph["grid"] = f"{k},{n},{int(bool(wrap))}" if text else [k, n, bool(wrap)]
    for key in ("diameter", "bisection"):
        if getattr(t, key) is not None:
            g.graph[key] = getattr(t, key)
    if t.figures:
        g.graph["figures"] = json.dumps(t.figures) if text else dict(t.figures)
    for node in t.nodes.values():
        if node.name == t.manager:
            continue  # attached by the run (--manager), not part of the network
        attrs = {"kind": node.kind, **node_attributes(node, all_fields, memo)}
        info = {k: v for k, v in node.info.items() if _jsonable(v)}
        if info:
            attrs["info"] = json.dumps(info) if text else info
        table = t.routes.get(node.name) if routes else None
        if table is not None:
            attrs["routes"] = ",".join(map(str, table)) if text else list(table)
        g.add_node(node.name, **attrs)
    for i, link in enumerate(t.links):
        if t.manager in (link.a, link.b):
            continue
        a, ap, b, bp = link.a, link.a_port, link.b, link.b_port
        g.add_edge(a, b, index=i, source_port=ap, target_port=bp, **_fields("link", link.spec, all_fields, memo))
    return g


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def dumps(t: Topology, fmt: str, routes: bool = True, all_fields: bool = False) -> str:
    """The file's text: node-link JSON or GraphML."""
    import networkx as nx

    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: give one of {', '.join(FORMATS)}")
    g = to_graph(t, fmt, routes, all_fields)
    if fmt == "json":
        data = nx.node_link_data(g, edges="links")
        head = {k: v for k, v in data.items() if k not in ("nodes", "links")}
        rows = lambda items: ",\n  ".join(json.dumps(x) for x in items)  # noqa: E731 -- one element a line
        return (json.dumps(head)[:-1] + f',\n "nodes": [\n  {rows(data["nodes"])}],\n'
                f' "links": [\n  {rows(data["links"])}]}}\n')
    return "<?xml version='1.0' encoding='utf-8'?>\n" + "\n".join(nx.generate_graphml(g)) + "\n"


# -- in --------------------------------------------------------------------------------------------
def load(path: str, *, defaults: dict | None = None, settings: dict | None = None) -> Topology:
    """The topology of a JSON or GraphML file (module docstring); ConfigError in one line naming the
    element and the attribute when the file is wrong (``emu.topologies.file_load``)."""
    from .file_load import load_file

    path = path.strip()
    return load_file(path, SUFFIXES[os.path.splitext(path)[1].lower()], defaults or {}, settings or {})


def write(t: Topology, fmt: str, out: str, routes: bool = True, all_fields: bool = False) -> None:
    """Write ``t`` to the file ``out`` ('-': stdout)."""
    import sys

    text = dumps(t, fmt, routes, all_fields)
    if out == "-":
        sys.stdout.write(text)
        return
    with open(out, "w") as fh:
        fh.write(text)
