#!/usr/bin/env python3
"""Spec 02's measurements: hierarchical XOR network coding for broadcast on meshes and tori.

    python scripts/nc_broadcast.py [--analytic-k 4,8,16,32,64] [--measured-k 4,8,16] [--sweep-k 8]
                                   [--flits 1,2,4,8,16] [--xor 0,1,5,15,35] [--sources 2,4,...,256]
                                   [--parts size,groups,...] [--out results/nc_broadcast/]

Counting (``nodes/collectives/coding/hops.py``): a hop is a router-to-router link under dimension-order
routing; host links are not hops; every unicast counts (IN to its own group, tree relays); the floor
of any unicast broadcast from S sources is S (N - 1) receptions and as many hops, printed beside.
Measured hops come from the frames of an emulated run (link crossings minus the two host links of
each unicast) and are checked equal to the analytic count.

Parts (each a table, and a PNG when matplotlib is there):

* ``size``: aggregate hops vs network size, k-ary 2-mesh and 2-torus, k = --analytic-k (analytic)
  and --measured-k (emulated, checked equal), tree / all-at-once / coded (planner's shape);
* ``groups``: the group-shape sweep on the 16-ary 2-mesh (the planner's table);
* ``time``: execution time and packet latency, emulated, vs network size (--measured-k), packet
  length (--flits, on --sweep-k) and XOR cost (--xor cycles): the source's router model -- 1 ns
  cycles, 3 header cycles per hop (``emu.switch.processing_delay_ns``), virtual cut-through, a 1-cycle
  link, 64-byte flits (one flit per cycle: 512 Gbit/s; a packet's 24 bytes of headers -- the coding
  header and the head-flit header, ``link.framing=flit`` -- ride in its first flit, so an L-flit packet
  carries 64 L - 24 payload bytes; the emulator's envelope takes no wire time), 4 VCs (8 with dateline pairs on
  tori), unbounded buffers. Execution time = the sum over the sequential phases (B with F, then C+D,
  then E, then G) of the phase's largest latency: a packet's latency runs from its multicast leaving
  the root (relays keep the root's stamp; an encoded packet's from when its encoding began) to its
  arrival; G's from a node's last packet in to its last packet decoded. Also the largest end-to-end
  time (the last node done) and the mean packet latency;
* ``sources``: many-to-all from S sources (evenly spread) on the 16-ary 2-mesh, analytic and
  emulated, with the planner's group shape for those sources (and the all-to-all's, 16x4);
* ``variants``: coding vs every-node-encodes vs recursive coding vs message combining (hops,
  packet-hops, execution time) on the k-ary 2-meshes of --variants-k;
* ``why``: every scheme on the same NICs, measured beside the model of each step's critical path
  (``emu.nodes.collectives.coding.timing``) with one and four injection channels per node, the model's
  what-ifs of the source's assumptions, and what binds each scheme (--why-k, default 8 and 16).
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import time

import numpy as np
import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import pyplot, write_csv  # noqa: E402

HEADERS = 16 + 8  # the coding header and the mesh's 8-byte head-flit header (``link.framing=flit``)
FLIT = 64


ROUTER = ["output_queued"]
"""The router model the runs pin (``--router``): the model of ``timing`` is exact for the output-queued
one in the unloaded case; the input-queued one adds VC allocation and head-of-line blocking."""


def router_settings(cut_through: bool = True, xor_ns: int = 1, torus: bool = False) -> dict:
    return {"switch": {"model": ROUTER[0], "processing_delay_ns": 3, "cut_through": cut_through,
                       "vcs": 8 if torus else 4, "vc_policy": "class_dateline" if torus else "by_class"},
            "link": {"latency_ns": 1, "bandwidth_bps": FLIT * 8 * 10**9},
            "host": {"nic_delay_ns": 1, "xor_ns": xor_ns}}


async def app(host, algo, shape, mcast, size, sources):
    from emu.nodes.collectives.coding.plan import Scheme
    from emu.nodes.collectives.coding.run import broadcast
    from emu.nodes.collectives.comm import Comm

    c = Comm(host)
    x = np.random.default_rng([c.rank, size]).integers(0, 256, size, dtype=np.uint8)
    y = await broadcast(c, x, Scheme(algo, shape, mcast, sources))
    return y, c.nc_stats


async def emulate(family: str, k: int, algo: str, *, shape=None, mcast="tree", flits=1, xor_ns=1, sources=None,
                  cut_through=True, ports=1, whatifs=(), direct=False, with_model=True) -> dict:
    """One emulated broadcast, checked bit for bit and its hops against the analytic count; ``direct``:
    frames between the elements of this one process go in memory (``emu.Cluster(direct=True)``: the
    same figures, less wall time); ``with_model``: the critical-path model beside it (its cost grows
    with the unicasts' paths: skip it for the largest runs)."""
    import emu
    from emu.nodes.collectives.coding import Scheme, count, plan
    from emu.nodes.collectives.coding.timing import measured, model
    from emu.topologies import build
    from emu.topologies.grid import Grid

    size = FLIT * flits - HEADERS
    t = build(f"{family}:k={k},n=2" + (f",ports={ports}" if ports > 1 else ""),
              settings=router_settings(cut_through, xor_ns, family == "torus"))
    grid = Grid(k, 2, family == "torus")
    wall = time.perf_counter()
    async with emu.Cluster(t, direct=direct) as net:
        res = await net.run({h: (app, algo, shape, mcast, size, sources) for h in net.hosts})
        m = net.metrics
    wall = time.perf_counter() - wall
    srcs = sorted(sources) if sources else list(range(grid.size))
    ref = np.stack([np.random.default_rng([r, size]).integers(0, 256, size, dtype=np.uint8) for r in srcs])
    assert all(res[h][0].tobytes() == ref.tobytes() for h in t.host_names()), f"{family} k={k} {algo}: not decoded"
    c = count(grid, Scheme(algo, shape, mcast, tuple(sources) if sources else None))
    measured_hops = m.hop_count - 2 * m.frames
    assert measured_hops == c.total and m.frames == c.total_unicasts, \
        f"{family} k={k} {algo}: hops {measured_hops} != {c.total}"
    stats = [res[h][1] for h in t.host_names()]
    p = plan(grid, Scheme(algo, shape, mcast, tuple(sources) if sources else None))
    me = measured(p, stats)
    specs = (t.hosts[0].spec, t.links[0].spec, t.switches[0].spec)
    mo = model(p, specs, size + HEADERS, inject_ports=ports) if with_model else {"execution_ns": "", "steps": {}, "binds": {}}
    what = {name: model(p, specs, size + HEADERS, **kw)["execution_ns"] for name, kw in whatifs}
    return dict(family=family, k=k, nodes=grid.size, algo=algo, shape="x".join(map(str, p.scheme.shape or ())),
                mcast=mcast, flits=flits, xor_cycles=xor_ns, sources=len(srcs), hops=measured_hops, analytic=c.total,
                floor=len(srcs) * (grid.size - 1), unicasts=m.frames, packet_hops=c.packet_hops,
                exec_ns=me["execution_ns"], model_ns=mo["execution_ns"],
                phase_ns="/".join(f"{v}" for v in _phases(me["steps"]).values()),
                model_phase_ns="/".join(f"{v}" for v in _phases(mo["steps"]).values()),
                end_to_end_ns=me["end_to_end_ns"], mean_latency_ns=me["packet_latency_mean_ns"],
                completion_ns=max(s["done_ns"] for s in stats) - min(s["first_ns"] for s in stats),
                steps=me["steps"], model_steps=mo["steps"], binds=mo["binds"], wall_s=round(wall, 2), **what)


def _phases(steps: dict) -> dict:
    """Per phase (B+F, C+D, E, G; a baseline's one), the sum of its rounds."""
    out: dict = {}
    for name, v in steps.items():
        ph = name.rsplit(" r", 1)[0]
        out[ph] = out.get(ph, 0) + v
    return out


def em(*args, **kw) -> dict:
    """One emulated run (``emulate``) from synchronous code."""
    return trio.run(functools.partial(emulate, *args, **kw))


def _shape(grid, algo, shape):
    from emu.nodes.collectives.coding import Scheme

    sc = Scheme(algo, shape).check(grid)
    return sc.shape or ()


def show(rows: list[dict], cols: tuple[str, ...]) -> None:
    w = {c: max(len(c), *(len(f"{r.get(c, '')}") for r in rows)) + 1 for c in cols}
    print(" ".join(f"{c:>{w[c]}}" for c in cols))
    for r in rows:
        print(" ".join(f"{r.get(c, '')!s:>{w[c]}}" for c in cols), flush=True)


def part_size(a, out, plt) -> list[dict]:
    from emu.nodes.collectives.coding import Scheme, count
    from emu.nodes.collectives.coding.planner import best_shape
    from emu.topologies.grid import Grid

    rows = []
    for family in ("mesh", "torus"):
        for k in a.analytic_k:
            g = Grid(k, 2, family == "torus")
            shape = best_shape(g)
            r = dict(family=family, k=k, nodes=g.size, floor=g.size * (g.size - 1), shape="x".join(map(str, shape)))
            for algo in ("tree", "all_at_once", "nc"):
                r[algo] = count(g, Scheme(algo, shape if algo == "nc" else None)).total
            r["nc/tree"] = round(r["nc"] / r["tree"], 3)
            if k in a.measured_k:
                for algo in ("tree", "nc"):
                    m = em(family, k, algo)
                    r[f"{algo}_measured"] = m["hops"]
            rows.append(r)
    print("\n== aggregate router hops (analytic; measured from frames where emulated: equal by assertion) ==")
    show(rows, ("family", "k", "nodes", "floor", "tree", "all_at_once", "nc", "shape", "nc/tree", "tree_measured",
                "nc_measured"))
    write_csv(out / "nc_hops_by_size.csv", rows)
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for family, ls in (("mesh", "-"), ("torus", "--")):
            fr = [r for r in rows if r["family"] == family]
            for algo in ("tree", "all_at_once", "nc", "floor"):
                ax.plot([r["nodes"] for r in fr], [r[algo] for r in fr], ls, marker="o", label=f"{algo} ({family})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes (k-ary 2-cube)")
        ax.set_ylabel("aggregate router hops")
        ax.legend(fontsize=7)
        ax.set_title("all-to-all broadcast: hops vs size")
        fig.tight_layout()
        fig.savefig(out / "nc_hops_by_size.png", dpi=120)
    return rows


def part_groups(a, out, plt) -> list[dict]:
    from emu.nodes.collectives.coding.planner import report, table
    from emu.topologies.grid import Grid

    g = Grid(16, 2, False)
    print("\n== group-size sweep on the 16-ary 2-mesh (the planner) ==")
    print(report(g))
    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in table(g)]
    write_csv(out / "nc_groups_16mesh.csv", rows)
    if plt is not None:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        rs = sorted(rows, key=lambda r: (r["members"], r["shape"]))
        ax.bar(range(len(rs)), [r["hops"] for r in rs])
        ax.axhline(256 * 255, color="k", ls=":", label="floor N(N-1)")
        ax.set_xticks(range(len(rs)), [r["shape"] for r in rs], rotation=60, fontsize=7)
        ax.set_ylabel("aggregate router hops")
        ax.set_title("coded all-to-all on the 16-ary 2-mesh by group shape")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "nc_groups_16mesh.png", dpi=120)
    return rows


