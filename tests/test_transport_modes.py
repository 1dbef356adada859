"""Real sockets by default, ``--direct`` (in-memory handover) as the option: the same figures and the
same capture bytes, over several workloads and topologies -- finite buffers and credits, the
input-queued router on a mesh, faults (a link down, bit errors) with the network manager, an
offload, and two processes -- and the default really puts every frame on a socket."""

import hashlib
import json

import pytest
import trio

import apps
import emu
from emu.config import RunConfig
from emu.front.cli import _parser, main, run_config

RUNS = {
    # host software collectives and echoes on an output-queued fat-tree
    "fattree": ["--topo", "fattree:k=4,n=2", "--test", "pingall+allreduce", "--size", "16KiB"],
    # the input-queued router (finite VC buffers, credits, cut-through) on a mesh: open-loop traffic, a collective
    "mesh_iq": ["--topo", "mesh:k=4,n=2", "--test", "uniform", "--size", "512B", "--load", "0.4",
                "--warmup", "60", "--measure", "60"],
    "mesh_iq_allreduce": ["--topo", "mesh:k=4,n=2", "--test", "allreduce", "--size", "8KiB"],
    # finite buffers with credit flow control on the output-queued switch
    "finite": ["--topo", "fattree:k=4,n=2", "--test", "alltoall", "--size", "2KiB",
               "--set", "switch.vc_buffer_bytes=4096", "--set", "switch.credit_delay_ns=20"],
    # faults: bit errors from the start and a link taken down mid-test, the manager routing around it
    "faults": ["--topo", "fattree:k=4,n=2", "--test", "put+allreduce", "--size", "16KiB", "--manager",
               "--set", "switch.routing=adaptive", "--fault", "at=0,link=s0-s5,ber=1e-4",
               "--fault", "at=3us,link=s0-s4,down"],
    # link bring-up by the manager: a pattern of test frames on every link, a lossy one taken out
    "bringup": ["--topo", "fattree:k=4,n=2", "--test", "put", "--size", "16KiB", "--manager",
                "--set", "manager.bringup=true", "--set", "switch.routing=static",
                "--fault", "at=0,link=s0-s5,ber=1e-4"],
    # an offloaded collective (NIC triggered descriptors)
    "nic_offload": ["--topo", "fattree:k=4,n=2", "--test", "allreduce", "--offload", "nic", "--size", "1KiB"],
    # two processes: frames between them are datagrams in both modes, within each the mode applies
    "processes2": ["--topo", "fattree:k=4,n=2", "--test", "pingall+allreduce", "--size", "8KiB",
                   "--processes", "2", "--partition", "order"],
}


def _figures(path) -> list[dict]:
    """Every figure of every test; ``wall_s`` is wall-clock time, not a figure of the model."""
    doc = json.loads(path.read_text())
    tests = doc["results"] if isinstance(doc, dict) else doc  # the run record says which mode: not a figure
    for t in tests:
        t.pop("wall_s", None)
    return tests


@pytest.mark.parametrize("name", list(RUNS))
def test_direct_and_sockets_give_the_same_figures_and_capture(name, tmp_path):
    out = {}
    for mode in ("sockets", "direct"):
        js, cap = tmp_path / f"{mode}.json", tmp_path / f"{mode}.pcapng"
        argv = ["run", *RUNS[name], "--json", str(js), "--pcap", str(cap)] + (["--direct"] if mode == "direct" else [])
        assert main(argv) == 0, (name, mode)
        out[mode] = (_figures(js), hashlib.sha256(cap.read_bytes()).hexdigest())
    figures, digest = out["sockets"]
    assert all(t["ok"] for t in figures), figures
    assert out["direct"][0] == figures
    assert out["direct"][1] == digest


def _datagrams(direct: bool | None) -> int:
    """Datagrams the elements sent on a small run: the default (None), or ``direct`` given."""
    async def go():
        kw = {} if direct is None else {"direct": direct}
        async with emu.Cluster("star:n=3", **kw) as net:
            await net.run({"h0": (apps.send_to, "h1", 3000, 0, 2), "h1": (apps.recv_n, 2), "h2": (apps.ping, "h0")})
            return sum(s["element"]["datagrams_sent"] for s in await net.stats())

    return trio.run(go)


def test_sockets_are_the_default_and_direct_skips_them():
    assert RunConfig().direct is False
    sent = _datagrams(None)
    assert sent > 0 and sent == _datagrams(False)  # every frame of every link went through a socket
    assert _datagrams(True) == 0  # one process, in-memory handover: no socket at all


def test_the_command_line_names_both_modes():
    run = _parser()._subparsers._group_actions[0].choices["run"]
    helps = {a.dest: a.help for a in run._actions}
    assert "in memory" in helps["direct"] and "default" in helps["wire"]
    assert run_config(run.parse_args(["--topo", "star:n=2"])).direct is False
    assert run_config(run.parse_args(["--topo", "star:n=2", "--wire"])).direct is False
    assert run_config(run.parse_args(["--topo", "star:n=2", "--direct"])).direct is True
    with pytest.raises(SystemExit):  # both at once: argparse refuses (they are exclusive)
        run.parse_args(["--topo", "star:n=2", "--direct", "--wire"])


async def test_the_large_run_hint_suggests_direct_only_where_it_applies():
    from emu.front.estimate import large_run_note
    from emu.topologies import build

    topo = build("fattree:k=4,n=2")
    extra = {"algo": None, "size": "4MiB", "dtype": None, "op": None, "root": None, "ranks": None, "offload": None,
             "branch": None, "density": None, "overlap": None}
    note = await large_run_note(["allreduce"], topo, extra)
    assert note is not None and "--direct" in note
    assert "--direct" not in await large_run_note(["allreduce"], topo, extra, direct=True)
