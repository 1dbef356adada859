"""The fast codecs and the scapy declarations produce and accept identical bytes."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.fields import MACField, _BitField
from scapy.layers.l2 import Ether

from emu.wire import (CREDIT, LinkCredit, DESC, FCS_LEN, MACK, MSG, OUTER, PING, CollDesc, DecodeError, EmuLink, EthernetFCS,
                      Fabric, FABRIC, MsgAck, MsgSegment, PacketType, Ping, add_fcs, build_frame, fcs_ok, parse_frame)
from emu.wire.codec import StructCodec

HEADERS = [(EmuLink, OUTER), (Fabric, FABRIC), (MsgSegment, MSG), (MsgAck, MACK), (Ping, PING), (CollDesc, DESC),
           (LinkCredit, CREDIT)]


def field_strategy(f):
    if isinstance(f, _BitField):
        return st.integers(0, (1 << f.size) - 1)
    if isinstance(f, MACField):
        return st.binary(min_size=6, max_size=6)
    size = struct.calcsize(f.fmt)
    if f.fmt[-1].islower():  # signed
        return st.integers(-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1)
    return st.integers(0, (1 << (8 * size)) - 1)


def header_values(cls):
    return st.tuples(*[field_strategy(f) for f in cls.fields_desc])


@pytest.mark.parametrize("cls,codec", HEADERS, ids=[c.__name__ for c, _ in HEADERS])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_codec_and_scapy_agree(cls, codec, data):
    values = data.draw(header_values(cls))
    fast = codec.pack(*values)
    # scapy builds the same bytes from the same field values
    pkt = cls(**dict(zip(codec.names, values)))
    slow = bytes(pkt)[: codec.size]
    assert fast == slow
    # and each side parses the other's bytes into the same values
    assert codec.unpack(slow) == values
    parsed = cls(fast)
    assert tuple(int(parsed.getfieldval(n)) for n in codec.names) == values


@pytest.mark.parametrize("cls,codec", HEADERS, ids=[c.__name__ for c, _ in HEADERS])
@given(cut=st.integers(0, 40))
def test_truncated_header_is_a_decode_error(cls, codec, cut):
    buf = bytes(codec.size)[: min(cut, codec.size - 1)]
    with pytest.raises(DecodeError):
        codec.unpack(buf)


GOLDEN = {
    "LinkCredit": (CREDIT, (1, 1, 0, 1074), "0101000000000432"),
    "EmuLink": (OUTER, (0xFAB1, 1, 0, 0xDEADBEEF, 7, 42, 123456789, 46, 0),
                "fab10100deadbeef000000070000002a00000000075bcd15002e0000"),
    "Fabric": (FABRIC, (3, 9, 1, 2, PacketType.MSG, 1, 4, 0, 32),
               "000000030000000901020101040000 20".replace(" ", "")),
    "MsgSegment": (MSG, (1, 2, 3000, 1024), "00000001000000020000 0bb800000400".replace(" ", "")),
    "MsgAck": (MACK, (7, 3000), "0000000700000bb8"),
    "Ping": (PING, (5, 6, 1 << 40), "00000005000000060000010000000000"),
}


WORD0 = dict(head=1, type=1, sm=0, lint=1, rint=0, inst=1, err=0, fen=0, swpmp=1, coll_region=5, cpcnt=3,
             swpflag=2, nocnct=0, src_vp=7, dest_vp=9, node_id=0xABCDE)
WORD1 = dict(data_num=6, err_vec=0, branch=2, pbranch=3, rop=3, rdtype=0, rbit=1, rflag=1, bflag=0, seg=0, nseg=1,
             rsvd=0)
PAIRS = {f"{k}{i}": (0x1111111111111111 * (i + 1) if k == "data" else i) for i in range(7) for k in ("data", "loc")}
GOLDEN["CollDesc"] = (DESC, tuple({**WORD0, **WORD1, **PAIRS}[n] for n in DESC.names),
                      # word 0: 0001 1 0 1 0 | 1 0 0 1 0000000101 000011 010 0 000111 001001 0xABCDE
                      "1a9014341c9abcde" "0600020330c00020"
                      + "".join(f"{0x1111111111111111 * (i + 1):016x}{i:016x}" for i in range(7)))


def test_descriptor_word0_bit_layout_is_the_specs():
    # each field alone, at the bit position spec 01 gives (bit 63 first)
    positions = {"head": 60, "type": 59, "sm": 58, "lint": 57, "rint": 56, "inst": 55, "err": 54, "fen": 53,
                 "swpmp": 52, "coll_region": 42, "cpcnt": 36, "swpflag": 33, "nocnct": 32, "src_vp": 26,
                 "dest_vp": 20, "node_id": 0}
    for name, bit in positions.items():
        values = {n: 0 for n in DESC.names}
        values[name] = 1
        word0 = int.from_bytes(DESC.pack(*(values[n] for n in DESC.names))[:8], "big")
        assert word0 == 1 << bit, name
    assert DESC.size == 128


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_vectors(name):
    codec, values, hexstr = GOLDEN[name]
    assert codec.pack(*values).hex() == hexstr
    assert codec.unpack(bytes.fromhex(hexstr)) == values


@settings(max_examples=200, deadline=None)
@given(src=st.integers(0, 2**32 - 1), dst=st.integers(0, 2**32 - 1), vc=st.integers(0, 255),
       body=st.binary(max_size=200), ptype=st.sampled_from(list(PacketType)))
def test_whole_frame_matches_scapy_stack(src, dst, vc, body, ptype):
    fast = build_frame(src, dst, ptype, body, vc=vc)
    p = Ether(fast)
    assert p.type == 0x88B5 and p[Fabric].src == src and p[Fabric].dst == dst and p[Fabric].vc == vc
    assert p[Fabric].length == len(body)
    assert bytes(p) == fast
    assert parse_frame(fast)[:3] == (src, dst, vc)


@settings(max_examples=200, deadline=None)
@given(src=st.integers(0, 2**32 - 1), dst=st.integers(0, 2**32 - 1), body=st.binary(max_size=300),
       bit=st.integers(0, 10**6))
def test_fcs_fast_path_matches_the_scapy_declaration(src, dst, body, bit):
    fast = build_frame(src, dst, PacketType.MSG, body)
    wire = add_fcs(fast)
    mac = Ether(fast)
    built = bytes(EthernetFCS(dst=mac.dst, src=mac.src, type=mac.type) / mac.payload)
    assert built == wire and len(wire) == len(fast) + FCS_LEN
    p = EthernetFCS(wire)
    assert p.fcs == zlib.crc32(fast) and p[Fabric].src == src and bytes(p) == wire and fcs_ok(wire)
    bad = bytearray(wire)
    bad[(bit // 8) % len(bad)] ^= 1 << (bit % 8)
    assert not fcs_ok(bytes(bad))  # CRC-32 catches every single-bit error


def test_fcs_golden_vector():
    frame = build_frame(1, 2, PacketType.PING, PING.pack(1, 2, 3))
    assert add_fcs(frame)[-4:].hex() == "21b58630"  # zlib.crc32 = 0x3086b521, least significant byte first
    assert EthernetFCS(add_fcs(frame)).fcs == 0x3086B521


@given(st.binary(max_size=100))
def test_parse_frame_rejects_garbage_with_decode_error(buf):
    try:
        f = parse_frame(buf)
    except DecodeError:
        return
    # whatever parsed must be self-consistent
    assert f[8] == len(buf) - 30


def test_codec_refuses_a_field_it_cannot_encode():
    from scapy.fields import StrField
    from scapy.packet import Packet

    class Bad(Packet):
        fields_desc = [StrField("s", b"")]

    with pytest.raises(TypeError, match="no fixed struct format"):
        StructCodec(Bad)


def test_bit_fields_pack_msb_first_like_scapy():
    from scapy.fields import BitField, ByteField
    from scapy.packet import Packet

    class Bits(Packet):
        fields_desc = [BitField("a", 0, 4), BitField("b", 0, 1), BitField("c", 0, 11), ByteField("d", 0)]

    codec = StructCodec(Bits)
    assert codec.size == 3
    for vals in [(0xF, 1, 0x7FF, 9), (0x3, 0, 0x123, 0), (0, 1, 0, 255)]:
        assert codec.pack(*vals) == bytes(Bits(a=vals[0], b=vals[1], c=vals[2], d=vals[3]))
        assert codec.unpack(codec.pack(*vals)) == vals
