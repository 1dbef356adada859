"""The demo programs of the mpi4py repository under ``emu mpirun``, beside MPICH and the models.

    git clone --depth 1 https://github.com/mpi4py/mpi4py /tmp/mpi4py
    python scripts/mpi4py_demos.py --demos /tmp/mpi4py/demo            # all, OSU at a small size
    python scripts/mpi4py_demos.py --demos /tmp/mpi4py/demo --only osu_latency,osu_bw --big
    python scripts/mpi4py_demos.py --demos /tmp/mpi4py/demo --only osu_latency --full

``helloworld.py``, ``compute-pi/cpi-cco.py`` and ``profiling/ring.py`` run unchanged, as
``python PROGRAM``; their output is compared with MPICH's (``mpiexec`` of the mpich wheel), the
processor names aside (the emulated hosts are h0, h1, ...). The OSU benchmarks run unchanged too:
with ``--full`` as ``python osu_x.py`` (all their loops: osu_latency alone is 664,008 MPI calls, about
4 minutes), by default through their own function with fewer iterations and smaller sizes
(``osu_latency(skip=.., loop=.., MAX_MSG_SIZE=..)``, the keyword arguments the demos take). Their
figures are virtual: latency beside the point-to-point model (``emu.nodes.collectives.model``:
send overhead + frames through the switch + receive overhead, the 17-byte MPI header included; over
``host.eager_limit_bytes`` the rendezvous's request-to-send and clear-to-send before the data; a
long osu_bcast/osu_scatter at least its data's time on the root's link),
bandwidth beside the link's payload rate; MPICH's are wall-clock figures of this machine's shared
memory, printed for the record only -- not a comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from emu.nodes.collectives.model import _step, frame_sizes
from emu.topologies.registry import build

WRAPPER = """import inspect, json, runpy, sys
ns = runpy.run_path(sys.argv[1])            # defines the demo's function; its __main__ block does not run
fn, given = ns[sys.argv[2]], json.loads(sys.argv[3])
fn(**{k: v for k, v in given.items() if k in inspect.signature(fn).parameters})
"""
SMALL = {"skip": 2, "loop": 20, "skip_small": 2, "loop_small": 20, "skip_large": 1, "loop_large": 4,
         "MAX_MSG_SIZE": 1 << 16}
BIG = {**SMALL, "loop_large": 2, "MAX_MSG_SIZE": 1 << 22}
OSU = {  # name: (ranks, topology)
    "osu_latency": (2, "star:n=2"), "osu_bw": (2, "star:n=2"), "osu_bibw": (2, "star:n=2"),
    "osu_multi_lat": (4, "fattree:k=2,n=2"), "osu_bcast": (4, "fattree:k=2,n=2"),
    "osu_allgather": (4, "fattree:k=2,n=2"), "osu_alltoall": (4, "fattree:k=2,n=2"),
    "osu_alltoallv": (4, "fattree:k=2,n=2"), "osu_barrier": (4, "fattree:k=2,n=2"),
    "osu_gather": (4, "fattree:k=2,n=2"), "osu_scatter": (4, "fattree:k=2,n=2"),
}
PLAIN = {"helloworld": ("helloworld.py", 4, "star:n=4", None), "cpi-cco": ("compute-pi/cpi-cco.py", 4, "star:n=4",
                                                                          "100\n1000\n0\n"),
         "ring": ("profiling/ring.py", 4, "fattree:k=2,n=2", None)}


def emu_run(argv: list[str], n: int, topo: str, stdin: str | None, extra=()) -> tuple:
    """(the finished process, its --json figures, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "f.json")
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "emu", "mpirun", "-n", str(n), "--topo", topo, "--compute", "zero",
                            "--json", out, *extra, *argv], input=stdin or "", capture_output=True, text=True)
        wall = time.perf_counter() - t0
        figs = json.load(open(out)) if os.path.exists(out) else {}
    return p, figs, wall


def mpich_run(argv: list[str], n: int, stdin: str | None):
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    if mpiexec is None:
        return None
    return subprocess.run([mpiexec, "-n", str(n), sys.executable, *argv], input=stdin or "", capture_output=True,
                          text=True, timeout=1800)


def _names(text: str) -> list[str]:
    """The lines, processor names aside; helloworld's greetings found wherever mpiexec's relay cut them."""
    hello = re.findall(r"Hello, World! I am process \d+ of \d+ on ", text)
    return sorted(hello) if hello else text.splitlines()


def plain(demos: str, name: str, use_mpich: bool) -> bool:
    rel, n, topo, stdin = PLAIN[name]
    path = os.path.join(demos, rel)
    p, figs, wall = emu_run([path], n, topo, stdin)
    ok = p.returncode == 0
    line = (f"{name:<14} -n {n} {topo:<16} exit {p.returncode}; virtual {figs.get('virtual_ns') or 0:,} ns, "
            f"{figs.get('frames') or 0:,} frames, {figs.get('mpi_calls') or 0} MPI calls, {wall:.1f} s wall")
    if use_mpich:
        ref = mpich_run([path], n, stdin)
        same = ref is not None and ref.returncode == p.returncode and _names(ref.stdout) == _names(p.stdout)
        ok = ok and same
        line += f"; output {'agrees' if same else 'DIFFERS'} with MPICH's"
    print(line)
    if not ok:
        print(p.stdout[-600:], p.stderr[-600:], sep="\n")
    return ok


def _rows(text: str) -> list[tuple[int, float]]:
    return [(int(a), float(b)) for a, b in (ln.split() for ln in text.splitlines() if ln and not ln.startswith("#"))]


