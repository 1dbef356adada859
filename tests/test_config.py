"""Settings (--set, --config), sizes the machine can take, and refusals before anything starts."""

import json
import os
import subprocess
import sys

import pytest

from emu.front.cli import main
from emu.config import ConfigError, parse_settings, settable_fields
from emu.topologies.estimate import estimate
from emu.topologies.registry import build, parse


def test_every_field_of_every_spec_is_settable_and_documented():
    fields = {name: doc for name, _, _, doc in settable_fields()}
    for must in ("link.latency_ns", "link.bandwidth_bps", "host.send_overhead_ns", "host.max_message_bytes",
                 "nic.alu_ns", "nic.queue_capacity", "switch.processing_delay_ns"):
        assert fields[must], must
    t = build("star:n=4", settings=parse_settings(["host.send_overhead_ns=435", "nic.alu_ns=1",
                                                   "link.latency_ns=77", "switch.processing_delay_ns=9"]))
    h, s, link = t.hosts[0].spec, t.switches[0].spec, t.links[0].spec
    assert (h.send_overhead_ns, h.nic.alu_ns, link.latency_ns, s.processing_delay_ns) == (435, 1, 77, 9)


def test_precedence_is_config_file_then_spec_string_then_set(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[link]\nlatency_ns = 500\nbandwidth_bps = 25_000_000_000\n[host]\nrecv_overhead_ns = 111\n")
    from emu.config import load_settings

    t = build("star:n=2,latency_ns=300", defaults=load_settings(str(cfg)),
              settings=parse_settings(["host.recv_overhead_ns=222"]))
    link, host = t.links[0].spec, t.hosts[0].spec
    assert (link.latency_ns, link.bandwidth_bps, host.recv_overhead_ns) == (300, 25 * 10**9, 222)


@pytest.mark.parametrize("items,message", [
    (["host.nosuch=1"], "host has no field 'nosuch'; fields: nic_delay_ns"),
    (["cpu.speed=1"], "unknown section 'cpu'; sections: link, host, nic, elan, switch"),
    (["host.send_overhead_ns=fast"], "host.send_overhead_ns must be an integer"),
    (["host.send_overhead_ns"], "is not SECTION.FIELD=VALUE"),
    (["link.latency_ns=1e30"], "out of range"),
    (["link.latency_ns=2.5"], "must be an integer"),
])
def test_bad_settings_are_refused_with_the_fix(items, message):
    with pytest.raises(ConfigError, match=message):
        parse_settings(items)


def test_values_a_spec_refuses_are_refused_like_spec_strings():
    with pytest.raises(ConfigError, match="latency_ns must be an integer within 1"):
        build("star:n=2", settings=parse_settings(["link.latency_ns=0"]))
    with pytest.raises(ConfigError, match="queue_capacity must be within 1..4096"):
        build("star:n=2", settings=parse_settings(["nic.queue_capacity=0"]))
    with pytest.raises(ConfigError, match="max_message_bytes must be within 1..2\\*\\*32-1"):
        build("star:n=2", settings=parse_settings(["host.max_message_bytes=99999999999"]))


def test_cli_set_and_config_reach_the_run(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[link]\nlatency_ns = 1000\n")
    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=2", "--config", str(cfg), "--set", "host.nic_delay_ns=0",
                 "--test", "pingall", "--json", str(out)]) == 0
    [r] = json.loads(out.read_text())["results"]
    assert r["rtt_min_ns"] == 2 * (2 * (1000 + 4) + 50)   # two links each way, 50-byte frames at 100 Gbit/s
    bad = tmp_path / "bad.toml"
    bad.write_text("[link]\nlatency = 5\n")
    assert main(["run", "--topo", "star:n=2", "--config", str(bad)]) == 2
    assert "link has no field 'latency'" in capsys.readouterr().out
    assert main(["topo", "star:n=2", "--set", "link.latency_ns=123"]) == 0
    assert "123 ns" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["--test", "allreduce", "--size", "2GiB"], "over what the hosts accept in one message"),
    (["--test", "allreduce", "--size", "99999999999999999999999GiB"], "over what the hosts accept"),
    (["--test", "pingall", "--seed", str(2**70)], "--seed must be within 0..2**63-1"),
    (["--test", "reduce", "--root", str(10**30)], "is not a rank"),
    (["--test", "pingall", "--pcap", "/no/such/folder/x.pcapng"], "the folder /no/such/folder does not exist"),
    (["--test", "pingall", "--json", "/no/such/folder/r.json"], "the folder /no/such/folder does not exist"),
    (["--test", "pingall", "--fault", "at=1us,link=h0-h1,down"], "no link between h0 and h1"),
    (["--test", "pingall", "--fault", "at=1us,link=s0-h9,down"], "no node 'h9'"),
])
def test_refused_before_the_run(args, message, capsys):
    assert main(["run", "--topo", "star:n=4", *args]) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert message in out and "Traceback" not in out


