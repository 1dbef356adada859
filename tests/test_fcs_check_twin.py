"""The receive side's FCS check (``crc32_pybytes`` in emu/csrc/crc.h, the compiled switch loop's
``plain_arrival``) against zlib's CRC-32 and against the pure Python element.

A frame of 144 bytes or more is checked by folding alone: its first block read from up to 15 bytes
before the frame (inside the bytes object's header) with those bytes masked off, zlib's initial
inversion placed where the frame starts. Every length mod 16 puts that start, and the inversion's
four bytes, somewhere else -- some straddle two blocks -- so every one is checked here, for a good
frame and for frames damaged in their first, last and middle bytes: each damaged frame is still
counted, dropped and captured as damaged, exactly as the pure Python element does it.
"""

import os
import zlib

import pytest

from emu import native
from emu.wire import MAGIC, OUTER, VERSION, PacketType, add_fcs, build_frame

from test_element import CID, make

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")


@needs_core
def test_crc32_of_bytes_is_zlibs_for_every_length_and_start():
    for n in [*range(0, 300), 1039, 1040, 1041, 1054, 1055, 1056, 4099]:
        b = os.urandom(n)
        assert CORE.crc32(b) == zlib.crc32(b), n
        assert CORE.crc32(bytearray(b)) == zlib.crc32(b), n  # (a buffer: the table's tail)
        assert CORE.crc32(memoryview(b)[1:]) == zlib.crc32(b[1:]), n


def _run(pure: bool, frames: list[bytes], monkeypatch, capture: bool):
    """The frames (with their FCS, some damaged) received on link 11 of a switch and run: what it
    forwarded, counted and captured (``capture``: the element's loop in Python, its FCS check the
    core's ``crc32``; without, the core's switch loop checks them)."""
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    e, peer = make(capture=capture)
    try:
        dgram = b"".join(OUTER.pack(MAGIC, VERSION, 0, CID, 11, seq, 500 + seq, len(f), 0) + f
                         for seq, f in enumerate(frames))
        assert e.on_datagram(dgram, e.ins[0].peer_addr) == len(frames)
        e.run_window(10**6, 1)
        out = [bytes(f) for p in e.outs for _, _, f, _ in p.pending]  # (what is still queued ...)
        while True:  # (... and what was sent: the datagrams' records, each header then its frame)
            try:
                dgram = peer.recv(65536)
            except BlockingIOError:
                break
            off = 0
            while off < len(dgram):
                n = OUTER.struct.unpack_from(dgram, off)[7]
                out.append(dgram[off + OUTER.size:off + OUTER.size + n])
                off += OUTER.size + n
        return (e.in_by_link[11].fcs_errors, e.engine.stats["forwarded"], out,
                [(c[0], c[2], bytes(c[3])) for c in e.capture or ()])
    finally:
        e.sock.close()
        peer.close()


@needs_core
@pytest.mark.parametrize("rest", range(16))
def test_good_and_damaged_frames_of_every_length_mod_16_as_pure_python(rest, monkeypatch):
    payload = bytes(range(256)) * 2
    frame = build_frame(0, 1, PacketType.MSG, payload)
    frame = build_frame(0, 1, PacketType.MSG, payload[:len(payload) - (len(frame) + 4 - rest) % 16])
    good = add_fcs(frame)
    assert len(good) % 16 == rest and len(good) >= 144
    frames = [good]
    for pos in (0, 1, 3, 4, 15, 16, 17, len(good) // 2, len(good) - 5, len(good) - 1):
        bad = bytearray(good)
        bad[pos] ^= 0x10
        frames += [bytes(bad), good]
    for capture in (False, True):
        before = CORE.counts()["forwarded"]
        compiled = _run(False, frames, monkeypatch, capture)
        assert (CORE.counts()["forwarded"] > before) == (not capture)  # (the compiled switch loop checked them)
        assert compiled == _run(True, frames, monkeypatch, capture)
        assert compiled[0] == 10 and compiled[1] == 11  # every damaged frame counted and dropped, the good ones forwarded
        assert len(compiled[2]) == 11 and all(f == compiled[2][0] for f in compiled[2])
    assert [flags & 32 for _, flags, _ in compiled[3] if flags & 1] == [0, 32] * 10 + [0]  # captured as damaged
