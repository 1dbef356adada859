"""Topologies: pure data, built by name (``build("fattree:k=4,n=3")``)."""

from .base import NO_ROUTE, SWITCH_ID_BASE, Link, Node, Topology
from .direct import mesh, torus
from .registry import FAMILIES, Family, Param, build, parse, register
from .star import star
from .trees import clos, fattree, twolevel

__all__ = ["FAMILIES", "Family", "Link", "NO_ROUTE", "Node", "Param", "SWITCH_ID_BASE", "Topology", "build", "clos",
           "fattree", "mesh", "parse", "register", "star", "torus", "twolevel"]
