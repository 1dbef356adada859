"""scripts/cc_reference.py's pieces that must match the references: htsim's leaf-spine, the HPCC
code's flow file and its node addresses (the runs themselves need the built references: slow)."""

import json

from load_script import load

from emu.topologies import build
from emu.nodes.workload.flows import parse_flows

ref = load("cc_reference")


def test_leaf_spine_is_htsims_two_tier_fat_tree(tmp_path):
    path = tmp_path / "ls6.json"
    ref.leaf_spine(6, str(path))
    t = build(str(path))
    hosts = [n for n in t.nodes if n.startswith("h")]
    assert len(hosts) == 6 * 6 // 2 == 18  # htsim: K*K/2 hosts for -tiers 2
    g = json.loads(path.read_text())
    up = {(e["source"], e["target"]) for e in g["links"]}
    assert all((f"h{h}", f"t{h // 3}") in up for h in range(18))  # HOST_POD_SWITCH: src / (K/2)
    assert all((f"t{t}", f"a{a}") in up for t in range(6) for a in range(3)) and len(up) == 18 + 18


def test_flow_file_is_the_hpcc_codes_format_and_emu_reads_it(tmp_path):
    path = tmp_path / "flow.txt"
    ref.flow_file(str(path), 2_000_000, 3, 250_000)
    lines = path.read_text().split("\n")
    assert lines[0] == "4" and lines[1].split() == ["2", "1", "3", "100", "2000000", "2.000000000"]
    flows = parse_flows(path.read_text(), "flow.txt", [f"h{i}" for i in range(66)])
    assert [(f.src, f.dst, f.priority, f.size) for f in flows] == \
        [(2, 1, 3, 2_000_000)] + [(h, 1, 3, 250_000) for h in (3, 4, 5)]
    assert [f.start_ns for f in flows] == [0, 20_000, 20_000, 20_000]


def test_ip_node_inverts_third_cc_node_id_to_ip():
    for node in (1, 2, 65, 255, 256, 300):
        ip = 0x0B000001 + (node // 256) * 0x10000 + (node % 256) * 0x100
        assert ref.ip_node(f"{ip:08x}") == node
