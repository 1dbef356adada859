#!/usr/bin/env python3
"""Attack an installed emulator and say what held (issue 22).

    python scripts/adversary.py [--quick] [--seed S]

Uses only the installed ``emu`` package: the ``emu`` command (``sys.executable -m emu``) and the
Python API (``emu.Cluster``). Every attack is bounded in wall time and only ever sends to the
elements' own sockets on this machine (loopback). One line per attack, HELD or BROKE with what was
checked; exit status 0 if every attack held, 1 otherwise.

1. forged    -- DATA records (right cluster id, link id, next sequence number, valid FCS) and NACKs
                from a foreign socket toward every element during a collective: the figures, metrics
                and results equal a clean run's; the forged records are counted (``wrong_sender``),
                nothing was retransmitted, no gap or duplicate.
2. malformed -- empty datagrams, random bytes, truncated outer headers, wrong magic, wrong version,
                a foreign cluster id, unknown links and kinds, records whose frame is truncated or
                oversized, a frame with a bad FCS, sent to every element's socket during a run: the
                figures unchanged, every datagram counted once among the drop counters, the cluster
                still answers afterwards.
3. kill      -- SIGKILL of a worker process during a ``processes=2`` run that spills its capture
                to disk: the run ends with an error in one line within a timeout, and no
                ``emu-capture-*`` file or folder is left in the temporary folder.
4. faults    -- ``emu run`` with link faults at seeded random times (fattree, and --offload nic,
                switch and hw): every run exits 0 or 1 and prints no traceback, CausalityError or
                EngineError.
5. refusals  -- bad inputs: each refused in one line (``refused: ...``) with exit status 2, no traceback.

``--quick`` runs a subset in about 30 s of wall time (one forged run, the malformed set, the kill,
three random fault runs and one run per offload, the bad inputs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import trio

import emu
from emu.config import RunConfig
from emu.nodes.collectives.run import check_results, run_collective
from emu.wire import MAGIC, OUTER, VERSION, LinkKind, PacketType, add_fcs, build_frame

SPEC = "fattree:k=2,n=3"
KW = dict(count=4096, dtype="int32", op="sum", algo="ring", seed=5)
DROP_COUNTERS = ("truncated", "bad_magic", "foreign_cluster", "bad_link", "wrong_sender")
BAD_WORDS = ("Traceback", "CausalityError", "EngineError")
CLI_TIMEOUT_S = 90.0


@dataclass
class Verdict:
    name: str
    held: bool
    detail: str


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text.replace("\n", " | ")[:400]


def _local(addr) -> bool:
    """Only ever send to this machine."""
    host = addr[0]
    if host.startswith("127."):
        return True
    with contextlib.suppress(OSError):
        local = {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
        return host in local
    return False


# -- 1. forged records from a foreign socket ---------------------------------------------------------
async def _forge(net, sock: socket.socket, sent: list[int]) -> None:
    """An attacker who sniffs loopback: for every link ending in this process a DATA record with the
    right cluster id, link id, the very next sequence number and a valid FCS (stamped in the future
    and in the past); for every link starting here a NACK asking for everything."""
    forged = add_fcs(build_frame(0, 1, PacketType.MSG, b"\0" * 16 + b"forged payload"))
    while True:
        for el in net._local.elements:
            if not _local(el.addr):
                continue
            for inp in el.in_ports:
                for ts in (el.safe_time + 10**6, 0):
                    rec = OUTER.pack(MAGIC, VERSION, LinkKind.DATA, net.cluster_id, inp.link_id, inp.link.expected,
                                     ts, len(forged), 0) + forged
                    with contextlib.suppress(BlockingIOError):
                        sock.sendto(rec, el.addr)
                        sent[0] += 1
            for outp in el.out_ports:
                with contextlib.suppress(BlockingIOError):
                    sock.sendto(OUTER.pack(MAGIC, VERSION, LinkKind.NACK, net.cluster_id, outp.link_id, 0, 0, 0, 0),
                                el.addr)
                    sent[0] += 1
        await trio.sleep(0)


def _sum(stats, key: str) -> int:
    return sum(s["element"][key] for s in stats)


async def _drop_counts(net) -> dict[str, int]:
    """The drop counters of the elements and of the processes' sockets (what belongs to no element)."""
    stats, procs = await net.stats(), await net.process_stats()
    return {k: _sum(stats, k) + sum(p.get(k, 0) for p in procs) for k in DROP_COUNTERS}


