"""Wall time per MPI call of ``emu mpirun``, beside its virtual figures and MPICH's mpiexec.

    python scripts/bench_mpi_calls.py                    # 2 ranks on star:n=2, 2,000 iterations per call
    python scripts/bench_mpi_calls.py --iters 5000 --only pingpong,barrier
    python scripts/bench_mpi_calls.py --profile prof.out # cProfile of the emulator process (default path)
    python scripts/bench_mpi_calls.py --instructions 500 --only pingpong   # valgrind: deterministic (UDP path)

One unchanged mpi4py program (below, ``PROGRAM``) times each kind of call in a loop: an 8-byte
``Send``/``Recv`` ping-pong, ``Barrier``, ``Allreduce`` of 8 bytes, and ``Isend``/``Irecv``/
``Waitall`` of 8 bytes both ways. Its rank 0 prints, per kind, the wall microseconds per MPI call
(``time.perf_counter``: what a person waits) and the virtual microseconds per iteration
(``MPI.Wtime``: the emulated cluster's clock). It runs under ``emu mpirun --compute zero`` on the
default path (the frames as UDP datagrams between the emulated elements) and with ``--direct`` (in
memory), and under MPICH's ``mpiexec`` (shared memory of this machine: its figures are wall time
and only there for the record). The virtual figures do not depend on the path, nor on the machine;
the model's one-way time of a small message (``emu.nodes.collectives.model``) is printed beside
the ping-pong's half round trip.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

PROGRAM = r'''
import os, sys, time
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
iters = int(sys.argv[1])
only = sys.argv[2].split(",")
peer = 1 - rank
a, b = np.zeros(1, np.float64), np.zeros(1, np.float64)


def pingpong():
    for _ in range(iters):
        if rank == 0:
            comm.Send(a, 1, 7)
            comm.Recv(b, 1, 7)
        else:
            comm.Recv(b, 0, 7)
            comm.Send(a, 0, 7)
    return 2  # MPI calls per iteration per rank


def barrier():
    for _ in range(iters):
        comm.Barrier()
    return 1


def allreduce():
    for _ in range(iters):
        comm.Allreduce(a, b, op=MPI.SUM)
    return 1


def nonblocking():
    for _ in range(iters):
        reqs = [comm.Irecv(b, peer, 3), comm.Isend(a, peer, 3)]
        MPI.Request.Waitall(reqs)
    return 3


def emulator_cpu_s():
    """CPU seconds of the emulator process (this rank's parent) so far; 0 under mpiexec."""
    if "EMU_MPIRUN_RANK" not in os.environ:
        return 0.0
    with open(f"/proc/{os.getppid()}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


for name in only:
    fn = globals()[name]
    comm.Barrier()
    w0, v0, c0, e0 = time.perf_counter(), MPI.Wtime(), time.process_time(), emulator_cpu_s()
    calls = fn()
    w1, v1, c1, e1 = time.perf_counter(), MPI.Wtime(), time.process_time(), emulator_cpu_s()
    cpu = comm.gather(c1 - c0, root=0)
    if rank == 0:
        n = iters * calls
        print(f"RESULT {name} {(w1 - w0) / n * 1e6:.3f} {(v1 - v0) / iters * 1e6:.4f} "
              f"{sum(cpu) / (size * n) * 1e6:.3f} {(e1 - e0) / (size * n) * 1e6:.3f}", flush=True)
if sys.argv[3:] == ["quick-exit"] and "EMU_MPIRUN_RANK" in os.environ:
    # (--instructions: the rank says it ended, as emu.rank's __main__ does, and goes without the interpreter's
    # shutdown, which under valgrind can outlast the grace mpirun gives a rank -- and then valgrind writes nothing)
    from emu.rank.channel import CHANNEL
    sys.stdout.flush()
    CHANNEL.call("exit", code=0)
    os._exit(0)
'''
KINDS = ("pingpong", "barrier", "allreduce", "nonblocking")
LABEL = {"pingpong": "Send/Recv 8 B ping-pong", "barrier": "Barrier", "allreduce": "Allreduce 8 B",
         "nonblocking": "Irecv+Isend+Waitall 8 B"}


def results(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            _, name, *vals = line.split()
            out[name] = tuple(float(v) for v in vals)
    return out


def run(cmd: list[str], env=None) -> tuple[dict, float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(f"{' '.join(cmd[:6])} ...: exit {p.returncode}\n{p.stderr[-2000:]}\n")
    return results(p.stdout), wall, p.stderr


def model_one_way_us(topo: str) -> float | None:
    """The point-to-point model's one-way time of an 8-byte message (its 17-byte MPI envelope
    included), on a topology whose hosts are one switch apart (a star)."""
    from emu.nodes.collectives.model import _step
    from emu.topologies.registry import build

    t = build(topo)
    if not topo.startswith("star"):
        return None
    h, lk, sw = t.nodes["h0"].spec, t.links[0].spec, t.nodes[t.switches[0].name].spec
    return _step(8 + 17, h, lk, sw, 1) / 1e3


INSTR_BASE = 10
"""Iterations of the shorter run of ``--instructions`` (the start-up and the end it subtracts)."""


def instructions(kind: str, iters: int, topo: str, direct: bool, prog: str, tmp: str) -> tuple[float, float]:
    """User-space instructions (valgrind's callgrind, every process of the job) per iteration of
    ``kind``: the emulator's, and one rank's per MPI call -- the difference between a run of
    ``INSTR_BASE + iters`` iterations and one of ``INSTR_BASE``, so start-up and end cancel out."""
    totals = []
    for n in (INSTR_BASE, INSTR_BASE + iters):
        out = os.path.join(tmp, f"cg-{kind}-{n}-{int(direct)}")
        os.makedirs(out)
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--cache-sim=no",
               f"--callgrind-out-file={out}/cg.%p", sys.executable, "-m", "emu", "mpirun", "-n", "2", "--topo", topo,
               "--compute", "zero", *(["--direct"] if direct else []), prog, str(n), kind, "quick-exit"]
        # (EMU_MPIRUN_CHECK_S: under valgrind on a busy machine a rank can sit in its read long enough for the
        # emulator's look to take it for one waiting outside MPI; the looks wait 10 minutes here)
        env = dict(os.environ, PYTHONHASHSEED="0", EMU_MPIRUN_CHECK_S=os.environ.get("EMU_MPIRUN_CHECK_S", "600"))
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
        emu = ranks = None
        rank_totals = []
        for name in os.listdir(out):
            with open(os.path.join(out, name)) as f:
                text = f.read()
            cmdline = next((ln for ln in text.splitlines() if ln.startswith("cmd:")), "")
            total = next((int(ln.split()[1]) for ln in text.splitlines() if ln.startswith(("summary:", "totals:"))), None)
            if " emu mpirun " in cmdline:
                emu = total
            elif " emu.rank " in cmdline and total is not None:
                rank_totals.append(total)
        if len(rank_totals) == 2:
            ranks = sum(rank_totals) / 2
        if p.returncode or emu is None:
            raise SystemExit(f"the run under valgrind failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        totals.append((emu, ranks))  # (ranks None: a rank's valgrind was ended before it wrote its counts)
    calls = {"pingpong": 2, "barrier": 1, "allreduce": 1, "nonblocking": 3}[kind]
    ranks = None if None in (totals[0][1], totals[1][1]) else (totals[1][1] - totals[0][1]) / (iters * calls)
    return (totals[1][0] - totals[0][0]) / iters, ranks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--topo", default="star:n=2")
    ap.add_argument("--only", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--no-mpich", action="store_true")
    ap.add_argument("--no-udp", action="store_true", help="only the --direct path")
    ap.add_argument("--profile", metavar="FILE", help="run the emulator (default path) under cProfile into FILE")
    ap.add_argument("--instructions", type=int, metavar="N",
                    help=f"instead of wall time: user-space instructions per iteration (valgrind; the difference "
                         f"between {INSTR_BASE} and {INSTR_BASE} + N iterations; deterministic, slow: minutes per kind)")
    args = ap.parse_args(argv)
    only = [k.strip() for k in args.only.split(",") if k.strip()]
    bad = [k for k in only if k not in KINDS]
    if bad:
        print(f"--only: no kind {bad[0]!r}; give some of {', '.join(KINDS)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "bench.py")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        if args.instructions:
            if not shutil.which("valgrind"):
                print("--instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
                return 2
            print(f"user-space instructions, {args.instructions} iterations ({INSTR_BASE} + {args.instructions} "
                  f"minus {INSTR_BASE}), 2 ranks on {args.topo}: the emulator's per iteration, a rank's per MPI call")
            for direct in ([True] if args.no_udp else [False]):  # the default path, or --direct
                for k in only:
                    e, r = instructions(k, args.instructions, args.topo, direct, prog, tmp)
                    rank = "?" if r is None else f"{r / 1e3:6.1f}k"
                    print(f"{LABEL[k]:26} {'--direct' if direct else 'UDP':9} emulator {e / 1e3:8.1f}k   rank {rank}",
                          flush=True)
            return 0
        tail = [prog, str(args.iters), ",".join(only)]
        emu = [sys.executable, "-m", "emu", "mpirun", "-n", "2", "--topo", args.topo, "--compute", "zero"]
        if args.profile:
            emu = [sys.executable, "-m", "cProfile", "-o", args.profile, "-m", "emu", *emu[3:]]
        rows = {}
        if not args.no_udp:
            rows["emu (UDP)"] = run(emu + tail)
        if not args.profile:
            rows["emu --direct"] = run(emu + ["--direct"] + tail)
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
        if mpiexec and not args.no_mpich:
            env = dict(os.environ, PYTHONPATH="")
            rows["MPICH mpiexec"] = run([mpiexec, "-n", "2", sys.executable, *tail], env)
    model = model_one_way_us(args.topo)
    print(f"{args.iters} iterations per kind, 2 ranks on {args.topo}, wall us per MPI call as a rank waits "
          f"for it; CPU us per MPI call, the ranks' + the emulator's; (virtual us per iteration)")
    names = list(rows)
    print(f"{'call':26}" + "".join(f"{n:>34}" for n in names))
    for k in only:
        cells = []
        for n in names:
            r = rows[n][0].get(k)
            cells.append(f"{r[0]:8.1f} {r[2]:7.1f}+{r[3]:6.1f} ({r[1]:7.4f})" if r else "-")
        print(f"{LABEL[k]:26}" + "".join(f"{c:>34}" for c in cells))
    print("whole run, wall s:" + "".join(f"  {n} {rows[n][1]:.2f}" for n in names))
    if model is not None and "pingpong" in only:
        print(f"model: one-way 8 B message {model:.4f} us; the ping-pong's virtual iteration is a round trip "
              f"(2 x {model:.4f} = {2 * model:.4f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
