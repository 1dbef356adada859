"""A host's open-loop injections (``emu.front.traffic_checks``), drawn in order from its own seeded
generator: all at once (``schedule``), or a part at a time as its application needs them (``Draws``:
``--drain measured`` and ``global`` stop a source when the measured packets are in, mostly long before its
``DRAIN_FACTOR`` windows are up, so the rest need never be drawn). Each cycle takes the same draws
either way, so the injections are the same numbers."""

from __future__ import annotations

import random
import struct

HEAD = struct.Struct("<qI")  # a packet's creation time (ns) and sequence number, at the head of its data
TAG = 29
"""The tag of a traffic packet."""
DRAW_CYCLES = 128
"""``--drain measured`` and ``global``: a source draws its injections past the window this many cycles at a time, as it reaches them."""
HOTSPOT_FRACTION = 0.1
HOTSPOT_HOST = 0

def receiver(w0: int, w1: int, lat: list, src: list, state: list):
    """``take(m)`` for a traffic application (``traffic_app``, ``global_app``): one packet received,
    its latency and source kept in ``lat``/``src`` if it was created in the window [w0, w1) (then 1,
    else 0), and ``state`` = [packets that arrived in the window, packets overtaken by a later one of
    the same source (another path), the newest creation time received] brought up to date. The
    calls and bounds in locals: it runs once per packet."""
    last: dict = {}
    last_get = last.get
    unpack_head = HEAD.unpack_from
    lat_append, src_append = lat.append, src.append

    def take(m) -> int:
        msrc, _tag, data, t_ns, _hops = m  # (a Message: its fields at once, not an attribute lookup each)
        created, seq = unpack_head(data)
        if seq < last_get(msrc, -1):
            state[1] += 1
        else:
            last[msrc] = seq
        if created > state[2]:
            state[2] = created
        if w0 <= t_ns < w1:
            state[0] += 1
        if w0 <= created < w1:
            lat_append(t_ns - created)
            src_append(msrc)
            return 1
        return 0

    return take


_RANDBELOW_PLAIN = random.Random._randbelow is random.Random._randbelow_with_getrandbits  # (``_uniform`` may draw so)


class Draws:
    """Host ``i``'s injections over ``cycles``, drawn on demand: ``upto(c)`` gives (cycles, destination
    indices) of the cycles not drawn yet before ``c``. ``fixed``: the pattern's destination per host
    (``destinations``; None: drawn per packet). Picklable (its generator's state with it), so a
    domain process can draw the rest of a schedule begun in the parent."""

    def __init__(self, pattern: str, n: int, i: int, load: float, cycles: int, seed: int, fixed,
                 to_self: bool = False, groups=None):
        self.pattern, self.n, self.i, self.load, self.cycles = pattern, n, i, load, cycles
        self.to_self, self.groups = to_self, groups
        self.dest = None if fixed is None else fixed[i]
        self.none = fixed is not None and fixed[i] is None  # (a host that would send to itself: nothing)
        self.fixed = fixed is not None
        self.rng = random.Random(f"{seed}:{pattern}:{load!r}:{i}")
        self.next = 0  # the first cycle not drawn yet

    @property
    def done(self) -> bool:
        return self.none or self.next >= self.cycles

    def upto(self, end: int) -> tuple[list, list]:
        c0, c1 = self.next, min(end, self.cycles)
        if self.none or c1 <= c0:
            return [], []
        self.next = c1
        n, i, rng = self.n, self.i, self.rng
        pattern = self.pattern
        if not self.fixed and pattern not in ("hotspot", "worst_case") and n > 1 and _RANDBELOW_PLAIN:
            return _uniform(rng, n, i, self.load, c0, c1, self.to_self)
        load, to_self, groups = self.load, self.to_self, self.groups
        when, dst = [], []
        for c in range(c0, c1):
            if rng.random() < load:
                if self.fixed:
                    d = self.dest
                elif pattern == "hotspot" and i != HOTSPOT_HOST and rng.random() < HOTSPOT_FRACTION:
                    d = HOTSPOT_HOST
                elif pattern == "worst_case":
                    ng = max(groups) + 1
                    nxt = [h for h, g in enumerate(groups) if g == (groups[i] + 1) % ng]
                    d = nxt[rng.randrange(len(nxt))]
                elif to_self:
                    d = rng.randrange(n)
                else:
                    d = rng.randrange(n - 1)
                    d += d >= i
                when.append(c)
                dst.append(d)
        return when, dst


def _uniform(rng: random.Random, n: int, i: int, load: float, c0: int, c1: int, to_self: bool) -> tuple[list, list]:
    """``Draws``' uniform draws of cycles ``c0`` to ``c1``, the same numbers: ``randrange(m)`` inline
    (``_randbelow_with_getrandbits``: ``getrandbits(m.bit_length())`` until below ``m``), a call per
    packet instead of three."""
    m, skip = (n, n) if to_self else (n - 1, i)  # (draws of skip and above are one more: i itself left out)
    k, rnd, bits = m.bit_length(), rng.random, rng.getrandbits
    when, dst = [], []
    for c in range(c0, c1):
        if rnd() < load:
            d = bits(k)
            while d >= m:
                d = bits(k)
            d += d >= skip
            when.append(c)
            dst.append(d)
    return when, dst
