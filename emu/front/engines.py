"""Fills the engine registry (``emu.build.register_engine``) with the kinds that come with the emulator.

Importing this module imports the modules that register them: ``host`` (the NIC, ``emu.nodes.nic.engine``),
``switch`` (``emu.switch.router``) and ``manager`` (the network manager, ``emu.switch.manager``). The
substrate knows none of them by name; the front door imports this module before it builds anything.
Import it yourself to build engines without a ``Cluster`` (``emu.sim.EngineNet``, ``make_engine``).
"""

import emu.nodes.nic.engine  # noqa: F401 -- registers "host"
import emu.switch.router  # noqa: F401 -- registers "switch"
import emu.switch.manager  # noqa: F401 -- registers "manager"
