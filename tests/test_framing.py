"""A frame's wire time is its modelled length on the link (``LinkSpec.framing``, ``emu.wire.framing``),
not the bytes on the socket: exact times of a QsNet put, a NIC descriptor and a mesh packet under
each family's default framing, and the generic families unchanged."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.config import ConfigError, LinkSpec
from emu.port import OutPort
from emu.topologies import build
from emu.wire import DESC, HDR_LEN, PacketType, build_frame
from emu.wire.coding import NC
from emu.wire.framing import ETHERNET, framing, frame_length, qsnet_packet_len
from emu.wire.qsnet import ACK, TXN, QsOp, encode_packet, packet_bytes


def port(bps: int, name: str, latency: int = 100) -> OutPort:
    return OutPort(0, "p", 0, 0, "h1", "h1-nic0", latency, bps, framing=framing(name))


def put_frame(data: bytes = b"\x11" * 8) -> bytes:
    """An 8-byte put as an Elan adapter sends it: transaction header and data, cut into one segment."""
    txn = TXN.pack(QsOp.PUT, 0, 0, 1, 0, len(data), 0x1000)
    return build_frame(0, 1, PacketType.QPKT, encode_packet(txn + data, vc=0, prio=0, dest=1, tstamp=0, pkt_id=7))


def test_families_default_framings():
    assert {lk.spec.framing for lk in build("qsnet:nodes=16").links} == {"qsnet"}
    assert {lk.spec.framing for lk in build("mesh:k=4,n=2").links} == {"flit"}
    assert {lk.spec.framing for lk in build("torus:k=4,n=2").links} == {"flit"}
    for spec in ("star:n=4", "fattree:k=2,n=2", "clos:radix=4,stages=2", "twolevel:ports=4,hosts=8"):
        assert {lk.spec.framing for lk in build(spec).links} == {"ethernet"}, spec
    assert {lk.spec.framing for lk in build("qsnet:nodes=4", settings={"link": {"framing": "ethernet"}}).links} \
        == {"ethernet"}
    with pytest.raises(ConfigError, match="framing must be ethernet, qsnet or flit"):
        LinkSpec(framing="atm")


def test_a_qsnet_put_takes_its_48_bytes_not_the_82_on_the_socket():
    f = put_frame()
    assert len(f) == HDR_LEN + 8 + 24 + 8 + 8                       # envelope, segment header, txn, data, trailer
    p = port(20_000_000_000, "qsnet")                                # QsNet's 20 Gbit/s of data
    assert p.modelled_length(f) == 48 == packet_bytes(24 + 8)
    assert p.enqueue(f, 1000) == 1000
    assert p.free_at == 1000 + 20                                   # ceil(48 * 8 / 20) = ceil(19.2)
    assert p.pending[0][1] == 1000 + 20 + 100                       # arrival: + the latency
    assert len(p.pending[0][2]) == len(f) + 4                       # the socket still carries every byte
    e = port(20_000_000_000, "ethernet")
    assert e.enqueue(f, 1000) == 1000 and e.free_at == 1000 + 33    # ceil(82 * 8 / 20): the old figure
    ack = build_frame(1, 0, PacketType.QACK, bytes(ACK.size), prio=1)
    assert p.modelled_length(ack) == 16                              # an ACK token is its 16 bytes


def test_a_descriptor_message_on_each_framing():
    f = build_frame(0, 1, PacketType.COLL, bytes(DESC.size))
    assert DESC.size == 128
    assert framing("ethernet").length(f) == 30 + 128 + 4 == len(f) + 4   # the NIC offload's fat trees: unchanged
    assert framing("flit").length(f) == 8 + 128
    assert framing("qsnet").length(f) == 8 + 128 + 8                     # carried as one QsNet packet
    p = port(100_000_000_000, "ethernet")
    p.enqueue(f, 0)
    assert p.free_at == 13                                               # ceil(162 * 8 / 100)


def test_a_one_flit_mesh_packet_takes_one_flit_time():
    t = build("mesh:k=4,n=2", bandwidth_gbps=512)                        # 64-byte flits, one per ns
    link = t.links[0].spec
    f = build_frame(0, 5, PacketType.NC, bytes(NC.size) + bytes(64 - 16 - 8))
    p = port(link.bandwidth_bps, link.framing, latency=1)
    assert p.modelled_length(f) == 64 == link.frame_bytes(PacketType.NC, NC.size + 40)
    p.enqueue(f, 0)
    assert p.free_at == 1 and p.pending[0][1] == 2                        # 1 ns on the line, 1 ns of latency
    assert port(link.bandwidth_bps, "ethernet").enqueue(f, 0) == 0


def test_qsnet_packets_yield_at_their_modelled_segment_boundaries():
    p = OutPort(0, "p", 0, 0, "h1", "h1-nic0", 100, 8_000_000_000, framing=framing("qsnet"))  # 1 byte per ns
    big = build_frame(0, 1, PacketType.QPKT, bytes(4000))
    ack = build_frame(1, 0, PacketType.QACK, bytes(16), prio=1)
    assert p.enqueue(big, 0) == 0
    assert p.enqueue(ack, 100) == 256                                    # the first segment ends 256 bytes in
    assert p.free_at == 4000 + 16


@settings(max_examples=60, deadline=None)
@given(ptype=st.integers(0, 255), body=st.integers(0, 4200))
def test_ethernet_framing_is_the_frame_and_its_fcs_and_the_others_agree_with_frame_length(ptype, body):
    f = build_frame(0, 1, ptype, bytes(body)) if body < 65536 else None
    assert ETHERNET.length(f) == len(f) + 4 == frame_length("ethernet", ptype, body)
    for name in ("qsnet", "flit"):
        fr = framing(name)
        assert fr.length(f) == fr.length_wire(f + b"\0\0\0\0") == frame_length(name, ptype, body)
    want = body if ptype in (PacketType.QPKT, PacketType.QACK) else qsnet_packet_len(body)
    assert framing("qsnet").length(f) == want
    assert framing("flit").length(f) == body + 8


def test_qsnet_packet_len_is_the_packets_own():
    for n in (0, 1, 248, 249, 500, 1024, 4096):
        assert qsnet_packet_len(n) == packet_bytes(n)
