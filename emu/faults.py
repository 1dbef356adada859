"""Faults scheduled during a run: what the CLI's ``--fault`` says and ``Cluster.schedule`` takes.

``at=20us,link=s0-s4,down`` takes the link between s0 and s4 down (both directions) 20 µs into the
test; ``at=40us,link=s0-s4,up`` brings it back; ``at=0,switch=s3,down`` takes every link of s3 down;
``at=0,link=h0-s0,ber=1e-6`` sets a seeded bit-error rate on that link. Times take ``ns``, ``us``,
``ms`` or ``s`` (plain numbers are ns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .config import HORIZON_NS, ConfigError
from .config.numbers import decimal_float, hint, is_decimal

ACTIONS = ("down", "up", "ber")
_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
MAX_TIME_NS = HORIZON_NS
"""A fault strikes before the end of virtual time (``emu.config.HORIZON_NS``, 2**62 ns)."""


def parse_time_ns(text: str) -> int:
    """``20us`` -> 20000: a decimal number (``emu.config.numbers``) and a unit, exact (a whole number
    of ns is not rounded through a float), refused at or past the end of virtual time."""
    t = text.strip().lower()
    if not t.isascii():  # float() takes any script's digits
        raise ConfigError(f"fault time {text!r} must be written in ASCII digits (0-9), e.g. 20us")
    for unit in sorted(_UNITS, key=len, reverse=True):
        if t.endswith(unit):
            t, scale = t[: -len(unit)].strip(), _UNITS[unit]
            break
    else:
        scale = 1
    if not is_decimal(t) or len(t) > 64:
        raise ConfigError(f"fault time {text!r} is not a time such as 20us, 1.5ms or 300 (ns){hint(t)}")
    v = float(t) * scale
    if v >= 2**53 and math.isfinite(v):  # exact where a float is not: 4611686018427387903 stays itself, not 2**62
        v = Fraction(t) * scale  # (cheap: at most 64 characters of a number below 2**64)
    if not (math.isfinite(v) and 0 <= v < MAX_TIME_NS):
        raise ConfigError(f"fault time {text!r} must be within 0 and 2**62 ns (the end of virtual time)")
    return round(v)


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
            raise ConfigError(f"fault time must be an integer number of ns within 0..2**62-1, before the end of "
                              f"virtual time, got {self.at_ns!r}")
        if not (isinstance(self.rate, (int, float)) and 0.0 <= self.rate <= 1.0):
            raise ConfigError(f"bit-error rate must be within 0..1, got {self.rate!r}")

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """``at=20us,link=s0-s4,down`` (see the module docstring)."""
        at, action, link, switch, rate = None, None, None, None, 0.0
        seen: dict[str, str] = {}  # key (an action: "action") -> the item that gave it
        for item in filter(None, (x.strip() for x in text.split(","))):
            key, eq, value = (x.strip() for x in item.partition("="))
            if key in ACTIONS or key in ("at", "link", "switch"):
                _refuse_twice(text, seen, "action" if key in ACTIONS else key, item)
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
                    rate = decimal_float(value)
                except ValueError:
                    raise ConfigError(f"fault {text!r}: ber={value} is not a number{hint(value)}") from None
            elif not eq and key in ("down", "up"):
                action = key
            else:
                raise ConfigError(f"fault {text!r}: {item!r} is not understood; write e.g. "
                                  "at=20us,link=s0-s4,down or at=0,link=h0-s0,ber=1e-6")
        if at is None or action is None:
            raise ConfigError(f"fault {text!r} needs at=TIME and one of down, up, ber=RATE, "
                              "e.g. at=20us,link=s0-s4,down")
        return cls(at, action, link, switch, rate)


def _refuse_twice(text: str, seen: dict[str, str], key: str, item: str) -> None:
    """One fault is one change at one time on one place: a key given twice, or two actions, is refused
    (the second would silently win)."""
    first = seen.get(key)
    if first is None:
        seen[key] = item
        return
    if key == "action":
        if first == item:
            raise ConfigError(f"fault {text!r} gives {item} twice; once is enough")
        raise ConfigError(f"fault {text!r} gives two changes, {first} and {item}; one --fault is one change: "
                          f"give one --fault each, e.g. --fault at=20us,link=s0-s4,down --fault at=40us,link=s0-s4,up")
    raise ConfigError(f"fault {text!r} gives {key}= twice ({first}, {item}); one --fault is one change at one time "
                      "on one link or switch: give one --fault each")
