"""What the substrate reads of a topology, as protocols: the runtime takes topologies as data.

A topology is pure data built above the substrate (``emu.topologies.base.Topology``, DESIGN.md
principle 9); ``emu.build`` and ``emu.partition`` make it real without importing it. These protocols
name the part of a topology, its nodes and its links that they read, and nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .config import LinkSpec


class Node(Protocol):
    """A named node of a topology."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str:
        """``host``, ``switch``...: the engine kind it runs unless ``info["engine"]`` names another."""
        ...

    @property
    def id(self) -> int:
        """Fabric address."""
        ...

    @property
    def spec(self) -> Any:
        """``HostSpec``, ``SwitchSpec``...: read by the node's engine kind; the runtime reads its
        buffer fields (``vc_buffer_bytes``, ``vcs``, ``pool_bytes``, ``credit_delay_ns``) and
        ``routing`` where they exist."""
        ...

    @property
    def info(self) -> Mapping[str, Any]: ...


class Link(Protocol):
    """A full-duplex link between port ``a_port`` of node ``a`` and port ``b_port`` of node ``b``."""

    @property
    def a(self) -> str: ...

    @property
    def a_port(self) -> int: ...

    @property
    def b(self) -> str: ...

    @property
    def b_port(self) -> int: ...

    @property
    def spec(self) -> LinkSpec: ...


class Topology(Protocol):
    """Named nodes and the links between their ports (picklable: a plan carries it to workers)."""

    @property
    def nodes(self) -> Mapping[str, Node]:
        """Node name -> node, in the topology's order."""
        ...

    @property
    def links(self) -> Sequence[Link]: ...

    @property
    def hosts(self) -> Sequence[Node]: ...

    @property
    def switches(self) -> Sequence[Node]: ...

    @property
    def candidates(self) -> Mapping[str, Any]:
        """Switch name -> minimal next hops per destination (empty until computed)."""
        ...

    def compute_candidates(self) -> None:
        """Fill ``candidates`` (adaptive and dispersive routing choose from them)."""

    def nports(self, name: str) -> int:
        """Ports of a node, numbered 0..nports-1 (some may be unlinked)."""
        ...

    def port_name(self, name: str, port: int) -> str:
        """Capture interface name of a port."""
        ...