TIME_COLS = ("family", "k", "algo", "shape", "flits", "xor_cycles", "hops", "floor", "exec_ns", "phase_ns",
             "end_to_end_ns", "mean_latency_ns", "wall_s")


def part_time(a, out, plt) -> list[dict]:
    rows = []
    for family in ("mesh", "torus"):
        for k in a.measured_k:
            for algo in ("tree", "all_at_once", "nc"):
                rows.append(em(family, k, algo))
    for fl in a.flits:
        for algo in ("tree", "nc"):
            rows.append(em("mesh", a.sweep_k, algo, flits=fl))
    for x in a.xor:
        rows.append(em("mesh", a.sweep_k, "nc", xor_ns=x))
    for algo in ("tree", "nc"):  # the router model's effect: store-and-forward instead of cut-through
        r = em("mesh", a.sweep_k, algo, flits=4, cut_through=False)
        r["algo"] += " (store-and-forward)"
        rows.append(r)
    print("\n== execution time and packet latency (emulated, virtual ns) ==")
    show(rows, TIME_COLS)
    write_csv(out / "nc_time.csv", rows)
    if plt is not None:
        fig, axes = plt.subplots(1, 3, figsize=(14, 4))
        for algo in ("tree", "all_at_once", "nc"):
            rs = [r for r in rows if r["algo"] == algo and r["family"] == "mesh" and r["flits"] == 1
                  and r["xor_cycles"] == 1]
            rs = sorted({r["k"]: r for r in rs}.values(), key=lambda r: r["k"])
            axes[0].plot([r["nodes"] for r in rs], [r["exec_ns"] for r in rs], marker="o", label=algo)
        axes[0].set_xlabel("nodes (mesh)")
        axes[0].set_ylabel("execution time (ns)")
        axes[0].legend()
        for algo in ("tree", "nc"):
            rs = [r for r in rows if r["algo"] == algo and r["k"] == a.sweep_k and r["xor_cycles"] == 1
                  and r["family"] == "mesh"]
            rs = sorted({r["flits"]: r for r in rs}.values(), key=lambda r: r["flits"])
            axes[1].plot([r["flits"] for r in rs], [r["exec_ns"] for r in rs], marker="o", label=algo)
        axes[1].set_xlabel(f"packet length (flits), k={a.sweep_k}")
        axes[1].legend()
        rs = sorted([r for r in rows if r["algo"] == "nc" and r["k"] == a.sweep_k and r["flits"] == 1
                     and r["family"] == "mesh"], key=lambda r: r["xor_cycles"])
        rs = sorted({r["xor_cycles"]: r for r in rs}.values(), key=lambda r: r["xor_cycles"])
        axes[2].plot([r["xor_cycles"] for r in rs], [r["exec_ns"] for r in rs], marker="o", label="nc exec")
        axes[2].plot([r["xor_cycles"] for r in rs], [r["end_to_end_ns"] for r in rs], marker="s", label="nc end-to-end")
        axes[2].set_xlabel(f"XOR cost (cycles), k={a.sweep_k}")
        axes[2].legend()
        fig.tight_layout()
        fig.savefig(out / "nc_time.png", dpi=120)
    return rows


