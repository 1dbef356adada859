"""Spec 04's experiments as the source ran them (issue 30): host arrival processes into the
processing unit, the unit's bandwidth script, the contention term of the multi-buffer model, and
the source's gradient-like bucket data on the command line."""

import numpy as np
import pytest

from emu.config import ConfigError, PUSpec
from emu.switch.aggregate import ProcessingUnit, service_time
from emu.switch.aggregate.arrivals import ARRIVALS, drive, order, spacing

from load_script import load


def test_staggered_hosts_spread_their_starting_blocks_over_each_window():
    # the source's: 4 hosts over windows of 8 blocks start 2 blocks apart
    assert [order("staggered", h, 16, 8, 4)[:8] for h in range(4)] == [
        [0, 1, 2, 3, 4, 5, 6, 7], [2, 3, 4, 5, 6, 7, 0, 1], [4, 5, 6, 7, 0, 1, 2, 3], [6, 7, 0, 1, 2, 3, 4, 5]]
    # 12 blocks: two equal groups of 6 (not 8 and a short 4 that would crowd its packets), starts 0, 1, 3, 4
    assert [order("staggered", h, 12, 8, 4)[6:] for h in range(4)] == [[6, 7, 8, 9, 10, 11], [7, 8, 9, 10, 11, 6],
                                                                      [9, 10, 11, 6, 7, 8], [10, 11, 6, 7, 8, 9]]
    assert order("staggered", 3, 4, 2, 4) == [1, 0, 3, 2]  # narrower windows than hosts: two start alike
    assert order("rotated", 0, 6, 4, 2) == [0, 1, 2, 3, 4, 5]
    assert order("rotated", 1, 6, 4, 2) == [1, 2, 3, 0, 5, 4]
    assert order("lockstep", 3, 5, 2, 4) == order("exponential", 3, 5, 2, 4) == [0, 1, 2, 3, 4]
    assert spacing("staggered", 1024, 1024, 64) == 16 and spacing("rotated", 1024, 1024, 64) == 1
    assert spacing("staggered", 16, 16, 64) == spacing("lockstep", 1024, 1024, 64) == 0


def test_staggered_packets_of_a_block_come_apart_so_handlers_do_not_contend():
    # 4 hosts, one cluster of 8 cores, one subset, the unit not overloaded (4 packets per 600 ns slot
    # against 8 per L = 1024 ns): a block's packets one slot apart (rotated) queue for its lock (600 ns < L),
    # window / P = 16 slots apart (staggered) they do not
    def run(process):
        p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=8, subset=8))
        return drive(p, 4, 64, lambda h, b: np.ones(256, np.float32), process=process, slot_ns=600, window=64)

    stag, rot = run("staggered"), run("rotated")
    assert stag.stats["busy_wait_ns"] == 0 < rot.stats["busy_wait_ns"]
    assert stag.span_ns < rot.span_ns


@pytest.mark.parametrize("process", ARRIVALS)
def test_every_arrival_process_aggregates_every_block_and_is_repeatable(process):
    def once():
        p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=4, subset=1, copy_cycles=0))
        return drive(p, 4, 12, lambda h, b: np.full(8, h + 10 * b, np.int32), process=process, slot_ns=40, window=4,
                     keep=True)

    r, again = once(), once()
    assert r.blocks == r.packets / 4 == 12 and sorted(r.results) == list(range(12))
    for b, got in r.results.items():
        assert np.array_equal(got, np.full(8, 6 + 40 * b, np.int32))
    assert (r.first_ns, r.last_ns, r.stats) == (again.first_ns, again.last_ns, again.stats)


def test_lockstep_without_contention_runs_at_the_models_k_over_tau():
    # S = 1: a block's packets queue at one core (no lock contention): tau = L; 4 cores, hosts sending far
    # faster than the unit aggregates -> the unit's bandwidth K / tau, to the last block's tail
    L = 256  # cycles: 256 bytes at 1 cycle per byte, 1 GHz
    p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=4, subset=1, copy_cycles=0))
    r = drive(p, 4, 64, lambda h, b: np.ones(64, np.float32), process="lockstep", slot_ns=1, window=64)
    # 256 packets over 4 cores, L each (block b on core b mod 4): K / tau; core 3 gets its first packet
    # in slot 3 (1 ns slots), so the last block is out at 3 + 64 L
    assert r.span_ns == 3 + 64 * 4 * L // 4
    assert r.stats["busy_wait_ns"] == 0


def test_a_full_packet_memory_holds_hosts_back_instead_of_dropping():
    p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=1, subset=1, packet_memory_bytes=4096))
    r = drive(p, 8, 16, lambda h, b: np.ones(256, np.float32), process="lockstep", slot_ns=1, window=16)
    assert r.stats["drops"] == 0 and r.stats["paused"] > 0 and r.stats["peak_packet_memory"] <= 4096
    assert r.blocks == 16


def test_the_multi_buffer_service_time_keeps_the_contention_term():
    L, P = 1024, 8
    assert service_time("multi", L, P, B=2) == L + L / P                           # no contention: as before
    assert service_time("multi", L, P, contending=8, B=2) == L * 5 / 2 + L / P     # 4 cores per buffer
    assert service_time("multi", L, P, contending=8, B=4) == L * 3 / 2 + 3 * L / P
    assert service_time("multi", L, P, contending=8, B=2, delta_c=512) == L + L / P  # B delta_c >= L: none
    assert service_time("multi", L, P, contending=8, B=8) == L + 7 * L / P


