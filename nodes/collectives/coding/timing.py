"""Spec 02's execution time, measured and modelled, from one run of a plan.

**Measured** (``measured``): every unicast carries its injection time (when its sender had the packet;
an encoded packet's, when its encoding began) and its receiver files its latency under its sequential
step: the plan's (phase, round) (``Plan.rounds``). A step is a round of a multicast inside a phase:
the coordinate-aware tree takes log2(d + 1) rounds, all-at-once one; the phases are spec 02's: B with
F, then C+D, then E, then G (decoding, from a node's last packet in to its last packet decoded); a
baseline is one phase of its multicast's rounds. ``execution_ns`` is the sum over the steps of each
step's longest packet latency (plus G's longest), ``packet_latency_mean_ns`` the mean over every
unicast, ``end_to_end_ns`` the source's "execution cycles" (first injection to the last node done).

**Modelled** (``model``): each step's critical path from the run's own parameters, on the same plan:
a unicast of ``h`` router hops takes, unloaded (``_zero_load``), on the output-queued router ``nic +
(h + 1) router + (h + 2) link + ser`` (cut-through: the serialisation ``ser`` once; store-and-forward:
at every one of the ``h + 2`` links), on the input-queued one ``nic + (h + 1) (head in + link +
pipeline stages) + ser + link``; and it
waits behind the other packets of its step at the one resource that has the most of them: its sender's
injection channel, its receiver's ejection channel, or the busiest router link on its path (``(n - 1)
ser``; on the input-queued router a router input passes one frame of a VC at a time, ``(n - 1)
(stages + ser) / V``: head-of-line in each of the V VCs of the step's class); an encoded packet also waits for the XOR unit of its IN (``(M - 1) xor`` for a group's chain)
and G is one chain's cascade (``(M - 1) xor``). On the output-queued router buffers are unbounded, so
no VC stalls (a step's VC is its own: steps do not block each other's buffers); the model says which
resource binds each step.
The model assumes the steps run one after another, the emulation runs them as data allows, so a
packet can also wait behind another step's (the measured figure is then above the model).
"""

from __future__ import annotations

from collections import Counter

from .layout import Step

PHASE_NAMES = {0: "B+F", 1: "C+D", 2: "E", 4: "C+D (outer)", 5: "E (outer)"}


def phase_name(plan, phase: int) -> str:
    if plan.scheme.algo in ("tree", "all_at_once"):
        return plan.scheme.algo
    if plan.scheme.algo == "nc_recursive" and phase in (1, 2):
        return PHASE_NAMES[phase] + " (inner)"
    return PHASE_NAMES[phase]


def measured(plan, stats: list[dict]) -> dict:
    """Spec 02's figures from every node's per-run statistics (``comm.nc_stats``)."""
    steps: dict[tuple[int, int], int] = {}
    for st in stats:
        for where, v in st["latency_max"].items():
            steps[where] = max(steps.get(where, 0), v)
    coded = plan.scheme.algo not in ("tree", "all_at_once")
    decode = max(st["decode_ns"] for st in stats) if coded else 0
    received = sum(sum(st["received"].values()) for st in stats)
    return {"execution_ns": sum(steps.values()) + decode,
            "packet_latency_mean_ns": round(sum(st["latency_sum"] for st in stats) / max(1, received), 1),
            "end_to_end_ns": max(st["done_ns"] for st in stats) - min(st["first_ns"] for st in stats),
            "steps": {f"{phase_name(plan, p)} r{r}": v for (p, r), v in sorted(steps.items())}
            | ({"G": decode} if coded else {})}