def part_sources(a, out, plt) -> list[dict]:
    from emu.nodes.collectives.coding import Scheme, count
    from emu.nodes.collectives.coding.planner import best_shape
    from emu.topologies.grid import Grid

    g = Grid(16, 2, False)
    rows = []
    for S in a.sources:
        srcs = tuple(int(i) for i in np.linspace(0, g.size - 1, S).round())
        shape = best_shape(g, sources=srcs)
        r = dict(sources=S, floor=S * (g.size - 1), shape="x".join(map(str, shape)))
        for algo in ("tree", "all_at_once", "nc"):
            r[algo] = count(g, Scheme(algo, shape if algo == "nc" else None, sources=srcs)).total
        r["nc (16x4)"] = count(g, Scheme("nc", (16, 4), sources=srcs)).total
        if S in a.sources_measured:
            for algo in ("tree", "nc"):
                m = em("mesh", 16, algo, shape=shape if algo == "nc" else None, sources=srcs)
                r[f"{algo}_exec_ns"] = m["exec_ns"]
        rows.append(r)
    print("\n== many-to-all from S sources on the 16-ary 2-mesh (sources evenly spread; nc: the planner's shape "
          "for them, and the all-to-all's 16x4) ==")
    show(rows, ("sources", "floor", "tree", "all_at_once", "nc", "shape", "nc (16x4)", "tree_exec_ns", "nc_exec_ns"))
    write_csv(out / "nc_sources.csv", rows)
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for algo in ("tree", "all_at_once", "nc", "floor"):
            ax.plot([r["sources"] for r in rows], [r[algo] for r in rows], marker="o", label=algo)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sources")
        ax.set_ylabel("aggregate router hops")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "nc_sources.png", dpi=120)
    return rows


