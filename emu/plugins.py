"""Registries filled from installed packages: entry points name the modules that register.

A registry (engine kinds in :mod:`emu.build`, NIC mechanisms in ``emu.nodes.nic.interface``) is
filled by the modules that register into it when they are imported. When a name is asked for that
nobody registered yet, :func:`load` looks for an entry point of that name in the registry's group
and imports the module it names -- the emulator's own kinds come this way too (``pyproject.toml``),
and so can a package of yours::

    [project.entry-points."emu.engines"]
    hub = "mypkg.hub"            # mypkg/hub.py calls register_engine("hub", ...)

    [project.entry-points."emu.nic_mechanisms"]
    counter = "mypkg.counter"    # mypkg/counter.py registers the mechanism "counter"

    [project.entry-points."emu.offloads"]
    dpu = "mypkg.dpu"            # mypkg/dpu.py registers the offload "dpu" (@register_offload)

    [project.entry-points."emu.routing"]
    first = "mypkg.first"        # mypkg/first.py registers the routing policy "first"

    [project.entry-points."emu.topologies"]
    ring = "mypkg.ring"          # mypkg/ring.py registers the family "ring" (registry.register)

    [project.entry-points."emu.transports"]
    gbn = "mypkg.gbn"            # mypkg/gbn.py registers the host transport "gbn" (@register_transport)

    [project.entry-points."emu.cc"]
    timely = "mypkg.timely"      # mypkg/timely.py registers the congestion control "timely" (@register_cc)

so worker processes and MPI ranks, which import only what their plan names, find them as well.
"""

from __future__ import annotations

import importlib
import sys

ENGINES = "emu.engines"
NIC_MECHANISMS = "emu.nic_mechanisms"
OFFLOADS = "emu.offloads"
"""Where a collective runs (``--offload``): ``emu.nodes.collectives.offloads``."""
ROUTING = "emu.routing"
"""Routing policies (``--set switch.routing=NAME``): ``emu.switch.routing.lookup``."""
TOPOLOGIES = "emu.topologies"
"""Topology families (``--topo NAME:...``): ``emu.topologies.registry.family``."""
TRANSPORTS = "emu.transports"
"""Host messaging's end-to-end transports (``--set host.transport=NAME``): ``emu.nodes.nic.transport``."""
CC = "emu.cc"
"""Congestion controls at the NIC (``--set host.cc=NAME``): ``emu.nodes.nic.cc``."""


def load(group: str, name: str) -> bool:
    """Import the module the entry point ``name`` of ``group`` names; False: there is none."""
    from importlib.metadata import entry_points  # (only when asked: a run of the emulator's own kinds never is)

    found = entry_points(group=group, name=name)
    for ep in found:
        importlib.import_module(ep.module)
    return bool(found)


_PROVIDED: dict[tuple, dict[str, str]] = {}
"""``provided``'s answers by group and import path (reading every installed package's metadata takes
~30 ms, and a run asks a few times); :func:`load` always looks afresh."""


def provided(group: str) -> dict[str, str]:
    """``{name: the package that declares it}`` of the entry points of ``group`` (installed, loaded or not;
    as found the first time this process asked with this import path)."""
    key = (group, tuple(sys.path))
    out = _PROVIDED.get(key)
    if out is None:
        from importlib.metadata import entry_points

        out = {}
        for ep in entry_points(group=group):
            dist = getattr(ep, "dist", None)
            out.setdefault(ep.name, dist.metadata["Name"] if dist is not None else "?")
        _PROVIDED[key] = out
    return dict(out)


def others(group: str, known) -> str:
    """For a refusal naming the known ones: ``", NAME (from PACKAGE)"`` for each name an installed
    package (not this one) declares in ``group`` that is not among ``known`` yet."""
    return "".join(f", {n} (from {pkg})" for n, pkg in sorted(provided(group).items())
                   if n not in known and pkg != "hpc-emu")


def installed_version(dist: str = "hpc-emu") -> str | None:
    """The version of the installed distribution ``dist``, read from the ``Version:`` line of its
    ``NAME-VERSION.dist-info/METADATA`` -- the first on the import path, as ``importlib.metadata.version``
    finds it -- without importing ``importlib.metadata`` (and the email parser it reads metadata
    with: some 50 ms of a command's start-up). None where it is not installed that way (an egg,
    a zip): then ask ``importlib.metadata``."""
    import os
    import re

    def norm(text: str) -> str:
        return re.sub(r"[-_.]+", "_", text).lower()

    want = norm(dist)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not (name.endswith(".dist-info") and norm(name.partition("-")[0]) == want):
                continue
            try:
                with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():  # (the headers end at the first empty line)
                            break
            except OSError:
                pass
    return None
