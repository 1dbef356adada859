"""The front door fits people's habits (issue 9): the ways people expect to call ``emu``."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_license_file_matches_the_package_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = (ROOT / "LICENSE").read_text()
    assert meta["license"]["text"] == "MIT" and text.startswith("MIT License\n")
    assert "Copyright (c) 2026 hpc-emu contributors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


async def test_cluster_repr_says_topology_hosts_processes_and_virtual_time():
    from emu import Cluster

    net = Cluster("fattree:k=2,n=2", processes=2)
    assert repr(net) == ("<Cluster fattree:k=2,n=2: 4 hosts, 4 switches, 2 processes, virtual time 0 ns, "
                         "not started>")
    async with net:
        rtt = await net["h0"].ping("h3")
        assert repr(net) == (f"<Cluster fattree:k=2,n=2: 4 hosts, 4 switches, 2 processes, "
                             f"virtual time {net.now:,} ns, running>") and net.now >= rtt > 0
    assert repr(net).endswith(f"virtual time {net.now:,} ns, closed>")
    assert repr(Cluster("star:n=3")).startswith("<Cluster star:n=3: 3 hosts, 1 switch, 1 process,")


def emu_cmd(*args, module=False, **kw):
    import subprocess
    import sys

    exe = [sys.executable, "-m", "emu"] if module else [str(pathlib.Path(sys.executable).parent / "emu")]
    return subprocess.run([*exe, *args], capture_output=True, text=True, timeout=120, **kw)


def test_version_comes_from_the_installed_metadata():
    from importlib.metadata import version

    for module in (False, True):
        out = emu_cmd("--version", module=module)
        assert out.returncode == 0 and out.stdout.startswith(f"emu (hpc-emu) {version('hpc-emu')}; element loop: ")


def test_python_dash_m_emu_works_like_emu():
    a, b = emu_cmd("topo", "star:n=5"), emu_cmd("topo", "star:n=5", module=True)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and "hosts" in a.stdout
    bad = emu_cmd("topo", "fattree:k=4", module=True)
    assert bad.returncode == 2 and "fattree: missing parameter n;" in bad.stdout


def run_json(capsys, *args):
    """``emu run ... --json -``: the exit code, the rows parsed from stdout (which must be pure JSON)
    and what went to stderr."""
    import json

    from emu.front.cli import main

    code = main(["run", *args, "--json", "-"])
    out = capsys.readouterr()
    return code, json.loads(out.out)["results"], out.err


def test_json_dash_writes_pure_json_to_stdout_and_the_table_to_stderr(capsys):
    code, rows, err = run_json(capsys, "--topo", "star:n=3", "--test", "pingall")
    assert code == 0 and [(r["name"], r["ok"], r["pairs"]) for r in rows] == [("pingall", True, 6)]
    assert "completion (ns)" in err and "pingall" in err


def test_test_option_repeats_and_joins_in_order(capsys):
    code, rows, _ = run_json(capsys, "--topo", "star:n=4", "--test", "barrier+bcast", "--test", "allgather",
                             "--size", "64B")
    assert code == 0 and [r["name"] for r in rows] == ["barrier", "bcast", "allgather"]
    assert all(r["ok"] for r in rows)


def refusal(capsys, *args):
    from emu.front.cli import main

    assert main(["run", "--topo", "star:n=4", *args]) == 2
    return capsys.readouterr().out.replace("\n", " ")


def test_a_test_named_twice_is_refused(capsys):
    assert "--test names allreduce more than once" in refusal(capsys, "--test", "allreduce", "--test",
                                                              "barrier+allreduce")


def test_offload_none_is_the_software_path(capsys):
    code, [none], _ = run_json(capsys, "--topo", "star:n=4", "--test", "allreduce", "--offload", "none",
                               "--size", "48B", "--dtype", "float64")
    code2, [default], _ = run_json(capsys, "--topo", "star:n=4", "--test", "allreduce", "--size", "48B",
                                   "--dtype", "float64")
    assert code == code2 == 0 and none["algo"] == default["algo"] == "recursive_doubling"
    assert none["completion_ns"] == default["completion_ns"] and none["frames"] == default["frames"]
    assert "--branch is the offload tree's degree" in refusal(capsys, "--test", "allreduce", "--offload", "none",
                                                              "--branch", "4")


def test_offloads_an_operation_has_not_are_refused_by_name(capsys):
    assert "allgather cannot be offloaded to the switches; allreduce, reduce, bcast and barrier can" in refusal(
        capsys, "--test", "allgather", "--offload", "switch")
    assert "--algo and --branch do not apply to --offload switch" in refusal(
        capsys, "--test", "allreduce", "--offload", "switch", "--algo", "ring")
    assert "reduce cannot be offloaded to the network hardware; bcast, barrier, allreduce can" in refusal(
        capsys, "--test", "reduce", "--offload", "hw")


def test_run_help_lists_every_test_with_a_summary(capsys):
    import pytest

    from emu.front.checks import CHECKS
    from emu.front.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--offload {none,nic,switch,hw}" in out
    listed = out.split("tests (--test NAME", 1)[1].split("settable fields", 1)[0].splitlines()[1:]
    assert [line.split()[0] for line in listed if line.startswith("  ")] == list(CHECKS)
    assert "  pingall         Every host pings every other host" in out
    assert "  allreduce       Every rank gets the reduction of all ranks' data" in out


def readme_offload_examples():
    """The README's ``emu run ... --offload nic`` lines, without their ``--branch``, plus the
    64-host case where the old default (2) lost to software."""
    import re

    readme = (ROOT / "README.md").read_text()
    lines = [line.split("#")[0].split()[2:] for line in re.findall(r"^emu run .*--offload nic.*$", readme, re.M)]
    out = []
    for args in lines + [["--topo", "fattree:k=2,n=6", "--test", "allreduce", "--offload", "nic", "--size", "48B",
                          "--dtype", "float64"]]:
        if "--branch" in args:
            i = args.index("--branch")
            del args[i:i + 2]
        out.append(args)
    return out


def test_default_branch_makes_the_offload_beat_software_on_the_readme_examples(capsys):
    examples = readme_offload_examples()
    assert len(examples) >= 2
    for args in examples:
        code, nic, _ = run_json(capsys, *args)
        i = args.index("--offload")
        code2, sw, _ = run_json(capsys, *args[:i + 1], "none", *args[i + 2:])
        assert code == code2 == 0 and all(r["ok"] for r in nic + sw)
        for a, b in zip(nic, sw):
            assert a["algo"].startswith("nic(branch=") and not b["algo"].startswith("nic")
            assert a["completion_ns"] <= b["completion_ns"], (args, a["algo"], a["completion_ns"], b["completion_ns"])
    # the shallowest tree the queue (64 entries) allows: flat up to 65 ranks, then as even as depth 2 permits
    assert [r["algo"] for r in nic] == ["nic(branch=63)"]


def test_default_branch_is_the_shallowest_tree_the_queue_allows():
    from emu.nodes.collectives.offload import default_branch, depth

    for op, parts, queue in (("allreduce", 1, 64), ("reduce", 2, 64), ("reduce", 5, 16), ("allreduce", 1, 4096)):
        cap = min(63, queue // parts if op == "reduce" else queue)  # CpCnt: 6 bits
        for n in (1, 2, 3, 8, 33, 64, 65, 66, 128, 256, 1000, 2048):
            k = default_branch(op, n, parts, queue)
            allowed = range(1, max(1, min(cap, n - 1)) + 1)
            assert k in allowed and depth(n, k) == min(depth(n, j) for j in allowed)
            assert all(depth(n, j) > depth(n, k) for j in allowed if j < k), (op, parts, queue, n, k)
    assert (default_branch("allreduce", 64, 1, 64), default_branch("allreduce", 128, 1, 64)) == (63, 11)
    assert default_branch("reduce", 64, 2, 64) == 8   # 2 parts in flight: at most 32 children, so depth 2
    assert default_branch("reduce", 4, 86, 64) == 1   # nothing fits: validate refuses it, naming why


def test_default_branch_of_a_pipelined_allreduce_is_the_models_fastest():
    from emu.config import HostSpec, LinkSpec, SwitchSpec
    from emu.nodes.collectives import nicmodel
    from emu.nodes.collectives.offload import default_branch, lanes

    host, link = HostSpec(), LinkSpec()
    cross = nicmodel.uniform(1, host, link, SwitchSpec())
    for n, parts in ((8, 2), (32, 86), (64, 16), (256, 5)):
        k = default_branch("allreduce", n, parts, 64)
        t = {j: nicmodel.allreduce_ns(n, j, parts, 6, lanes("allreduce", j, parts, 64, 63), host, link, cross).total_ns
             for j in range(1, min(64, n - 1) + 1)}
        assert t[k] == min(t.values()) and all(t[j] > t[k] for j in t if j < k)
    # many parts want many lanes: a narrow tree (lanes = queue // branch); a few parts, a wide one
    assert default_branch("allreduce", 32, 86, 64) == 3 < default_branch("allreduce", 32, 2, 64) == 6


def terminal_stderr(monkeypatch):
    """Make the CLI's stderr console a terminal writing into a buffer; returns the buffer."""
    import io

    from rich.console import Console

    import emu.front.cli

    buf = io.StringIO()
    real = emu.front.cli.make_console
    monkeypatch.setattr(emu.front.cli, "make_console",
                        lambda stderr=False: Console(file=buf, force_terminal=True, width=120) if stderr else real())
    return buf


