"""Sizes as people write them on the command line (``64KiB``)."""

from __future__ import annotations

import re

from ..config import ConfigError
from ..config.numbers import BYTES, hint


def parse_size(text: str) -> int:
    """'64KiB' -> 65536; accepts B, KiB, MiB, GiB (powers of 2), KB, MB, GB (powers of 10), a bare
    K, M or G as nccl-tests and the OSU benchmarks read it (powers of 2: ``64K`` is 64 KiB), or a plain
    number of bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?B|[KMG]|B)?\s*", str(text), re.I | re.ASCII)  # ASCII digits only
    if not m:
        number = re.sub(r"\s*([KMG]i?B|[KMG]|B)\s*$", "", str(text).strip(), flags=re.I)
        raise ConfigError(f"size {text!r} is not a number of bytes such as 64KiB (65536), 64KB (64000), 64K "
                          f"(64 KiB, as nccl-tests reads it) or 4096{hint(number)}")
    return int(m.group(1)) * BYTES[(m.group(2) or "B").lower()]
