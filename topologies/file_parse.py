"""A topology file's bytes as plain elements, bounded: nothing is built here.

* node-link JSON: parsed by ``emu.config.files.parse_json`` (nesting depth, numbers of more digits
  than Python converts, bad UTF-8: one-line refusals), then its shape checked: an object with a
  ``nodes`` list, a ``links`` (or ``edges``) list and an optional ``graph`` object;
* GraphML: read by a streaming expat parser that never builds a tree: nesting deeper than
  ``emu.config.files.MAX_DEPTH``, a DOCTYPE (and so any entity declaration) and a nested graph are
  refused as they come, and the nodes and links are counted against the limits as they come, so a
  file of a million nodes is refused at its limit-th node, not after it is all in memory. Values
  take their key's ``attr.type`` (``boolean``, ``int``, ``long``, ``float``, ``double``,
  ``string``), and a key's ``<default>`` applies to the elements without a ``<data>`` for it.

Either way the result is :class:`Elements`: the graph's attributes, the nodes ``(name, attributes)``
and the links ``(source, target, attributes)``, each in file order.
"""

from __future__ import annotations

from dataclasses import dataclass

from emu.config import ConfigError, _convert
from emu.config.files import MAX_DEPTH, parse_json

MAX_NAME = 256
"""Longest node name (and topology name) a file may give, in characters."""
MAX_PORT = 65535
"""Highest port number a file may give (a star of 65,536 hosts would need it on its switch)."""
NODE_LINK = ("a topology in JSON is node-link data: an object with \"nodes\" and \"links\" lists "
             "(emu topo SPEC --format json writes one)")
GRAPHML_TYPES = {"boolean": bool, "int": int, "long": int, "integer": int, "float": float, "double": float,
                 "string": str}
BOOLS = {"true": True, "false": False, "1": True, "0": False}
TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "text"}


@dataclass
class Elements:
    """What a topology file holds, in file order; each attribute dict is the caller's to consume."""

    graph: dict
    nodes: list[tuple[str, dict]]
    links: list[tuple[str, str, dict]]


