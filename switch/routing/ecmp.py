"""``ecmp`` and ``spray``: load balancing over the equal-cost (minimal) next hops (issue 47, item 2).

* ``ecmp`` -- per flow: the switch hashes the frame's flow key and takes candidate
  ``hash mod k`` of its k minimal next hops for the destination, so every frame of one flow takes one
  path. The key is the fabric header's ``src`` (4 bytes), ``dst`` (4), ``ptype`` (1) and an
  **entropy** byte the sender may set: the header's ``rsvd`` when fabric flag SRCRT is not set (with
  SRCRT, ``rsvd`` is a route id and the frame takes the way it names, as under ``dispersive``: a
  resend of the reliable transport tries another path). Hosts send their messages with ``rsvd`` 0
  today, so a flow is a (source, destination, packet type) triple; a sender that wants flows of one
  pair on different paths sets ``rsvd`` (``NicEngine.emit(..., rsvd=e)``), as a NIC sets a UDP source
  port for RoCEv2's ECMP. The hash is CRC-32 (``zlib.crc32``, deterministic: never Python's
  ``hash()``) of the 4-byte big-endian *salt* followed by the 10 key bytes; the salt is
  ``(seed * 1_000_003 + node_id) mod 2**32`` -- a hash seed per switch, as real switches are
  configured, so that the levels of a tree do not all choose alike (hash polarisation) -- and the
  same seed gives the same paths run after run, over any number of processes.
* ``spray`` -- per packet: each switch sends the frames for one destination round the candidates in
  turn (a counter per destination and switch, starting at the first candidate), so the frames of a flow
  spread evenly over the equal-cost paths; ``dispersive`` is the seeded-random variant of the same idea.
  A frame with SRCRT takes the way it names.

Ports that are down or out of service (``engine.held``) are passed over as ``dispersive`` does: the
hashed (or next-in-turn) candidate when live, else the live candidate at the same index among the
live ones (ecmp) or the next live one in turn (spray); every candidate down: the choice stands.
"""

from __future__ import annotations

import struct
import zlib

from emu.wire.fabric import ETH_LEN, FLAG_SRCRT, FLAGS_OFF, RSVD_OFF, source_route

KEY_OFF = ETH_LEN
"""The fabric header's ``src`` and ``dst`` (8 bytes from here)."""
PTYPE_OFF = ETH_LEN + 10
MEMO = 4096
"""Hashes a switch remembers (by the header bytes that hold the key), cleared when full."""


def flow_key(frame: bytes) -> bytes:
    """The 10 bytes ecmp hashes: src, dst, ptype and the entropy byte (``rsvd``, 0 under SRCRT)."""
    entropy = 0 if frame[FLAGS_OFF] & FLAG_SRCRT else frame[RSVD_OFF]
    return bytes(frame[KEY_OFF:KEY_OFF + 8]) + bytes((frame[PTYPE_OFF], entropy))


def salt(seed: int, node_id: int) -> int:
    """The switch's hash seed."""
    return (seed * 1_000_003 + node_id) & 0xFFFFFFFF


def ecmp_hash(frame: bytes, salt_: int) -> int:
    """CRC-32 of the salt (4 bytes, big-endian) and :func:`flow_key`."""
    return zlib.crc32(flow_key(frame), zlib.crc32(struct.pack(">I", salt_)))


def _live(engine):
    def live(p: int, now: int) -> bool:
        view = engine.ports
        return p not in engine.held and (view is None or view.up(p, now))
    return live


def ecmp(engine, seed: int):
    s0 = zlib.crc32(struct.pack(">I", salt(seed, engine.node_id)))  # the salt's CRC, once
    live = _live(engine)
    crc = zlib.crc32
    memo: dict[bytes, int] = {}  # the fabric header from src to rsvd -> its hash (the key is in it)

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        cands = engine.candidates
        ports = cands[dst] if dst < len(cands) else ()
        k = len(ports)
        if k < 2:
            return static
        if frame[FLAGS_OFF] & FLAG_SRCRT:
            chosen, h = source_route(frame, ports), 0
        else:  # ecmp_hash, inline: CRC-32 of salt, src and dst, then ptype and entropy
            head = frame[KEY_OFF:RSVD_OFF + 1]
            h = memo.get(head)
            if h is None:
                if len(memo) >= MEMO:
                    memo.clear()
                h = memo[head] = crc(bytes((frame[PTYPE_OFF], frame[RSVD_OFF])), crc(frame[KEY_OFF:KEY_OFF + 8], s0))
            chosen = ports[h % k]
        view = engine.ports
        if chosen not in engine.held and (view is None or view.up(chosen, now)):
            return chosen
        up = [q for q in ports if live(q, now)]
        return up[h % len(up)] if up else chosen
    return choose


def spray(engine, seed: int):
    turn: dict[int, int] = {}
    live = _live(engine)

    def choose(dst: int, static: int, frame: bytes, now: int) -> int:
        cands = engine.candidates
        ports = cands[dst] if dst < len(cands) else ()
        k = len(ports)
        if k < 2:
            return static
        if frame[FLAGS_OFF] & FLAG_SRCRT:
            chosen = source_route(frame, ports)
            if live(chosen, now):
                return chosen
        i = turn.get(dst, 0)
        if i >= k:  # (the manager's SET_ROUTES gave fewer candidates)
            i = 0
        p = ports[i]
        view = engine.ports
        if p not in engine.held and (view is None or view.up(p, now)):  # (the common case: live)
            turn[dst] = i + 1 if i + 1 < k else 0
            return p
        for j in range(1, k):
            p = ports[(i + j) % k]
            if live(p, now):
                turn[dst] = (i + j + 1) % k
                return p
        turn[dst] = (i + 1) % k
        return ports[i]
    return choose


POLICIES = {"ecmp": ecmp, "spray": spray}
__all__ = ["POLICIES", "ecmp", "ecmp_hash", "flow_key", "salt", "spray"]
