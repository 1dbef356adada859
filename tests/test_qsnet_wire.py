"""QsNet packets on the wire (spec 03): the segmenting codec against the scapy declarations."""

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.wire import DecodeError
from emu.wire.qsnet import (ACK, CONT_DATA, FIRST_DATA, TRAP, TXN, Damaged, QsAck, QsCont, QsSegment, QsTrailer,
                            QsTrap, QsTxn, decode_packet, encode_packet, packet_bytes, payload_crc, segments)


def scapy_packet(payload: bytes, vc: int, prio: int, dest: int, tstamp: int, pkt_id: int) -> bytes:
    """The packet built from the declarations alone: first segment, continuations, trailer."""
    first = payload[:FIRST_DATA]
    out = bytes(QsSegment(vc=vc, prio=prio, length=len(first), dest=dest, tstamp=tstamp)) + first
    off, index = FIRST_DATA, 1
    while off < len(payload):
        chunk = payload[off:off + CONT_DATA]
        off += len(chunk)
        out += bytes(QsCont(vc=vc, prio=prio, last=int(off >= len(payload)), length=len(chunk), index=index)) + chunk
        index += 1
    return out + bytes(QsTrailer(crc32=zlib.crc32(payload + pkt_id.to_bytes(4, 'big')), pkt_id=pkt_id))


def test_golden_vectors():
    one = encode_packet(bytes(range(30)), vc=5, prio=1, dest=0x1234, tstamp=0xBEEF, pkt_id=0x01020304)
    assert one.hex() == ("2c1e1234beef2b70" + bytes(range(30)).hex() + "07cc4f13" + "01020304")
    two = encode_packet(bytes(i % 256 for i in range(300)), vc=31, prio=0, dest=7, tstamp=1, pkt_id=2)
    assert two[:8].hex() == "f8f8000700013434"           # vc 31, 248 bytes, dest 7, tstamp 1, CRC-16
    assert two[8 + 248:8 + 248 + 4].hex() == "fa340001"  # vc 31 + last, 52 bytes, segment 1
    assert two[-8:].hex() == "cb483a8900000002" and len(two) == 320


def test_a_kibibyte_takes_five_segments():
    assert [segments(n) for n in (0, 1, 248, 249, 500, 501, 1004, 1005, 1024, 4096)] == [1, 1, 1, 2, 2, 3, 4, 5, 5, 17]
    assert packet_bytes(1024) == 8 + 4 * 4 + 1024 + 8
    assert len(encode_packet(bytes(1024), vc=0, prio=0, dest=1, tstamp=0, pkt_id=1)) == packet_bytes(1024)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.integers(0, 31), st.integers(0, 1), st.integers(0, 0xFFFF),
       st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF))
def test_codec_matches_the_declarations_and_round_trips(payload, vc, prio, dest, tstamp, pkt_id):
    enc = encode_packet(payload, vc=vc, prio=prio, dest=dest, tstamp=tstamp, pkt_id=pkt_id)
    assert enc == scapy_packet(payload, vc, prio, dest, tstamp, pkt_id)
    assert decode_packet(enc) == (vc, prio, dest, tstamp, payload, pkt_id)


@pytest.mark.parametrize("cls,codec", [(QsTxn, TXN), (QsAck, ACK), (QsTrap, TRAP)])
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_fixed_headers_codec_equals_scapy(cls, codec, data):
    raw = data.draw(st.binary(min_size=codec.size, max_size=codec.size))
    values = codec.unpack(raw)
    assert codec.pack(*values) == raw
    assert bytes(cls(raw)) == raw


def test_every_single_bit_error_is_caught_or_harmless():
    payload = bytes(range(256)) * 2 + b"tail"
    enc = encode_packet(payload, vc=3, prio=0, dest=9, tstamp=77, pkt_id=42)
    caught = damaged = 0
    for bit in range(8 * len(enc)):
        b = bytearray(enc)
        b[bit // 8] ^= 0x80 >> (bit % 8)
        try:
            vc, _prio, dest, _ts, got, pkt_id = decode_packet(bytes(b))
        except Damaged:
            damaged += 1  # the header is sound: the target can NACK it
            continue
        except DecodeError:
            caught += 1
            continue
        # undetected flips may only touch what carries no meaning for delivery: a continuation's
        # vc/prio/reserved bits, the first header's time stamp is covered by its CRC-16 (the
        # payload, the destination and the packet id are intact)
        assert (got, dest, pkt_id) == (payload, 9, 42)
    assert damaged == 8 * (len(payload) + 8)  # every payload bit, the trailer's CRC and packet id
    assert caught > 8 * 8  # every first-segment-header bit at least


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_are_a_decode_error_never_a_crash(buf):
    try:
        decode_packet(buf)
    except DecodeError:
        pass


def test_truncated_and_trailing_bytes_are_refused():
    enc = encode_packet(bytes(600), vc=0, prio=0, dest=1, tstamp=0, pkt_id=5)
    for cut in (1, 4, 8, 100, len(enc) - 9):
        with pytest.raises(DecodeError):
            decode_packet(enc[:-cut])
    with pytest.raises(DecodeError):
        decode_packet(enc + b"\x00")
    with pytest.raises(ValueError):
        encode_packet(bytes(4097), vc=0, prio=0, dest=1, tstamp=0, pkt_id=1)
