"""Congestion controls at the NIC (``host.cc``, issue #47): a registry by name.

``none`` (the default) leaves host messaging as it was: the frames of a message go to the port at
once, and ``host.transport`` (none or reliable, :mod:`emu.nodes.nic.transport`) recovers losses. Any
other name is a :class:`emu.nodes.nic.cc.base.CcTransport` subclass -- a segment transport (one
acknowledgement per segment, go-back-N or selective repeat) whose hooks set each peer's rate or
window -- registered with :func:`register_cc`: the built-in ``dcqcn``, ``hpcc``, ``swift`` and
``ndp`` (one module each, here), or yours, named as an entry point of the group ``emu.cc``
(``emu.plugins``) so that every process of a run finds it. ``docs/congestion-control.md`` describes
each algorithm, its sources and its defaults.
"""

from __future__ import annotations

from typing import Any, Callable

CCS: dict[str, type | None] = {"none": None}
"""Congestion controls by name (``host.cc``); None: none (host.transport as it is)."""
BUILT_IN = ("dcqcn", "hpcc", "swift", "ndp")


def register_cc(name: str):
    """Class decorator: the congestion control ``name`` (``@register_cc("mine")``)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a congestion control's name is an identifier, got {name!r}")

    def deco(cls: type) -> type:
        CCS[name] = cls
        cls.cc_name = name
        return cls
    return deco


def cc_class(name: str) -> type | None:
    """The congestion control ``name``: built in, registered, or registered by the module an installed
    package names for it in the entry-point group ``emu.cc``; an unknown name is refused in one line
    naming the known ones."""
    from emu.config import ConfigError
    from emu.plugins import CC as GROUP, load, others

    if name not in CCS and name in BUILT_IN:
        import importlib

        importlib.import_module(f"{__name__}.{name}")
    if name not in CCS:
        load(GROUP, name)
    if name not in CCS:
        known = list(dict.fromkeys(["none", *BUILT_IN, *CCS]))
        raise ConfigError(f"unknown host.cc {name!r}; known: {', '.join(known)}" + others(GROUP, known))
    return CCS[name]


def make_transport(nic: Any, put: Callable) -> Any:
    """The end-to-end transport of ``nic``'s host messages: its congestion control's (``host.cc``), which
    takes the packet types of its control frames in the NIC's dispatch table, or else
    ``host.transport``'s (None: each frame sent once)."""
    from ..transport import transport_class

    cls = cc_class(nic.spec.cc)
    if cls is None:
        kind = transport_class(nic.spec.transport)
        return kind(nic, put) if kind is not None else None
    tr = cls(nic)
    for ptype, handler in tr.frames().items():
        if ptype in nic._frames or ptype in nic._anywhere:
            raise ValueError(f"{nic.name}: host.cc={nic.spec.cc} needs packet type {ptype}, taken by a NIC mechanism")
        nic._frames[ptype] = handler
    return tr
