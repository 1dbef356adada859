"""HyperX (Ahn, Binkert, Davis, McLaren and Schreiber, SC 2009): an L-dimensional array of switches,
every two switches that differ in one coordinate joined directly.

``hyperx:S=4,L=2,K=1,T=2``: ``S`` switches along each of ``L`` dimensions (S**L switches), ``K``
parallel links between every two switches of a dimension (trunking), ``T`` hosts per switch.
Switch ``i`` (``s{i}``) has coordinates ``c_d = (i // S**d) % S``; host ``h{i*T + k}`` is on its
port k. Dimension d's links take ports ``T + d*(S-1)*K`` on: to the switch with coordinate x in
that dimension, ports ``+ (x or x-1, itself left out)*K + 0..K-1``.

Routing tables are dimension order (the lowest differing dimension first, one hop per dimension),
over the (destination host mod K)-th of the parallel links: at most L switch-to-switch links, so the
diameter is L + 2 links host to host. The bisection cuts dimension 0 in halves: (S/2)**2 * K links
per row of S switches, S**(L-1) rows (S odd: floor * ceil, not an exact halving).
"""

from __future__ import annotations

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import Topology
from .trees import _check_int


def hyperx(S: int, L: int, K: int = 1, T: int = 1, *, link: LinkSpec | None = None, host: HostSpec | None = None,
           switch: SwitchSpec | None = None) -> Topology:
    """``hyperx:S=4,L=2,K=1,T=2`` (see the module's text)."""
    _check_int("hyperx", "S", S, 2, 64)
    _check_int("hyperx", "L", L, 1, 4)
    _check_int("hyperx", "K", K, 1, 8)
    _check_int("hyperx", "T", T, 1, 64)
    n = S ** L
    if n * T > 65536:
        raise ConfigError(f"hyperx: S**L*T = {n * T} hosts exceeds 65536; lower S, L or T")
    link = link or LinkSpec()
    t = Topology(f"hyperx:S={S},L={L},K={K},T={T}")
    coords = [tuple((i // S ** d) % S for d in range(L)) for i in range(n)]
    for i in range(n * T):
        t.add_host(f"h{i}", host, coords=coords[i // T])
    for i in range(n):
        t.add_switch(f"s{i}", switch, coords=coords[i], hyperx=(S, L, K, T), host_ports=T)

    def port(c: tuple, d: int, x: int, k: int) -> int:
        return T + d * (S - 1) * K + (x if x < c[d] else x - 1) * K + k

    for i in range(n * T):
        t.add_link(f"h{i}", f"s{i // T}", link, a_port=0, b_port=i % T)
    for i in range(n):
        c = coords[i]
        for d in range(L):
            for x in range(c[d] + 1, S):
                j = i + (x - c[d]) * S ** d
                for k in range(K):
                    t.add_link(f"s{i}", f"s{j}", link, a_port=port(c, d, x, k), b_port=port(coords[j], d, c[d], k))
    for i in range(n):
        c = coords[i]
        row = []
        for dst in range(n * T):
            cd = coords[dst // T]
            d = next((d for d in range(L) if cd[d] != c[d]), None)
            row.append(dst % T if d is None else port(c, d, cd[d], dst % K))
        t.routes[f"s{i}"] = row
    t.diameter = L + 2
    t.bisection = (S // 2) * (S - S // 2) * K * S ** (L - 1)
    t.figures = {"cables_host": n * T, "cables_switch": L * S ** (L - 1) * S * (S - 1) // 2 * K}
    return t
