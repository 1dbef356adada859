"""pcapng writer: one interface per element port, nanosecond virtual time stamps, raw frames.

Blocks written: Section Header, one Interface Description per port (``if_name`` like ``s3-p2``,
``if_tsresol`` = 9, link type Ethernet, ``if_fcslen`` = 4: every frame ends with its frame check
sequence) and one Enhanced Packet per frame seen at a port, with ``epb_flags`` giving the direction
(inbound at the receiving port, outbound at the sending one) and, for a frame that failed its FCS
check, the CRC-error bit (24).
Frames are the raw bytes the elements exchanged; nothing is rebuilt with scapy.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import BinaryIO

from .wire.fabric import FCS_LEN

LINKTYPE_ETHERNET = 1
_SHB = 0x0A0D0D0A
_IDB = 0x00000001
_EPB = 0x00000006
_BOM = 0x1A2B3C4D


def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad4(value)


def _block(btype: int, body: bytes) -> bytes:
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def section_header(application: str = "hpc-emu") -> bytes:
    opts = _option(4, application.encode()) + _option(0, b"")
    return _block(_SHB, struct.pack("<IHHq", _BOM, 1, 0, -1) + opts)


def interface_block(name: str, snaplen: int = 0) -> bytes:
    opts = _option(2, name.encode()) + _option(9, bytes([9])) + _option(13, bytes([FCS_LEN])) + _option(0, b"")
    return _block(_IDB, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, snaplen) + opts)


_EPB_HEAD = struct.Struct("<IIIII")
_FLAGS_OPT = {1: _option(2, struct.pack("<I", 1)) + _option(0, b""),
              2: _option(2, struct.pack("<I", 2)) + _option(0, b""),
              # 4 marks a frame dropped on purpose (a link taken down): outbound, with a comment
              6: _option(1, b"dropped: link down") + _option(2, struct.pack("<I", 2)) + _option(0, b""),
              # 8: lost on the wire by an emulated fault; 16: delivered with a bit flipped
              10: _option(1, b"dropped: fault") + _option(2, struct.pack("<I", 2)) + _option(0, b""),
              18: _option(1, b"corrupted: fault") + _option(2, struct.pack("<I", 2)) + _option(0, b""),
              # 32: received with a bad frame check sequence and dropped by the port (CRC-error bit)
              33: _option(1, b"dropped: FCS error") + _option(2, struct.pack("<I", 1 | 1 << 24)) + _option(0, b""),
              # 64: on the wire while its link was down (a scheduled fault): lost
              65: _option(1, b"lost: link down") + _option(2, struct.pack("<I", 1)) + _option(0, b"")}


def packet_block(iface: int, ts_ns: int, frame: bytes, direction: int) -> bytes:
    body = (_EPB_HEAD.pack(iface, ts_ns >> 32, ts_ns & 0xFFFFFFFF, len(frame), len(frame))
            + _pad4(frame) + _FLAGS_OPT[direction])
    return _block(_EPB, body)


def write_pcapng(out: BinaryIO, interfaces: list[str],
                 records: Iterable[tuple[int, int, int, bytes]]) -> int:
    """Write a capture; ``records`` are (ts_ns, iface, direction, frame), already in file order."""
    out.write(section_header())
    for name in interfaces:
        out.write(interface_block(name))
    n = 0
    for ts, iface, direction, frame in records:
        out.write(packet_block(iface, ts, frame, direction))
        n += 1
    return n


def capture_order(records: list[tuple[int, int, int, bytes]]) -> list[tuple[int, int, int, bytes]]:
    """Deterministic file order: virtual time, then interface, then direction (out before in is
    impossible at one port and one time), then the frame bytes as a last resort."""
    return sorted(records, key=_order_key)


def _order_key(r: tuple[int, int, int, bytes]) -> tuple:
    return r[0], r[1], r[2], r[3]


# -- spilling: captures streamed to disk in sorted runs, merged when the file is written -----------------
_RUN_REC = struct.Struct("<QIBI")  # ts, iface, direction, frame length; then the frame


def write_run(path: str, records: list[tuple[int, int, int, bytes]]) -> int:
    """Write ``records`` in capture order to a run file (the capture kept on disk, not in memory);
    returns how many."""
    pack = _RUN_REC.pack
    with open(path, "wb") as f:
        for ts, iface, direction, frame in capture_order(records):
            f.write(pack(ts, iface, direction, len(frame)))
            f.write(frame)
    return len(records)


def read_run(path: str) -> Iterable[tuple[int, int, int, bytes]]:
    """The records of a run file, in its (capture) order, read as they are needed."""
    size, unpack = _RUN_REC.size, _RUN_REC.unpack
    with open(path, "rb") as f:
        while True:
            head = f.read(size)
            if len(head) < size:
                return
            ts, iface, direction, n = unpack(head)
            yield ts, iface, direction, f.read(n)


def merged(sources: list[Iterable[tuple[int, int, int, bytes]]]) -> Iterable[tuple[int, int, int, bytes]]:
    """Records of several sorted sources in one capture order (the same order ``capture_order``
    gives their concatenation: the key decides every tie)."""
    import heapq

    return heapq.merge(*sources, key=_order_key)
