"""Indirect networks: k-ary n-trees, folded Clos networks of fixed-radix routers, two-level trees.

Common conventions. A non-top switch has down ports ``0..k-1`` and up ports ``k..2k-1``; a top
switch has only down ports. Routing is deterministic up*/down*: a frame climbs until it reaches a
switch whose subtree holds the destination, choosing the up port by *destination mod k* (at stage
``l`` the up port is digit ``l-1`` of the destination in base k), then descends on the unique path.

k-ary n-tree (Petrini & Vanneschi): ``k**n`` hosts, ``n`` stages of ``k**(n-1)`` switches of radix
2k. Host ``x`` (digits ``x_0..x_{n-1}`` base k) hangs on stage-1 switch ``x // k`` port ``x_0``. Up
port ``k + j`` of stage-``l`` switch ``w`` leads to the stage-``l+1`` switch whose index is ``w`` with
digit ``l-1`` replaced by ``j``, arriving on its down port ``w_{l-1}``.

Folded Clos of radix-r routers (QsNet): the same with ``k = r/2`` and two "halves" below the top
stage, whose routers use all r ports downward: ``r * (r/2)**(n-1)`` hosts. With ``nodes=N`` (two
stages) it is a federated network: ``S = ceil(N / (r/2))`` node switches of r/2 ports down and r/2
up, and r/2 top switches of radix S; when S is below r, several top switches are carved out of one
router (``info["router"]`` names it; each carved switch is its own element).
"""

from __future__ import annotations

import numpy as np

from emu.config import ConfigError, HostSpec, LinkSpec, SwitchSpec

from .base import NO_ROUTE, Topology