def test_demo_shows_a_transient_spinner_on_stderr_and_tables_on_stdout(monkeypatch, capsys, tmp_path):
    from emu.front.cli import main

    buf = terminal_stderr(monkeypatch)
    assert main(["demo", "--hosts", "4", "--plot", ""]) == 0
    out, spun = capsys.readouterr().out, buf.getvalue()
    for stage in ("fabric: echo, 1 MiB, fan-in on star:n=4, one process", "fabric: the same over two processes",
                  "pingall on torus:k=4,n=2", "allreduce algorithms across sizes",
                  "allreduce of 56 B on fattree:k=2,n=6: host software vs NIC offload",
                  "allreduce of 65,536 B on fattree:k=4,n=2: switch"):
        assert stage in spun and stage not in out
    assert "where it runs" in out and "switch (in-network)" in out
    assert "MPI_Reduce of 8 B per rank" in out and "reduce of 8 B of uint64: host software vs NIC offload" in spun
    assert "pingall on 16 hosts: topologies side by side" in out and "pingall on 16" not in spun
    assert "\x1b[2K" in spun  # transient: the spinner's line is erased when a part ends


def noted_frames(err: str) -> dict[str, int]:
    """Per test, the frames the large-run note predicted ('about N frames to move (test: N (...); ...)')."""
    import re

    note = " ".join(err.split("frames to move (", 1)[1].split())
    return {name: int(num.replace(",", "")) for name, num in re.findall(r"(\w+): ([\d,]+) \(", note)}


