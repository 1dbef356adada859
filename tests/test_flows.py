"""Flow workloads, completion times and slowdown (issue 47, item 4): the reader of flow files, the
generators, the ideal FCT against isolated runs, incast against its analytic completion."""

import json

import pytest

from emu.config import ConfigError
from emu.front.cli import main
from emu.front.flow_model import IdealFct
from emu.nodes.workload.flows import (Flow, all_to_all, cdf_named, incast, parse_cdf, parse_flows, permutation,
                                      poisson)
from emu.topologies.registry import build

HOSTS = ["h0", "h1", "h2", "h3"]


from test_traffic import run  # noqa: E402  (emu run's JSON rows, wall time left out)


# -- the flow file --------------------------------------------------------------------------------

def test_a_flow_file_by_index_or_name_with_comments():
    text = "# src dst priority size start_ns\n0 3 0 1 0\n\nh1 h2 2 1024 100000  # a comment\n"
    assert parse_flows(text, "f.txt", HOSTS) == [Flow(0, 3, 0, 1, 0), Flow(1, 2, 2, 1024, 100000)]


def test_the_hpcc_flow_txt_is_read_as_it_is():
    """The HPCC code's flow.txt: the count, then 'src dst pg dport size start_s'; starts from the first."""
    text = "2\n2 1 3 100 200000000 2\n3 1 3 100 5000 2.000001\n"
    assert parse_flows(text, "flow.txt", HOSTS) == [Flow(2, 1, 3, 200000000, 0), Flow(3, 1, 3, 5000, 1000)]


@pytest.mark.parametrize("text, says", [
    ("0 1 0 10\n", "f.txt:1: 4 fields, not the 5 of 'src dst priority size start_ns'; write the line as "
                   "'src dst priority size start_ns'"),
    ("0 1 0 10 0\n0 7 0 10 0\n", "f.txt:2: no host '7'; give a host index 0..3 or a name (h0...)"),
    ("0 x1 0 10 0\n", "f.txt:1: no host 'x1'; give a host index 0..3 or a name (h0...)"),
    ("2 h2 0 10 0\n", "f.txt:1: a flow from h2 to itself; give another destination"),
    ("0 1 8 10 0\n", "f.txt:1: priority '8' is not a traffic class; give 0..7"),
    ("0 1 0 0 0\n", "f.txt:1: size '0' is not a byte count; give 1..4294967296 (host.max_message_bytes)"),
    ("0 1 0 1e3 0\n", "f.txt:1: size '1e3' is not a byte count; give 1..4294967296 (host.max_message_bytes)"),
    ("0 1 0 10 -5\n", "f.txt:1: start '-5' is not a time; give a start >= 0 in whole ns, e.g. 1500"),
    ("0 1 0 10 1.5\n", "f.txt:1: start '1.5' is not a time; give a start >= 0 in whole ns, e.g. 1500"),
    ("3\n0 1 3 100 10 2\n", "f.txt:1: the file says 3 flows and holds 1; correct the count"),
    ("1\n0 1 3 10 2\n", "f.txt:2: 5 fields, not the 6 of 'src dst priority dport size start_s'; write the line as "
                        "'src dst priority dport size start_s'"),
    ("1\n0 1 3 100 10 two\n", "f.txt:2: start 'two' is not a time; give a start >= 0 in seconds, e.g. 2.000001"),
    ("# nothing\n", "f.txt: no flows; write one per line as 'src dst priority size start_ns'"),
])
def test_a_bad_line_is_refused_naming_file_line_and_fix(text, says):
    with pytest.raises(ConfigError) as e:
        parse_flows(text, "f.txt", HOSTS)
    assert str(e.value) == says


def test_the_cli_refuses_a_bad_flow_file_in_one_line(tmp_path, capsys):
    f = tmp_path / "bad.txt"
    f.write_text("0 1 0 10 0\n0 1 0 ten 0\n")
    assert main(["run", "--topo", "star:n=4", "--test", "flows", "--flows", str(f)]) == 2
    assert capsys.readouterr().out == (f"refused: {f}:2: size 'ten' is not a byte count; give 1..1073741824 "
                                       "(host.max_message_bytes)\n")
    for args, says in ((["--test", "flows"], "--test flows reads its flows from a file: give --flows FILE"),
                       (["--test", "pingall", "--senders", "2"], "--senders apply to the flow tests"),
                       (["--test", "incast", "--cdf", "hadoop"], "--cdf applies to --test poisson"),
                       (["--test", "incast", "--senders", "4"], "--senders 4: an incast on 4 hosts has 1..3"),
                       (["--test", "poisson"], "--test poisson --load None: give one load in (0, 1]"),
                       (["--test", "poisson", "--load", "0.5", "--cdf", "nope"], "--cdf nope: neither a CDF by name"),
                       (["--test", "poisson", "--load", "0.5", "--duration", "soon"], "--duration soon: a time 'soon'"),
                       (["--test", "poisson", "--load", "0.5", "--size", "1KB"], "--size does not apply to --test "
                                                                                 "poisson: the sizes come from --cdf")):
        assert main(["run", "--topo", "star:n=4", *args]) == 2
        out = capsys.readouterr().out
        assert out.startswith("refused: " + says) and out.count("\n") == 1, out


