"""The host: the MPI-like API applications see, and the scheduling of those applications."""

from .api import HostAPI, Message
from .engine import AppState, Host

__all__ = ["AppState", "Host", "HostAPI", "Message"]
