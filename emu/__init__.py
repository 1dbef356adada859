"""hpc-emu: a packet-level HPC interconnect emulator on loopback UDP with deterministic virtual time."""

from .cluster import Cluster, NodeHandle
from .config import ConfigError, HostSpec, LinkSpec, RunConfig, SwitchSpec
from .errors import AppError, CausalityError, DeadlockError, EmuError, EngineError, FrameLossError

__all__ = ["AppError", "CausalityError", "Cluster", "ConfigError", "DeadlockError", "EmuError", "EngineError",
           "FrameLossError", "HostSpec", "LinkSpec", "NodeHandle", "RunConfig", "SwitchSpec"]
