"""What lives at the edge: hosts (applications and their API) and their NICs (the node's engine)."""

from .host import AppState, Host, HostAPI, Message
from .nic.engine import NicEngine

__all__ = ["AppState", "Host", "HostAPI", "Message", "NicEngine"]