def part_variants(a, out, plt) -> list[dict]:
    rows = []
    for k in a.variants_k:
        for algo in ("tree", "nc", "nc_every", "nc_recursive", "combine"):
            rows.append(em("mesh", k, algo))
    print("\n== variants: coding, every node encodes, recursive coding, message combining (emulated) ==")
    show(rows, ("k", "algo", "shape", "hops", "packet_hops", "unicasts", "floor", "exec_ns", "phase_ns", "end_to_end_ns",
                "mean_latency_ns"))
    write_csv(out / "nc_variants.csv", rows)
    return rows


WHATIFS = (("model P=4", {"inject_ports": 4}), ("model P=4 eject 4", {"inject_ports": 4, "eject_ports": 4}),
           ("model IN in router", {"in_router": True}))
"""The source's plausible assumptions, modelled (``timing.model``): a node injects on 4 channels (the
router's 2n network ports of a 2-D mesh; emulated too, ``ports=4``), and ejects on 4; the INs code and
relay in their routers (their packets leave and enter over the router's 4 network ports, no host link)."""


def part_why(a, out, plt) -> list[dict]:
    """Why coding loses or wins: every scheme on the same NICs and router model, measured beside the
    model of each step's critical path, with one injection channel per node and with 4 (emulated), and
    the model's what-ifs; for k in --why-k."""
    rows = []
    for k in a.why_k:
        for ports in (1, 4):
            for algo, mcast, shape in (("tree", "tree", None), ("all_at_once", "tree", None), ("nc", "tree", None),
                                       ("nc", "tree", (8, 4) if k >= 16 else None), ("nc", "all_at_once", None),
                                       ("nc_every", "tree", None), ("combine", "tree", None)):
                if shape is not None and k < 16:
                    continue
                r = em("mesh", k, algo, mcast=mcast, shape=shape, ports=ports, whatifs=WHATIFS if ports == 1 else ())
                r["ports"] = ports
                r["scheme"] = algo if algo in ("tree", "all_at_once") else f"{algo}/{mcast}"
                big = max((s for s in r["model_steps"] if s != "G"), key=r["model_steps"].get)
                r["binds_most"] = f"{big}: {r['binds'][big]}"
                rows.append(r)
    print("\n== why coding loses or wins: k-ary 2-mesh, the source's router model (3-cycle hops, virtual cut-through, "
          "1-flit packets, XOR 1 cycle), every scheme on the NICs ==")
    print("exec = sum over sequential steps (rounds of each phase) of the step's longest packet latency from its "
          "injection; model = each step's critical path were it run alone; end_to_end = first injection to last node "
          "done (the source's 'execution cycles'); ports = injection channels per node (emulated)")
    show(rows, ("k", "ports", "scheme", "shape", "hops", "floor", "end_to_end_ns", "exec_ns", "model_ns",
                "mean_latency_ns", "phase_ns", "model_phase_ns") + tuple(n for n, _ in WHATIFS))
    print("what binds each scheme's longest modelled step:")
    for r in rows:
        if r["ports"] == 1:
            print(f"  k={r['k']} {r['scheme']:>16} {r['shape']:>5}: {r['binds_most']}")
    write_csv(out / "nc_why.csv", [{c: v for c, v in r.items() if not isinstance(v, dict)} for r in rows])
    return rows


