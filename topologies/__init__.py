"""Topologies: pure data, built by name (``build("fattree:k=4,n=3")``)."""

from .base import NO_ROUTE, SWITCH_ID_BASE, Link, Node, Topology
from .direct import mesh, torus
from .dragonfly import dragonfly
from .hyperx import hyperx
from .registry import FAMILIES, Family, Param, build, parse, register
from .slimfly import slimfly
from .star import star
from .trees import clos, fattree, twolevel

__all__ = ["FAMILIES", "Family", "Link", "NO_ROUTE", "Node", "Param", "SWITCH_ID_BASE", "Topology", "build", "clos", "dragonfly",
           "fattree", "hyperx", "mesh", "parse", "register", "slimfly", "star", "torus", "twolevel"]
