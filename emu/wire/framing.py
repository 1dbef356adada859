"""A frame's modelled length: what it costs on the emulated network's wire (spec 00, Time).

Every element exchanges the same inner frame -- Ethernet (14 B), the fabric routing header (16 B),
the mechanism's header(s) and payload -- and an output port appends a 4-byte FCS: those are the bytes
on the socket and in the capture, whatever the network. What the emulated network would send
differs per network, so a link has a *framing* (``LinkSpec.framing``) and a frame's time on the line
is ``ceil(8 * modelled_length / rate)``:

``ethernet`` (the generic families: star, fattree, clos, twolevel)
    The frame as it is on the socket: Ethernet header, fabric header (the network's own routing
    header), mechanism header(s), payload and FCS: ``len(frame) + 4``. No preamble or inter-frame
    gap (the figures of every earlier run, and the equality with ns-3's point-to-point links).
``qsnet`` (the ``qsnet:`` family, spec 03)
    The Ethernet header, the fabric header and the FCS are plumbing (the fabric header's routing
    fields live in QsNet's segment headers). A QsNet packet (ptype QPKT) carries its 8-byte segment
    header, a 4-byte continuation per further 256-byte segment and its 8-byte trailer (CRC-32 and
    packet id) in the frame already: its modelled length is exactly that packet. An ACK token
    (QACK) is its 16 bytes. Anything else (a host message, a trap) is carried as a QsNet packet:
    its body behind a segment header, continuations and a trailer (:func:`qsnet_packet_len`).
``flit`` (the ``mesh:`` and ``torus:`` families, spec 02)
    The envelope is plumbing; the packet is the mechanism's header and payload behind an
    8-byte head-flit header (destination 4 B, VC 1 B, type 1 B, length 2 B: our choice, the source
    does not publish one), so a 64-byte flit carries a coding packet's 16-byte header and 40 bytes
    of payload.

A port knows a frame's modelled length from its length and one byte (the fabric header's ``ptype``)
through a 256-entry table of what to add to the body: no parsing.
"""

from __future__ import annotations

from .fabric import HDR_LEN, PacketType

PTYPE_OFF = HDR_LEN - 16 + 10
"""The fabric header's ptype byte."""
FCS_LEN = 4
FLIT_HEADER_BYTES = 8
"""The mesh routers' head-flit header (``flit`` framing)."""
QS_SEG, QS_CONT, QS_TRAILER, QS_FIRST, QS_NEXT = 8, 4, 8, 248, 252
"""QsNet's segment header, continuation header, trailer, and the data bytes of a first and a further
segment (spec 03; emu.wire.qsnet)."""
_WRAP = -1
FRAMINGS = ("ethernet", "qsnet", "flit")


def qsnet_packet_len(body: int) -> int:
    """The length of a QsNet packet that carries ``body`` bytes: segment header, continuations, trailer."""
    extra = -(-(body - QS_FIRST) // QS_NEXT) if body > QS_FIRST else 0
    return QS_SEG + extra * QS_CONT + body + QS_TRAILER


class Framing:
    """One link framing: ``length(frame)`` is the modelled length of a MAC client frame (no FCS);
    ``length_wire`` that of a frame that carries its FCS."""

    __slots__ = ("name", "add", "qs_first_end", "plain")

    def __init__(self, name: str) -> None:
        if name not in FRAMINGS:
            raise ValueError(name)
        self.name = name
        self.plain = name == "ethernet"
        """The modelled length is the frame's length plus its FCS, whatever the frame."""
        if name == "ethernet":
            add = [HDR_LEN + FCS_LEN] * 256
        elif name == "flit":
            add = [FLIT_HEADER_BYTES] * 256
        else:
            add = [_WRAP] * 256
            add[PacketType.QPKT] = add[PacketType.QACK] = 0
        self.add = tuple(add)
        """Per ptype: bytes added to the frame's body (what follows the fabric header), or -1: the body
        rides in a QsNet packet."""
        self.qs_first_end = 256 + (0 if name == "qsnet" else FLIT_HEADER_BYTES if name == "flit" else HDR_LEN)
        """Where a QsNet packet's first 256-byte segment ends, in modelled bytes from the frame's start."""

    def length(self, frame) -> int:
        n = len(frame)
        if self.plain or n <= PTYPE_OFF:
            return n + FCS_LEN
        a = self.add[frame[PTYPE_OFF]]
        return n - HDR_LEN + a if a >= 0 else qsnet_packet_len(n - HDR_LEN)

    def length_wire(self, wire) -> int:
        n = len(wire) - FCS_LEN
        if self.plain or n <= PTYPE_OFF:
            return n + FCS_LEN
        a = self.add[wire[PTYPE_OFF]]
        return n - HDR_LEN + a if a >= 0 else qsnet_packet_len(n - HDR_LEN)

    def __repr__(self) -> str:
        return f"Framing({self.name!r})"


_BY_NAME = {name: Framing(name) for name in FRAMINGS}
ETHERNET = _BY_NAME["ethernet"]


def framing(name: str) -> Framing:
    return _BY_NAME[name]


def modelled_length(frame, name: str = "ethernet") -> int:
    """The modelled length of MAC client frame ``frame`` on a link of framing ``name``."""
    return _BY_NAME[name].length(frame)


def frame_length(name: str, ptype: int, body: int) -> int:
    """The modelled length, on framing ``name``, of a frame of ``ptype`` whose body (what follows the
    fabric header: the mechanism's header(s) and payload) is ``body`` bytes: what analytic models count."""
    a = _BY_NAME[name].add[ptype]
    return body + a if a >= 0 else qsnet_packet_len(body)
