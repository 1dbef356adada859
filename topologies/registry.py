"""Topologies built by name: ``build("fattree:k=4,n=3,latency_ns=200")`` (DESIGN.md principle 8).

A spec is ``NAME:PARAM=VALUE,...``. Each family has its own parameters (some required) and every
family accepts the element and link figures below, which default to ``LinkSpec()``,
``HostSpec()`` and ``SwitchSpec()``. A spec that is wrong in any way is refused with a
``ConfigError`` naming the parameter and what it accepts, before anything starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from emu.config import ConfigError, ElanSpec, HostSpec, LinkSpec, NicSpec, PUSpec, QueueSpec, SwitchSpec, merge_settings
from emu.config.numbers import decimal_float, decimal_int, hint

from .base import Topology
from .estimate import check as check_size
from .estimate import estimate
from .direct import mesh, torus
from .dragonfly import dragonfly
from .hyperx import hyperx
from .qsnet import qsnet
from .slimfly import slimfly
from .star import star
from .trees import clos, fattree, twolevel


@dataclass(frozen=True)
class Param:
    name: str
    kind: type
    required: bool
    help: str


@dataclass(frozen=True)
class Family:
    name: str
    build: Callable[..., Topology]
    params: tuple[Param, ...]
    summary: str
    defaults: dict | None = None
    """The family's own element and link figures ({section: {field: value}}), under everything a
    user gives (a ``--config`` file, the spec's parameters, ``--set``)."""


def _p(name: str, required: bool = True, help: str = "", kind: type = int) -> Param:
    return Param(name, kind, required, help)


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> None:
    """Add a topology family (a builder taking its parameters and link/host/switch keywords)."""
    FAMILIES[family.name] = family


def family(name: str) -> Family | None:
    """The family ``name``: registered, or registered by the module an installed package names for it
    in the entry-point group ``emu.topologies`` (``[project.entry-points."emu.topologies"] ring =
    "mypkg.ring"``: ``mypkg/ring.py`` calls :func:`register`); None when there is none."""
    if name not in FAMILIES:
        from emu.plugins import TOPOLOGIES, load

        load(TOPOLOGIES, name)
    return FAMILIES.get(name)


register(Family("star", star, (_p("n", help="hosts on the switch"),), "n hosts on one switch"))
register(Family("fattree", fattree, (_p("k", help="arity: switch radix is 2k"), _p("n", help="stages"),
                                     _p("rails", False, "separate networks, each host linked to every one (default 1)"),
                                     _p("links", False, "links from each host to its switch (default 1)")),
                "k-ary n-tree: k^n hosts, n stages of k^(n-1) switches, up*/down* routing"))
register(Family("clos", clos, (_p("radix", help="router ports"), _p("stages"),
                               _p("nodes", False, "build a smaller two-stage network of this many hosts"),
                               _p("rails", False, "separate networks, each host linked to every one (default 1)"),
                               _p("links", False, "links from each host to its switch (default 1)")),
                "folded Clos of fixed-radix routers: r*(r/2)^(stages-1) hosts"))
register(Family("twolevel", twolevel, (_p("ports", help="switch ports on each side"), _p("hosts"),
                                       _p("spines", False, "spine switches (default: ports)")),
                "two-level fat tree: leaves of `ports` hosts, spines linked to every leaf"))
QSNET_DEFAULTS = {"link": {"bandwidth_bps": 20_000_000_000, "framing": "qsnet", "latency_ns": 5},
                  "switch": {"model": "input_queued", "cut_through": True, "flit_bytes": 256, "processing_delay_ns": 35,
                             "vcs": 32, "vc_buffer_bytes": 256, "pool_bytes": 16 * 256, "routing": "qsnet"}}
"""QsNet's hardware as spec 03 describes it: links of 25 Gbit/s on the wire with 8b10b encoding carry
20 Gbit/s of data each way over short cables (5 ns: about a metre; the source gives no figure); a frame's
wire time is its QsNet packet (segment headers, CRCs, payload), not the emulator's envelope
(``link.framing=qsnet``). Routers are input-queued crossbars (``emu.switch.iq``) that cut through at
segment granularity (256-byte flits: a router routes a packet once its first segment is in) and cost
35 ns a crossing (the source: under 40); each input link has 32 VCs of one 256-byte segment buffer
each plus a shared pool of 16 such buffers (``emu.switch.iqpool``; the source's "8 KiB in total" read
as the 32 VC buffers, the pool besides them: 12 KiB a link, room for one 4 KiB packet's 17 segments
on one VC). Routing is adaptive (``routing=qsnet``; ``--set switch.routing=static`` for comparison).
``QSNET_BEFORE`` gives back what ``qsnet:`` had before: the ideal store-and-forward switch, one VC,
unbounded buffers, 100 ns links, static routing."""
QSNET_BEFORE = {"link": {"latency_ns": 100}, "switch": {"model": "output_queued", "cut_through": False, "vcs": 1,
                                                        "vc_buffer_bytes": 0, "pool_bytes": 0, "flit_bytes": 64,
                                                        "routing": "static"}}
"""Settings over ``qsnet:`` that give the defaults it had before QSNET_DEFAULTS described the hardware
(``build(spec, settings=QSNET_BEFORE)``, or the same fields by ``--set``)."""
register(Family("qsnet", qsnet, (_p("nodes", help="nodes, 2..16384 (node switches of 128)"),
                                 _p("bisection", False, "1 (128 top switches, default) or 0.5 (64)", float),
                                 _p("rails", False, "separate networks, each node linked to every one (default 1)"),
                                 _p("links", False, "links from each node into the network, each to another router (default 1)")),
                "QsNet federated network: node-switch chassis of radix-32 routers, top switches carved from routers (or chassis); "
                "links of 20 Gbit/s of data, input-queued routers of 35 ns cutting through at 256-byte segments, 32 VCs, "
                "adaptive routing by default", QSNET_DEFAULTS))
MESH_DEFAULTS = {"switch": {"model": "input_queued", "cut_through": True, "vcs": 4}, "link": {"framing": "flit"}}
"""Meshes and tori have routers of their own, as spec 02 describes them: input-queued, virtual
cut-through at 64-byte flits, 4 VCs (``--set switch.model=output_queued``: the ideal switch); a frame's
wire time is its mechanism header and payload behind an 8-byte head-flit header (``link.framing=flit``)."""
TORUS_DEFAULTS = {"switch": {**MESH_DEFAULTS["switch"], "vc_policy": "dateline"}, "link": {"framing": "flit"}}
"""... and on a torus the dateline classes (two VCs each side of a ring's dateline) that keep
dimension-order routing free of deadlock with finite buffers."""
IDEAL_ROUTER = {"switch": {"model": "output_queued", "cut_through": False, "vcs": 1, "vc_policy": "by_class"}}
"""Settings that give a mesh or torus the ideal output-queued switch they had before the input-queued
router became their default (``build(spec, settings=IDEAL_ROUTER)``, or the same fields by ``--set``)."""
register(Family("mesh", mesh, (_p("k", help="side"), _p("n", help="dimensions"), _p("ports", False, "links between a node and its router (default 1): injection channels")),
                "k-ary n-mesh, a router per node, dimension-order routing; input-queued routers, 4 VCs, "
                "virtual cut-through", MESH_DEFAULTS))
register(Family("torus", torus, (_p("k", help="side, >= 3"), _p("n", help="dimensions"), _p("ports", False, "links between a node and its router (default 1): injection channels")),
                "k-ary n-torus, a router per node, dimension-order routing with wrap-around; input-queued "
                "routers, 4 VCs in dateline classes, virtual cut-through", TORUS_DEFAULTS))

DIRECT_ROUTERS = {"switch": {"model": "input_queued", "cut_through": True, "vcs": 4, "routing": "minimal"},
                  "link": {"framing": "flit"}}
"""Dragonflies, HyperX and Slim Flies have routers of their own, as meshes do: input-queued, virtual
cut-through at 64-byte flits, 4 VCs in the classes their routing needs (``emu.switch.vc``:
``dragonfly`` -- a class more per global link crossed, and per re-decision -- or ``hops`` -- a class
per router-to-router hop), minimal routing (``--set switch.routing=valiant|ugal_l|ugal_g|par``)."""
register(Family("dragonfly", dragonfly,
                (_p("p", help="hosts per router"), _p("a", False, "routers per group (default 2p)"),
                 _p("h", False, "global links per router (default p)"),
                 _p("g", False, "groups (default a*h+1; g-1 must divide a*h)"),
                 _p("arrangement", False, "global links: absolute (default), relative or circulant", str)),
                "dragonfly: groups of a routers fully connected, h global links each, g groups; "
                "link.local_*/global_* set the two kinds of links apart; minimal routing, VC classes per global hop",
                {"switch": {**DIRECT_ROUTERS["switch"], "vc_policy": "dragonfly"}, "link": DIRECT_ROUTERS["link"]}))
register(Family("hyperx", hyperx,
                (_p("S", help="switches along each dimension"), _p("L", help="dimensions"),
                 _p("K", False, "parallel links between two switches of a dimension (default 1)"),
                 _p("T", False, "hosts per switch (default 1)")),
                "HyperX: S**L switches, all-to-all along each dimension, dimension-order routing, VC class per hop",
                {"switch": {**DIRECT_ROUTERS["switch"], "vc_policy": "hops"}, "link": DIRECT_ROUTERS["link"]}))
register(Family("slimfly", slimfly,
                (_p("q", help="a prime 4w+1 or 4w-1: 2q^2 routers"), _p("p", False, "hosts per router (default ceil(k/2))")),
                "Slim Fly (MMS graph): 2q^2 routers of network radix (3q-d)/2, diameter 2, VC class per hop",
                {"switch": {**DIRECT_ROUTERS["switch"], "vc_policy": "hops"}, "link": DIRECT_ROUTERS["link"]}))

# element and link figures every family accepts: spec name -> (spec class, field, scale)
COMMON: dict[str, tuple[type, str, float, type]] = {
    "latency_ns": (LinkSpec, "latency_ns", 1, int),
    "bandwidth_gbps": (LinkSpec, "bandwidth_bps", 1e9, float),
    "switch_delay_ns": (SwitchSpec, "processing_delay_ns", 1, int),
    "nic_delay_ns": (HostSpec, "nic_delay_ns", 1, int),
    "mtu_bytes": (HostSpec, "mtu_bytes", 1, int),
}


def parse(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``name:a=1,b=2`` into the name and the raw parameter strings."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"a topology spec is NAME:PARAM=VALUE,...; got {spec!r}. Known: {', '.join(FAMILIES)}")
    name, _, rest = spec.strip().partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = (x.strip() for x in item.partition("="))
        if not eq or not key or not value:
            raise ConfigError(f"{name}: {item!r} is not PARAM=VALUE (e.g. {name}:k=4,n=2)")
        if key in params:
            raise ConfigError(f"{name}: parameter {key!r} is given twice")
        params[key] = value
    return name.strip(), params


def build(spec: str, *, defaults: dict | None = None, settings: dict | None = None, **overrides) -> Topology:
    """Build a topology from its spec; keyword ``overrides`` win over the spec's values
    (``build("fattree:k=4,n=2", latency_ns=50)``).

    ``defaults`` and ``settings`` ({section: {field: value}}, sections ``link``, ``host``, ``nic``,
    ``elan``, ``switch``; see ``emu.config.parse_settings`` / ``load_settings``) set any field of the specs:
    ``defaults`` (a ``--config`` file) under the spec string's parameters, ``settings`` (``--set``)
    over them. A spec too large for this machine is refused before it is built
    (``emu.topologies.estimate``).

    A spec ending in ``.json`` or ``.graphml`` names a topology file (``emu.topologies.files``): the
    file's element and link fields between ``defaults`` and ``settings``."""
    from .files import is_file_spec, load

    if is_file_spec(spec):
        if overrides:
            raise ConfigError(f"{spec}: a topology file takes no parameters ({', '.join(overrides)}); use --set")
        return load(spec, defaults=defaults, settings=settings)
    name, raw = parse(spec)
    fam = family(name)
    if fam is None:
        from emu.plugins import TOPOLOGIES, others

        raise ConfigError(f"unknown topology {name!r}; known: {', '.join(sorted(FAMILIES))}"
                          + others(TOPOLOGIES, FAMILIES))
    raw.update({k: str(v) for k, v in overrides.items()})
    accepted = [p.name for p in fam.params] + list(COMMON)
    kwargs: dict[str, object] = {}
    specs: dict[type, dict[str, object]] = {LinkSpec: {}, HostSpec: {}, SwitchSpec: {}}
    for key, value in raw.items():
        param = next((p for p in fam.params if p.name == key), None)
        if param is not None:
            kwargs[key] = _convert(name, key, value, param.kind)
        elif key in COMMON:
            cls, fname, scale, kind = COMMON[key]
            v = _convert(name, key, value, kind)
            specs[cls][fname] = int(round(v * scale))
        else:
            raise ConfigError(f"{name}: unknown parameter {key!r}; accepted: {', '.join(accepted)}")
    missing = [p.name for p in fam.params if p.required and p.name not in kwargs]
    if missing:
        need = ", ".join(f"{p.name} ({p.help})" if p.help else p.name for p in fam.params if p.required)
        raise ConfigError(f"{name}: missing parameter {', '.join(missing)}; {name} needs {need}, "
                          f"e.g. {example(name)}")
    fields = merge_settings(fam.defaults, defaults, {_SECTION_OF[cls]: f for cls, f in specs.items()}, settings)
    link = LinkSpec(**fields.get("link", {}))
    host = HostSpec(**fields.get("host", {}), nic=NicSpec(**fields.get("nic", {})),
                    elan=ElanSpec(**fields.get("elan", {})))
    switch = SwitchSpec(**fields.get("switch", {}), pu=PUSpec(**fields.get("pu", {})),
                        queues=QueueSpec(**fields.get("queues", {})))
    check_size(spec.strip(), estimate(name, kwargs))
    return fam.build(**kwargs, link=link, host=host, switch=switch)


_SECTION_OF = {LinkSpec: "link", HostSpec: "host", SwitchSpec: "switch"}


_FLOATS = "a finite positive number below 1e7"
"""What a topology spec's float parameter may be (``bandwidth_gbps``, ``bisection``)."""


def _convert(family: str, key: str, value: str, kind: type):
    if kind in (int, float) and not value.isascii():  # int() and float() take any script's digits: '٤' would be 4
        raise ConfigError(f"{family}: {key} must be written in ASCII digits (0-9), got {value!r}")
    try:  # decimal only, as every number given as text (emu.config.numbers)
        v = decimal_int(value) if kind is int else decimal_float(value) if kind is float else kind(value)
    except ValueError:
        raise ConfigError(f"{family}: {key} must be {'an integer' if kind is int else _FLOATS}, "
                          f"got {value!r}{hint(value)}") from None
    if kind is float and not (math.isfinite(v) and 0 < v < 1e7):
        raise ConfigError(f"{family}: {key} must be {_FLOATS}, got {value!r}")
    return v


EXAMPLES = {"qsnet": "qsnet:nodes=1024", "star": "star:n=16", "fattree": "fattree:k=4,n=3", "clos": "clos:radix=32,stages=2",
            "twolevel": "twolevel:ports=8,hosts=64", "mesh": "mesh:k=8,n=2", "torus": "torus:k=4,n=3",
            "dragonfly": "dragonfly:p=2,a=4,h=2,g=9", "hyperx": "hyperx:S=4,L=2,K=1,T=2", "slimfly": "slimfly:q=5"}


def example(name: str) -> str:
    return EXAMPLES.get(name, name)


def describe_families() -> list[tuple[str, str, str]]:
    """(name, parameters, summary) for help texts."""
    out = []
    for fam in FAMILIES.values():
        ps = ",".join(p.name + ("" if p.required else "?") for p in fam.params)
        out.append((fam.name, ps, fam.summary))
    return out

