"""Fills the engine registry (``emu.build.register_engine``) with the kinds that come with the emulator.

Importing this module imports the modules that register them: ``host`` (the NIC, ``emu.nodes.nic.engine``),
``switch`` (``emu.switch.router``) and ``manager`` (the network manager, ``emu.switch.manager``). The
substrate knows none of them by name; the front door imports this module before it builds anything.
Import it yourself to build engines without a ``Cluster`` (``emu.sim.EngineNet``, ``make_engine``).
"""

import emu.nodes.nic.engine  # noqa: F401 -- registers "host"
import emu.switch.router  # noqa: F401 -- registers "switch"
import emu.switch.manager  # noqa: F401 -- registers "manager"


def check_names(topology) -> None:
    """Look up the routing policies, host transports and congestion controls ``topology``'s elements name (installed
    packages included), so that a name nobody has is refused in one line before any worker process
    starts -- a worker would otherwise fail while building its elements."""
    from emu.nodes.nic.cc import cc_class
    from emu.nodes.nic.transport import transport_class
    from emu.switch.routing import lookup

    for name in sorted({getattr(n.spec, "routing", "static") for n in topology.switches}):
        lookup(name)
    for name in sorted({n.spec.transport for n in topology.hosts if n.spec is not None}):
        transport_class(name)
    for name in sorted({n.spec.cc for n in topology.hosts if n.spec is not None}):
        cc_class(name)
