"""The table of named tests (``emu run --test NAME``) and the options every test receives
(DESIGN.md principle 8): the modules that define tests register them here when they are imported
(``emu.front.checks`` imports them all), and the runner looks them up by name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

CheckFn = Callable[[Any, "Options"], Awaitable[dict[str, Any]]]
CHECKS: dict[str, CheckFn] = {}


@dataclass(frozen=True)
class Options:
    seed: int = 0
    pingall_full_max_hosts: int = 64
    """Above this many hosts, pingall samples pairs instead of trying all of them."""
    pingall_peers: int = 4
    """Peers per host when sampling."""
    extra: dict[str, Any] = field(default_factory=dict)


def register(name: str) -> Callable[[CheckFn], CheckFn]:
    def deco(fn: CheckFn) -> CheckFn:
        CHECKS[name] = fn
        return fn
    return deco
