#!/usr/bin/env python3
"""Hand the installed emulator files and options as an attacker would, and say what held (issue 41).

    python scripts/adversary_files.py [--quick] [--list] [--only NAME,...] [--timeout S] [--memory MIB]

A colleague's results file to ``--replay`` or ``emu report``, a topology file from a paper's
artifact, a ``--config``, a sweep: each case writes its hostile input into a fresh temporary folder
and runs one ``emu`` command on it (``sys.executable -m emu``, the installed package), under a wall
timeout (default 20 s; SIGTERM first, which must end it within 5 s) and a memory cap (``RLIMIT_AS``,
default 3 GiB). A case HELD when the command ended in time, in bounded memory, printed exactly one
line, ``refused: ...`` (naming what the case expects, where it says), with exit status 2, and wrote
nothing the case forbids. One line per case, HELD or BROKE with why; exit status 0 if every case
held, 1 otherwise.

The cases, by the issue's items: 1 a results file whose recorded command line abbreviates an output
option (``--js``, ``--pca``, ``--cs``, ``--trace-b``), holds a non-string or unknown item; 2 a
topology file whose grid implies 3**99999999999999 hosts, and a 10,000-host star file without link
indices (must load within the timeout: the one case that succeeds); 3 JSON, TOML and XML nested
5,000 deep, numbers of 100,000 digits, ``"graph": [...]``, results and traces whose rows hold the
wrong types; 4 ``/dev/zero``, a FIFO, a directory, a symlink to a device and an oversized (sparse)
file where each loader expects a file; 5 a sweep of 10^9 points; 6 a message size larger than the
machine's memory, a port number of 10^12, non-decimal numbers in ``--set``, contradictory faults;
7 a fault past the horizon of virtual time.

``--quick`` runs one or two cases per item (about 30 s of wall time); the test suite runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

REFUSED = re.compile(r"(emu(?: \w+)?: )?refused: ")
"""A refusal: ``refused: ...`` (the run's checks) or ``emu run: refused: ...`` (the command line)."""
DEEP = 5000
DIGITS = "1" * 100_000


@dataclass
class Case:
    name: str
    item: int
    argv: list[str]
    """The ``emu`` arguments; ``{d}`` is the case's folder."""
    setup: Callable[[str], None] = lambda d: None
    quick: bool = False
    expect: str = ""
    """A word the refusal must hold (case-insensitive), naming the problem."""
    forbid: list[str] = field(default_factory=list)
    """Paths (with ``{d}``) that must not exist afterwards."""
    rc: int = 2
    """The exit status that holds: 2 (refused) for all but the cases that must succeed."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment added to the command's (``EMU_PURE=1``: the pure-Python path)."""


# -- inputs ----------------------------------------------------------------------------------------
def _write(path: str, data: str | bytes) -> None:
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def _results(d: str, argv: list) -> None:
    """A results file of ``emu run`` (the layout ``--replay`` reads) whose run record holds ``argv``."""
    row = {"topology": "star:n=2", "seed": 0, "name": "allreduce", "ok": True, "completion_ns": 1478,
           "per_link": {"h0-nic0": {"busy_ns": 100}}}
    _write(os.path.join(d, "r.json"), json.dumps({"run": {"format": 1, "argv": argv, "topology": "star:n=2",
                                                          "seed": 0}, "results": [row]}))


def _report_input(d: str, row_update: dict | None = None, run_update: dict | None = None) -> None:
    row = {"topology": "star:n=2", "seed": 0, "name": "allreduce", "completion_ns": 1478,
           "per_link": {"h0-nic0": {"busy_ns": 100}}, **(row_update or {})}
    run = {"format": 1, "argv": ["run"], "seed": 0, **(run_update or {})}
    _write(os.path.join(d, "r.json"), json.dumps({"run": run, "results": [row]}))


def _topo(d: str, mutate: Callable[[dict], None] | None = None, spec: str = "star:n=2", name: str = "t.json") -> None:
    """A topology file as ``emu topo SPEC --format json`` writes it, then ``mutate``d."""
    p = subprocess.run([sys.executable, "-m", "emu", "topo", spec, "--format", "json"], capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(f"emu topo {spec} --format json: {p.stdout}{p.stderr}")
    data = json.loads(p.stdout)
    if mutate:
        mutate(data)
    _write(os.path.join(d, name), json.dumps(data))


def _star(d: str, n: int) -> None:
    """A star of ``n`` hosts as a file, without link indices and routes (a file may describe more hosts
    than the ``star`` family's spec allows: the limits a file meets are the tool's, not a family's)."""
    nodes = [{"kind": "host", "id": f"h{i}"} for i in range(n)] + [{"kind": "switch", "id": "s0"}]
    links = [{"source": f"h{i}", "target": "s0", "source_port": 0, "target_port": i} for i in range(n)]
    _write(os.path.join(d, "t.json"), json.dumps({"directed": True, "multigraph": True, "graph": {},
                                                  "nodes": nodes, "links": links}))


def _grid(data: dict) -> None:
    data.setdefault("graph", {})["grid"] = "3,99999999999999,1"


def _port(data: dict) -> None:
    data["links"][0]["source_port"] = 10**12


def _fifo(name: str) -> Callable[[str], None]:
    return lambda d: os.mkfifo(os.path.join(d, name))


def _link(name: str, target: str) -> Callable[[str], None]:
    return lambda d: os.symlink(target, os.path.join(d, name))


def _sparse(name: str, size: int) -> Callable[[str], None]:
    def make(d: str) -> None:
        with open(os.path.join(d, name), "wb") as f:
            f.truncate(size)
    return make


def _text(name: str, text: str | Callable[[], str]) -> Callable[[str], None]:
    return lambda d: _write(os.path.join(d, name), text() if callable(text) else text)


def _graphml_deep() -> str:
    return ("<?xml version='1.0'?><graphml xmlns='http://graphml.graphdrawing.org/xmlns'><graph edgedefault="
            "'undirected'>" + "<desc>" * DEEP + "</desc>" * DEEP + "</graph></graphml>")


RUN = ["run", "--topo", "star:n=2", "--test", "allreduce"]
SETS = [",".join(str(i) for i in range(1, 1001))]


def cases() -> list[Case]:
    out_json, out_pcap, out_csv, out_bin = "{d}/out/x.json", "{d}/out/x.pcap", "{d}/out/x.csv", "{d}/out/x.bin"
    return [
        # 1. a results file's command line: data, never commands
        Case("replay-abbrev-json", 1, ["run", "--replay", "{d}/r.json"], quick=True, forbid=[out_json],
             setup=lambda d: _results(d, ["run", "--topo", "star:n=2", "--test", "allreduce", "--js", f"{d}/out/x.json"])),
        Case("replay-abbrev-pcap", 1, ["run", "--replay", "{d}/r.json"], forbid=[out_pcap],
             setup=lambda d: _results(d, ["run", "--topo", "star:n=2", "--test", "allreduce", "--pca", f"{d}/out/x.pcap"])),
        Case("replay-abbrev-csv", 1, ["run", "--replay", "{d}/r.json"], forbid=[out_csv],
             setup=lambda d: _results(d, ["run", "--topo", "star:n=2", "--test", "allreduce", f"--cs={d}/out/x.csv"])),
        Case("replay-abbrev-trace-bin", 1, ["run", "--replay", "{d}/r.json"], forbid=[out_bin],
             setup=lambda d: _results(d, ["run", "--topo", "star:n=2", "--test", "allreduce", "--trace-b", f"{d}/out/x.bin"])),
        Case("replay-non-string", 1, ["run", "--replay", "{d}/r.json"], quick=True,
             setup=lambda d: _results(d, ["run", "--topo", "star:n=2", "--test", 7])),
        Case("replay-unknown-option", 1, ["run", "--replay", "{d}/r.json"], expect="--bogus",
             setup=lambda d: _results(d, ["run", "--topo", "star:n=2", "--test", "allreduce", "--bogus", "1"])),
        Case("run-abbreviation", 1, [*RUN, "--js", "{d}/out/x.json"], forbid=[out_json]),
        # 2. topology files that hang or crawl
        Case("topo-grid-huge", 2, ["topo", "{d}/t.json"], quick=True, expect="grid", setup=lambda d: _topo(d, _grid)),
        Case("topo-10000-hosts-no-index", 2, ["topo", "{d}/t.json"], rc=0,
             setup=lambda d: _star(d, 10_000)),
        # 3. what parsing raises, as one line
        Case("config-toml-deep", 3, [*RUN, "--config", "{d}/c.toml"], quick=True, expect="deep",
             setup=_text("c.toml", "a = " + "[" * DEEP + "]" * DEEP + "\n")),
        Case("config-toml-digits", 3, [*RUN, "--config", "{d}/c.toml"], expect="digits",
             setup=_text("c.toml", f"[link]\nlatency_ns = {DIGITS}\n")),
        Case("topo-json-deep", 3, ["topo", "{d}/t.json"], expect="deep",
             setup=_text("t.json", '{"nodes": [], "links": [], "graph": ' + "[" * DEEP + "]" * DEEP + "}")),
        Case("topo-json-digits", 3, ["topo", "{d}/t.json"], expect="digits",
             setup=lambda d: _write(os.path.join(d, "t.json"), '{"nodes": [{"id": "h0", "x": ' + DIGITS + '}], "links": []}')),
        Case("topo-graphml-deep", 3, ["topo", "{d}/t.graphml"], quick=True, expect="nest", setup=_text("t.graphml", _graphml_deep)),
        Case("topo-graph-is-a-list", 3, ["topo", "{d}/t.json"], expect="graph",
             setup=lambda d: _topo(d, lambda g: g.__setitem__("graph", [1, 2]))),
        Case("report-json-deep", 3, ["report", "{d}/r.json", "--out", "{d}/plots"], forbid=["{d}/plots"],
             expect="deep", setup=_text("r.json", "[" * DEEP + "]" * DEEP)),
        Case("report-digits", 3, ["report", "{d}/r.json", "--out", "{d}/plots"], expect="digits",
             setup=_text("r.json", '{"run": {}, "results": [{"topology": "star:n=2", "name": "x", "per_link": {}, '
                                   '"completion_ns": ' + DIGITS + "}]}")),
        Case("report-per-link-not-object", 3, ["report", "{d}/r.json", "--out", "{d}/plots"], quick=True,
             expect="per_link", setup=lambda d: _report_input(d, {"per_link": {"h0-nic0": "busy"}})),
        Case("report-completion-text", 3, ["report", "{d}/r.json", "--out", "{d}/plots"], expect="completion_ns",
             setup=lambda d: _report_input(d, {"completion_ns": "soon"})),
        Case("report-topology-list", 3, ["report", "{d}/r.json", "--out", "{d}/plots"], expect="topology",
             setup=lambda d: _report_input(d, {"topology": ["star:n=2"]})),
        Case("report-sweep-bad", 3, ["report", "{d}/r.json", "--out", "{d}/plots"], expect="sweep",
             setup=lambda d: _report_input(d, {"point": {"size": "1KiB"}}, {"sweep": {"size": 5}})),
        Case("report-trace-bad-ts", 3, ["report", "{d}/r.json", "--trace", "{d}/tr.json", "--out", "{d}/plots"],
             expect="ts", setup=lambda d: (_report_input(d), _write(os.path.join(d, "tr.json"), json.dumps(
                 {"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1},
                                  {"ph": "B", "pid": 1, "ts": "x"}]})))),
        Case("replay-json-deep", 3, ["run", "--replay", "{d}/r.json"], expect="deep",
             setup=_text("r.json", "[" * DEEP + "]" * DEEP)),
        # 4. special and huge files
        Case("config-dev-zero", 4, [*RUN, "--config", "/dev/zero"], quick=True, expect="regular file"),
        Case("replay-dev-zero", 4, ["run", "--replay", "/dev/zero"], expect="regular file"),
        Case("report-dev-zero", 4, ["report", "/dev/zero", "--out", "{d}/plots"], expect="regular file"),
        Case("report-trace-dev-zero", 4, ["report", "{d}/r.json", "--trace", "/dev/zero", "--out", "{d}/plots"],
             expect="regular file", setup=lambda d: _report_input(d)),
        Case("topo-symlink-dev-zero", 4, [*RUN[:1], "--topo", "{d}/t.json", "--test", "allreduce"], quick=True,
             expect="regular file", setup=_link("t.json", "/dev/zero")),
        Case("config-fifo", 4, [*RUN, "--config", "{d}/c.toml"], quick=True, expect="FIFO", setup=_fifo("c.toml")),
        Case("replay-fifo", 4, ["run", "--replay", "{d}/r.json"], expect="FIFO", setup=_fifo("r.json")),
        Case("report-fifo", 4, ["report", "{d}/r.json", "--out", "{d}/plots"], expect="FIFO", setup=_fifo("r.json")),
        Case("topo-fifo", 4, ["topo", "{d}/t.graphml"], expect="FIFO", setup=_fifo("t.graphml")),
        Case("config-directory", 4, [*RUN, "--config", "{d}"], expect="directory"),
        Case("config-oversized", 4, [*RUN, "--config", "{d}/c.toml"], expect="MiB", setup=_sparse("c.toml", 17 << 20)),
        Case("results-oversized", 4, ["run", "--replay", "{d}/r.json"], expect="MiB", setup=_sparse("r.json", 257 << 20)),
        # 5. sweeps counted before they are built
        Case("sweep-10^9-points", 5, [*RUN, "--set", f"link.latency_ns={SETS[0]}", "--set",
                                     f"host.send_overhead_ns={SETS[0]}", "--set", f"switch.latency_ns={SETS[0]}"],
             quick=True, expect="1,000,000,000"),
        # 6. sizes
        Case("size-beyond-memory", 6, ["run", "--topo", "star:n=8", "--test", "allreduce", "--size", "1GiB"],
             quick=True, expect="memory"),
        Case("topo-port-10^12", 6, ["topo", "{d}/t.json"], expect="port", setup=lambda d: _topo(d, _port)),
        Case("set-hex", 6, [*RUN, "--set", "link.latency_ns=0x10"], expect="latency_ns"),
        Case("set-underscore", 6, [*RUN, "--set", "link.latency_ns=1_0"], expect="latency_ns"),
        Case("fault-down-up", 6, [*RUN, "--fault", "at=1us,link=h0-s0,down,up"], quick=True, expect="fault"),
        Case("fault-two-at", 6, [*RUN, "--fault", "at=1us,at=2us,link=h0-s0,down"], expect="at"),
        # 7. the horizon of virtual time
        Case("fault-past-horizon", 7, [*RUN, "--fault", "at=4611686018427387904ns,link=h0-s0,down"], quick=True,
             expect="2**62"),
    ]


# -- running ---------------------------------------------------------------------------------------
def _limit(memory: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.setsid()
    return apply


def run_case(c: Case, timeout: float, memory: int) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="emu-adversary-files-") as d:
        os.mkdir(os.path.join(d, "out"))
        try:
            c.setup(d)
        except Exception as e:  # noqa: BLE001 -- a setup that fails is this script's problem: say so
            return False, f"setup failed: {type(e).__name__}: {e}"
        argv = [a.replace("{d}", d) for a in c.argv]
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "emu", *argv], cwd=d, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                             preexec_fn=_limit(memory), env={**os.environ, **c.env})
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.communicate(timeout=5)
                how = "ended by SIGTERM"
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                how = "SIGTERM did not end it either"
            return False, f"still running after {timeout:.0f} s ({how})"
        wall = time.monotonic() - t0
        text = (out + err).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        written = [f for f in (x.replace("{d}", d) for x in c.forbid) if os.path.exists(f)]
        problems = []
        if written:
            problems.append(f"wrote {', '.join(os.path.relpath(w, d) for w in written)}")
        if "Traceback" in text:
            problems.append("a traceback")
        if p.returncode != c.rc:
            problems.append(f"exit {p.returncode} (want {c.rc})")
        if c.rc == 2:
            if len(lines) != 1 or not REFUSED.match(lines[0]):
                problems.append(f"{len(lines)} lines, not one 'refused:' line")
            elif c.expect and c.expect.lower() not in lines[0].lower():
                problems.append(f"the refusal does not name {c.expect!r}")
        first = lines[0] if lines else "(no output)"
        if len(first) > 160:
            first = first[:157] + "..."
        if problems:
            return False, f"{'; '.join(problems)} in {wall:.1f} s: {first}"
        return True, f"{wall:.1f} s: {first}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--quick", action="store_true", help="one or two cases per item (about 30 s)")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--timeout", type=float, default=20.0, help="wall seconds a case may take (default 20)")
    ap.add_argument("--memory", type=int, default=3072, help="address space a case may use, MiB (default 3072)")
    args = ap.parse_args()
    todo = cases()
    if args.list:
        for c in todo:
            print(f"{c.item}  {c.name}{'  (quick)' if c.quick else ''}")
        return 0
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {c.name for c in todo}
        if unknown:
            print(f"--only: no case named {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
            return 2
        todo = [c for c in todo if c.name in names]
    elif args.quick:
        todo = [c for c in todo if c.quick]
    broke = 0
    for c in todo:
        held, why = run_case(c, args.timeout, args.memory << 20)
        broke += not held
        print(f"{'HELD ' if held else 'BROKE'} {c.item} {c.name}: {why}", flush=True)
    print(f"{len(todo) - broke} of {len(todo)} held")
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