def test_the_processing_unit_script_at_a_tiny_size_prints_the_model_and_the_reference_lines(capsys):
    rows = load("inc_pu").main(["--hosts", "4", "--size", "4KiB", "--clusters", "1", "--subsets", "1,8"])
    out = capsys.readouterr().out
    assert "SwitchML (P4 switch) 1.6 Tbit/s" in out and "SHARP (fixed function) 3.2 Tbit/s" in out
    assert [r["dtype"] for r in rows[:4]] == ["int32", "int16", "int8", "float32"]
    assert {r["S"] for r in rows[4:6]} == {1, 8} and [r["arrivals"] for r in rows[6:]] == list(ARRIVALS)
    i32, i8 = rows[0], rows[2]
    assert i32["span_ns"] == i8["span_ns"] and i8["gelems"] == pytest.approx(4 * i32["gelems"], rel=0.05)  # by bytes
    assert all(r["model_tbps"] > 0 and r["drops"] == 0 for r in rows)


def test_bucket_data_has_one_value_per_bucket_and_overlap_places_that_share_alike():
    from emu.nodes.collectives.run import make_sparse_input

    a = make_sparse_input(7, 0, 512 * 40, "float32", 1 / 512, 0.5, 512)[0]
    b = make_sparse_input(7, 1, 512 * 40, "float32", 1 / 512, 0.5, 512)[0]
    assert len(a) == len(b) == 40 and np.array_equal(a // 512, np.arange(40))
    assert 20 <= np.sum(a == b) < 40  # 20 buckets alike on purpose, the others by chance only
    same = [make_sparse_input(7, r, 512 * 8, "int32", 1 / 512, 1.0, 512)[0] for r in range(3)]
    assert all(np.array_equal(same[0], s) for s in same)


def test_emu_run_bucket_is_refused_in_one_line_where_it_cannot_apply():
    from emu.nodes.collectives.run import bucket_density

    assert bucket_density(512, 512 * 4) == 1 / 512
    for args, msg in (((512, 1000), "not a whole number of buckets"), ((1, 10), "integer >= 2"),
                      ((512, 1024, 0.1), "leave --density out")):
        with pytest.raises(ConfigError, match=msg) as e:
            bucket_density(*args)
        assert "\n" not in str(e.value)


def test_emu_run_bucket_runs_the_sparse_allreduce_on_the_switches(capsys):
    from emu.front.cli import main

    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--offload", "switch", "--bucket", "64",
                 "--size", "16KiB", "--overlap", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "bucket=64" in out and "result=equal to numpy" in out and "overlap=0.5" in out


def test_the_64_host_workload_script_runs_the_scale_part_alone():
    rows = load("inc_sparse").main(["--parts", "scale", "--scale", "star:n=4", "--scale-length", "32768",
                                    "--buckets", "256", "--overlap", "0.5",
                                    "--scale-methods", "sparse host,sparse switch (hash leaves)", "--out", "/tmp"])
    assert [r["method"] for r in rows] == ["sparse host", "sparse switch (hash leaves)"]
    assert all(r["density"] == round(1 / 256, 5) for r in rows)


def test_the_spill_script_replays_the_switches_hash_store_and_more_hosts_per_leaf_spill_more():
    from emu.switch.aggregate import hashstore

    h = hashstore.new_store(2, np.int32)  # 4 slots, a spill buffer of 2 pairs
    slot = lambda i: (i * hashstore.HASH_MULT) % 4  # noqa: E731
    same = [i for i in range(64) if slot(i) == slot(0)][:4]  # four indices on one slot
    out = hashstore.fold(h, np.array(same + [same[0]]), np.ones(5, np.int32), np.add, 2)
    assert [list(i) for i, _v in out] == [same[1:3]]  # the first two collisions leave at once, unaggregated
    idx, vals = hashstore.leftovers(h)
    assert list(idx) == [same[0], same[3]] and list(vals) == [2, 1]  # the repeat of same[0] was added in
    spill = load("inc_spill")
    base = spill.leaf(4, 2, 0.0, 0.2, 4096)
    assert spill.leaf(16, 2, 0.0, 0.2, 4096)["extra_uplink"] > 5 * base["extra_uplink"] > 0
    assert spill.leaf(4, 8, 0.0, 0.2, 4096)["extra_uplink"] < base["extra_uplink"]  # a bigger table spills less
    assert base["extra_network"] < base["extra_uplink"] / 5  # the host links dilute it
    assert spill.index_overlap([np.array([1, 2]), np.array([2, 3]), np.array([4])]) == pytest.approx((0.5 + 0.5) / 3)


def test_an_unknown_sending_schedule_is_refused_in_one_line_naming_the_known_ones():
    from types import SimpleNamespace

    from emu.nodes.collectives.inswitch import _schedule

    assert _schedule(SimpleNamespace()) is None and _schedule(SimpleNamespace(inc_schedule="rotated")) == "rotated"
    with pytest.raises(ConfigError) as e:
        _schedule(SimpleNamespace(inc_schedule="spread"))
    assert "staggered, rotated, in order" in str(e.value) and "\n" not in str(e.value)
