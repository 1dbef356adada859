#!/usr/bin/env python3
"""Spec 04's measurements (dense): in-network allreduce against host software.

    python scripts/inc_allreduce.py [--sizes 4KiB,64KiB,1MiB] [--ports 8] [--clusters 1]
                                    [--scale 'source;twolevel:ports=8,hosts=64'] [--out results/inc_allreduce/]

Part 1, one switch (``star:n=--ports``, 100 Gbit/s links): the allreduce of float32 (and int8: four
times the elements per packet) by each aggregation algorithm (single buffer, 2 and 4 buffers, tree,
reproducible tree) and by the host ring, per size: completion, bandwidth per host (bytes reduced over
completion time), the switch's peak packet memory and working memory, time handlers spent
busy-waiting. The processing unit is made small (``--clusters`` clusters of 8 cores) so that it, not
the links, limits, and the algorithms differ. Beside it the model (``switch/aggregate/model.py``): the
switch's aggregation bandwidth min(K / tau, 1 / delta) packets per cycle with the algorithm's service
time tau (single buffer: as many handlers contend for one block as staggered hosts -- the source's
schedule, starting blocks spread over the window -- send it in one packet slot, ceil(hosts / blocks); B buffers: the same contention term with those handlers spread
over the B buffers, plus the fold of the other B - 1, ``model.service_time``), and delta the links'
packet interval over the ports.

Part 2, at scale (the source used 64 hosts and 100 Gbit/s): dense host ring allreduce vs dense
in-network allreduce on the source's "two-level fat tree of 8-port switches", which cannot exist at
full bisection (two levels of 8-port switches hold 32 hosts so): ``source`` builds the closest tree
of real 8-port switches, ``fattree:k=4,n=3`` (three levels), and the output says so; and on
``twolevel:ports=8,hosts=64`` (two levels, but leaves of 16 ports: 8 hosts and 8 up links):
completion time and the bytes that crossed the network's links. Every result is checked against
numpy.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import trio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from expt import pyplot, scale_specs, write_csv  # noqa: E402

ALGOS = ("single", "multi2", "multi4", "tree", "reproducible", "host ring")


async def app(host, algo, count, dtype, phase, schedule=None):
    from emu.nodes.collectives.comm import Comm

    comm = Comm(host)
    rng = np.random.default_rng([comm.rank, count])
    x = (rng.integers(-10, 10, count) if np.dtype(dtype).kind == "i" else rng.standard_normal(count)).astype(dtype)
    if algo == "host ring":
        if phase == "setup":
            return None
        return await comm.allreduce(x, "sum", "ring"), x, "ring"
    comm.reproducible = algo == "reproducible"
    comm.inc_algo = None if algo == "reproducible" else algo  # reproducible: always the tree
    comm.inc_schedule = schedule
    if phase == "setup":  # the communicator's request: the tree is installed before the measured call
        from emu.wire.inc import Algo

        want = 0 if comm.inc_algo is None else int(Algo[comm.inc_algo.upper()])
        return await host.inc_request(comm.id, comm.members, x.dtype, "sum", x.nbytes, comm.reproducible, want)
    return await comm.allreduce(x, "sum", offload="switch"), x, comm.last_algo


async def measure(spec: str, algo: str, count: int, dtype: str, settings: dict, schedule: str | None = None) -> dict:
    import emu
    from emu.switch.aggregate.model import model, service_time
    from emu.topologies import build

    t = build(spec, settings=settings)
    t.add_manager()
    n = len(t.hosts)
    async with emu.Cluster(t) as net:
        await net.run({h: (app, algo, count, dtype, "setup", schedule) for h in net.hosts})
        t0 = net.now
        res = await net.run({h: (app, algo, count, dtype, "run", schedule) for h in net.hosts})
        done = max(net.now, t0)
        m = net.metrics
        stats = {s["name"]: s for s in await net.stats()}
    xs = [res[h][1] for h in t.host_names()]
    y = res[t.host_names()[0]][0]
    if np.dtype(dtype).kind == "i":
        assert np.array_equal(y, np.sum(xs, axis=0, dtype=dtype)), f"{spec} {algo}: wrong result"
    else:
        ref = np.sum(np.array(xs, np.float64), axis=0)
        assert np.allclose(y.astype(np.float64), ref, rtol=1e-3, atol=1e-3), f"{spec} {algo}: wrong result"
    completion = m.completion_ns
    nbytes = count * np.dtype(dtype).itemsize
    pu = {k: max(s.get("pu", {}).get(k, 0) for s in stats.values()) for k in
          ("peak_packet_memory", "peak_working_memory", "busy_wait_ns", "drops")}
    row = dict(topology=spec, hosts=n, algo=algo, dtype=dtype, size=nbytes, completion_ns=completion,
               schedule=schedule or "staggered", granted=res[t.host_names()[0]][2],
               gbps_per_host=round(nbytes * 8 / completion, 2) if completion else None,
               link_bytes=sum(m.link_bytes.values()), **pu, model_gbps=None)
    if algo != "host ring" and spec.startswith("star"):
        sp = t.switches[0].spec.pu
        link = t.links[0].spec
        pkt = 1024  # bytes of data per packet (the manager's default)
        L = pkt * sp.cycles_per_byte
        # hosts stagger their blocks (the source's: starting blocks spread over the window, here all the
        # blocks): in each packet slot the switch gets n packets of min(n, blocks) different blocks, so
        # ceil(n / blocks) handlers at most work on one block at once
        blocks = -(-nbytes // pkt)
        contending = min(sp.subset, -(-n // min(n, blocks)))
        tau = {"single": service_time("single", L, n, contending=contending),
               "multi2": service_time("multi", L, n, contending=contending, B=2),
               "multi4": service_time("multi", L, n, contending=contending, B=4)}.get(
            algo, service_time("tree", L, n, copy=sp.copy_cycles))
        wire = link.serialization_ns(pkt + 16 + 30 + 4)
        mm = model(K=sp.cores, tau=tau / sp.ghz, delta=wire / n, delta_c=wire / n, P=n,
                   S=sp.subset if sp.scheduler == "hfcfs" else sp.cores)
        row["model_gbps"] = round(mm.bandwidth / n * pkt * 8, 2)  # packets/ns over n hosts, each 1 KiB
    return row


def main(argv=None) -> list[dict]:
    from emu.front.checks import parse_size

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--sizes", default="4KiB,64KiB,1MiB")
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--clusters", type=int, default=1)
    ap.add_argument("--scale", default="source;twolevel:ports=8,hosts=64",
                    help="';'-separated topologies; source: the closest tree of 8-port switches to the source's 64 hosts")
    ap.add_argument("--scale-size", default="256KiB")
    ap.add_argument("--out", default="results/inc_allreduce")
    a = ap.parse_args(argv)
    settings = {"pu": {"clusters": a.clusters}}
    rows = []
    cols = ("topology", "algo", "dtype", "size", "completion_ns", "gbps_per_host", "model_gbps", "peak_packet_memory",
            "peak_working_memory", "busy_wait_ns", "link_bytes")
    print(" ".join(f"{c:>20}" for c in cols))

    def show(r):
        print(" ".join(f"{r[c]:>20,}" if isinstance(r[c], int) else f"{r[c]!s:>20}" for c in cols), flush=True)

    for size in [parse_size(s) for s in a.sizes.split(",")]:
        for dtype in ("float32", "int8"):
            for algo in ALGOS:
                r = trio.run(measure, f"star:n={a.ports}", algo, size // np.dtype(dtype).itemsize, dtype, settings)
                rows.append(r)
                show(r)
    big = parse_size(a.scale_size)
    for spec in scale_specs(a.scale):
        for algo in ("host ring", "tree"):
            r = trio.run(measure, spec, algo, big // 4, "float32", {})
            rows.append(r)
            show(r)
    out = pathlib.Path(a.out)
    write_csv(out / "inc_allreduce.csv", rows)
    plt = pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4))
        for ax, dtype in zip(axes, ("float32", "int8")):
            for k, algo in enumerate(ALGOS):
                pts = [(r["size"], r["gbps_per_host"]) for r in rows if r["algo"] == algo and r["dtype"] == dtype
                       and r["topology"].startswith("star")]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=f"C{k}", label=algo)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("bytes per host")
            ax.set_ylabel("Gbit/s per host")
            ax.set_title(f"one switch, {a.ports} hosts, {dtype}")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "inc_allreduce.png", dpi=120)
        print(f"wrote {out}/inc_allreduce.csv and inc_allreduce.png")
    return rows


if __name__ == "__main__":
    main()
