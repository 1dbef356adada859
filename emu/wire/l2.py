"""The wire's layers under scapy's ``Ether``, bound when scapy's ``scapy.layers.l2`` is imported.

The emulator builds and parses its frames with its own codecs (``emu.wire.codec``) and never needs
scapy's Ethernet layer; importing it costs every process a tenth of a second or more (it pulls in
scapy's sending and sniffing machinery, which reads the machine's interfaces and routes). So the
bindings that let scapy dissect a frame (``Ether(frame)`` showing ``Fabric``, ``LinkCredit``, ...)
and the ``EthernetFCS`` layer are made when something imports ``scapy.layers.l2`` -- a test, a
capture read with scapy, ``scapy.all`` -- or at once if it is imported already.
"""

from __future__ import annotations

import sys
from typing import Callable

L2 = "scapy.layers.l2"
_pending: list[Callable] = []


def when_ether(fn: Callable) -> None:
    """Call ``fn(Ether)`` once scapy's Ethernet layer exists: now if it is imported, else right after
    its module is imported, by whoever imports it."""
    mod = sys.modules.get(L2)
    if mod is not None and hasattr(mod, "Ether"):
        fn(mod.Ether)
        return
    _pending.append(fn)
    if _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def ether():
    """scapy's ``Ether``, its module imported (and with it every binding of ``when_ether``)."""
    from scapy.layers.l2 import Ether

    return Ether


class _AfterL2:
    """A finder that takes no part in finding ``scapy.layers.l2``, only wraps its loader so that the
    pending bindings are made once the module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != L2:
            return None
        import importlib.machinery

        sys.meta_path.remove(self)  # (once: the next finders find the module as they would)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            todo, _pending[:] = list(_pending), []
            for fn in todo:
                fn(module.Ether)

        spec.loader.exec_module = exec_module
        return spec

    def invalidate_caches(self) -> None:
        pass


_HOOK = _AfterL2()