@pytest.mark.parametrize("spec", ["fattree:k=16,n=4", "clos:radix=64,stages=3", "mesh:k=128,n=2"])
def test_topologies_too_large_for_the_machine_are_refused_with_the_estimate(spec, capsys):
    assert main(["topo", spec]) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert "refused:" in out and "would have" in out and "over the limit" in out


def test_the_limits_can_be_raised_for_bigger_machines(monkeypatch):
    monkeypatch.setenv("EMU_MAX_ELEMENTS", "10")
    with pytest.raises(ConfigError, match="over the limit of 10 elements"):
        build("star:n=16")
    monkeypatch.setenv("EMU_MAX_ELEMENTS", "1000")
    monkeypatch.setenv("EMU_MAX_ROUTE_ENTRIES", "1000")
    with pytest.raises(ConfigError, match="over the limit of 1,000 routing-table entries"):
        build("fattree:k=4,n=2")   # 8 switches x 16 hosts = 128 entries: fine; k=4,n=3 is not
        build("fattree:k=4,n=3")


@pytest.mark.parametrize("spec", ["star:n=7", "fattree:k=3,n=3", "fattree:k=2,n=1", "clos:radix=8,stages=3",
                                  "clos:radix=6,stages=1", "clos:radix=16,stages=2,nodes=40",
                                  "twolevel:ports=8,hosts=60", "twolevel:ports=8,hosts=5",
                                  "twolevel:ports=4,hosts=16,spines=2", "mesh:k=5,n=2", "torus:k=3,n=3"])
def test_the_estimate_equals_the_built_counts(spec):
    name, raw = parse(spec)
    p = {k: int(v) for k, v in raw.items()}
    t = build(spec)
    t.validate()
    est = estimate(name, p)
    assert (est.hosts, est.switches, est.links, est.route_entries) == (
        len(t.hosts), len(t.switches), len(t.links), sum(len(v) for v in t.routes.values()))


def test_too_many_open_files_is_one_line_not_a_traceback(tmp_path):
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
            "from emu.front.cli import main\n"
            "sys.exit(main(['run', '--topo', 'star:n=200', '--test', 'pingall']))\n")
    env = {**os.environ, "EMU_MAX_ELEMENTS": "100000"}  # past the estimate: the start itself runs out
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    text = out.stdout + out.stderr
    assert out.returncode in (1, 2) and "Traceback" not in text and "ExceptionGroup" not in text
    assert "open files" in text, text[-500:]


def test_run_help_lists_the_settable_fields(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for name, _, _, _ in settable_fields():
        assert name in out


def test_a_fault_on_the_command_line_strikes_during_the_test(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=3", "--test", "pingall", "--fault", "at=0,link=s0-h2,down",
                 "--json", str(out)]) == 1
    [r] = json.loads(out.read_text())["results"]
    assert not r["ok"] and "h2" in r["error"] and "DeadlockError" in r["error"]
