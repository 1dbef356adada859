"""``emu run --format nccl-tests|osu``: the collectives' rows in the layouts those benchmarks print,
so that the figures can be set beside a real machine's and read by the scripts that read theirs.

* **nccl-tests** (NVIDIA/nccl-tests 2.x, ``src/util.cu``: ``writeResultHeader``,
  ``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody``, ``writeResultFooter``): a block per
  collective, a row per size: ``size`` (B), ``count`` (elements), ``type``, ``redop``, ``root``, then
  time (us), algbw and busbw (GB/s, :mod:`emu.front.units`) and ``#wrong`` for out-of-place and for
  in-place. The emulator runs a collective once, in place, and charges no copy of the input, so both
  column groups hold that one run (said in a comment line); ``#wrong`` is 0 when the result equals
  numpy's and ``N/A`` when the row has no check.
* **OSU** (OSU Micro-Benchmarks 7, ``c/util/osu_util_mpi.c``: ``print_preamble``,
  ``print_only_header``, ``print_stats``): a block per collective, ``# Size`` and ``Avg
  Latency(us)`` (``%-10d%18.2f``; a barrier has no size column); the latency is the virtual
  completion time of the one run.

Comment lines (``#``) say what ran: the topology, and that times are virtual. A row of a test that
is no collective is refused before anything runs (:func:`check`).
"""

from __future__ import annotations

import numpy as np

from .units import SIZE_TIMES_RANKS, nccl_bandwidth

FORMATS = ("table", "nccl-tests", "osu")
NCCL_NAMES = {"allreduce": "all_reduce_perf", "allgather": "all_gather_perf", "reduce_scatter": "reduce_scatter_perf",
              "alltoall": "alltoall_perf", "bcast": "broadcast_perf", "reduce": "reduce_perf"}
OSU_NAMES = {"allreduce": "Allreduce", "allgather": "Allgather", "reduce_scatter": "Reduce_scatter",
             "alltoall": "All-to-All Personalized Exchange", "bcast": "Broadcast", "reduce": "Reduce",
             "barrier": "Barrier"}
NCCL_TYPES = {"float32": "float", "float16": "half", "float64": "double", "int8": "int8", "uint8": "uint8",
              "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64"}
ROOTED = ("bcast", "reduce")


def check(fmt: str, tests: list[str]) -> None:
    """Refuse a format whose layout has no place for one of ``tests``."""
    from ..config import ConfigError

    known = NCCL_NAMES if fmt == "nccl-tests" else OSU_NAMES if fmt == "osu" else None
    if known is None:
        return
    other = [t for t in tests if t not in known]
    if other:
        raise ConfigError(f"--format {fmt} prints the collectives {', '.join(known)}; {other[0]} is not one of them "
                          "(leave --format out for the table)")


def _float(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: two decimals if they fit the width, then one, none, exponent."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def _groups(finished, swept) -> dict[tuple[str, str, str], list]:
    """Rows by (collective, the sweep point but its size and topology): a block each, as one
    benchmark run prints."""
    out: dict[tuple[str, str], list] = {}
    for point, pargs, r in finished:
        at = " ".join(f"{k}={v}" for k, v in (point or {}).items() if k in swept and k not in ("size", "topo"))
        out.setdefault((r.name, at, pargs.topo), []).append((point, pargs, r))
    return out


def nccl_tests(finished, swept=()) -> str:
    """The rows of ``finished`` ((point, args, result) per row) in nccl-tests' layout."""
    lines = []
    for (name, at, topology), rows in _groups(finished, swept).items():
        lines += [f"# emu run on {topology}{' ' + at if at else ''}: {NCCL_NAMES[name]} layout (nccl-tests 2.x); times are virtual, "
                  "out-of-place and in-place are the one emulated run (no copy of the input is charged)", "#"]
        lines.append("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
                     % ("", "", "", "", ""))
        lines.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
            "#wrong"))
        lines.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""))
        bus, wrong_rows = [], 0
        for point, pargs, r in rows:
            f = r.as_dict()
            n, size, dtype = f.get("ranks", 0), f.get("size_bytes", 0), f.get("dtype", "float32")
            total = size * (n if name in SIZE_TIMES_RANKS else 1)
            count = total // np.dtype(dtype).itemsize
            redop = f.get("op", "none") if name in ("allreduce", "reduce", "reduce_scatter") else "none"
            root = (pargs.root or 0) if name in ROOTED else -1
            bw = nccl_bandwidth(f) if r.ok else None
            t_us = f.get("completion_ns", 0) / 1000
            algbw, busbw = bw if bw else (0.0, 0.0)
            checked = f.get("result")
            wrong = "N/A" if checked is None else "%6g" % (0 if r.ok and checked == "equal to numpy" else 1)
            wrong_rows += wrong.strip() not in ("0", "N/A")
            body = "  %7s  %6s  %6s  %6s" % (_float(t_us, 7), _float(algbw, 6), _float(busbw, 6), wrong)
            lines.append("%12i  %12i  %8s  %6s  %6s" % (total, count, NCCL_TYPES.get(dtype, dtype), redop, "%6i" % root)
                         + body + body)
            bus.append(busbw)
        avg = sum(bus) / len(bus) if bus else 0.0
        lines += ["# %-20s : %d %s" % ("Out of bounds values", wrong_rows, "FAILED" if wrong_rows else "OK"),
                  "# %-20s : %g " % ("Avg bus bandwidth", avg), "#",
                  f"# Collective test concluded: {NCCL_NAMES[name]}", ""]
    return "\n".join(lines)


def osu(finished, swept=()) -> str:
    """The rows of ``finished`` in OSU's collective latency layout."""
    lines = []
    for (name, at, topology), rows in _groups(finished, swept).items():
        lines += ["", f"# OSU MPI {OSU_NAMES[name]} Latency Test (layout of OSU Micro-Benchmarks 7; emu run on "
                      f"{topology}{' ' + at if at else ''}, virtual time)"]
        dtype = rows[0][2].figures.get("dtype")
        if dtype:
            lines.append(f"# Datatype: {dtype}.")
        if name == "barrier":
            lines.append("# Avg Latency(us)")
            lines += ["%*.*f" % (17, 2, (r.completion_ns or 0) / 1000) for _, _, r in rows]
            continue
        lines.append("%-*s%*s" % (10, "# Size", 18, "Avg Latency(us)"))
        lines += ["%-*d%*.*f" % (10, r.figures.get("size_bytes", 0), 18, 2, (r.completion_ns or 0) / 1000)
                  for _, _, r in rows]
    return "\n".join(lines) + "\n"


__all__ = ["FORMATS", "check", "nccl_tests", "osu"]
