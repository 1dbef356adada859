"""The port view the routing policies read on an input-queued router (``emu.switch.iq``)."""

from __future__ import annotations

__all__ = ["IQView"]


class IQView:
    """The port view the routing policies read on an input-queued router (``engine.ports``): a
    port's load counts the frames granted to it whose last bit has not left (the element's port)
    and the frames waiting for it in this router's input buffers; ``credits`` are the router's."""

    def __init__(self, view, engine) -> None:  # (an InputQueuedEngine)
        self._view, self._eng = view, engine

    def __getattr__(self, name):  # up, linked, free_at, len: the element's
        return getattr(self._view, name)

    def __len__(self) -> int:
        return len(self._view)

    def queue(self, port: int, now: int, vc: int | None = None) -> tuple[int, int]:
        e = self._eng
        if vc is not None:  # those waiting for that VC at the next hop
            return e.wait_vc.get((port, vc), (0, 0))
        f, b = self._view.queue(port, now)
        return f + e.wait_n[port], b + e.wait_b[port]

    def waiting(self, port: int) -> int:
        return self._eng.wait_n[port]

    def credits(self, port: int, vc: int = 0) -> int | None:
        cr = self._eng.credits[port]
        return None if cr is None else cr[vc % len(cr)]
