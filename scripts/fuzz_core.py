#!/usr/bin/env python3
"""Differential fuzz of the compiled core (emu/_core.c) against pure Python: random small fabrics,
workloads and conditions, each run twice in a fresh process -- with the core and with ``EMU_PURE=1``
-- and every figure compared: the applications' results, the run's metrics, every element's and
port's counters, the processes' socket counters, the capture's bytes and the virtual time reached.
The core must be the exact twin of the Python it stands in for; any difference is a bug (exit 1).

Scenarios: fat trees, stars, two-level trees, meshes and tori (input-queued or ideal routers);
credit flow control, latency, bandwidth, MTU, switch delay and priority settings; long messages
(lazy frames); in memory or on sockets (one socket per process or per element); one or two
processes; captures; scheduled link downs, bit errors, lossy or corrupting links (with the reliable
transport or without a receiver that waits); a socket drop rate (then only results and metrics are
compared: recovery waits on the wall clock, so counters vary from run to run, pure or not).

    python scripts/fuzz_core.py [--seeds 0:40] [--timeout 300]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TOPOS = [("fattree:k=2,n=2", False), ("fattree:k=2,n=3", False), ("fattree:k=4,n=2", False), ("star:n=4", False),
         ("twolevel:ports=2,hosts=4", False), ("mesh:k=3,n=2", True), ("torus:k=3,n=2", True),
         ("mesh:k=3,n=2", False), ("torus:k=3,n=2", False)]
"""(spec, ideal router): meshes and tori default to the input-queued router; ideal gives the old switch."""


def scenario(seed: int) -> dict:
    from emu.topologies.registry import IDEAL_ROUTER, build

    r = random.Random(seed)
    topo, ideal = r.choice(TOPOS)
    sc = {"topo": topo, "ideal": ideal, "seed": seed, "msgs": r.choice([5, 20, 60]), "expect": True}
    sets = []
    if r.random() < 0.3:
        sets += [f"switch.vc_buffer_bytes={r.choice([1088, 2176, 8960])}", f"switch.credit_delay_ns={r.choice([0, 20])}"]
        if topo.startswith("torus"):
            sets += ["switch.vcs=2", "switch.vc_policy=dateline"]
    if r.random() < 0.3:
        sets.append(f"link.latency_ns={r.choice([50, 300, 1000, 10000])}")
    if r.random() < 0.3:
        sets.append(f"link.bandwidth_bps={r.choice([10**9, 10**10])}")
    if r.random() < 0.2:
        sets.append("link.priority=false")
    if r.random() < 0.2:
        sets.append(f"host.mtu_bytes={r.choice([256, 4096])}")
    if r.random() < 0.2:
        sets.append(f"switch.processing_delay_ns={r.choice([0, 1, 500])}")
    if r.random() < 0.3:
        sc["sizes"], sc["delays"] = [r.choice([20000, 100000])], [0]
    sc["direct"] = r.random() < 0.5
    sc["capture"] = r.random() < 0.3
    sc["processes"] = 2 if r.random() < 0.4 else 1
    if not sc["direct"] and r.random() < 0.15:
        sc["drop_rate"] = 0.05
    if not sc["direct"] and r.random() < 0.15:
        sc["batch"] = False
    t = build(topo, settings={k: dict(v) for k, v in IDEAL_ROUTER.items()} if ideal else {})
    links = [(lk.a, lk.b) for lk in t.links]
    faults = []
    fr = r.random()
    a, b = r.choice(links)
    if fr < 0.15:
        t0 = r.randrange(0, 20000)
        faults += [("down", t0, a, b), ("up", t0 + r.randrange(100, 20000), a, b)]
    elif fr < 0.3:
        faults.append(("ber", r.randrange(0, 5000), a, b, 1e-4))
    elif fr < 0.45:
        faults.append(("set_fault", a, b, r.choice([0.0, 0.1]), r.choice([0.0, 0.2])))
    if faults:  # frames may be lost: with the reliable transport receivers wait, without it they do not
        sc["expect"] = r.random() < 0.5
        if sc["expect"]:
            sets.append("host.transport=reliable")
    sc["set"], sc["faults"] = sets, faults
    return sc


# -- the applications (importable by worker processes: this module is on their path) --------------
async def traffic(host, plan, expect):
    """Send ``plan`` ((delay, dst, size, tag) ...), then receive ``expect`` messages."""
    for delay, dst, size, tag in plan:
        if delay:
            await host.sleep(delay)
        await host.send(dst, bytes(((i * 7 + size + tag) & 0xFF) for i in range(size)), tag)
    got = []
    for _ in range(expect):
        m = await host.recv()
        got.append((m.src, m.tag, len(m.data), m.t_ns, m.hops))
    return got, host.now


async def sender_only(host, plan):
    for delay, dst, size, tag in plan:
        if delay:
            await host.sleep(delay)
        await host.send(dst, bytes(size), tag)
    return host.now


def _digest(x) -> str:
    return hashlib.sha256(repr(x).encode()).hexdigest()[:16]


async def one(sc: dict) -> dict:
    """Run scenario ``sc`` here; a digest of every figure."""
    import trio

    import emu
    from emu import native
    from emu.config import parse_settings
    from emu.topologies.registry import IDEAL_ROUTER, build

    settings = {k: dict(v) for k, v in IDEAL_ROUTER.items()} if sc["ideal"] else {}
    for sec, d in parse_settings(sc["set"]).items():
        settings.setdefault(sec, {}).update(d)
    t = build(sc["topo"], settings=settings)
    rng = random.Random(sc["seed"])
    hosts = [n for n, v in t.nodes.items() if v.kind == "host"]
    plans, expect = {h: [] for h in hosts}, {h: 0 for h in hosts}
    for _ in range(sc["msgs"]):
        a, b = rng.sample(hosts, 2)
        plans[a].append((rng.choice(sc.get("delays", [0, 0, 0, 100, 1000, 5000])), b,
                         rng.choice(sc.get("sizes", [1, 60, 500, 1000, 1500, 4000, 9000])), rng.randrange(4)))
        expect[b] += 1
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        cap = os.path.join(tmp, "run.pcapng") if sc["capture"] else None
        run = emu.RunConfig(direct=sc["direct"], processes=sc["processes"], seed=sc["seed"], capture=bool(cap),
                            socket_drop_rate=sc.get("drop_rate", 0.0), batch=sc.get("batch", True))
        async with emu.Cluster(t, run=run, **({"capture": cap} if cap else {})) as net:
            for f in sc["faults"]:
                if f[0] == "set_fault":
                    await net.set_fault(f[1], f[2], drop=f[3], corrupt=f[4])
                elif f[0] == "ber":
                    await net.schedule(f[1], "ber", link=(f[2], f[3]), rate=f[4])
                else:
                    await net.schedule(f[1], f[0], link=(f[2], f[3]))
            try:
                with trio.fail_after(120):
                    if sc["expect"]:
                        res = await net.run({h: (traffic, plans[h], expect[h]) for h in hosts})
                    else:
                        res = await net.run({h: (sender_only, plans[h]) for h in hosts if plans[h]})
            except Exception as e:  # (the same error both ways is the same behaviour)
                res = ("error", type(e).__name__, str(e)[:300])
            out = {"results": _digest(res), "metrics": _digest(net.metrics), "stats": _digest(await net.stats()),
                   "process_stats": _digest(await net.process_stats()), "now": net.now}
        if cap:
            out["capture"] = hashlib.sha256(pathlib.Path(cap).read_bytes()).hexdigest()[:16]
    out["loop"] = native.in_use()
    return out


def run(sc: dict, pure: bool, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    env.pop("EMU_PURE", None)
    if pure:
        env["EMU_PURE"] = "1"
    p = subprocess.run([sys.executable, str(HERE / "fuzz_core.py"), "--one", json.dumps(sc)], capture_output=True,
                       text=True, env=env, timeout=timeout)
    if p.returncode:  # (its last line: the error, which must be the same both ways)
        return {"crashed": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode,
                "stderr": p.stderr[-1500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--seeds", default="0:40", help="A:B, the scenarios' seeds (B excluded)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds for one run")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        import trio

        print(json.dumps(trio.run(one, json.loads(a.one))))
        return 0
    try:
        lo, hi = (int(x) for x in a.seeds.split(":"))
    except ValueError:
        ap.error(f"--seeds {a.seeds!r}: give A:B (e.g. 0:40)")
    bad = 0
    for seed in range(lo, hi):
        sc = scenario(seed)
        c, p = run(sc, False, a.timeout), run(sc, True, a.timeout)
        if "crashed" not in c and c.get("loop") != "compiled":
            print(f"seed {seed}: the compiled core was not used ({c.get('loop')}): build it (pip install -e .)")
            return 2
        keys = (set(c) | set(p)) - {"loop", "stderr"}
        if sc.get("drop_rate"):
            keys -= {"stats", "process_stats"}
        diff = sorted(k for k in keys if c.get(k) != p.get(k))
        bad += bool(diff)
        what = "DIFFERENT " + ", ".join(diff) if diff else "same" + (f" (both refused: {c['crashed']})" if "crashed" in c else "")
        print(f"seed {seed}: {what}  {json.dumps(sc)}", flush=True)
        for r in (c, p):
            if "stderr" in r and diff:
                print(r["stderr"])
    print(f"{hi - lo} scenarios, {bad} different")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
