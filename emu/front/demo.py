"""``emu demo``: small clusters showing what is built so far, with virtual-time figures.

So far the fabric, the topologies, the host software collectives and the NIC offload of spec 01
(the other mechanisms join as they are built): echo round trips, one large message and a fan-in through one switch port,
each checked against the same scenario run over two OS processes; pingall on four 16-host
topologies side by side; allreduce algorithms across sizes and node counts (table and PNG);
software allreduce against the NIC offload. While a part computes, a transient spinner on stderr
says which; the tables go to stdout.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

import trio
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from emu.topologies import star

from .checks import Options, run_check
from .cluster import Cluster
from .consoles import make_console as default_console
from ..config import HostSpec


async def _ping(host, dst):
    return await host.ping(dst)


async def _send(host, dst, size, count):
    data = bytes(size)
    for _ in range(count):
        await host.send(dst, data)
    return host.now


async def _recv(host, count):
    total = 0
    for _ in range(count):
        total += len((await host.recv()).data)
    return total, host.now


def scenarios(n: int) -> list[tuple[str, dict]]:
    return [
        ("ping h0 -> h1", {"h0": (_ping, "h1")}),
        ("1 MiB message h0 -> h1", {"h0": (_send, "h1", 1 << 20, 1), "h1": (_recv, 1)}),
        (f"fan-in {n - 1} hosts x 64 KiB -> h0",
         {**{f"h{i}": (_send, "h0", 64 << 10, 1) for i in range(1, n)}, "h0": (_recv, n - 1)}),
    ]


async def _run_all(n: int, processes: int) -> list[tuple[str, int, int, int]]:
    topo = star(n, host=HostSpec(mtu_bytes=4096))
    out = []
    async with Cluster(topo, processes=processes) as net:
        for name, apps in scenarios(n):
            res = await net.run(apps)
            m = net.metrics
            out.append((name, m.completion_ns, m.hop_count, m.max_queue_frames, res))
    return out


@contextlib.contextmanager
def busy(err: Console, what: str) -> Iterator[Callable[[str], None]]:
    """A transient spinner on stderr (the console ``err``, with the elapsed time) while a part of the
    demo computes; yields a function that changes what it says. Nothing may print to stdout
    meanwhile. Silent when stderr is not a terminal (a log file gets no spinner frames)."""
    if not err.is_terminal:
        yield lambda text: None
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=True, redirect_stdout=False, redirect_stderr=False) as progress:
        task = progress.add_task(what)
        progress.refresh()  # every part is shown at least once, however fast it ends
        yield lambda text: progress.update(task, description=text, refresh=True)


async def demo(n: int = 8, plot_path: str | None = None,
               make_console: Callable[..., Console] = default_console) -> int:
    """The demo; ``make_console(stderr=False)`` makes the consoles it prints on (the caller's: the
    ``emu`` command passes its own)."""
    console = make_console()
    err = make_console(stderr=True)
    console.print(f"[bold]hpc-emu demo[/]: star:n={n}, links 100 ns / 100 Gbit/s, switch 50 ns, NIC 100 ns "
                  "(emu run's defaults); the fabric table's frames are 4 KiB (emu run's default is 1 KiB: "
                  f"emu run --topo star:n={n} --set host.mtu_bytes=4096 is its cluster), the other tables emu run's "
                  "defaults")
    with busy(err, f"fabric: echo, 1 MiB, fan-in on star:n={n}, one process") as say:
        wall = time.perf_counter()
        one = await _run_all(n, 1)
        wall1 = time.perf_counter() - wall
        say("fabric: the same over two processes")
        two = await _run_all(n, 2)
    table = Table(title="fabric: virtual-time figures (1 process vs 2 processes)")
    for col in ("scenario", "completion (ns)", "frames on links", "peak port queue", "2 processes agree"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    ok = True
    for a, b in zip(one, two):
        same = a[1:] == b[1:]
        ok &= same
        table.add_row(a[0], f"{a[1]:,}", f"{a[2]:,}", f"{a[3]} frames", "yes" if same else "[red]NO[/]")
    console.print(table)
    console.print(f"wall clock: {wall1:.2f} s in one process; figures are virtual time and identical run after run")
    topo = Table(title="pingall on 16 hosts: topologies side by side")
    for col in ("topology", "switches", "links", "completion ns", "crossings", "mean RTT ns", "max RTT ns"):
        topo.add_column(col, justify="left" if col == "topology" else "right", no_wrap=True)
    with busy(err, "pingall") as say:
        for spec in ("star:n=16", "fattree:k=4,n=2", "mesh:k=4,n=2", "torus:k=4,n=2"):
            say(f"pingall on {spec}")
            async with Cluster(spec) as net:
                r = await run_check(net, "pingall", Options())
                ok &= r.ok
                topo.add_row(spec, str(len(net.switches)), str(len(net.topology.links)), f"{r.completion_ns:,}",
                             f"{r.hop_count:,}", f"{r.figures['rtt_mean_ns']:,}", f"{r.figures['rtt_max_ns']:,}")
    console.print(topo)
    ok &= await _collectives(console, err, plot_path)
    ok &= await _nic_offload(console, err)
    ok &= await _offloads(console, err)
    ok &= await _coding(console, err)
    return 0 if ok else 1


async def _coding(console, err) -> bool:
    """Spec 02: the all-to-all broadcast on a mesh and a torus, by tree, all-at-once and XOR coding."""
    from emu.nodes.collectives.coding import Scheme, count
    from emu.nodes.collectives.run import check_results, run_collective
    from emu.topologies.grid import grid_of

    t = Table(title="all-to-all broadcast of 16 B per node (network-coded broadcast, docs/network-coding.md): router hops measured from the frames "
                    "(= analytic) and virtual completion (ns); floor N(N-1)")
    for col in ("topology", "floor", "tree", "all_at_once", "nc (XOR coding)"):
        t.add_column(col, justify="left" if col == "topology" else "right", no_wrap=True)
    ok = True
    seen = {}
    with busy(err, "all-to-all broadcast: tree vs all-at-once vs coding") as say:
        for spec in ("mesh:k=8,n=2", "torus:k=8,n=2"):
            async with Cluster(spec) as net:
                grid = grid_of(net.topology)
                cells = []
                for algo in ("tree", "all_at_once", "nc"):
                    say(f"mcast_all on {spec}: {algo}")
                    r = await run_collective(net, "mcast_all", count=4, dtype="float32", algo=algo)
                    check_results(r, 4, "float32", "sum", 0, 0)
                    hops = r.hop_count - 2 * r.frames
                    good = hops == count(grid, Scheme(algo)).total
                    ok &= good
                    cells.append(f"{hops:,}{'' if good else ' [red]!= analytic[/]'} / {r.completion_ns:,}")
                    seen.setdefault(spec, {})[algo] = (hops, r.completion_ns)
                t.add_row(spec, f"{grid.size * (grid.size - 1):,}", *cells)
    console.print(t)
    (th, tt), (nh, nt) = seen["mesh:k=8,n=2"]["tree"], seen["mesh:k=8,n=2"]["nc"]
    console.print(f"coding cuts hops ({100 * (th - nh) // th} % fewer than the tree on mesh:k=8,n=2), not receptions, "
                  f"and {'wins' if nt < tt else 'loses'} in time ({nt:,} vs {tt:,} ns): each intermediate node sends "
                  "its group every other group's chain packets through one injection channel (`python "
                  "scripts/nc_broadcast.py --parts why`; `emu plan nc mesh:k=16,n=2` chooses the groups)")
    return ok


async def _offloads(console, err) -> bool:
    """The comparison users come for: one allreduce, host software vs each offload, on one fabric."""
    from emu.nodes.collectives.offloads import canonical_offload, offload_named
    from emu.nodes.collectives.run import check_results, run_collective
    from emu.topologies import build

    from ..config import ConfigError

    spec = "fattree:k=4,n=2"
    topo = build(spec)
    shown = [offload_named(n) for n in ("none", "nic", "hw", "switch")]  # the table's columns, in this order
    for off in shown:
        off.add_groups(topo, topo.host_names())   # spec 03's hardware collectives
    if any(off.needs_manager for off in shown):
        topo.add_manager()                        # spec 04 asks the network manager for a tree
    t = Table(title=f"allreduce of float32 on {spec} (16 hosts): where it runs, virtual completion (us) "
                    "and bytes on links")
    for col in ("size", *(off.title for off in shown)):
        t.add_column(col, justify="right", no_wrap=True)
    ok, seen = True, {}
    with busy(err, "allreduce: " + " vs ".join(canonical_offload(o.name) or "host software" for o in shown)) as say:
        async with Cluster(topo) as net:
            for size in (256, 4096, 65536):
                cells = []
                for off in (canonical_offload(o.name) for o in shown):
                    say(f"allreduce of {size:,} B on {spec}: {off or 'host software'}")
                    try:
                        r = await run_collective(net, "allreduce", count=size // 4, dtype="float32", offload=off)
                    except ConfigError:  # e.g. more descriptors than one NIC call takes
                        cells.append("-")
                        continue
                    check_results(r, size // 4, "float32", "sum", 0, 0)
                    seen[size, off] = (r.completion_ns, sum(r.link_bytes.values()))
                    cells.append(f"{r.completion_ns / 1000:,.2f} / {sum(r.link_bytes.values()) / 1000:,.0f} kB")
                t.add_row(f"{size:,} B", *cells)
            say(f"sparse allreduce of 65,536 B at 1 % density on {spec}: the switches")
            r = await run_collective(net, "allreduce", count=65536 // 4, dtype="float32", offload="switch", density=0.01)
            check_results(r, 65536 // 4, "float32", "sum", 0, 0)
            seen[65536, "sparse"] = (r.completion_ns, sum(r.link_bytes.values()))
    console.print(t)
    console.print(_hw_line(seen))
    console.print(_switch_line(seen))
    return ok


def _hw_line(seen: dict) -> str:
    """QsNet's hardware collectives in one line, from the table's figures: against host software and
    against the switches."""
    sizes = sorted({s for s, o in seen if o is None})
    win = [s for s in sizes if seen[s, "hw"][0] < seen[s, None][0]]
    lose = [s for s in sizes if seen[s, "switch"][0] < seen[s, "hw"][0]]
    by = ", ".join(f"x{seen[s, None][0] / seen[s, 'hw'][0]:.2f} at {s:,} B" for s in sizes)
    return (f"hw offload (QsNet: the adapters reduce up a tree, then one hardware broadcast whose ACKs the "
            f"switches combine): faster than host software at {', '.join(f'{s:,} B' for s in win) or 'no size'} "
            f"({by}): no host takes part once the data is given, and the result is sent once, not per rank; "
            f"slower than the switches at {', '.join(f'{s:,} B' for s in lose) or 'no size'}: each adapter on "
            "the tree receives, adds and resends the whole vector, where a switch adds it as it passes")


def _switch_line(seen: dict) -> str:
    """Spec 04 in one line, from the table's figures: where the switches win against host software."""
    sizes = sorted({s for s, o in seen if o is None})
    win = [s for s in sizes if seen[s, "switch"][0] < seen[s, None][0]]
    big = sizes[-1]
    (st, sb), (ht, hb), (pt, pb) = seen[big, "switch"], seen[big, None], seen[big, "sparse"]
    return (f"switch offload (in-network allreduce): faster than host software at {', '.join(f'{s:,} B' for s in win) or 'no size'}"
            f" here (at {big:,} B x{ht / st:.1f}, with {100 * sb // hb} % of the bytes): each host sends its vector "
            f"once and gets the sum once, the switches add as the blocks pass; on sparse data (1 % non-zeros) it "
            f"sends {100 * pb // sb} % of the dense bytes {'but' if pt > st else 'and'} takes {pt / 1000:,.2f} us "
            f"against {st / 1000:,.2f}: a switch handles a pair as 8 bytes where a value is 4, and scans an array "
            "store's whole span as a block leaves (scripts/inc_sparse.py)")


