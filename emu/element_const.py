"""The element's constants: its time infinity, the flags of a received frame in its heap, of a
capture record, and the kinds of its port events (shared by ``emu.element`` and its parts)."""

from __future__ import annotations

from .wire.outer import LinkKind

INF = 1 << 62
RCVBUF = 4 << 20

DIR_IN = 1   # pcapng epb_flags direction bits
DIR_OUT = 2
DROPPED = 4  # capture record of a frame dropped on purpose (written with a comment)
FAULT_DROP = 8  # ... lost on the wire by an emulated fault
FAULT_CORRUPT = 16  # ... sent intact, delivered with a bit flipped by an emulated fault
WAKE, RELEASE, CREDIT_OUT, CREDIT_BACK, STRETCH_OUT, PAUSE_END = 0, 1, 2, 3, 4, 5  # kinds of port events
POOL = int(LinkKind.DATA_POOL)  # flags of a received record in the heap: the sender used the pool ...
CLEAN = 4  # ... it was handed over in this process with no fault possible: its FCS need not be checked
NOFCS = 8  # ... and its FCS was never appended (``OutPort.defer_fcs``): the frame is the engine's, 4 bytes short
assert POOL == 2 and int(LinkKind.DATA) == 0
RX_FLAGS = (0, 0, POOL)
"""Heap flags of a received DATA record by its kind (DATA, -, DATA_POOL): a frame from a socket carries
its FCS (``NOFCS`` is only for frames handed over in memory)."""
FCS_ERROR = 32  # ... received with a bad frame check sequence, dropped by the receiving port
LOST_DOWN = 64  # ... was on the wire while its link was down (scheduled): lost
