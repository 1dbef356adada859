"""The NIC's round robin between queue pairs (nic.qp_sched, issue 47): a small message does not wait for
a large one to another peer; one queue pair alone is sent as before; the settings are checked."""

import pytest

from emu.config import ConfigError, HostSpec, NicSpec
from emu.front.cli import main
from emu.wire import HDR_LEN, MSG

from test_traffic import run  # noqa: E402  (emu run's JSON rows, wall time left out)

# h0 sends 200 KB to each of h1, h2, h3 at 0 (three backlogged queue pairs), then 1,000 B to h4 at 20 us
FLOWS = "0 1 0 200000 0\n0 2 0 200000 0\n0 3 0 200000 0\n0 4 0 1000 20000\n"


def flows(tmp_path, *sets, text=FLOWS):
    f = tmp_path / "f.txt"
    f.write_text(text)
    args = ["--topo", "star:n=5", "--test", "flows", "--flows", str(f)]
    for s in sets:
        args += ["--set", s]
    return run(tmp_path, *args)[0]


def test_a_small_message_waits_one_segment_per_active_queue_pair(tmp_path):
    """Round robin: the three backlogged queue pairs keep h0's line busy, one full segment of L ns each
    from the first hand-over s0 = send overhead + NIC delay, so the hand-over slots are s0 + jL. The
    small message's queue pair joins the ring behind the three when the host sends it (at 20 us): it
    goes at the fourth slot whose decision (nic_delay_ns before the slot) comes after that, and then
    takes the path of the same message alone (its ideal FCT less send overhead and NIC delay)."""
    h, n = HostSpec(), NicSpec()
    assert n.qp_sched == "auto"
    o, d = h.send_overhead_ns, h.nic_delay_ns
    L = -(-(HDR_LEN + MSG.size + h.mtu_bytes + 4) * 8 // 100)  # a full segment at 100 Gbit/s (FCS included)
    r = flows(tmp_path, "host.cc=dcqcn")
    small = r["per_flow"][3]
    start = 20_000
    s0 = o + d
    j = -(-(start + d + 1 - s0) // L)  # the first slot decided after the send
    hand = s0 + (j + 3) * L
    assert hand >= start + o + d  # (the message is ready by its turn)
    assert small["fct_ns"] == hand - start + small["ideal_ns"] - o - d == 956


def test_fifo_keeps_the_old_hand_over_and_the_small_message_waits(tmp_path):
    """nic.qp_sched=fifo: each queue pair hands its segments over at its own pacing times, the port sends
    them in that order; by 20 us every frame of the large messages is at the port, so the small one
    waits for them all -- exactly as without a congestion control (one FIFO)."""
    fifo = flows(tmp_path, "host.cc=dcqcn", "nic.qp_sched=fifo")["per_flow"][3]
    none = flows(tmp_path, "host.cc=none")["per_flow"][3]
    assert fifo["fct_ns"] == none["fct_ns"] > 30 * fifo["ideal_ns"]


@pytest.mark.parametrize("cc", ["dcqcn", "hpcc", "swift", "ndp"])
def test_one_queue_pair_alone_is_sent_as_without_the_scheduler(tmp_path, cc):
    text = "0 1 0 100000 0\n0 1 0 3000 1000\n"
    rr = flows(tmp_path, f"host.cc={cc}", text=text)
    fifo = flows(tmp_path, f"host.cc={cc}", "nic.qp_sched=fifo", text=text)
    assert rr == fifo


def test_every_algorithm_shares_the_line_by_round_robin(tmp_path):
    for cc in ("hpcc", "swift", "ndp"):
        small = flows(tmp_path, f"host.cc={cc}")["per_flow"][3]
        assert small["slowdown"] < 2, (cc, small)


@pytest.mark.parametrize("sets, says", [
    (["nic.qp_sched=rr"], "nic.qp_sched=rr arbitrates between the queue pairs of a congestion control's "
                          "transport; set host.cc (dcqcn, hpcc, swift, ndp) or leave nic.qp_sched at auto"),
    (["nic.qp_sched=drr"], "nic.qp_sched must be one of auto, fifo, rr, got 'drr'"),
])
def test_bad_settings_are_refused_in_one_line(capsys, sets, says):
    args = ["run", "--topo", "star:n=3", "--test", "incast", "--size", "1KB"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    assert capsys.readouterr().out == f"refused: {says}\n"
    with pytest.raises(ConfigError):
        HostSpec(nic=NicSpec(qp_sched="rr"))


def test_round_robin_figures_repeat_over_processes_and_in_memory(tmp_path):
    args = ["--topo", "fattree:k=2,n=2", "--test", "poisson", "--load", "0.9", "--cdf", "hadoop", "--duration",
            "60us", "--seed", "3", "--set", "host.cc=dcqcn"]
    a = run(tmp_path, *args, name="a.json")
    assert a[0]["flows"] > 4 and a[0]["cc"]["segments_sent"] > 100
    assert run(tmp_path, *args, "--processes", "2", name="b.json") == a
    assert run(tmp_path, *args, "--direct", name="c.json") == a
