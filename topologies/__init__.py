"""Topologies: pure data, built by name (``star:n=16``)."""

from .base import Link, Node, Topology
from .star import star

__all__ = ["Link", "Node", "Topology", "star"]
