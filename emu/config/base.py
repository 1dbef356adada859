"""What every spec uses: the error a refused setting raises, and the check of a delay."""

from __future__ import annotations


class ConfigError(ValueError):
    """A topology or parameter is refused before anything starts; the message names the fix."""


HORIZON_NS = 1 << 62
"""The end of virtual time: an event at or after it never happens (the elements' ``INF``). A time a
person gives (a fault's ``at=``, a host's sleep) must fall before it; it is refused otherwise."""
MAX_DELAY_NS = 10**12
"""Largest delay a spec may give (1000 s of virtual time): far from overflowing 64-bit time stamps."""


def _check_delays(cls: str, spec, names: tuple[str, ...]) -> None:
    for f in names:
        v = getattr(spec, f)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_DELAY_NS:
            raise ConfigError(f"{cls}.{f} must be an integer within 0..10**12, got {v!r}")

