"""OS noise and arrival skew of a host (``host.noise*``, ``host.skew*``): seeded, deterministic.

Noise, as in the noise studies of LogGOPSim-style simulators: the host CPU now and then leaves the
application for a *detour* (a daemon, a timer interrupt) of ``noise_duration_ns``. CPU work the host
engine charges (send and receive overheads, reductions, ``compute``) makes progress only outside
detours: work of w ns started at t ends at the first time by which w ns outside detours have passed
since t (:meth:`Noise.finish`); waiting (for a message, a NIC) is not delayed.

* ``periodic``: a detour every ``noise_interval_ns`` (P), starting at a phase drawn per host from
  the seed (uniform in [0, P)), or at 0 on every host with ``noise_phase=aligned`` (synchronised
  noise, e.g. a gang-scheduled daemon). Work of w ns then ends after exactly the detours it overlaps.
* ``random``: detours as a renewal process: the gaps between one detour's end and the next one's
  start are exponential with mean ``noise_interval_ns``, drawn per host from the seed.

Skew at a collective's entry (``skew``, ``skew_ns``): a rank enters the operation late by
``fixed``: rank x skew_ns (a staircase); ``uniform``: a whole number of ns uniform in [0, skew_ns];
``exponential``: exponential with mean skew_ns (rounded to ns). Completion time still runs from the
common start t0 (Nupairoj & Ni), so it includes the latest rank's lateness.
"""

from __future__ import annotations

import bisect
import random


def _rng(seed: int, node_id: int, what: int) -> random.Random:
    return random.Random((seed * 1_000_003 + node_id) * 31 + what)


class Noise:
    """The detours of one host's CPU."""

    __slots__ = ("kind", "P", "d", "phase", "rng", "starts", "ends", "mean")

    def __init__(self, spec, seed: int, node_id: int) -> None:
        self.kind = spec.noise
        self.d = spec.noise_duration_ns
        self.P = self.mean = spec.noise_interval_ns
        self.rng = _rng(seed, node_id, 1)
        self.phase = 0 if spec.noise_phase == "aligned" or self.kind != "periodic" else self.rng.randrange(self.P)
        self.starts: list[int] = []
        self.ends: list[int] = []

    def finish(self, t: int, work: int) -> int:
        """When ``work`` ns of CPU started at ``t`` is done, detours left out."""
        if work <= 0 or self.kind == "none":
            return t + max(work, 0)
        if self.kind == "periodic":
            return self._periodic(t, work)
        return self._random(t, work)

    def _periodic(self, t: int, w: int) -> int:
        P, d = self.P, self.d
        off = (t - self.phase) % P          # into the current period; a detour occupies [0, d)
        if off < d:                          # inside a detour: the work starts when it ends
            t += d - off
            off = d
        free = P - off                       # until the next detour
        if w <= free:
            return t + w
        w -= free
        t += free + d
        full, rem = divmod(w, P - d)
        return t + full * P - d if rem == 0 else t + full * P + rem

    def _detour(self, i: int) -> tuple[int, int]:
        while len(self.starts) <= i:
            last = self.ends[-1] if self.ends else 0
            s = last + round(self.rng.expovariate(1.0 / self.mean))
            self.starts.append(s)
            self.ends.append(s + self.d)
        return self.starts[i], self.ends[i]

    def _random(self, t: int, w: int) -> int:
        i = bisect.bisect_right(self.ends, t)
        while True:
            s, e = self._detour(i)
            if s <= t:
                t = max(t, e)
            else:
                if w <= s - t:
                    return t + w
                w -= s - t
                t = e
            i += 1

    def detours(self, t0: int, t1: int) -> list[tuple[int, int]]:
        """The detours that overlap [t0, t1) (for tests and reports)."""
        if self.kind == "none":
            return []
        if self.kind == "periodic":
            k = (t0 - self.phase - self.d) // self.P + 1
            out = []
            while self.phase + k * self.P < t1:
                out.append((self.phase + k * self.P, self.phase + k * self.P + self.d))
                k += 1
            return out
        out, i = [], 0
        while True:
            s, e = self._detour(i)
            if s >= t1:
                return out
            if e > t0:
                out.append((s, e))
            i += 1


def entry_skew_ns(spec, seed: int, node_id: int, rank: int) -> int:
    """How late rank ``rank`` (on node ``node_id``) enters a collective (``HostSpec.skew``)."""
    kind, s = spec.skew, spec.skew_ns
    if kind == "none" or s == 0:
        return 0
    if kind == "fixed":
        return rank * s
    rng = _rng(seed, node_id, 2)
    if kind == "uniform":
        return rng.randint(0, s)
    return round(rng.expovariate(1.0 / s))
