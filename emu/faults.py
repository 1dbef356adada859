"""Faults scheduled during a run: what the CLI's ``--fault`` says and ``Cluster.schedule`` takes.

``at=20us,link=s0-s4,down`` takes the link between s0 and s4 down (both directions) 20 µs into the
test; ``at=40us,link=s0-s4,up`` brings it back; ``at=0,switch=s3,down`` takes every link of s3 down;
``at=0,link=h0-s0,ber=1e-6`` sets a seeded bit-error rate on that link. Times take ``ns``, ``us``,
``ms`` or ``s`` (plain numbers are ns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import ConfigError

ACTIONS = ("down", "up", "ber")
_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
MAX_TIME_NS = 1 << 62


def parse_time_ns(text: str) -> int:
    t = text.strip().lower()
    if not t.isascii():  # float() takes any script's digits
        raise ConfigError(f"fault time {text!r} must be written in ASCII digits (0-9), e.g. 20us")
    for unit in sorted(_UNITS, key=len, reverse=True):
        if t.endswith(unit):
            t, scale = t[: -len(unit)], _UNITS[unit]
            break
    else:
        scale = 1
    try:
        v = float(t) * scale
    except ValueError:
        raise ConfigError(f"fault time {text!r} is not a time such as 20us, 1.5ms or 300 (ns)") from None
    if not math.isfinite(v) or not 0 <= v < MAX_TIME_NS:
        raise ConfigError(f"fault time {text!r} must be within 0 and 2**62 ns")
    return int(round(v))


@dataclass(frozen=True)
class Fault:
    at_ns: int
    """Virtual time of the change (``Cluster.schedule``: absolute; the CLI: from the test's start)."""
    action: str
    """``down``, ``up`` or ``ber``."""
    link: tuple[str, str] | None = None
    switch: str | None = None
    rate: float = 0.0
    """Bit-error rate (``ber``): the probability that any one bit is flipped."""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ConfigError(f"fault action {self.action!r} is not one of {', '.join(ACTIONS)}")
        if (self.link is None) == (self.switch is None):
            raise ConfigError("a fault names exactly one of link=A-B or switch=NAME")
        if self.action == "ber" and self.link is None:
            raise ConfigError("a bit-error rate applies to a link (link=A-B,ber=RATE)")
        if not (isinstance(self.at_ns, int) and 0 <= self.at_ns < MAX_TIME_NS):
            raise ConfigError(f"fault time must be an integer number of ns within 0..2**62, got {self.at_ns!r}")
        if not (isinstance(self.rate, (int, float)) and 0.0 <= self.rate <= 1.0):
            raise ConfigError(f"bit-error rate must be within 0..1, got {self.rate!r}")

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """``at=20us,link=s0-s4,down`` (see the module docstring)."""
        at, action, link, switch, rate = None, None, None, None, 0.0
        for item in filter(None, (x.strip() for x in text.split(","))):
            key, eq, value = (x.strip() for x in item.partition("="))
            if key == "at" and eq:
                at = parse_time_ns(value)
            elif key == "link" and eq:
                ends = value.split("-")
                if len(ends) != 2 or not all(ends):
                    raise ConfigError(f"fault {text!r}: link={value} must name two nodes, e.g. link=s0-s4")
                link = (ends[0], ends[1])
            elif key == "switch" and eq:
                switch = value
            elif key == "ber" and eq:
                action = "ber"
                try:
                    if not value.isascii():  # float() takes any script's digits
                        raise ValueError
                    rate = float(value)
                except ValueError:
                    raise ConfigError(f"fault {text!r}: ber={value} is not a number") from None
            elif not eq and key in ("down", "up"):
                action = key
            else:
                raise ConfigError(f"fault {text!r}: {item!r} is not understood; write e.g. "
                                  "at=20us,link=s0-s4,down or at=0,link=h0-s0,ber=1e-6")
        if at is None or action is None:
            raise ConfigError(f"fault {text!r} needs at=TIME and one of down, up, ber=RATE, "
                              "e.g. at=20us,link=s0-s4,down")
        return cls(at, action, link, switch, rate)
