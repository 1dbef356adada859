"""The compiled core's one-byte FCS update (a forwarded frame's hop count) against zlib's CRC-32.

A switch that forwards a frame in place raises its hop count by one and, instead of computing the
FCS again over the whole frame, changes the checked FCS by what that one byte contributes
(``crc32_one_byte`` in ``emu/csrc/crc.h``, reached here as ``_core.crc32_byte``). The result must
be zlib's CRC-32 of the changed frame, for any frame, position and change.
"""

import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu import native

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


def _changed(frame: bytes, pos: int, new: int) -> bytes:
    return frame[:pos] + bytes((new,)) + frame[pos + 1:]


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=2000), st.data())
def test_one_byte_changed_gives_zlibs_crc_of_the_changed_frame(frame, data):
    pos = data.draw(st.integers(0, len(frame) - 1))
    new = data.draw(st.integers(0, 255))
    z = len(frame) - pos - 1
    got = CORE.crc32_byte(zlib.crc32(frame), frame[pos] ^ new, z)
    assert got == zlib.crc32(_changed(frame, pos, new))


@needs_core
def test_the_distances_kept_apart_and_a_hop_count_raised_along_a_path():
    """Distances that share a cache slot (z and z + 64k) one after the other, and the same frame
    forwarded hop after hop (the FCS carried along, never computed again), stay zlib's."""
    frame = os.urandom(1100)
    for z in (5, 69, 133, 5, 1029, 69, 0, 64, 0):
        pos = len(frame) - 1 - z
        for new in (0, 1, 0x80, 0xFF, frame[pos] ^ 0x5A):
            assert CORE.crc32_byte(zlib.crc32(frame), frame[pos] ^ new, z) == zlib.crc32(_changed(frame, pos, new))
    pos = 17
    crc = zlib.crc32(frame)
    for _ in range(300):  # (the count wraps past 255)
        new = (frame[pos] + 1) & 0xFF
        crc = CORE.crc32_byte(crc, frame[pos] ^ new, len(frame) - pos - 1)
        frame = _changed(frame, pos, new)
        assert crc == zlib.crc32(frame)


@needs_core
def test_no_change_is_the_same_crc_and_bad_arguments_are_refused():
    assert CORE.crc32_byte(0x12345678, 0, 10) == 0x12345678
    for args in ((1 << 32, 1, 0), (0, 256, 0), (0, 1, -1), (0, 1)):
        with pytest.raises(TypeError):
            CORE.crc32_byte(*args)


@needs_core
@pytest.mark.parametrize("env", [{}, {"EMU_NO_VPCLMUL": "1"}])
def test_long_crcs_by_512_bit_folds_and_without(env):
    """Where the CPU has AVX-512 and VPCLMULQDQ (``crc32_path``: vpclmul512) a CRC of 256 bytes or
    more folds four 16-byte blocks to a register, 256 bytes a round, then 128 (``crc32_fold8_v512``);
    EMU_NO_VPCLMUL=1 keeps the 128-bit folds. Both zlib's at every length about the edges of those
    rounds, for a frame (a bytes object: its leading bytes folded with the rest) and a buffer from an
    odd offset."""
    import subprocess
    import sys

    code = ("import os, zlib, emu.element, emu.native as n\n"
            "lengths = [k for e in range(256, 1600, 128) for k in range(e - 17, e + 18)] + [1074, 1102, 4099, 9000, 65507]\n"
            "for k in lengths:\n"
            "    b = os.urandom(k + 3)\n"
            "    for v in (b[:k], memoryview(b)[3:], bytes(b[1:k + 1])):\n"
            "        assert n.CORE.crc32(v) == zlib.crc32(v), k\n"
            "print(n.in_use(), n.CORE.crc32_path())\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    used, path = out.stdout.split()
    assert used == "compiled"
    if env:
        assert path in ("clmul8", "clmul", "table")
    elif path != "vpclmul512":
        pytest.skip(f"this CPU folds by {path}: no AVX-512 with VPCLMULQDQ here")
