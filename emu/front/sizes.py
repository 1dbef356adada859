"""Sizes as people write them on the command line (``64KiB``)."""

from __future__ import annotations

import re

from ..config import ConfigError


def parse_size(text: str) -> int:
    """'64KiB' -> 65536; accepts B, KiB, MiB, GiB, KB, MB (powers of 10) or a plain number of bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?B|B)?\s*", str(text), re.I | re.ASCII)  # ASCII digits only
    if not m:
        raise ConfigError(f"size {text!r} is not a number of bytes such as 64KiB, 1MiB or 4096")
    unit = (m.group(2) or "B").lower()
    scale = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}[unit]
    return int(m.group(1)) * scale
