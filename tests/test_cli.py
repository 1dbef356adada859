"""The emu command and the pytest fixtures."""

import json

import pytest

import apps
from emu.front.cli import main

DONE_WHEN = ["fattree:k=4,n=3", "mesh:k=8,n=2", "torus:k=4,n=3", "clos:radix=8,stages=3",
             "twolevel:ports=8,hosts=64", "star:n=16"]


@pytest.mark.parametrize("spec", DONE_WHEN)
def test_emu_run_pingall_writes_json(spec, tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "--topo", spec, "--test", "pingall", "--json", str(out)]) == 0
    [r] = json.loads(out.read_text())["results"]
    assert (r["topology"], r["name"], r["ok"]) == (spec, "pingall", True)
    from emu.topologies import build

    t = build(spec)
    n = len(t.hosts)
    pairs = n * (n - 1) if n <= 64 else 4 * n
    assert r["pairs"] == pairs and ("sampled" in r) == (n > 64)
    # each ping is a request and a reply: 2 frames of 50 bytes (46 of headers, the FCS), each
    # crossing route-length links
    assert (r["frames"], r["bytes"]) == (2 * pairs, 2 * pairs * 50)
    assert 2 * pairs * 2 <= r["hop_count"] <= 2 * pairs * t.diameter
    assert r["completion_ns"] > 0 and r["rtt_min_ns"] <= r["rtt_mean_ns"] <= r["rtt_max_ns"]


