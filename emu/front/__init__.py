"""The top floor: the only part of ``emu`` that imports ``nodes/``, ``switch/`` and ``topologies/``.

The ``Cluster`` API that makes a topology real (as Mininet's ``net.py`` over ``topo.py``), the
``emu`` command, the demo, the named checks and their option validation, the run-size estimate and
the pytest plugin. Engines reach the runtime through the engine registry (``emu.build``).
"""

import emu.switch.routing  # noqa: F401,E402 -- registers the VC-class deadlock check topology files use

WORKER_PRELOAD = ("emu.build", "emu.front.engines")
"""What a worker process imports while the main process makes the plan (``emu.control.launch_workers``):
the engines that come with the emulator, and all they use (most of a worker's start-up)."""