PARTS = {"size": part_size, "groups": part_groups, "time": part_time, "sources": part_sources,
         "variants": part_variants, "why": part_why}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("--analytic-k", type=ints, default=[4, 8, 16, 32, 64])
    ap.add_argument("--measured-k", type=ints, default=[4, 8, 16])
    ap.add_argument("--sweep-k", type=int, default=8)
    ap.add_argument("--flits", type=ints, default=[1, 2, 4, 8, 16])
    ap.add_argument("--xor", type=ints, default=[0, 1, 5, 15, 35])
    ap.add_argument("--sources", type=ints, default=[2, 4, 8, 16, 32, 64, 128, 256])
    ap.add_argument("--sources-measured", type=ints, default=[4, 32, 256])
    ap.add_argument("--variants-k", type=ints, default=[8, 16])
    ap.add_argument("--why-k", type=ints, default=[8, 16])
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--out", default="results/nc_broadcast")
    ap.add_argument("--router", choices=["output_queued", "input_queued"], default="output_queued",
                    help="the router model of every run (switch.model)")
    a = ap.parse_args(argv)
    ROUTER[0] = a.router
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    plt = pyplot()
    res = {}
    for name in a.parts.split(","):
        res[name] = PARTS[name](a, out, plt)
    print(f"wrote {out}/nc_*.csv" + (" and nc_*.png" if plt is not None else ""))
    return res


if __name__ == "__main__":
    main()
