"""The ``switch`` engine kind: the router model a switch's spec names (``SwitchSpec.model``).

``output_queued`` is :mod:`emu.switch.forward` (an ideal switch: a frame goes from its input into
its output port's FIFO), ``input_queued`` is :mod:`emu.switch.iq` (per-input VC buffers, VC and
switch allocation, a pipeline of stages).
"""

from __future__ import annotations

from emu.build import register_engine

from .forward import SwitchEngine, make_switch
from .iq import make_iq


def make_router(node, topology, cache: dict) -> SwitchEngine:
    if node.spec.input_queued:
        return make_iq(node, topology, cache)
    return make_switch(node, topology, cache)


register_engine("switch", make_router,
                min_delay=lambda spec: 0 if spec.input_queued else spec.processing_delay_ns)
