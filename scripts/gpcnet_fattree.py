#!/usr/bin/env python3
"""GPCNeT on an oversubscribed fat tree, and what placement does to an allreduce beside an all-to-all.

    python scripts/gpcnet_fattree.py [--hosts 64] [--ports 8] [--spines 4] [--seed 0]
                                     [--gpcnet rings=2,lat_iters=20,...] [--ar-size 64KiB] [--a2a-size 4KiB]
                                     [--skip-gpcnet] [--skip-placement] [--processes 1]

The tree: ``twolevel:ports=P,hosts=N,spines=S`` -- leaves of P hosts, each with one link to each of
S spines: P/S = 2 is 2:1 oversubscribed (8 up links for 8 hosts would be full bisection; 4 give half).

1. ``emu run --test gpcnet``: GPCNeT's network_load_test (docs/jobs.md) -- the table as GPCNeT
   prints it, victims isolated and beside the four congestors, and the congestion impact factors.
2. Two jobs of N/2 hosts each, an allreduce (``--ar-size``) and an all-to-all (``--a2a-size`` per
   destination), placed packed (each whole leaves: no link carries both), interleaved (every other
   host: each leaf holds both) and random (the run's seed): each job's completion beside itself
   alone on the same hosts, and the slowdown (``emu run --job``).

Every figure is virtual time, the same on every run and over --processes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def emu(argv: list[str]) -> list[dict]:
    """``emu run ARGV --json -``: the result rows (a refusal or failure ends the script with its line)."""
    exe = str(Path(sys.executable).parent / "emu")
    out = subprocess.run([exe, "run", *argv, "--json", "-"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    if out.returncode != 0:
        sys.exit(f"emu run {' '.join(argv)}: exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)["results"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--gpcnet", default="", help="--gpcnet of emu run (default: its defaults)")
    ap.add_argument("--ar-size", default="64KiB")
    ap.add_argument("--a2a-size", default="4KiB")
    ap.add_argument("--skip-gpcnet", action="store_true")
    ap.add_argument("--skip-placement", action="store_true")
    a = ap.parse_args()
    topo = f"twolevel:ports={a.ports},hosts={a.hosts},spines={a.spines}"
    common = ["--topo", topo, "--seed", str(a.seed), "--processes", str(a.processes)]
    print(f"{topo}: {a.ports} hosts per leaf, {a.spines} up links each ({a.ports / a.spines:g}:1), seed {a.seed}\n")
    if not a.skip_gpcnet:
        [r] = emu([*common, "--test", "gpcnet", *(["--gpcnet", a.gpcnet] if a.gpcnet else [])])
        opts = ", ".join(f"{k[7:]}={v}" for k, v in r.items() if k.startswith("gpcnet_") and k != "gpcnet_table")
        print(r["gpcnet_table"])
        print(f"\n(emu: {opts}; virtual {r['completion_ns']:,} ns, wall {r['wall_s']} s; congestor iterations "
              + "; ".join(f"{row['test']}: {row['congestor_iterations']}" for row in r["rows"]) + ")\n")
    if not a.skip_placement:
        half = a.hosts // 2
        print(f"allreduce of {a.ar_size} beside an all-to-all of {a.a2a_size} per destination, {half} hosts each")
        print(f"{'placement':>12} {'job':>10} {'completion ns':>14} {'alone ns':>10} {'slowdown':>9}  hosts")
        for policy in ("packed", "interleaved", "random"):
            rows = emu([*common, "--job", f"ar:hosts={policy}:{half},test=allreduce,size={a.ar_size}",
                        "--job", f"a2a:hosts={policy}:{half},test=alltoall,size={a.a2a_size}"])
            for r in rows:
                hl = r["host_list"].split(",")
                shown = ",".join(hl[:6]) + (",..." if len(hl) > 6 else "")
                print(f"{policy:>12} {r['name']:>10} {r['completion_ns']:>14,} {r['isolated_ns']:>10,} "
                      f"{r['slowdown']:>9.4f}  {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
