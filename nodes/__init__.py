"""What lives at the edge: hosts, their NICs and the applications that run on them."""

from .api import HostAPI, Message
from .host import AppState, HostEngine

__all__ = ["AppState", "HostAPI", "HostEngine", "Message"]