def _digits(x: int, k: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        out.append(x % k)
        x //= k
    return out


def _tree(name: str, k: int, n: int, halves: int, link: LinkSpec | None, host: HostSpec | None,
          switch: SwitchSpec | None) -> Topology:
    t = Topology(name)
    per_half = k ** n
    nh = halves * per_half
    for h in range(nh):
        t.add_host(f"h{h}", host)
    nw = k ** (n - 1)
    # switch names in order: stage 1 (half 0, then half 1), ..., top stage
    sw: dict[tuple[int, int, int], str] = {}
    i = 0
    for stage in range(1, n + 1):
        for half in ([0] if stage == n else range(halves)):
            for w in range(nw):
                sw[(stage, half, w)] = name_ = f"s{i}"
                t.add_switch(name_, switch, stage=stage, half=half, index=w, top=stage == n)
                i += 1
    # hosts to stage 1 (or straight to the top switch when n == 1)
    for h in range(nh):
        half, x = divmod(h, per_half)
        if n == 1:
            t.add_link(f"h{h}", sw[(1, 0, 0)], link, a_port=0, b_port=half * k + x)
        else:
            t.add_link(f"h{h}", sw[(1, half, x // k)], link, a_port=0, b_port=x % k)
    # stage l up port k+j -> stage l+1 switch with digit l-1 := j
    for stage in range(1, n):
        for half in range(halves):
            for w in range(nw):
                dw = _digits(w, k, n - 1)
                for j in range(k):
                    w2 = w + (j - dw[stage - 1]) * k ** (stage - 1)
                    if stage + 1 == n:
                        t.add_link(sw[(stage, half, w)], sw[(n, 0, w2)], link, a_port=k + j,
                                   b_port=half * k + dw[stage - 1])
                    else:
                        t.add_link(sw[(stage, half, w)], sw[(stage + 1, half, w2)], link, a_port=k + j,
                                   b_port=dw[stage - 1])
    # up*/down* routing with destination-mod-k on the way up (vectorised over destinations)
    d = np.arange(nh)
    dhalf, x = np.divmod(d, per_half)
    dx = np.stack([(x // k ** i) % k for i in range(n)], axis=1) if n else np.zeros((nh, 0), np.int64)
    top = (dhalf * k + dx[:, n - 1]).tolist()
    for (stage, half, w), sname in sw.items():
        if stage == n:
            t.routes[sname] = top
            continue
        dw = _digits(w, k, n - 1)
        below = dhalf == half
        for i in range(stage - 1, n - 1):
            below &= dx[:, i + 1] == dw[i]
        down = dx[:, 0] if stage == 1 else dx[:, stage - 1]
        t.routes[sname] = np.where(below, down, k + dx[:, stage - 1]).tolist()
    t.diameter = 2 * n if nh > 1 else 0
    t.bisection = nh // 2
    return t


def fattree(k: int, n: int, rails: int = 1, links: int = 1, *, link: LinkSpec | None = None,
            host: HostSpec | None = None, switch: SwitchSpec | None = None) -> Topology:
    """``fattree:k=4,n=3[,rails=2][,links=2]``: the k-ary n-tree, k**n hosts, n stages of k**(n-1)
    switches."""
    _check_int("fattree", "k", k, 2, 64)
    _check_int("fattree", "n", n, 1, 8)
    _check_int("fattree", "rails", rails, 1, 8)
    _check_int("fattree", "links", links, 1, 8)
    if rails > 1 and links > 1:
        raise ConfigError("fattree: rails and links cannot be combined; give one of them")
    if k ** n > 65536:
        raise ConfigError(f"fattree: k**n = {k ** n} hosts exceeds 65536; lower k or n")
    return _linked(_railed(_tree(f"fattree:k={k},n={n}", k, n, 1, link, host, switch), rails), links)


def _linked(t: Topology, links: int) -> Topology:
    """Several links from each node into the same network (spec 03: a node with several adapters
    or links): host h's ports 1..links-1 link to its switch too, on new ports after the switch's
    others. Routing tables keep the first link; the adaptive policies choose among them (the
    final-link choice), and the adapter stripes its packets over them."""
    if links == 1:
        return t
    t.name += f",links={links}"
    for lk in [lk for lk in t.links if t.nodes[lk.a].kind == "host" or t.nodes[lk.b].kind == "host"]:
        h, s_ = (lk.a, lk.b) if t.nodes[lk.a].kind == "host" else (lk.b, lk.a)
        for extra in range(1, links):
            t.add_link(h, s_, lk.spec, a_port=extra)
    return t


def _railed(t: Topology, rails: int) -> Topology:
    """Multi-rail (spec 03): ``rails`` separate copies of the switch network; host h's port r
    links to rail r's copy of its switch, on the same switch port as rail 0. Rail r's switches
    are numbered after rail r-1's (``info["rail"]``) and keep rail 0's tables."""
    if rails == 1:
        return t
    t.name += f",rails={rails}"
    base = list(t.switches)
    nsw = len(base)
    links = list(t.links)
    for r in range(1, rails):
        copy = {}
        for j, sw in enumerate(base):
            copy[sw.name] = f"s{j + r * nsw}"
            t.add_switch(copy[sw.name], sw.spec, **{**sw.info, "rail": r})
            t.routes[copy[sw.name]] = t.routes[sw.name]
        for lk in links:
            a_host, b_host = t.nodes[lk.a].kind == "host", t.nodes[lk.b].kind == "host"
            if a_host or b_host:
                h, hp, s_, sp = (lk.a, lk.a_port, lk.b, lk.b_port) if a_host else (lk.b, lk.b_port, lk.a, lk.a_port)
                t.add_link(h, copy[s_], lk.spec, a_port=hp + r, b_port=sp)
            else:
                t.add_link(copy[lk.a], copy[lk.b], lk.spec, a_port=lk.a_port, b_port=lk.b_port)
    for sw in base:
        sw.info["rail"] = 0
    if t.bisection is not None:
        t.bisection *= rails
    return t


def clos(radix: int, stages: int, nodes: int | None = None, rails: int = 1, links: int = 1, *,
         link: LinkSpec | None = None, host: HostSpec | None = None, switch: SwitchSpec | None = None) -> Topology:
    """``clos:radix=32,stages=2[,nodes=N][,rails=2][,links=2]``: folded Clos of radix-r routers,
    r*(r/2)**(stages-1) hosts; with ``nodes``, a smaller two-stage network with top switches carved
    out of routers."""
    _check_int("clos", "rails", rails, 1, 8)
    _check_int("clos", "links", links, 1, 8)
    if rails > 1 and links > 1:
        raise ConfigError("clos: rails and links cannot be combined; give one of them")
    return _linked(_railed(_clos(radix, stages, nodes, link, host, switch), rails), links)


def _clos(radix: int, stages: int, nodes: int | None, link, host, switch) -> Topology:
    _check_int("clos", "radix", radix, 4, 128)
    if radix % 2:
        raise ConfigError(f"clos: radix must be even (r/2 ports down, r/2 up), got {radix}")
    _check_int("clos", "stages", stages, 1, 5)
    k = radix // 2
    full = radix * k ** (stages - 1)
    if nodes is None:
        if full > 65536:
            raise ConfigError(f"clos: radix={radix}, stages={stages} gives {full} hosts, over 65536")
        return _tree(f"clos:radix={radix},stages={stages}", k, stages, 2, link, host, switch)
    if stages != 2:
        raise ConfigError(f"clos: nodes= builds a two-stage federated network; use stages=2 (got {stages})")
    _check_int("clos", "nodes", nodes, 2, radix * k)
    return _federated(radix, nodes, link, host, switch)


def _federated(radix: int, nodes: int, link, host, switch) -> Topology:
    m = radix // 2                      # ports down (and up) per node switch
    s = -(-nodes // m)                  # node switches; also the radix of each top switch
    per_router = radix // s             # top switches carved out of one router
    t = Topology(f"clos:radix={radix},stages=2,nodes={nodes}")
    for h in range(nodes):
        t.add_host(f"h{h}", host)
    for i in range(s):
        t.add_switch(f"s{i}", switch, stage=1, index=i, top=False)
    for j in range(m):
        t.add_switch(f"s{s + j}", switch, stage=2, index=j, top=True, router=f"R{j // per_router}",
                     ports=s)
    for h in range(nodes):
        t.add_link(f"h{h}", f"s{h // m}", link, a_port=0, b_port=h % m)
    for i in range(s):
        for j in range(m):
            t.add_link(f"s{i}", f"s{s + j}", link, a_port=m + j, b_port=i)
    for i in range(s):
        t.routes[f"s{i}"] = [d % m if d // m == i else m + d % m for d in range(nodes)]
    for j in range(m):
        t.routes[f"s{s + j}"] = [d // m for d in range(nodes)]
    t.diameter = 4 if s > 1 else 2
    t.bisection = m * (s // 2) if s > 1 else nodes // 2
    return t


def twolevel(ports: int, hosts: int, spines: int | None = None, *, link: LinkSpec | None = None,
             host: HostSpec | None = None, switch: SwitchSpec | None = None) -> Topology:
    """``twolevel:ports=8,hosts=64``: a two-level fat tree of switches with ``ports`` ports on each
    side: leaves take ``ports`` hosts and have one up link to each spine; ``spines`` (default
    ``ports``, full bisection) spines have one down link to each of the ceil(hosts/ports) leaves.
    With ports=8 and 64 hosts this is the 8-ary 2-tree: 8 leaves, 8 spines."""
    _check_int("twolevel", "ports", ports, 2, 128)
    _check_int("twolevel", "hosts", hosts, 2, ports * ports)
    sp = ports if spines is None else spines
    _check_int("twolevel", "spines", sp, 1, ports)
    leaves = -(-hosts // ports)
    if leaves == 1:
        sp = 0  # one leaf holds every host: no spine needed
    t = Topology(f"twolevel:ports={ports},hosts={hosts}" + (f",spines={spines}" if spines is not None else ""))
    for h in range(hosts):
        t.add_host(f"h{h}", host)
    for i in range(leaves):
        t.add_switch(f"s{i}", switch, stage=1, index=i, top=False)
    for j in range(sp):
        t.add_switch(f"s{leaves + j}", switch, stage=2, index=j, top=True)
    for h in range(hosts):
        t.add_link(f"h{h}", f"s{h // ports}", link, a_port=0, b_port=h % ports)
    if leaves > 1:
        for i in range(leaves):
            for j in range(sp):
                t.add_link(f"s{i}", f"s{leaves + j}", link, a_port=ports + j, b_port=i)
        for j in range(sp):
            t.routes[f"s{leaves + j}"] = [d // ports for d in range(hosts)]
    for i in range(leaves):
        t.routes[f"s{i}"] = [d % ports if d // ports == i else (ports + d % sp if leaves > 1 else NO_ROUTE)
                             for d in range(hosts)]
    t.diameter = 4 if leaves > 1 else 2
    t.bisection = sp * (leaves // 2) if leaves > 1 else hosts // 2
    return t


def closest_tree(radix: int, hosts: int) -> tuple[str, str]:
    """The fat tree of switches with ``radix`` ports that holds ``hosts`` hosts at full bisection,
    with the fewest levels, as (spec, one sentence saying what it is and why not two levels).

    Two levels at full bisection: a leaf gives half its ports to hosts and half to spines, and a
    spine reaches one leaf per port, so at most ``radix`` leaves of ``radix / 2`` hosts (radix^2 / 2
    hosts); any two-level tree at all holds at most ``radix`` leaves of ``radix - 1`` hosts. Above
    that, a k-ary n-tree with k = radix / 2 (every switch k ports down, k up) of the fewest levels
    n with k^n >= hosts, which the spec builds with exactly k^n hosts. (``twolevel:ports=P`` reads P
    as ports on each side: its leaves have 2P ports.)"""
    _check_int("closest_tree", "radix", radix, 4, 256)
    _check_int("closest_tree", "hosts", hosts, 2, 1 << 20)
    if radix % 2:
        raise ConfigError(f"closest_tree: a fat tree of {radix}-port switches needs an even radix")
    k = radix // 2
    if hosts <= k * radix:  # the folded Clos of two stages (``twolevel`` would need 2 x k-port leaves)
        spec = f"clos:radix={radix},stages=2" + (f",nodes={hosts}" if hosts < k * radix else "")
        return spec, (f"{hosts} hosts on two levels of {radix}-port switches at full bisection: {spec} "
                      f"(leaves of {k} hosts and {k} up links)")
    n = 2
    while k ** n < hosts:
        n += 1
    spec = f"fattree:k={k},n={n}"
    switches = n * k ** (n - 1)
    return spec, (f"two levels of {radix}-port switches hold at most {k * radix} hosts at full bisection "
                  f"({radix} leaves of {k}), {radix * (radix - 1)} at all; the closest tree for {hosts} hosts is "
                  f"{spec}: {n} levels of {radix}-port switches ({k} down, {k} up), {switches} switches, "
                  f"{k ** n} hosts, full bisection")


def _check_int(family: str, pname: str, v, lo: int, hi: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ConfigError(f"{family}: {pname} must be an integer within {lo}..{hi}, got {v!r}")
