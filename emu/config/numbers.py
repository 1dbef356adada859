"""Numbers as people write them in text: decimal, everywhere.

One rule for every number given as text -- ``--set`` values and string values of a ``--config``
file, topology spec parameters (``star:n=8``), ``--size``, ``--fault`` times and rates, and the
numeric options of ``emu run`` and ``emu mpirun``: ASCII decimal digits, an optional sign, and for a
number that may have a fraction a decimal point and an exponent (``1.5``, ``1e-6``). Refused, with
the decimal spelling as the hint: Python's other spellings -- ``0x10``, ``0o20``, ``0b10`` (a base
prefix) and ``1_000`` (digit grouping) -- and digits of other scripts (``int('٤')`` is 4). A TOML
file's own integers (``latency_ns = 0x10``, ``bandwidth_bps = 25_000_000_000``) are not text: TOML
reads them, and they are taken as the numbers they are.
"""

from __future__ import annotations

import re

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PREFIXED = re.compile(r"([+-]?)0([xXoObB])([0-9a-fA-F_]+)")


def decimal_int(text: str) -> int:
    """``text`` as an integer written in decimal digits (ValueError otherwise)."""
    t = text.strip()
    if not _INT.fullmatch(t):
        raise ValueError(f"not a decimal integer: {text!r}")
    return int(t)


def decimal_float(text: str) -> float:
    """``text`` as a decimal number (``2``, ``0.5``, ``1e-6``; ValueError otherwise: no ``inf``,
    ``nan``, base prefixes or ``_``)."""
    t = text.strip()
    if not _FLOAT.fullmatch(t):
        raise ValueError(f"not a decimal number: {text!r}")
    return float(t)


def is_decimal(text: str, fraction: bool = True) -> bool:
    """Whether ``text`` is written as :func:`decimal_float` (or, without ``fraction``, :func:`decimal_int`) reads it."""
    return bool((_FLOAT if fraction else _INT).fullmatch(text.strip()))


def hint(text: str) -> str:
    """What to write instead, for a number in another spelling (``"; numbers are decimal: write 16, not
    0x10"``), or ``""``. For the end of a refusal's one line."""
    t = str(text).strip()
    if not t.isascii():
        return "; numbers are written in ASCII digits (0-9)"
    if len(t) > 40:
        return "; numbers are decimal (no 0x, 0o or 0b prefix, no '_')" if _PREFIXED.fullmatch(t) or "_" in t else ""
    m = _PREFIXED.fullmatch(t)
    if m:
        try:
            return f"; numbers are decimal: write {int(t, 0)}, not {t}"
        except ValueError:
            return "; numbers are decimal (no 0x, 0o or 0b prefix)"
    if "_" in t and is_decimal(t.replace("_", "")):
        return f"; numbers are written without '_': {t.replace('_', '')}, not {t}"
    return ""


BYTES = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "kb": 10**3, "mb": 10**6,
         "gb": 10**9, "tb": 10**12, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
"""Sizes: KiB.. powers of 2, KB.. powers of 10, a bare K, M, G powers of 2 (as nccl-tests reads them)."""
TIMES_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
RATES_BPS = {"bps": 1, "kbps": 10**3, "mbps": 10**6, "gbps": 10**9, "tbps": 10**12, "bit/s": 1, "kbit/s": 10**3,
             "mbit/s": 10**6, "gbit/s": 10**9, "tbit/s": 10**12}
UNITS = {"_ns": ("a time", TIMES_NS), "_bytes": ("a size", BYTES), "_bps": ("a bit rate", RATES_BPS)}
"""The units a field takes by the unit in its name (``link.latency_ns=1us``, ``link.bandwidth_bps=100Gbps``,
``host.mtu_bytes=4KiB``)."""
_WITH_UNIT = re.compile(r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([A-Za-zµ/]+)")


def with_unit(field: str, text: str) -> float | None:
    """``text`` with a unit its ``field`` takes (by the field name's suffix: :data:`UNITS`) as a number
    in the field's own unit (``1.5us`` for a ``_ns`` field: 1500.0); None when ``text`` carries no
    unit. ValueError naming the units when it carries one the field does not take."""
    m = _WITH_UNIT.fullmatch(text.strip())
    if not m:
        return None
    number, unit = m.groups()
    for suffix, (what, table) in UNITS.items():
        if field.endswith(suffix):
            scale = table.get(unit.lower()) if unit != "µs" else table.get(unit)
            if scale is None:
                raise ValueError(f"{unit!r} is not a unit of {what}: give one of {', '.join(table)}")
            return float(number) * scale
    raise ValueError(f"{field} takes a plain number (only fields ending in {', '.join(UNITS)} take units)")