# -- CDFs and generators --------------------------------------------------------------------------

def test_the_published_cdfs_sample_by_interpolation_and_their_means():
    w = cdf_named("websearch")
    assert w.size(0.15) == 10000 and w.size(0.60) == 200000 and w.size(0.165) == 13000
    assert w.mean() == 1711250.0                 # trapezoid over the points, as the HPCC code's getAvg
    assert cdf_named("hadoop").mean() == 120420.75
    assert parse_cdf("0 0\n100 50\n300 100\n", "c.txt").size(0.75) == 200


@pytest.mark.parametrize("text, says", [
    ("0 0\n100 fifty\n", "c.txt:2: '100 fifty' is not 'size percent'"),
    ("0 0\n100 90\n", "c.txt: a CDF runs from 0 % to 100 % over two points or more"),
    ("0 0\n100 50\n50 100\n", "c.txt: the point 50 100 does not follow 100 50; sizes and percents must both increase"),
])
def test_a_bad_cdf_file_is_refused(text, says):
    with pytest.raises(ConfigError, match="^" + says.replace("(", r"\(").replace(")", r"\)")):
        parse_cdf(text, "c.txt")


def test_generators():
    assert incast(8, 3, 100) == [Flow(1, 0, 0, 100, 0), Flow(2, 0, 0, 100, 0), Flow(3, 0, 0, 100, 0)]
    p = permutation(8, 10, seed=2)
    assert sorted(f.dst for f in p) == list(range(8)) and all(f.src != f.dst for f in p)
    assert permutation(8, 10, seed=2) == p != permutation(8, 10, seed=3)
    a = all_to_all(4, 10)
    assert len(a) == 12 and {(f.src, f.dst) for f in a} == {(i, j) for i in range(4) for j in range(4) if i != j}
    w = cdf_named("websearch")
    f = poisson(8, 0.5, w, 10_000_000, 100_000_000_000, seed=1)
    assert f == poisson(8, 0.5, w, 10_000_000, 100_000_000_000, seed=1) != poisson(8, 0.5, w, 10_000_000,
                                                                                    100_000_000_000, seed=2)
    assert [x.start_ns for x in f] == sorted(x.start_ns for x in f) and all(x.src != x.dst for x in f)
    offered = sum(x.size for x in f) * 8 / (8 * 0.01 * 100e9)
    assert 0.4 < offered < 0.6                   # load 0.5 of each link, within the draws' noise (289 flows)


# -- the ideal FCT against isolated runs ----------------------------------------------------------

def test_the_ideal_fct_by_hand_on_a_star():
    """star:n=2, 100 Gbit/s, 100 ns links, 50 ns switch, NICs 100 ns, send overhead 300 ns. 100,000 B:
    97 frames of 1,074 B (86 ns) and one of 722 B (58 ns). The last full frame leaves h0 at 400 + 97 x 86
    = 8,742 and the switch at 8,742 + 150 + 86 = 8,978; the last frame reaches the switch at 8,742 + 58 +
    150 = 8,950, waits for the port until 8,978, then 58 + 100 + NIC 100: 9,236."""
    m = IdealFct(build("star:n=2"))
    assert m("h0", "h1", 100_000) == 9236
    assert m("h0", "h1", 1) == 300 + 100 + (5 + 100) + 50 + (5 + 100) + 100
    assert m("h0", "h1", 1025) == 927


SPACED = "0 3 0 1 0\nh1 h2 0 1024 100000\n2 0 0 1025 200000\n3 1 0 100000 300000\n0 1 0 450000 500000\n"


@pytest.mark.parametrize("topo, sets", [
    ("star:n=4", []), ("fattree:k=2,n=3", []), ("fattree:k=2,n=3", ["switch.routing=ecmp"]),
    ("dragonfly:p=1,a=2,h=1", ["switch.model=output_queued", "switch.cut_through=false"]),
    ("star:n=4", ["link.bandwidth_bps=25e9", "host.mtu_bytes=4096"]),
])
def test_a_flow_alone_takes_exactly_its_ideal_time(tmp_path, topo, sets):
    f = tmp_path / "spaced.txt"
    f.write_text(SPACED)
    (r,) = run(tmp_path, "--topo", topo, "--test", "flows", "--flows", str(f), *[a for s in sets for a in ("--set", s)])
    assert r["slowdown_min"] == r["slowdown_max"] == 1.0 and r["flows"] == 5
    assert "ideal_note" not in r


