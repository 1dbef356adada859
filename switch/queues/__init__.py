"""Output-queue disciplines of the output-queued switch (DESIGN.md "switch/queues/"): a shared buffer
with dynamic thresholds and tail drop, trimming, ECN marking and INT (``admission``), with PFC at the
ingress (``emu.pause``, ``emu.element_pfc``: hosts honour PAUSE too, so it lives beside the ports).
Settings: ``[queues]`` (``emu.config.queues.QueueSpec``); all off by default."""

from __future__ import annotations

from .admission import SwitchQueues


def attach(engine, outs: list, seed: int) -> SwitchQueues | None:
    """Give ``engine``'s output ports their mechanisms (``SwitchSpec.queues``), when any is on."""
    spec = engine.spec.queues
    if not spec.on:
        return None
    return SwitchQueues(spec, outs, seed, engine.node_id)


__all__ = ["SwitchQueues", "attach"]