def test_emu_run_is_deterministic_and_sampled_beyond_64_hosts(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert main(["run", "--topo", "fattree:k=9,n=2", "--test", "pingall", "--seed", "3", "--json", str(out)]) == 0
    ra, rb = json.loads(a.read_text())["results"][0], json.loads(b.read_text())["results"][0]
    ra.pop("wall_s"), rb.pop("wall_s")
    assert ra == rb and ra["sampled"].startswith("4 random peers per host (81 hosts > 64)")


def test_emu_refuses_bad_input_before_starting(capsys):
    assert main(["run", "--topo", "fattree:k=4", "--test", "pingall"]) == 2
    assert "missing parameter n" in capsys.readouterr().out
    assert main(["run", "--topo", "star:n=4", "--test", "pingall+nosuch"]) == 2
    assert "unknown test(s) nosuch; known: allgather, allreduce" in capsys.readouterr().out


def test_emu_topo_prints_the_figures(capsys):
    assert main(["topo", "fattree:k=4,n=3"]) == 0
    out = capsys.readouterr().out
    for word in ("hosts", "64", "switches", "48", "links", "192", "diameter", "6", "bisection", "32"):
        assert word in out


async def test_cluster_fixture(cluster):
    from emu.sim import EngineNet
    from emu.topologies import build

    net = await cluster("fattree:k=2,n=2")
    other = await cluster("star:n=3", processes=2)
    assert await net["h0"].ping("h3") == EngineNet(build("fattree:k=2,n=2")).run({"h0": (apps.ping, "h3")})["h0"]
    assert await other["h0"].ping("h2") == 816
    assert net.hosts == ["h0", "h1", "h2", "h3"]


@pytest.mark.topology("mesh:k=3,n=2", processes=2)
async def test_net_fixture_with_marker(net):
    assert len(net.switches) == 9 and len(net.worker_pids) == 1
    res = await net.run({"h0": (apps.send_to, "h8", 3000), "h8": (apps.recv_n, 1)})
    assert res["h8"][0][4] == 5  # switches crossed: 4 router hops + the first router


def test_emu_run_collectives_with_figures(tmp_path):
    out = tmp_path / "c.json"
    args = ["run", "--topo", "fattree:k=2,n=3", "--test", "allreduce+bcast+barrier+alltoall", "--size", "64KiB",
            "--dtype", "float32", "--op", "sum", "--json", str(out)]
    assert main(args) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    ar = rows["allreduce"]
    assert ar["ok"] and ar["result"] == "equal to numpy" and ar["algo"] == "rabenseifner"
    assert ar["size_bytes"] == 65536 and ar["ranks"] == 8 and ar["cpu_ns_max"] > 0
    assert ar["frames"] > 0 and ar["hop_count"] >= 2 * ar["frames"]
    assert rows["bcast"]["algo"] == "scatter_allgather" and rows["barrier"]["algo"] == "dissemination"
    per_link = ar["per_link"]
    assert sum(v["frames"] for v in per_link.values()) == ar["hop_count"]
    assert sum(v["bytes"] for p, v in per_link.items() if "-nic" in p) == ar["bytes"]
    again = tmp_path / "d.json"
    assert main(args[:-1] + [str(again)]) == 0
    strip = [{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(again.read_text())["results"]]
    assert strip == [{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(out.read_text())["results"]]


def test_emu_run_named_algorithm_and_refusals(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=8", "--test", "allreduce", "--algo", "ring", "--size", "64KiB",
                 "--dtype", "int64", "--op", "bxor", "--ranks", "h1,h3,h5,h7,h0", "--json", str(out)]) == 0
    [r] = json.loads(out.read_text())["results"]
    assert (r["algo"], r["ranks"], r["op"], r["dtype"]) == ("ring", 5, "bxor", "int64")
    assert main(["run", "--topo", "star:n=6", "--test", "allgather", "--algo", "recursive_doubling"]) == 2
    assert "needs a power-of-two number of ranks, not 6" in capsys.readouterr().out
    assert main(["run", "--topo", "star:n=6", "--test", "allreduce", "--size", "3B"]) == 2
    assert "size 3 B is not a whole number of float32 elements" in capsys.readouterr().out


def test_parse_size():
    from emu.front.checks import parse_size

    assert [parse_size(s) for s in ("64KiB", "1MiB", "4096", "8B", "2kb")] == [65536, 1 << 20, 4096, 8, 2000]
    # a bare K/M/G as nccl-tests' -b/-e and OSU's -m read it: powers of 2; KB stays 1000
    assert [parse_size(s) for s in ("64K", "64KB", "4M", "1G")] == [65536, 64000, 4 << 20, 1 << 30]
    with pytest.raises(Exception, match="not a number of bytes"):
        parse_size("lots")


def test_emu_run_allreduce_offloaded_to_the_nic(tmp_path, capsys):
    out = tmp_path / "o.json"
    assert main(["run", "--topo", "fattree:k=2,n=4", "--test", "allreduce+reduce", "--offload", "nic", "--branch",
                 "4", "--size", "56B", "--dtype", "float64", "--op", "maxloc", "--root", "3", "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["allreduce"]["algo"] == "nic(branch=4)" and rows["allreduce"]["result"] == "equal to numpy"
    assert rows["allreduce"]["cpu_ns_max"] == 4 * 80   # two parts, two descriptors each, 80 ns to post one
    assert rows["reduce"]["cpu_ns_max"] == 2 * 80
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--offload", "nic", "--dtype", "int16"]) == 2
    assert "32- and 64-bit operands" in capsys.readouterr().out
    assert main(["run", "--topo", "star:n=4", "--test", "bcast", "--offload", "nic"]) == 2
    assert "bcast cannot be offloaded to the NIC" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["--test", ""], "--test names no test"),
    (["--test", "pingall", "--algo", "ring"], "--algo apply to collective tests only; --test pingall has none"),
    (["--test", "allreduce", "--branch", "4"], "--branch is the offload tree's degree: give --offload nic or hw too"),
    (["--test", "allreduce", "--root", "1"], "--root applies to reduce, bcast, mcast only"),
    (["--test", "allreduce", "--offload", "nic", "--branch", "0"], "branch degree must be within 1..63, got 0"),
    (["--test", "allreduce", "--ranks", "h0,h0,h1"], "--ranks lists a host twice"),
    (["--test", "pingall", "--seed", "-1"], "--seed must be within 0..2**63-1"),
    (["--test", "reduce", "--offload", "nic", "--size", "4KiB"], "reduce keeps all its 86 parts in flight"),
])
def test_emu_run_refuses_options_it_would_ignore_or_fail_on(args, message, capsys):
    assert main(["run", "--topo", "star:n=4", *args]) == 2
    assert message in capsys.readouterr().out.replace("\n", " ")


BAD_TOML = b"[link]\nlatency_ns = 5 # \xff\xfe\n"


@pytest.mark.parametrize("args,message", [
    (["plan", "nc", "mesh:k=2,n=1"], "mesh:k=2,n=1 cannot be cut into groups"),
    (["plan", "nc", "torus:k=3,n=1"], "torus:k=3,n=1 cannot be cut into groups"),
    (["run", "--topo", "star:n=4", "--config", "{bad_toml}"], "not UTF-8 text (byte 0xff at offset 24)"),
    (["run", "--topo", "star:n=4", "--test", "put", "--size", "0"], "--size 0: put and get move 1 B..1 GiB"),
    (["run", "--topo", "star:n=4", "--realtime", "1e-300"], "--realtime must be a finite number of virtual ns per "
                                                            "second, at least 1000"),
    (["run", "--topo", "star:n=4", "--test", "put", "--set", "switch.vc_buffer_bytes=1"],
     "switch.vc_buffer_bytes=1 is smaller than the largest frame of this run, 1,114 B"),
    (["run", "--topo", "star:n=4", "--set", "switch.vc_buffer_bytes=1"],
     "switch.vc_buffer_bytes=1 is smaller than the largest frame of this run, 1,074 B"),
    (["run", "--topo", "star:n=\u0664"], "star: n must be written in ASCII digits (0-9)"),
    (["run", "--topo", "star:n=4", "--set", "link.latency_ns=\u0663"], "link.latency_ns must be written in ASCII"),
    (["run", "--topo", "star:n=4", "--fault", "at=\u0663,link=h0-s0,down"], "fault time '\u0663' must be written"),
    (["run", "--topo", "star:n=4", "--fault", "at=0,link=h0-s0,ber=\u0661e-3"], "ber=\u0661e-3 is not a number"),
    (["run", "--topo", "star:n=4", "--test", "put", "--size", "\u0663KiB"], "is not a number of bytes"),
])
def test_refused_before_anything_starts_in_one_line(args, message, tmp_path):
    """Each is refused by the one-line path: exit 2, one line on the terminal, no traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    bad = tmp_path / "bad.toml"
    bad.write_bytes(BAD_TOML)
    exe = str(Path(sys.executable).parent / "emu")
    argv = [a.replace("{bad_toml}", str(bad)) for a in args]
    out = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert text.startswith("refused: ") and message in text, text


def test_numbers_in_other_scripts_are_refused_on_the_options_too(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--topo", "star:n=4", "--seed", "\u0663"])
    assert e.value.code == 2 and "must be written in ASCII digits" in capsys.readouterr().err