def test_a_sprayed_flow_may_beat_the_one_path_ideal(tmp_path):
    """Under spray the frames of one flow take parallel paths: the short last frame of a 1,025 B flow
    does not wait behind the first at the switches above h2's, so it arrives earlier than on one path."""
    f = tmp_path / "spaced.txt"
    f.write_text(SPACED)
    (r,) = run(tmp_path, "--topo", "fattree:k=2,n=3", "--test", "flows", "--flows", str(f), "--set",
               "switch.routing=spray")
    assert r["slowdown_max"] == 1.0 and 0.99 < r["slowdown_min"] < 1
    assert r["buckets"][0]["flows"] == 3 and r["buckets"][0]["slowdown_p99"] == 1.0


def test_an_incast_finishes_when_the_receiver_link_has_carried_every_frame(tmp_path):
    """star:n=4, 3 senders x 10 frames of 1,074 B (86 ns): the switch starts h0's port at 400 + 86 + 150
    (636) and sends the 30 frames back to back; the last arrives 100 + 100 later: 636 + 30 x 86 + 200 = 3,416."""
    (r,) = run(tmp_path, "--topo", "star:n=4", "--test", "incast", "--size", "10KiB")
    assert r["senders"] == 3 and r["flows"] == 3 and r["last_completion_ns"] == 3416
    assert r["goodput_gbps"] == round(3 * 10240 * 8 / 3416, 3)
    ideal = IdealFct(build("star:n=4"))("h1", "h0", 10240)
    assert r["slowdown_max"] == round(3416 / ideal, 4) and r["slowdown_min"] > 1
    rows = r["per_flow"]  # each flow's own figures: the last to finish is the run's last completion
    assert [(f["src"], f["dst"], f["size"]) for f in rows] == [("h1", "h0", 10240), ("h2", "h0", 10240),
                                                                ("h3", "h0", 10240)]
    assert max(f["fct_ns"] for f in rows) == 3416 and all(f["ideal_ns"] == ideal for f in rows)
    assert max(f["slowdown"] for f in rows) == r["slowdown_max"]


def test_flow_workloads_repeat_over_processes_and_in_memory(tmp_path):
    args = ["--topo", "fattree:k=2,n=3", "--test", "permutation+alltoall_flows+poisson", "--size", "20KB",
            "--load", "0.6", "--cdf", "hadoop", "--duration", "100us", "--seed", "3", "--set", "switch.routing=ecmp"]
    a = run(tmp_path, *args, name="a.json")
    assert [r["flows"] for r in a[:2]] == [8, 56] and a[2]["flows"] > 20
    assert all(r["slowdown_min"] >= 1 for r in a)
    assert [b["buckets"][0]["bucket"] for b in a] == ["<=100KB", "<=100KB", "<=10KB"]
    assert run(tmp_path, *args, "--processes", "2", name="b.json") == a
    assert run(tmp_path, *args, "--direct", name="c.json") == a


# -- emu report -----------------------------------------------------------------------------------

def test_emu_report_draws_slowdown_by_size_and_queues_over_time(tmp_path, capsys):
    res, tr, out = tmp_path / "r.json", tmp_path / "t.json", tmp_path / "plots"
    assert main(["run", "--topo", "star:n=4", "--test", "incast", "--size", "10KiB", "--json", str(res),
                 "--trace", str(tr)]) == 0
    assert main(["report", str(res), "--trace", str(tr), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert {"fct_slowdown.png", "fct_slowdown.svg", "queues.png", "queues.svg"} <= set(names)
    from emu.front.report_flows import queue_tracks

    tracks = queue_tracks(json.loads(tr.read_text()), "t.json")
    assert max(b for _, b in tracks["s0-p0"]) > 10 * 1074      # the incast's queue at h0's switch port
    doc = json.loads(res.read_text())
    doc["results"][0]["buckets"][0]["slowdown_p99"] = "high"
    res.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["report", str(res), "--out", str(tmp_path / "p2")]) == 2
    assert capsys.readouterr().out == (f"refused: emu report: {res}: the buckets of 'incast'[0].slowdown_p99 must be a "
                                       "number >= 0; give the files of one emu run\n")


# -- the readers on any text ----------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

_TOKENS = st.sampled_from(["0", "1", "3", "h2", "4", "-1", "1.5", "1e3", "256", "99999999999", "x", "#", "2.0", "\t"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_TOKENS, max_size=7).map(" ".join), max_size=6).map("\n".join) | st.text(max_size=80))
def test_the_readers_take_any_text_and_refuse_in_one_line(text):
    for parse in (lambda: parse_flows(text, "f.txt", HOSTS), lambda: parse_cdf(text, "c.txt")):
        try:
            out = parse()
        except ConfigError as e:
            assert "\n" not in str(e) and str(e).startswith(("f.txt", "c.txt"))
        else:
            if isinstance(out, list):
                assert out and all(0 <= f.src < 4 and 0 <= f.dst < 4 and f.src != f.dst and f.size >= 1
                                   and f.start_ns >= 0 for f in out)