async def _nic_offload(console, err) -> bool:
    """Spec 01: the same allreduce in host software and offloaded to the NICs."""
    import numpy as np

    from emu.nodes.collectives.run import check_results, run_collective

    t = Table(title="allreduce of doubles: host software vs NIC offload (triggered descriptors, the default tree)")
    for col in ("nodes", "size", "software us", "algorithm", "NIC offload us", "speedup", "host CPU sw / nic ns"):
        t.add_column(col, justify="right", no_wrap=True)
    ratios = {}
    with busy(err, "allreduce: host software vs NIC offload") as say:
        for spec in ("fattree:k=2,n=4", "fattree:k=2,n=6"):
            async with Cluster(spec) as net:
                for size in (8, 48, 56, 4096):
                    say(f"allreduce of {size} B on {spec}: host software vs NIC offload")
                    sw = await run_collective(net, "allreduce", count=size // 8, dtype="float64")
                    nic = await run_collective(net, "allreduce", count=size // 8, dtype="float64", offload="nic")
                    for r in (sw, nic):
                        check_results(r, size // 8, "float64", "sum", 0, 0)
                    ratios[len(net.hosts), size] = nic.completion_ns / sw.completion_ns
                    t.add_row(str(len(net.hosts)), f"{size} B", f"{sw.completion_ns / 1000:.2f}", sw.algo,
                              f"{nic.completion_ns / 1000:.2f}", f"x{sw.completion_ns / nic.completion_ns:.2f}",
                              f"{sw.cpu_ns_max} / {nic.cpu_ns_max}")
    console.print(t)
    rt = Table(title="MPI_Reduce of 8 B per rank (the source's first experiment): host software vs NIC offload")
    for col in ("nodes", "type", "software ns", "NIC offload ns", "speedup"):
        rt.add_column(col, justify="right", no_wrap=True)
    with busy(err, "reduce: host software vs NIC offload") as say:
        async with Cluster("fattree:k=2,n=4") as net:
            for dtype in ("float64", "float32", "int64", "uint64"):
                say(f"reduce of 8 B of {dtype}: host software vs NIC offload")
                count = 8 // np.dtype(dtype).itemsize
                sw = await run_collective(net, "reduce", count=count, dtype=dtype)
                nic = await run_collective(net, "reduce", count=count, dtype=dtype, offload="nic")
                for r in (sw, nic):
                    check_results(r, count, dtype, "sum", 0, 0)
                rt.add_row(str(len(net.hosts)), dtype, f"{sw.completion_ns:,}", f"{nic.completion_ns:,}",
                           f"x{sw.completion_ns / nic.completion_ns:.2f}")
    console.print(rt)
    console.print(f"NIC offload wins at 48 B and below (no host overhead per tree level) and loses at 4 KiB (x"
                  f"{max(r for (_n, b), r in ratios.items() if b == 4096):.2f} the software time): its 48-byte parts "
                  "are pipelined over lanes, but each is a message per tree edge and two descriptors the host writes, "
                  "while software sends the bytes in a few large messages (scripts/nic_offload_sweep.py: where "
                  "software overtakes, and the model)")
    return True


async def _collectives(console, err, plot_path: str | None) -> bool:
    """Allreduce algorithms (host software, the baseline of every offload) across sizes and nodes."""
    from emu.nodes.collectives import ALGORITHMS
    from .sweep import plot, sweep

    algos = list(ALGORITHMS["allreduce"])
    sizes = [64, 4096, 65536]
    with busy(err, f"allreduce algorithms across sizes on 8 and 16 hosts ({len(algos) * len(sizes) * 2} runs)"):
        rows = await sweep(["fattree:k=2,n=3", "fattree:k=2,n=4"], sizes, algos)
    t = Table(title="allreduce, host software on binary fat trees: virtual completion (us); * = fastest")
    t.add_column("nodes", justify="right")
    t.add_column("size", justify="right")
    for a in algos:
        t.add_column(a, justify="right", no_wrap=True)
    for n in sorted({r.nodes for r in rows}):
        for s in sizes:
            cells = {r.algo: r.completion_ns for r in rows if r.nodes == n and r.requested_bytes == s}
            best = min(cells.values())
            t.add_row(str(n), f"{s:,} B", *[f"{cells[a] / 1000:,.2f}{'*' if cells[a] == best else ''}" for a in algos])
    console.print(t)
    if plot_path:
        plot(rows, plot_path, "allreduce, host software")
        console.print(f"plot written to {os.path.abspath(plot_path)}")
    return True


def plot_file(out: str | None, plot: str) -> str | None:
    """Where ``emu demo`` writes its plot: FILE inside ``--out DIR`` (made if missing), by default
    inside a new temporary folder -- never silently into the current folder; None: no plot."""
    import tempfile

    from emu.config import ConfigError

    if not plot:
        return None
    if out is None:
        out = tempfile.mkdtemp(prefix="emu-demo-")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot make the folder ({e.strerror}); give a folder you can write") from None
    if not os.access(out, os.W_OK) or not os.path.isdir(out):
        raise ConfigError(f"--out {out}: not a folder this user can write; give another")
    return os.path.join(out, plot)


def main(n: int = 8, plot_path: str | None = None,
         make_console: Callable[..., Console] = default_console) -> int:
    return trio.run(demo, n, plot_path, make_console)