def show(value, width: int = 40) -> str:
    """``repr(value)`` cut to ``width`` characters (a hostile value can be megabytes long)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() >= 128:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    text = repr(value)
    if len(text) <= width:
        return text
    return text[:width - 5] + "..." + ("'" if isinstance(value, str) else "") + f" ({len(text):,} characters)"


def ranged(path: str, where: str, key: str, value, lo: int, hi: int, note: str = "") -> int:
    """An integer attribute within lo..hi, or ConfigError naming the element and the attribute."""
    v = value
    if type(v) is not int:
        try:
            v = None if isinstance(v, str) and len(v) > 64 else _convert(key, v, int)
        except ConfigError:
            v = None
    if v is None or not lo <= v <= hi:
        raise ConfigError(f"{path}: {where}: attribute {key!r} must be an integer within {lo}..{hi}{note}, "
                          f"got {show(value)}")
    return v


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), "null" if value is None else type(value).__name__)


def _name(what: str, where: str, key: str, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{what}: {where}: \"{key}\" must be a node's name (a string), got {_kind(value)}")
    name = str(value)
    if len(name) > MAX_NAME:
        raise ConfigError(f"{what}: {where}: \"{key}\" is {len(name):,} characters long; a node's name has at "
                          f"most {MAX_NAME}")
    return name


# -- JSON ------------------------------------------------------------------------------------------
def json_elements(raw: bytes, what: str) -> Elements:
    """The elements of node-link JSON (``networkx.node_link_data``'s keys: ``id``, ``source``,
    ``target``; a link's ``key`` is networkx's own and is dropped)."""
    data = parse_json(raw, what, NODE_LINK)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ConfigError(f"{what}: {NODE_LINK}")
    key = "links" if "links" in data or "edges" not in data else "edges"
    links = data.get(key, [])
    if not isinstance(links, list):
        raise ConfigError(f"{what}: \"{key}\" must be a list of {{\"source\": ..., \"target\": ...}}, "
                          f"got {_kind(links)}")
    graph = data.get("graph")
    if graph is None:
        graph = {}
    if not isinstance(graph, dict):
        raise ConfigError(f"{what}: \"graph\" must be an object of graph attributes (name, grid, diameter, "
                          f"bisection, figures), got {_kind(graph)}")
    nodes = []
    for i, n in enumerate(data["nodes"]):  # the parsed objects are ours: consumed in place
        if type(n) is not dict or "id" not in n:
            raise ConfigError(f"{what}: nodes[{i}] has no \"id\" (the node's name)")
        name = n.pop("id")
        if type(name) is not str or len(name) > MAX_NAME:
            name = _name(what, f"nodes[{i}]", "id", name)
        nodes.append((name, n))
    out = []
    for i, e in enumerate(links):
        if type(e) is not dict or "source" not in e or "target" not in e:
            raise ConfigError(f"{what}: {key}[{i}] needs \"source\" and \"target\" (node names)")
        a, b = e.pop("source"), e.pop("target")
        if type(a) is not str or len(a) > MAX_NAME:
            a = _name(what, f"{key}[{i}]", "source", a)
        if type(b) is not str or len(b) > MAX_NAME:
            b = _name(what, f"{key}[{i}]", "target", b)
        e.pop("key", None)
        out.append((a, b, e))
    return Elements(dict(graph), nodes, out)


# -- GraphML ---------------------------------------------------------------------------------------
class _Stop(Exception):
    """A refusal raised inside an expat handler (carried out of ``Parse``)."""


_LOCAL: dict[str, str] = {}
"""Element tag (``namespace local``, as expat gives it: the same string object each time) -> local name."""
_HOLDERS = frozenset(("node", "edge", "graph"))


class _GraphML:
    """The expat handlers: one pass, a stack of open elements' local names, nothing kept but the
    elements. Text goes to one list (``text.append`` is the character handler itself: no Python
    call per piece); a ``<data>`` joins what came since it opened."""

    def __init__(self, what: str, max_nodes: int, max_links: int, too_many) -> None:
        self.what, self.max_nodes, self.max_links, self.too_many = what, max_nodes, max_links, too_many
        self.stack: list[str] = []
        self.keys: dict[str, tuple[str, str, type]] = {}   # id -> (for, name, type)
        self.defaults: dict[str, dict[str, object]] = {"node": {}, "edge": {}, "graph": {}}
        self.key_id: str | None = None
        self.graphs = 0
        self.graph: dict = {}
        self.nodes: list[tuple[str, dict]] = []
        self.links: list[tuple[str, str, dict]] = []
        self.current: tuple | None = None                  # the node or edge whose <data> come next
        self.attrs: dict = self.graph                      # where the next <data> value goes
        self.data: tuple | None = None                     # (key id, name, type) of the <data> open
        self.text: list[str] = []
        self.mark = 0                                      # where the open <data>'s text starts
        self.skip = 0                                      # depth inside an element we do not read

    def fail(self, message: str):
        raise _Stop(f"{self.what}: {message}")

    def where(self) -> str:
        c = self.current
        if c is None:
            return "graph"
        return f"node {c[1]!r}" if c[0] == "node" else f"link {c[1]}-{c[2]}"

    def value(self, key: tuple, text: str, where: str | None = None):
        """``text`` as the key's type (``where``: the element, by default the one open)."""
        kid, name, kind = key
        if kind is str:
            return text
        t = text.strip()
        if t.isascii():  # int() and float() take any script's digits: '٤' would be 4
            try:
                return BOOLS[t.lower()] if kind is bool else kind(t)
            except (KeyError, ValueError):  # ValueError: also an integer of more digits than int() converts
                pass
        self.fail(f"{where or self.where()}: attribute {name!r} must be {TYPE_WORDS[kind]}"
                  f"{' written in ASCII' if not t.isascii() else ''} (its key {kid!r} says so), got {show(text)}")

    # handlers
    def start(self, tag: str, attrs: dict) -> None:
        stack = self.stack
        if len(stack) >= MAX_DEPTH:
            self.fail(f"nests deeper than {MAX_DEPTH} levels; a GraphML topology nests 4 deep")
        local = _LOCAL.get(tag)
        if local is None:
            local = _LOCAL[tag] = tag.rpartition(" ")[2]
        parent = stack[-1] if stack else None
        stack.append(local)
        if self.skip:
            self.skip += 1
        elif local == "data" and parent in _HOLDERS:
            key = self.keys.get(attrs.get("key"))
            if key is None:
                self.fail(f"{self.where()}: <data key={show(attrs.get('key'))}> has no <key> of that id")
            self.data, self.mark = key, len(self.text)
        elif parent == "graph":
            self.element(local, attrs)
        elif parent is None:
            if local != "graphml":
                self.fail(f"not GraphML: the root element is <{local}>, not <graphml>")
        elif parent == "graphml":
            if local == "key":
                self.key(attrs)
            elif local == "graph":
                self.graphs += 1
                if self.graphs > 1:
                    self.fail("holds more than one <graph>; a topology file holds one")
            else:
                self.skip = 1
        elif parent == "key" and local == "default" and self.key_id is not None:
            self.data, self.mark = self.keys[self.key_id], len(self.text)
        elif parent == "data" or parent == "default":
            self.fail(f"{self.where()}: a <{parent}> holds the element <{local}>; a value is text")
        elif local == "graph" and parent in _HOLDERS:
            self.fail(f"{self.where()} holds a nested <graph>; a topology file is one flat graph")
        else:
            self.skip = 1

    def element(self, local: str, attrs: dict) -> None:
        """A child of <graph>: a node, an edge (their <data> follow), or one to skip."""
        if local == "node":
            if len(self.nodes) >= self.max_nodes:
                self.too_many("nodes", self.max_nodes)
            name = attrs.get("id")
            if name is None or len(name) > MAX_NAME:
                if name is None:
                    self.fail(f"<node> number {len(self.nodes) + 1} has no id (the node's name)")
                _name(self.what, f"<node> number {len(self.nodes) + 1}", "id", name)
            self.attrs = {}
            self.current = ("node", name, self.attrs)
        elif local == "edge":
            if len(self.links) >= self.max_links:
                self.too_many("links", self.max_links)
            a, b = attrs.get("source"), attrs.get("target")
            if a is None or b is None:
                self.fail(f"<edge> number {len(self.links) + 1} needs source and target (node names)")
            for end in (a, b):
                if len(end) > MAX_NAME:
                    _name(self.what, f"<edge> number {len(self.links) + 1}", "source" if end is a else "target", end)
            self.attrs = {}
            self.current = ("edge", a, b, self.attrs)
        elif local == "hyperedge":
            self.fail("holds a <hyperedge>; a link joins two nodes (<edge>)")
        else:
            self.skip = 1

    def key(self, attrs: dict) -> None:
        kid, name = attrs.get("id"), attrs.get("attr.name")
        if kid is None or name is None:
            self.fail(f"<key> {show(kid)} needs an id and an attr.name")
        kind = GRAPHML_TYPES.get(attrs.get("attr.type", "string"))
        if kind is None:
            self.fail(f"<key> {show(kid)}: attr.type {show(attrs['attr.type'])} is not one of "
                      f"{', '.join(GRAPHML_TYPES)}")
        self.keys[kid] = (kid, name, kind)
        self.key_id = kid
        self.scope = attrs.get("for", "all")

    def end(self, tag: str) -> None:
        local = self.stack.pop()
        if self.skip:
            self.skip -= 1
        elif self.data is not None and (local == "data" or local == "default"):
            text = "".join(self.text[self.mark:])
            key, self.data = self.data, None
            if local == "data":
                self.attrs[key[1]] = text if key[2] is str else self.value(key, text)
            else:
                value = self.value(key, text, f"<key> {key[0]!r}: <default>")
                for scope in (("node", "edge", "graph") if self.scope == "all" else (self.scope,)):
                    if scope in self.defaults:
                        self.defaults[scope][key[1]] = value
        elif local == "node" or local == "edge":
            c = self.current
            if c is None:
                return
            d = self.defaults[local]
            if local == "node":
                self.nodes.append((c[1], {**d, **c[2]} if d else c[2]))
            else:
                self.links.append((c[1], c[2], {**d, **c[3]} if d else c[3]))
            self.current, self.attrs = None, self.graph
            self.text.clear()

    def doctype(self, *_args) -> None:
        self.fail("holds a DOCTYPE declaration; a topology file has none (entities are not expanded)")


def graphml_elements(raw: bytes, what: str, max_nodes: int, max_links: int, too_many) -> Elements:
    """The elements of a GraphML file; ``too_many(what, limit)`` raises when the nodes or links
    pass ``max_nodes`` / ``max_links``."""
    from xml.parsers import expat

    r = _GraphML(what, max_nodes, max_links, too_many)
    p = expat.ParserCreate(namespace_separator=" ")
    p.buffer_text = True
    p.StartElementHandler, p.EndElementHandler, p.CharacterDataHandler = r.start, r.end, r.text.append
    p.StartDoctypeDeclHandler = r.doctype
    p.EntityDeclHandler = r.doctype
    try:
        p.Parse(raw, True)
    except _Stop as e:
        raise ConfigError(str(e)) from None
    except expat.ExpatError as e:
        raise ConfigError(f"{what}: not GraphML (XML error: {e})") from None
    if not r.graphs:
        raise ConfigError(f"{what}: not GraphML: no <graph> element")
    graph = {**r.defaults["graph"], **r.graph} if r.defaults["graph"] else r.graph
    return Elements(graph, r.nodes, r.links)