def model(name: str, size: int, topo: str) -> str:
    t = build(topo)
    h, lk, sw = t.nodes["h0"].spec, t.links[0].spec, t.nodes[t.switches[0].name].spec
    if name == "osu_latency":  # over the eager limit: the request-to-send (+8: its size), the clear-to-send first
        rndv = _step(17 + 8, h, lk, sw, 1) + _step(17, h, lk, sw, 1) if size > h.eager_limit_bytes else 0
        return f"{(rndv + _step(size + 17, h, lk, sw, 1)) / 1000:.2f} us"
    if name in ("osu_bcast", "osu_scatter") and size > h.eager_limit_bytes:
        # a rendezvous send ends when its data went: the root's link carries at least one copy (bcast),
        # or every other rank's part of ``size`` bytes (scatter; the ranks: OSU's table)
        copies = OSU[name][0] - 1 if name == "osu_scatter" else 1
        wire_ns = copies * sum(lk.serialization_ns(s) for s in frame_sizes(size + 17, h.mtu_bytes))
        return f">= {wire_ns / 1000:.2f} us (root's link)"
    if name in ("osu_bw", "osu_bibw"):
        wire_ns = sum(lk.serialization_ns(s) for s in frame_sizes(size + 17, h.mtu_bytes))
        # a window of messages: bound by the link, or by the host CPU per message (osu_bw: the sender
        # sends, the receiver receives; osu_bibw -- which counts one direction's bytes -- each does both)
        cpu = h.send_overhead_ns + (h.recv_overhead_ns if name == "osu_bibw" else 0)
        return f"<= {size / max(wire_ns, cpu) * 1e3:,.0f} MB/s ({'link' if wire_ns >= cpu else 'host CPU'})"
    return "-"


def osu(demos: str, name: str, use_mpich: bool, full: bool, params: dict, n: int | None = None,
        topo: str | None = None) -> bool:
    n0, topo0 = OSU[name]
    n, topo = n or n0, topo or topo0
    path = os.path.join(demos, f"{name}.py")
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = os.path.join(tmp, "run_demo.py")
        with open(wrapper, "w") as f:
            f.write(WRAPPER)
        argv = [path] if full else [wrapper, path, name, json.dumps(params)]
        p, figs, wall = emu_run(argv, n, topo, None)
        ref = mpich_run(argv, n, None) if use_mpich else None
    ours = _rows(p.stdout) if p.returncode == 0 else []
    theirs = _rows(ref.stdout) if ref is not None and ref.returncode == 0 else []
    head_ok = ref is None or p.stdout.splitlines()[:2] == ref.stdout.splitlines()[:2]
    sizes_ok = ref is None or [s for s, _ in ours] == [s for s, _ in theirs]
    ok = p.returncode == 0 and bool(ours) and head_ok and sizes_ok
    calls = figs.get("mpi_calls", 0)
    print(f"\n{name} -n {n} on {topo} ({'unchanged, full loops' if full else 'its function, ' + json.dumps(params)}): "
          f"exit {p.returncode}, {calls or 0:,} MPI calls, {figs.get('frames') or 0:,} frames, {wall:.1f} s wall"
          f" ({wall / max(calls, 1) * 1e6:.0f} us per call)"
          + ("" if ref is None else f"; header and sizes {'agree' if head_ok and sizes_ok else 'DIFFER'} with MPICH"))
    unit = p.stdout.splitlines()[1].split()[-1] if len(p.stdout.splitlines()) > 1 else ""
    print(f"  {'size [B]':>9} {'emu (virtual) ' + unit:>22} {'model':>28} {'MPICH (wall, this machine)':>28}")
    their = dict(theirs)
    for size, v in ours:
        print(f"  {size:>9} {v:>22.2f} {model(name, size, topo):>28} {their.get(size, float('nan')):>28.2f}")
    if not ok:
        print(p.stdout[-600:], p.stderr[-600:], sep="\n")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--demos", required=True, help="the demo/ folder of an mpi4py checkout")
    ap.add_argument("--only", help="comma-separated: helloworld, cpi-cco, ring, osu_latency, ... (default: all)")
    ap.add_argument("--full", action="store_true", help="run the OSU demos as they are (all their loops: long)")
    ap.add_argument("--big", action="store_true", help="OSU sizes up to 4 MiB (default up to 64 KiB)")
    ap.add_argument("--no-mpich", action="store_true", help="do not run MPICH beside")
    ap.add_argument("--n64", action="store_true", help="also osu_allgather with -n 64 on fattree:k=4,n=3")
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.demos, "helloworld.py")):
        print(f"refused: {a.demos} is not mpi4py's demo/ folder (no helloworld.py); "
              "git clone --depth 1 https://github.com/mpi4py/mpi4py and give its demo/")
        return 2
    names = a.only.split(",") if a.only else [*PLAIN, *OSU]
    unknown = [x for x in names if x not in PLAIN and x not in OSU]
    if unknown:
        print(f"refused: unknown demo(s) {', '.join(unknown)}; known: {', '.join([*PLAIN, *OSU])}")
        return 2
    params = BIG if a.big else SMALL
    ok = True
    for name in names:
        if name in PLAIN:
            ok &= plain(a.demos, name, not a.no_mpich)
        else:
            ok &= osu(a.demos, name, not a.no_mpich, a.full, params)
    if a.n64:
        ok &= osu(a.demos, "osu_allgather", False, False, {"skip": 1, "loop": 3, "skip_large": 1, "loop_large": 2,
                                                            "MAX_MSG_SIZE": 1 << 12}, 64, "fattree:k=4,n=3")
    print("\nall agree" if ok else "\nSOME DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
