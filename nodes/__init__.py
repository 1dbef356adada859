"""What lives at the edge: hosts, their NICs and the applications that run on them."""

from .host import AppState, HostAPI, HostEngine, Message

__all__ = ["AppState", "HostAPI", "HostEngine", "Message"]