@pytest.mark.parametrize("entropy", ["flow", "message", "segment"])
def test_the_senders_entropy_byte_spreads_segments_under_ecmp(tmp_path, entropy):
    """host.cc_entropy under switch.routing=ecmp, one 200 KB flow h0 -> h15 across the core of
    fattree:k=4,n=2 (196 segments): one entropy per flow (or per message: there is one) keeps every
    segment on one of s0's four uplinks; one per segment spreads them over all four (the sender sprays),
    and selective repeat takes what comes out of order."""
    f = tmp_path / "one.txt"
    f.write_text("0 15 0 200000 0\n")
    (r,) = run(tmp_path, "--topo", "fattree:k=4,n=2", "--test", "flows", "--flows", str(f), "--set",
               "switch.routing=ecmp", "--set", "host.cc=swift", "--set", f"host.cc_entropy={entropy}")
    up = sorted(v["frames"] for k, v in r["per_link"].items() if k in ("s0-p4", "s0-p5", "s0-p6", "s0-p7")
                and v.get("frames"))
    assert sum(up) == 196 and r["per_flow"][0]["fct_ns"] > 0
    assert up == ([196] if entropy != "segment" else [48, 48, 50, 50])


# -- a flow's priority is its traffic class (the frames' prio) -------------------------------------

def test_a_flows_priority_is_its_frames_prio_and_class_queues_serve_it_first(tmp_path):
    """h0 (priority 1) and h1 (priority 0) each send 100,000 B to h2 at 0 through s0's class queues
    (strict priority, 802.1Q: the higher class first). Every frame of h0's flow carries prio 1 and VC 0
    (the routers' own VC policy), h1's prio 0; h0's flow goes as if alone (its ideal FCT to the ns) and
    h1's ends later by exactly h0's frames' time on s0's line to h2 (97 x 1,074 B + 1 x 722 B at 100
    Gbit/s: 8,400 ns). Before, the priority went to the VC byte and both flows shared the port FIFO."""
    from scapy.utils import rdpcap
    from emu.wire import PacketType, parse_frame

    f = tmp_path / "f.txt"
    f.write_text("0 2 1 100000 0\n1 2 0 100000 0\n")
    cap = tmp_path / "c.pcapng"
    (r,) = run(tmp_path, "--topo", "star:n=3", "--test", "flows", "--flows", str(f), "--set",
               "queues.buffer_bytes=100000000", "--pcap", str(cap))
    hi, lo = r["per_flow"]
    assert hi["fct_ns"] == hi["ideal_ns"] == lo["ideal_ns"]
    assert lo["fct_ns"] == lo["ideal_ns"] + 97 * -(-1074 * 8 // 100) + -(-722 * 8 // 100) == lo["ideal_ns"] + 8_400
    classes = {}
    for p in rdpcap(str(cap)):
        src, _dst, vc, prio, ptype, *_ = parse_frame(bytes(p)[:-4])  # (the capture keeps the FCS)
        if ptype == PacketType.MSG:
            classes.setdefault(src, set()).add((vc, prio))
    assert classes == {0: {(0, 1)}, 1: {(0, 0)}}


def test_a_flows_priority_is_the_prio_of_its_segments_under_a_congestion_control(tmp_path):
    """The same under host.cc=dcqcn (its segment transport sends the frames): h0's flow alone at its ideal."""
    f = tmp_path / "f.txt"
    f.write_text("0 2 1 100000 0\n1 2 0 100000 0\n")
    (r,) = run(tmp_path, "--topo", "star:n=3", "--test", "flows", "--flows", str(f), "--set",
               "queues.buffer_bytes=100000000", "--set", "host.cc=dcqcn")
    hi, lo = r["per_flow"]
    assert hi["slowdown"] < 1.02 < 1.8 < lo["slowdown"]
