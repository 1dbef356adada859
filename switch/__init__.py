"""What lives inside the network: forwarding, routing policies, in-network engines."""

from .forward import SwitchEngine

__all__ = ["SwitchEngine"]
