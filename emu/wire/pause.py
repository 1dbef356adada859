"""Priority flow control frames (IEEE 802.1Qbb PFC, a MAC control frame of 802.3 Annex 31D).

Layout (network byte order), padded to Ethernet's 60-byte minimum (64 with its FCS)::

    Ethernet  dst 01:80:c2:00:00:01 (MAC control, never forwarded) src MAC of the sending node
              type(2)=0x8808 (MAC control)
    PFC       opcode(2)=0x0101, class-enable vector(2): bit c set = the time of class c is valid,
              time[8](2 each): pause class c for time[c] quanta of 512 bit times; 0 = resume (XON)
    pad       26 zero bytes

Wireshark and scapy (``scapy.contrib.mac_control``) decode it as they find it on any link.
"""

from __future__ import annotations

import struct

MAC_CONTROL = bytes.fromhex("0180c2000001")
ETHERTYPE_MAC_CONTROL = 0x8808
OPCODE_PFC = 0x0101
QUANTUM_BITS = 512
"""A pause quantum: 512 bit times of the link."""
_BODY = struct.Struct("!HHHHHHHHHH")
PAUSE_LEN = 60
"""The frame without its FCS (padded to Ethernet's minimum)."""
_PAD = bytes(PAUSE_LEN - 14 - _BODY.size)


def build_pause(src_mac: bytes, times: dict[int, int]) -> bytes:
    """A PFC frame (without its FCS): ``times`` {class: quanta} (0: resume the class)."""
    vector, t = 0, [0] * 8
    for c, q in times.items():
        vector |= 1 << c
        t[c] = q
    return MAC_CONTROL + src_mac + b"\x88\x08" + _BODY.pack(OPCODE_PFC, vector, *t) + _PAD


def is_pause(wire) -> bool:
    """Is this frame a PFC frame (by its EtherType and opcode)?"""
    return len(wire) >= 18 and wire[12] == 0x88 and wire[13] == 0x08 and wire[14] == 0x01 and wire[15] == 0x01


def parse_pause(wire) -> dict[int, int]:
    """{class: quanta} of the classes a PFC frame names (its enable vector)."""
    _op, vector, *t = _BODY.unpack_from(wire, 14)
    return {c: t[c] for c in range(8) if vector >> c & 1}


def quanta_ns(quanta: int, bandwidth_bps: int) -> int:
    """How long ``quanta`` pause a link of ``bandwidth_bps`` (ns, rounded up)."""
    return -(-quanta * QUANTUM_BITS * 1_000_000_000 // bandwidth_bps)