def test_a_large_run_says_so_before_it_starts_and_the_estimate_is_the_measured_frames(monkeypatch, capsys):
    import emu.front.estimate

    code, rows, err = run_json(capsys, "--topo", "star:n=3", "--test", "pingall")
    assert code == 0 and "large run" not in err   # small runs say nothing
    monkeypatch.setattr(emu.front.estimate, "LARGE_RUN_FRAMES", 0)   # every run is large now
    for args in (["--topo", "fattree:k=2,n=3", "--test", "pingall+allreduce+bcast+barrier", "--test",
                  "alltoall+reduce_scatter+allgather", "--size", "24KiB"],
                 ["--topo", "star:n=6", "--test", "allreduce+mcast_all+reduce", "--size", "5000B", "--dtype", "int8"],
                 ["--topo", "fattree:k=2,n=4", "--test", "allreduce+reduce", "--offload", "nic", "--size", "56B",
                  "--dtype", "float64"],
                 # the QsNet hardware: packets, EVENTs and their ACKs, broadcasts acknowledged by every member
                 ["--topo", "fattree:k=4,n=2", "--test", "bcast+barrier+allreduce", "--offload", "hw", "--size",
                  "64KiB", "--direct"],
                 ["--topo", "qsnet:nodes=32", "--test", "allreduce+bcast", "--offload", "hw", "--size", "3000B",
                  "--ranks", "h0,h3,h5,h9,h20", "--direct"],
                 ["--topo", "fattree:k=4,n=2", "--test", "allreduce+bcast+barrier", "--offload", "switch", "--size",
                  "8KiB", "--direct"]):
        code, rows, err = run_json(capsys, *args)
        assert code == 0 and err.index("a large run: about") < err.index("completion (ns)")
        predicted = noted_frames(err)
        # stated in emu/front/estimate.py: exact unless the operands are scaled down or counting stops early
        assert predicted == {r["name"]: r["frames"] for r in rows}, args


async def test_scaled_down_counts_stay_within_one_percent():
    from emu.nodes.collectives.dryrun import count_messages

    for operation, algo, ranks, count in (("allreduce", "ring", 16, 100_003), ("allreduce", None, 12, 50_001),
                                          ("reduce_scatter", None, 8, 80_000), ("alltoall", None, 8, 7_001)):
        full = await count_messages(operation, ranks, count, algo=algo)
        scaled = await count_messages(operation, ranks, count, algo=algo, memory_bytes=ranks * count // 4)
        assert full.complete and scaled.algo == full.algo and len(scaled.sizes) == len(full.sizes)
        assert abs(scaled.frames(1024) - full.frames(1024)) <= full.frames(1024) / 100, (operation, algo)
    stopped = await count_messages("alltoall", 64, 1, budget=1000)
    assert not stopped.complete and 1000 <= len(stopped.sizes) < 64 * 63


def test_the_demo_says_where_the_qsnet_hardware_allreduce_wins_and_loses_from_its_figures():
    from emu.front.demo import _hw_line

    seen = {(256, None): (5000, 1), (256, "hw"): (2500, 1), (256, "switch"): (2000, 1),
            (4096, None): (12000, 1), (4096, "hw"): (4000, 1), (4096, "switch"): (6000, 1),
            (65536, None): (30000, 1), (65536, "hw"): (31000, 1), (65536, "switch"): (12000, 1)}
    line = _hw_line(seen)
    assert "faster than host software at 256 B, 4,096 B (x2.00 at 256 B, x3.00 at 4,096 B, x0.97 at 65,536 B)" in line
    assert "slower than the switches at 256 B, 65,536 B:" in line
