"""Spec 04 on the wire: the in-network allreduce header and control messages, codec against scapy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.reduce import OPS
from emu.wire import DecodeError
from emu.wire.inc import (CTL, DATA, DTYPE_CODES, F_LAST, F_SPARSE, GRANT, INSTALL, REQUEST, IncCtl, IncData,
                          IncGrant, IncInstall, IncRequest, decode, dtype_code, encode_dense, encode_sparse, op_by_code,
                          op_code, register_dtype)


def test_golden_vectors():
    p = encode_dense(7, 3, np.arange(4, dtype=np.float32))
    assert p.hex() == "0007010a00000003000000010004" "0000" "000000003f8000004000000040400000"
    s = encode_sparse(0x1234, 0x01020304, np.array([1, 9]), np.array([2.5, -1.0]), shard=1, shards=2)
    assert s[:16].hex() == "1234" "05" "0b" "01020304" "0001" "0002" "0002" "0000"
    assert s[16:].hex() == "00000001" "4004000000000000" "00000009" "bff0000000000000"


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_header_codec_equals_its_scapy_declaration(data):
    for cls, codec in ((IncData, DATA), (IncCtl, CTL), (IncRequest, REQUEST), (IncGrant, GRANT),
                       (IncInstall, INSTALL)):
        values = []
        for f in cls.fields_desc:
            values.append(data.draw(st.integers(0, (1 << (8 * int(f.sz))) - 1)))
        raw = codec.pack(*values)
        assert raw == bytes(cls(**dict(zip(codec.names, values))))
        assert codec.unpack(raw) == tuple(values)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.float16, np.float32,
                                   np.float64])
def test_dense_and_sparse_packets_round_trip_every_type(dtype):
    rng = np.random.default_rng(1)
    v = (rng.standard_normal(33) * 50).astype(dtype)
    head, got, idx = decode(encode_dense(1, 2, v))
    assert idx is None and np.array_equal(got.astype(dtype), v) and head[6] == 33 and head[2] == dtype_code(v.dtype)
    i = np.sort(rng.choice(1 << 20, 9, replace=False))
    head, got, gi = decode(encode_sparse(1, 2, i, v[:9]))
    assert head[1] & F_SPARSE and head[1] & F_LAST and np.array_equal(gi, i) and np.array_equal(got.astype(dtype), v[:9])


def test_small_types_pack_more_elements_per_packet():
    assert len(encode_dense(1, 0, np.zeros(256, np.int8))) == 16 + 256
    assert len(encode_dense(1, 0, np.zeros(256, np.float64))) == 16 + 2048


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_truncated_or_padded_bytes_never_crash_the_decoder(raw):
    try:
        decode(raw)
    except DecodeError:
        pass
    good = encode_dense(3, 4, np.arange(5, dtype=np.int32))
    for bad in (good[:-1], good + b"\0", good[:10]):
        with pytest.raises(DecodeError):
            decode(bad)


def test_user_types_and_operators_get_codes():
    pair = np.dtype([("a", ">i2"), ("b", ">i2")])
    code = max(c for c in DTYPE_CODES if c >= 16) + 1 if any(c >= 16 for c in DTYPE_CODES) else 16
    register_dtype(code, pair)
    try:
        assert dtype_code(pair) == code
        with pytest.raises(ValueError, match="unused"):
            register_dtype(code, np.dtype("int32"))
    finally:
        del DTYPE_CODES[code]
    codes = [op_code(n) for n in OPS]
    assert len(set(codes)) == len(codes)  # no two built-in operators share a code
    assert all(op_by_code(op_code(n)).name == n for n in OPS)
    with pytest.raises(DecodeError, match="no operator"):
        op_by_code((max(codes) + 1) & 0xFFFF if (max(codes) + 1) & 0xFFFF not in codes else 1)
