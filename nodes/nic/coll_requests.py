"""What a host hands the collective-offload NIC (``emu.nodes.nic.coll``) and gets back from it: the
descriptors it posts (``Posted``), the completions written to its memory (``Completion``), and the
requests through which it opens a virtual port, posts and waits (``NicOpen``, ``NicPost``, ``NicWait``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .interface import NicRequest


@dataclass(eq=False)
class Posted:
    """A descriptor the host posted, with what does not travel on the wire."""

    desc: dict[str, int]
    """The 128-byte descriptor's fields (``emu.wire.coll.CollDesc``)."""
    dests: list[tuple[int, int]] = field(default_factory=list)
    """(host address, VP) it sends to: the parent of a reduce, the children of a broadcast."""
    completion: int = 0
    """Host memory address (an id) the completion is written to."""


@dataclass
class Completion:
    region: int
    seg: int
    err_vec: int
    values: np.ndarray | None
    locations: np.ndarray | None
    t_ns: int
    vp: int = 1


class NicOpen(NicRequest):
    __slots__ = ("vp",)

    def __init__(self, vp: int):
        self.vp = vp

    def describe(self, names) -> str:
        return f"nic_open(vp={self.vp})"


class NicPost(NicRequest):
    __slots__ = ("vp", "posted")

    def __init__(self, vp: int, posted: list):
        self.vp, self.posted = vp, posted

    def describe(self, names) -> str:
        return f"nic_post(vp={self.vp}, {len(self.posted)} descriptors)"


class NicWait(NicRequest):
    __slots__ = ("region", "count", "timeout_ns", "vp")

    def __init__(self, region: int, count: int, timeout_ns: int, vp: int):
        self.region, self.count, self.timeout_ns, self.vp = region, count, timeout_ns, vp

    def describe(self, names) -> str:
        return f"nic_wait(region={self.region}, {self.count} completions)"
