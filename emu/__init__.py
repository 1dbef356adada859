"""hpc-emu: a packet-level HPC interconnect emulator on loopback UDP with deterministic virtual time."""

from .config import ConfigError, HostSpec, LinkSpec, RunConfig, SwitchSpec
from .errors import AppError, CausalityError, DeadlockError, EmuError, EngineError, FrameLossError

__all__ = ["AppError", "CausalityError", "Cluster", "ConfigError", "DeadlockError", "EmuError", "EngineError",
           "FrameLossError", "HostSpec", "LinkSpec", "NodeHandle", "RunConfig", "SwitchSpec"]


SUBPACKAGES = ("config", "front", "nodes", "rank", "switch", "topologies", "wire")
"""Imported on first use: ``import emu`` then ``emu.topologies.build(...)`` works."""


def __getattr__(name: str):
    # the Cluster pulls in topologies/, nodes/ and switch/, which themselves use emu.config:
    # import it on first use so that either package can be imported first
    if name in ("Cluster", "NodeHandle"):
        from .front import cluster

        return getattr(cluster, name)
    if name in SUBPACKAGES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'emu' has no attribute {name!r}")
