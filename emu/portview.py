"""The read-only view of its ports an engine gets (``engine.ports``), set by the element driver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .port import OutPort


class PortOwner(Protocol):
    """What the view reads of the element it belongs to (``emu.element.Element``)."""

    @property
    def outs(self) -> Sequence[OutPort | None]:
        """Output ports by port number (None where a port has no link)."""
        ...


class PortView:
    """What an engine may read of its element's ports (``engine.ports``), at its own ``now``:
    read-only, and a function of virtual time only (every event before ``now`` has been handled,
    in the element's fixed order), so runs stay deterministic."""

    __slots__ = ("_el",)

    def __init__(self, element: PortOwner):
        self._el = element

    def __len__(self) -> int:
        return len(self._el.outs)

    def linked(self, port: int) -> bool:
        return 0 <= port < len(self._el.outs) and self._el.outs[port] is not None

    def up(self, port: int, now: int) -> bool:
        """Does the port take frames at ``now`` (not taken down, nor scheduled down)?"""
        p = self._el.outs[port]
        return p is not None and p.up and (p.timeline is None or p.timeline.up_at(now))

    def queue(self, port: int, now: int, vc: int | None = None) -> tuple[int, int]:
        """(frames, bytes) handed to the port whose last bit has not left by ``now``; with ``vc``
        (credit flow control), those still waiting on that VC for the line or a credit."""
        p = self._el.outs[port]
        if p is None:
            return (0, 0)
        if vc is not None:
            if p.flow is None:
                return (0, 0)
            if p.flow.by_prio:  # a switch's class queues (switch.queues): every frame waiting, whatever its VC
                return p.flow.waiting(), p.flow.held_bytes
            q = p.flow.queues[vc % p.flow.vcs]
            return len(q), sum(len(w) for _, w, _ in q)
        return p.queue_at(now)

    def credits(self, port: int, vc: int = 0) -> int | None:
        """Bytes the next hop's buffer on ``vc`` can still take (its pool aside); None when the
        link has no credit flow control (unbounded buffers)."""
        p = self._el.outs[port]
        return None if p is None or p.flow is None else p.flow.credits[vc % p.flow.vcs]

    def waiting(self, port: int) -> int:
        """Frames queued at the port for want of credit or of the line."""
        p = self._el.outs[port]
        return 0 if p is None or p.flow is None else p.flow.waiting()

    def free_at(self, port: int) -> int:
        """When the port's line is free of every frame handed to it so far."""
        p = self._el.outs[port]
        return 0 if p is None else p.free_at

    def rate_bps(self, port: int) -> int:
        """The line rate of the port's link (bit/s); 0 without a link."""
        p = self._el.outs[port]
        return 0 if p is None else p.bandwidth_bps
