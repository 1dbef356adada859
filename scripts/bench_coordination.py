#!/usr/bin/env python3
"""What the main process pays, per window, to coordinate 7 worker processes (``emu.sync``'s window
request to each and its answer), without any model work: 7 echoing workers over socket pairs, the
tree's ``RemoteHandle`` and ``MsgStream``. Counted in the main process's instructions under
callgrind (the workers run natively), a run of ``--windows`` windows less one of none: deterministic
to a fraction of a per cent, unlike CPU seconds on a shared machine. Kernel work (the system calls)
is not in the count.

    python scripts/bench_coordination.py [--tree TREE] [--before TREE] [--windows 2000]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys

HOME = pathlib.Path(__file__).resolve().parents[1]
WORKERS = 7


async def _worker(fd: int) -> None:
    import trio
    from emu.sync import MsgStream

    chan = MsgStream(trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=fd))))
    while True:
        try:
            method, args = await chan.recv()
        except EOFError:
            return
        if method == "stop":
            return
        w, t0, t1, _ = args
        await chan.send(("ok", ([w * 3 + i for i in range(WORKERS + 1)], t1 + 5, t0)))


async def _main(tree: str, windows: int) -> None:
    import trio
    from emu.sync import MsgStream, RemoteHandle

    kids, handles = [], []
    for d in range(1, WORKERS + 1):
        a, b = socket.socketpair()
        kids.append(subprocess.Popen([sys.executable, __file__, "--serve", str(b.fileno()), "--tree", tree],
                                     pass_fds=[b.fileno()]))
        b.close()
        handles.append(RemoteHandle(d, MsgStream(trio.SocketStream(trio.socket.from_stdlib_socket(a)))))
    total = 0
    for w in range(1, windows + 1):
        for h in handles:
            await h.request("window", w, w * 1000, w * 1000 + 500, w * 7)
        for h in handles:
            sent, nt, mt = await h.reply("window")
            total += sent[0] + nt + mt
    for h in handles:
        await h.close()
    for k in kids:
        k.wait()
    expect = sum(sum(w * 3 + w * 1000 + 505 + w * 1000 for w in range(1, windows + 1)) for _ in handles)
    if total != expect:
        raise SystemExit(f"the answers' checksum {total} is not {expect}: a message was garbled")


def count(tree: str, windows: int) -> int:
    """The main process's instructions for ``windows`` windows, start-up included."""
    out = pathlib.Path(f"/tmp/bench_coordination.{os.getpid()}.cg")
    try:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                               __file__, "--tree", tree, "--windows", str(windows), "--run"],
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the run under callgrind failed: {done.stderr.strip()[-300:]}")
        return int(re.search(r"^(?:summary|totals):\s*(\d+)", out.read_text(), re.M).group(1))
    finally:
        out.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--tree", default=str(HOME), help="the checkout whose emu.sync is measured")
    ap.add_argument("--before", help="also this checkout's, for comparison")
    ap.add_argument("--windows", type=int, default=2000)
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.path.insert(0, a.tree)
    import trio

    if a.serve is not None:
        return trio.run(_worker, a.serve)
    if a.run:
        return trio.run(_main, a.tree, a.windows)
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    if a.windows < 1:
        raise SystemExit("--windows must be at least 1")
    for label, tree in ([("before", a.before)] if a.before else []) + [("tree", a.tree)]:
        per = (count(tree, a.windows) - count(tree, 0)) / a.windows
        print(f"{label} ({tree}): the main process's instructions per window with {WORKERS} workers: {per / 1e6:.3f} M",
              flush=True)


if __name__ == "__main__":
    main()