async def _forged_run(attack: bool, processes: int, direct: bool):
    run = RunConfig(processes=processes, direct=direct)
    async with emu.Cluster(SPEC, run=run) as net:
        sent = [0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            async with trio.open_nursery() as nursery:
                if attack:
                    nursery.start_soon(_forge, net, sock, sent)
                res = await run_collective(net, "allreduce", **KW)
                nursery.cancel_scope.cancel()
        stats = await net.stats()
    return res, sent[0], stats


def _unlike_clean(hit, clean) -> list[str]:
    """How the attacked run's collective differs from what it should be and from the clean run's."""
    problems = []
    try:
        check_results(hit, KW["count"], KW["dtype"], KW["op"], 0, KW["seed"])
    except AssertionError as e:
        problems.append(f"results wrong: {e}")
    if hit.figures() != clean.figures() or hit.metrics != clean.metrics:
        problems.append(f"figures differ: {hit.figures()} vs clean {clean.figures()}")
    return problems


async def attack_forged(processes: int, direct: bool) -> Verdict:
    name = f"forged records (processes={processes}{'' if direct else ', every link on UDP'})"
    with trio.fail_after(60):
        clean, _, cstats = await _forged_run(False, processes, direct)
        hit, sent, stats = await _forged_run(True, processes, direct)
    wrong, clean_wrong = _sum(stats, "wrong_sender"), _sum(cstats, "wrong_sender")
    retx, dup_gap = _sum(stats, "retransmitted"), _sum(stats, "duplicates") + _sum(stats, "gaps")
    problems = []
    if sent == 0:
        problems.append("nothing was sent")
    if clean_wrong:
        problems.append(f"clean run counted {clean_wrong} wrong_sender")
    if not 0 < wrong <= sent:
        problems.append(f"wrong_sender {wrong} not within 1..{sent}")
    if retx or dup_gap:
        problems.append(f"forged input caused {retx} retransmissions, {dup_gap} gaps/duplicates")
    problems.extend(_unlike_clean(hit, clean))
    if any(not np.array_equal(hit.results[h], clean.results[h]) for h in clean.ranks):
        problems.append("results differ from the clean run's")
    detail = (f"{sent} forged records/NACKs sent, {wrong} counted wrong_sender, {retx} retransmitted, "
              f"{dup_gap} gaps+duplicates; figures {'equal' if hit.figures() == clean.figures() else 'DIFFER'} "
              f"({hit.figures()})")
    return Verdict(name, not problems, detail + ("" if not problems else " -- " + "; ".join(problems)))


# -- 2. malformed datagrams ----------------------------------------------------------------------------
def _malformed(net, el, rng: random.Random) -> list[tuple[str, bytes]]:
    """The malformed datagrams for one element (each is dropped at its first fault: one count each)."""
    cid = net.cluster_id
    in_link = el.in_ports[0].link_id if el.in_ports else 0
    out_link = el.out_ports[0].link_id if el.out_ports else 0
    good = add_fcs(build_frame(0, 1, PacketType.MSG, b"\0" * 16 + b"malformed"))
    bad_fcs = good[:-4] + bytes(b ^ 0xFF for b in good[-4:])
    big = add_fcs(build_frame(0, 1, PacketType.MSG, bytes(60_000)))

    def rec(frame: bytes, *, magic=MAGIC, ver=VERSION, kind=LinkKind.DATA, c=cid, link=in_link, length=None):
        return OUTER.pack(magic, ver, kind, c, link, 0, 0, len(frame) if length is None else length, 0) + frame

    junk = bytes([rng.randrange(0, 0xFA)]) + rng.randbytes(rng.randrange(40, 300))  # never MAGIC's first byte
    return [
        ("empty", b""),
        ("random short", rng.randbytes(rng.randrange(1, 28))),
        ("random bytes", junk),
        ("truncated outer header", rec(good)[:rng.randrange(1, 28)]),
        ("wrong magic", rec(good, magic=0xDEAD)),
        ("wrong version", rec(good, ver=VERSION + 7)),
        ("foreign cluster id", rec(good, c=cid ^ 0x5A5A5A5A)),
        ("unknown link", rec(good, link=0x7FFFFFF0)),
        ("NACK for a link not starting here", rec(b"", kind=LinkKind.NACK, link=0x7FFFFFF1)),
        ("unknown record kind", rec(good, kind=9)),
        ("truncated frame", rec(good)[:28 + len(good) // 2]),
        ("length past the datagram", rec(good, length=0xFFFF)),
        ("oversized frame", rec(big)),
        ("bad FCS", rec(bad_fcs)),
        ("NACK from a stranger", rec(b"", kind=LinkKind.NACK, link=out_link)),
    ]


async def _malformed_run(attack: bool, rng: random.Random):
    async with emu.Cluster(SPEC, processes=1) as net:
        before = await _drop_counts(net)
        sent = [0]
        kinds: set[str] = set()

        async def pelt(sock):
            for _ in range(3):  # three rounds during the run
                for el in net._local.elements:
                    if not _local(el.addr):
                        continue
                    for what, dgram in _malformed(net, el, rng):
                        try:
                            sock.sendto(dgram, el.addr)
                        except BlockingIOError:
                            continue
                        sent[0] += 1
                        kinds.add(what)
                    await trio.sleep(0)
                await trio.sleep(0.002)

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            async with trio.open_nursery() as nursery:
                if attack:
                    nursery.start_soon(pelt, sock)
                res = await run_collective(net, "allreduce", **KW)
        # let the elements read what is still queued on their sockets
        counted = 0
        deadline = trio.current_time() + 5
        while True:
            now = await _drop_counts(net)
            counted = sum(now[k] - before[k] for k in DROP_COUNTERS)
            if counted >= sent[0] or trio.current_time() > deadline:
                break
            await trio.sleep(0.05)
        alive = await net["h0"].ping(net.hosts[-1])  # still answers
        by_kind = {k: now[k] - before[k] for k in DROP_COUNTERS}
    return res, sent[0], counted, by_kind, alive, len(kinds)


async def attack_malformed(rng: random.Random) -> Verdict:
    name = "malformed datagrams"
    with trio.fail_after(60):
        clean, _, clean_counted, _, _, _ = await _malformed_run(False, rng)
        hit, sent, counted, by_kind, alive, nkinds = await _malformed_run(True, rng)
    problems = []
    if clean_counted:
        problems.append(f"a clean run counted {clean_counted} drops")
    if sent == 0:
        problems.append("nothing was sent")
    if counted != sent:
        problems.append(f"{sent} sent but {counted} counted")
    problems.extend(_unlike_clean(hit, clean))
    if not isinstance(alive, int) or alive <= 0:
        problems.append(f"ping after the attack gave {alive!r}")
    counts = ", ".join(f"{k} {v}" for k, v in by_kind.items())
    detail = (f"{sent} datagrams of {nkinds} kinds sent to every element, {counted} counted ({counts}); "
              f"figures {'equal' if hit.figures() == clean.figures() else 'DIFFER'}; ping afterwards {alive} ns")
    return Verdict(name, not problems, detail + ("" if not problems else " -- " + "; ".join(problems)))


# -- 3. kill -9 of a worker --------------------------------------------------------------------------
def _leftovers(folder: str, since: float) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.name.startswith("emu-capture-"):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime >= since - 1:
                        out.append(entry.name)
    return out


async def attack_kill() -> Verdict:
    name = "kill -9 of a worker"
    # a temporary folder of our own (this process and the workers it starts), so that runs of other
    # programs cannot be taken for our leftovers
    private = tempfile.mkdtemp(prefix="adversary-")
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = private
    os.environ["TMPDIR"] = private
    start = time.time()
    t0 = time.monotonic()
    error: BaseException | None = None
    killed = None
    spilled = False
    hung = False
    try:
        run = RunConfig(processes=2, capture=True, capture_spill_records=64)
        with trio.move_on_after(45) as scope:
            try:
                async with emu.Cluster("fattree:k=4,n=2", run=run, capture=os.path.join(private, "k.pcapng")) as net:
                    [pid] = net.worker_pids

                    async def killer():
                        nonlocal killed, spilled
                        deadline = trio.current_time() + 5
                        while trio.current_time() < deadline:  # once the capture spilled to disk
                            if any(os.scandir(d.path) for d in os.scandir(private) if d.is_dir()
                                   and d.name.startswith("emu-capture-")):
                                spilled = True
                                break
                            await trio.sleep(0.02)
                        os.kill(pid, signal.SIGKILL)
                        killed = pid

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(killer)
                        for i in range(10_000):
                            await run_collective(net, "allreduce", count=16384, dtype="float32", algo="ring", seed=i)
                        nursery.cancel_scope.cancel()
            except BaseException as e:  # noqa: BLE001 -- the error is what we look at
                if isinstance(e, (KeyboardInterrupt, trio.Cancelled)):
                    raise
                error = e
        hung = scope.cancelled_caught
        await trio.sleep(0.2)
        left = _leftovers(private, start)
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        left_all = [os.path.relpath(os.path.join(r, f), private) for r, ds, fs in os.walk(private) for f in fs + ds]
        shutil.rmtree(private, ignore_errors=True)
    wall = time.monotonic() - t0
    problems = []
    if killed is None:
        problems.append("the worker was never killed (the run ended first?)")
    if hung:
        problems.append("no error within 45 s: hung")
    msg = "" if error is None else _one_line(error)
    if error is None and not hung:
        problems.append("the run ended without an error")
    elif error is not None:
        if isinstance(error, BaseExceptionGroup) or "\n" in str(error):
            problems.append(f"the error is not one line: {type(error).__name__} {str(error)[:200]!r}")
    if left:
        problems.append(f"left in the temporary folder: {left}")
    detail = (f"worker {killed} killed{' after the capture spilled' if spilled else ''}; run ended in {wall:.1f} s with "
              f"{msg[:200]!r}; temporary files left: {len(left)} (folder held {left_all or 'nothing else'})")
    return Verdict(name, not problems, detail + ("" if not problems else " -- " + "; ".join(problems)))


# -- 4. faults at random times ----------------------------------------------------------------------
def _emu(args: list[str], timeout: float = CLI_TIMEOUT_S) -> tuple[int | None, str]:
    """Run the installed ``emu`` command; (exit status or None on timeout, stdout and stderr as written)."""
    env = dict(os.environ, COLUMNS="200")
    try:
        p = subprocess.run([sys.executable, "-m", "emu", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, env=env, errors="replace", stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        return None, out.decode(errors="replace") if isinstance(out, bytes) else out
    return p.returncode, p.stdout


def _emu_many(cmds: list[list[str]], parallel: int = 4) -> list[tuple[int | None, str]]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(_emu, cmds))


def _switch_links(spec: str) -> list[str]:
    topo = emu.topologies.build(spec)
    hosts = set(topo.host_names) if not callable(topo.host_names) else set(topo.host_names())
    return sorted({f"{lk.a}-{lk.b}" for lk in topo.links if lk.a not in hosts and lk.b not in hosts})


def _ns(t: int) -> str:
    return f"{t}ns"


def attack_faults(rng: random.Random, n: int, offload_rounds: int) -> Verdict:
    name = "faults at random times"
    cmds = []
    for _ in range(n):
        t = rng.randrange(0, 50_001)
        t2 = rng.randrange(0, 50_001)
        cmds.append(["run", "--topo", "fattree:k=4,n=2", "--test", "pingall+allreduce", "--seed", str(rng.randrange(1000)),
                     "--fault", f"at={_ns(t)},link=s0-s4,down", "--fault", f"at={_ns(t2)},link=s0-s4,up"])
    offloads = [("nic", "fattree:k=2,n=3", "allreduce+reduce"),
                ("switch", "fattree:k=4,n=2", "allreduce"),
                ("hw", "qsnet:nodes=16", "bcast+barrier+allreduce")]
    for _ in range(offload_rounds):
        for off, spec, tests in offloads:
            link = rng.choice(_switch_links(spec))
            t = rng.randrange(0, 50_001)
            t2 = t + rng.randrange(0, 50_001)
            cmds.append(["run", "--topo", spec, "--test", tests, "--offload", off, "--seed", str(rng.randrange(1000)),
                         "--fault", f"at={_ns(t)},link={link},down", "--fault", f"at={_ns(t2)},link={link},up"])
    results = _emu_many(cmds)
    codes = [rc for rc, _ in results]
    problems = []
    for cmd, (rc, out) in zip(cmds, results):
        bad = [w for w in BAD_WORDS if w in out]
        if rc not in (0, 1) or bad:
            why = "timed out" if rc is None else f"exit {rc}"
            last = out.strip().splitlines()[-1][:160] if out.strip() else ""
            problems.append(f"`emu {' '.join(cmd)}`: {why}{', printed ' + '/'.join(bad) if bad else ''} ({last!r})")
    detail = (f"{len(cmds)} runs ({n} fattree s0-s4 down/up, {len(cmds) - n} with --offload nic/switch/hw), "
              f"exit codes {codes}; none printed {'/'.join(BAD_WORDS)}" if not problems else
              f"{len(cmds)} runs, exit codes {codes}")
    return Verdict(name, not problems, detail + ("" if not problems else " -- " + "; ".join(problems)))


# -- 5. bad inputs -------------------------------------------------------------------------------------
def attack_refusals() -> Verdict:
    name = "bad inputs refused"
    folder = tempfile.mkdtemp(prefix="adversary-")
    try:
        toml = os.path.join(folder, "bad.toml")
        with open(toml, "wb") as f:
            f.write(b'[link]\nlatency_ns = 100 # \xff\xfe caf\xe9\n')
        cases = [
            ["plan", "nc", "mesh:k=2,n=1"],
            ["plan", "nc", "torus:k=3,n=1"],
            ["run", "--topo", "fattree:k=4,n=2", "--config", toml],
            ["run", "--topo", "fattree:k=4,n=2", "--test", "put", "--size", "0"],
            ["run", "--topo", "fattree:k=4,n=2", "--realtime", "1e-300"],
            ["run", "--topo", "fattree:k=4,n=2", "--set", "switch.vc_buffer_bytes=1"],
            ["run", "--topo", "star:n=\u0664"],
            ["run", "--topo", "star:n=4", "--bind", "0.0.0.0"],
            ["run", "--topo", "hypercube:n=4"],
            ["run", "--topo", "fattree:k=4,n=2", "--fault", "at=soon,link=s0-s4,sideways"],
        ]
        results = _emu_many(cases)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    problems = []
    for cmd, (rc, out) in zip(cases, results):
        lines = out.rstrip("\n").split("\n")
        why = []
        if rc != 2:
            why.append("timed out" if rc is None else f"exit {rc}")
        if "Traceback" in out:
            why.append("traceback")
        if len(lines) != 1:
            why.append(f"{len(lines)} lines")
        if not any(ln.startswith("refused:") for ln in lines):
            why.append("no 'refused:' line")
        if why:
            shown = " ".join(cmd).replace(folder, "$TMP")
            problems.append(f"`emu {shown}`: {', '.join(why)} ({out[:160]!r})")
    detail = f"{len(cases)} bad inputs, exit codes {[rc for rc, _ in results]}"
    if not problems:
        detail += ", each one line 'refused: ...', no traceback"
    return Verdict(name, not problems, detail + ("" if not problems else " -- " + "; ".join(problems)))


# -- main -------------------------------------------------------------------------------------------
def _guard(name: str, fn, *args) -> Verdict:
    try:
        return fn(*args)
    except Exception as e:  # an attack that could not even be carried out is a finding too
        return Verdict(name, False, f"the attack itself failed: {_one_line(e)}")


def _guard_async(name: str, fn, *args) -> Verdict:
    return _guard(name, lambda: trio.run(fn, *args))


def _say(v: Verdict) -> None:
    print(f"{'HELD ' if v.held else 'BROKE'} {v.name}: {v.detail}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--quick", action="store_true", help="a subset taking about 30 s")
    ap.add_argument("--seed", type=int, default=0, help="seeds every random choice (fault times, bytes)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    import logging

    logging.disable(logging.WARNING)  # the elements log the first drop of each kind: expected here
    verdicts = []
    t0 = time.monotonic()

    def go(v: Verdict) -> None:
        verdicts.append(v)
        _say(v)

    go(_guard_async("forged records", attack_forged, 2, True))
    if not args.quick:
        go(_guard_async("forged records", attack_forged, 1, False))
    go(_guard_async("malformed datagrams", attack_malformed, random.Random(rng.random())))
    go(_guard_async("kill -9 of a worker", attack_kill))
    go(_guard("faults at random times", attack_faults, random.Random(rng.random()),
              3 if args.quick else 20, 1 if args.quick else 3))
    go(_guard("bad inputs refused", attack_refusals))
    held = sum(v.held for v in verdicts)
    print(f"{held} of {len(verdicts)} attacks held ({time.monotonic() - t0:.1f} s wall)", file=sys.stderr, flush=True)
    return 0 if held == len(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
