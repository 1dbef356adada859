"""Where a collective runs, by name (``--offload``): one module per offload, each registering one
:class:`Offload` (``none``, ``nic``, ``switch``, ``hw``, in the order ``--help`` lists them). See
:mod:`.base` for what an offload says and does, and how to add one."""

from .base import OFFLOADS, Offload, Setup, canonical_offload, names, offload_named, register_offload, unregister_offload
from . import none, nic, switch, hw  # noqa: E402,F401 -- they register, in this order

__all__ = ["OFFLOADS", "Offload", "Setup", "canonical_offload", "names", "offload_named", "register_offload",
           "unregister_offload"]
