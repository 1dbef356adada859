"""The host: the MPI-like API applications see, and the scheduling of those applications."""

from .api import HostAPI, Message
from .engine import AppState, HostEngine

__all__ = ["AppState", "HostAPI", "HostEngine", "Message"]