def model(plan, spec, frame_bytes: int, inject_ports: int = 1, in_router: bool = False, eject_ports: int = 1,
          route=None) -> dict:
    """Each step's modelled longest latency were it run alone (the source's execution model: its
    steps one after another) and the resource that binds it. ``spec``: (host, link, switch) specs of
    the run. The source's plausible assumptions: ``inject_ports`` -- every node injects on that many
    channels at once (``mesh:...,ports=P`` emulates it; its packets queue ``ceil(n / P) - 1`` deep,
    not ``n - 1``), ``eject_ports`` likewise for ejection (modelled only); ``in_router`` -- the intermediate nodes encode and relay in their routers, so their packets
    leave and enter over the router's 2n network ports and never cross the host link. ``route``: ``(a,
    b) -> [links]``, the router-to-router links a unicast crosses (default: dimension-order on the
    plan's grid; on an indirect network, the topology's routes: ``indirect.route_links``)."""
    host, link, switch = spec
    g = plan.grid
    walk = route or (lambda a, b: _path(g, a, b))
    ser = -(-8_000_000_000 * frame_bytes // link.bandwidth_bps)
    zero_load = _zero_load(host, link, switch, frame_bytes, ser)
    # the spacing of two packets of one step through one router input (from the node or a link): the
    # line (ser); on the input-queued router, the input VC they share (each step has its own VC
    # class) routes only its head frame, so the one behind starts its pipeline when the one ahead left
    # (head-of-line: stages + ser per frame), shared among the VCs of the class group
    iq = getattr(switch, "model", "output_queued") == "input_queued"
    per_group = max(1, switch.vcs // switch.vc_groups) if iq else 1  # VCs a frame of one class may take
    spacing = max(ser, -(-(sum(switch.stages_ns) + ser) // per_group)) if iq else ser
    ins = set(plan.ins) if in_router else set()
    by_step: dict[tuple[int, int], list] = {}
    for (src, dst, key), where in plan.rounds.items():
        by_step.setdefault(where, []).append((src, dst, key))
    out, why = {}, {}
    M = len(plan.groups[0]) if plan.groups else 1
    for where in sorted(by_step):
        us = by_step[where]
        inj = Counter(s for s, _d, _k in us)
        ej = Counter(d for _s, d, _k in us)
        load: Counter = Counter()
        paths = {}
        for s, d, k in us:
            p = walk(s, d)
            paths[(s, d, k)] = p
            load.update(p)
        best, bind = 0, ""
        for s, d, k in us:
            zero = zero_load(len(paths[(s, d, k)]), s in ins, d in ins)
            q = {"injection at node": -(-inj[s] // (2 * g.n if s in ins else inject_ports)) - 1,
                 "ejection at node": -(-ej[d] // (2 * g.n if d in ins else eject_ports)) - 1,
                 "link": max((load[lk] for lk in paths[(s, d, k)]), default=1) - 1}
            cost = {"injection at node": q["injection at node"] * spacing,
                    "ejection at node": q["ejection at node"] * ser,
                    "link": q["link"] * spacing}
            res = max(cost, key=cost.get)
            wait = cost[res]
            if k[0] == "x" and where[1] == 0 and _step_of(plan, s, k) == Step.D:
                wait += (M - 1) * host.xor_ns  # the IN's chain: one XOR at a time
            if zero + wait > best:
                best, bind = zero + wait, _bind(res, q[res], s, d, inj[s], ej[d], paths[(s, d, k)], load)
        out[where], why[where] = best, bind
    coded = plan.scheme.algo not in ("tree", "all_at_once")
    decode = (M - 1) * host.xor_ns if coded and plan.scheme.algo != "combine" else 0
    return {"execution_ns": sum(out.values()) + decode,
            "steps": {f"{phase_name(plan, p)} r{r}": v for (p, r), v in out.items()} | ({"G": decode} if coded else {}),
            "binds": {f"{phase_name(plan, p)} r{r}": w for (p, r), w in why.items()},
            "ser_ns": ser, "link_spacing_ns": spacing}


def _zero_load(host, link, switch, frame_bytes: int, ser: int):
    """The unloaded latency of a unicast of h router hops, from its sender having it to its receiver's
    NIC having it, under the run's router model; an in-router IN at either end skips its host link
    (and, as the sender, the NIC's delay)."""
    lat = link.latency_ns
    if getattr(switch, "model", "output_queued") == "input_queued":
        # a frame's head (cut-through) or the whole frame comes in, then the router's pipeline stages
        route = switch.processing_delay_ns if switch.route_ns < 0 else switch.route_ns
        stages = route + switch.vc_alloc_ns + switch.sw_alloc_ns + switch.traversal_ns
        head = -(-8_000_000_000 * min(frame_bytes, switch.flit_bytes) // link.bandwidth_bps)
        per_router = (head if switch.cut_through else ser) + lat + stages

        def zero(h: int, src_in: bool, dst_in: bool) -> int:
            return (0 if src_in else host.nic_delay_ns) + (h + 1) * per_router + ser + lat \
                - (ser + lat) * (src_in + dst_in)
        return zero
    per_link = lat + (0 if switch.cut_through else ser)

    def zero(h: int, src_in: bool, dst_in: bool) -> int:
        return (0 if src_in else host.nic_delay_ns) + (h + 1) * switch.processing_delay_ns \
            + (h + 2 - src_in - dst_in) * per_link + (ser if switch.cut_through else 0)
    return zero


def _bind(res: str, wait: int, s: int, d: int, inj: int, ej: int, path, load) -> str:
    """What binds a step's critical path, in words."""
    if not wait:
        return "unloaded"
    if res == "link":
        a, b = max(path, key=lambda lk: load[lk])
        return f"router link {a}->{b} ({load[(a, b)]} packets)"
    return f"injection at node {s} ({inj} packets)" if res.startswith("inj") else f"ejection at node {d} ({ej} packets)"


def _step_of(plan, node: int, key) -> int:
    for step, _lvl, _dst, _root in plan.rules.get(node, {}).get(key, ()):
        return step
    return -1


def _path(g, a: int, b: int) -> list[tuple[int, int]]:
    """The router links (from, to) a dimension-order unicast from a to b crosses."""
    ca, cb = list(g.coords(a)), g.coords(b)
    out = []
    for d in range(g.n):
        while ca[d] != cb[d]:
            diff = (cb[d] - ca[d]) % g.k if g.wrap else cb[d] - ca[d]
            up = (diff <= g.k - diff) if g.wrap else diff > 0
            nxt = list(ca)
            nxt[d] = (ca[d] + (1 if up else -1)) % g.k
            out.append((g.index(ca), g.index(nxt)))
            ca = nxt
    return out


def figures(topology, stats: list[dict]) -> dict:
    """What ``emu run --test mcast_all`` (and ``mcast``) reports of a NIC-run broadcast: the measured
    ``execution_ns`` (spec 02's: sum over the sequential steps of each step's longest packet latency),
    ``packet_latency_mean_ns``, ``end_to_end_ns``, and beside them the model's ``model_execution_ns``,
    per step (``steps``, ``model_steps``) and what binds each step (``model_binds``). ``stats``: every
    rank's ``comm.nc_stats``."""
    from emu.topologies.grid import grid_of
    from emu.wire import PacketType
    from emu.wire.coding import NC

    from .plan import plan as make_plan

    from .indirect import line, route_links

    grid = grid_of(topology)
    p = make_plan(grid or line(len(topology.hosts)), stats[0]["scheme"])
    me = measured(p, stats)
    specs = (topology.hosts[0].spec, topology.links[0].spec, topology.switches[0].spec)
    mo = model(p, specs, specs[1].frame_bytes(PacketType.NC, NC.size + stats[0]["bytes"]),
               inject_ports=topology.nports(topology.hosts[0].name) if grid else 1,
               route=None if grid else route_links(topology))
    return {"execution_ns": me["execution_ns"], "model_execution_ns": mo["execution_ns"],
            "packet_latency_mean_ns": me["packet_latency_mean_ns"], "end_to_end_ns": me["end_to_end_ns"],
            "steps": me["steps"], "model_steps": mo["steps"], "model_binds": mo["binds"]}
