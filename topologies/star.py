"""``star:n=16``: n hosts on one switch."""

from __future__ import annotations

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology


def star(n: int = 16, *, link: LinkSpec | None = None, host: HostSpec | None = None,
         switch: SwitchSpec | None = None) -> Topology:
    if not isinstance(n, int) or not 2 <= n <= 4096:
        raise ConfigError(f"star: n must be an integer within 2..4096, got {n!r}")
    return star_unbounded(n, link=link, host=host, switch=switch)


def star_unbounded(n: int, *, link: LinkSpec | None = None, host: HostSpec | None = None,
                   switch: SwitchSpec | None = None) -> Topology:
    """The star of ``n`` hosts without the family's bound on ``n`` (benchmarks of very large stars)."""
    t = Topology(f"star:n={n}")
    for i in range(n):
        t.add_host(f"h{i}", host)
    t.add_switch("s0", switch)
    for i in range(n):
        t.add_link(f"h{i}", "s0", link)
    t.routes = {"s0": list(range(n))}
    t.diameter, t.bisection = 2, n // 2
    return t
