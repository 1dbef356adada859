"""``--drain global`` (``emu.front.traffic_global``): BookSim2's drain -- every source injects until every
measured packet anywhere has arrived, then none does; the count is the harness's, out of band."""

import json
import math
import sys
from pathlib import Path

import pytest

from emu import native
from emu.front.cli import main
from emu.front.traffic_checks import DRAIN_FACTOR, schedule
from emu.front.traffic_global import ONE_PROCESS

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, FLIT, OURS  # noqa: E402

K, WARMUP, MEASURE, LOADS = 3, 20, 60, (0.3, 0.8)
SEED = 5


def argv(loads=LOADS, warmup=WARMUP, measure=MEASURE, vcs=2, direct=True) -> list:
    """BookSim's uniform comparison (``scripts/router_curves.py``'s mapping) on a 3x3 mesh."""
    out = ["--topo", f"mesh:k={K},n=2", "--test", "uniform", *(["--direct"] if direct else []), "--load", ",".join(map(str, loads)),
           "--warmup", str(warmup), "--measure", str(measure), "--size", f"{FLIT - 24}B", "--to-self",
           "--seed", str(SEED)]
    for key, v in {**OURS, **FAITHFUL, "switch.vcs": vcs, "switch.model": "input_queued"}.items():
        out += ["--set", f"{key}={v}"]
    return out


def run(tmp_path, *args, name="r.json", **how):
    out = tmp_path / name
    assert main(["run", *argv(**how), *args, "--json", str(out)]) == 0
    (r,) = json.loads(out.read_text())["results"]
    r.pop("wall_s")
    return r


def test_global_drain_is_deterministic_sends_no_count_frames_and_stops_every_source_at_once(tmp_path):
    """Two runs alike, in memory and over sockets; the hosts inject only data packets (frames = packets sent), where --drain
    measured adds a count message from every host to every host; every packet created in the window
    arrives; and every source injects exactly its schedule's draws before the cut-off (the first
    cycle at least the lookahead after the last measured packet was counted), none after."""
    a = run(tmp_path, "--drain", "global", name="a.json")
    assert a == run(tmp_path, "--drain", "global", name="b.json") == run(tmp_path, "--drain", "global", name="u.json",
                                                                         direct=False)
    assert a["drain"] == "global" and a["drain_lag_ns"] == 10  # the mesh's lookahead: one 10 ns cycle
    cycle, n = a["cycle_ns"], K * K
    assert a["frames_all_loads"] == sum(row["packets_sent"] for row in a["curve"])
    total = (WARMUP + MEASURE) * (1 + DRAIN_FACTOR)  # (a source's schedule at most)
    for load, row in zip(LOADS, a["curve"]):
        draws = [schedule("uniform", n, i, load, total, SEED, to_self=True)[0] for i in range(n)]
        window = sum(WARMUP <= c < WARMUP + MEASURE for when in draws for c in when)
        assert row["packets"] == window  # every measured packet arrived (its latency counted)
        stop = row["inject_stop_cy"]
        assert stop == math.ceil(row["measured_in_cy"] + a["drain_lag_ns"] / cycle)
        assert row["measured_in_cy"] >= WARMUP + MEASURE
        assert row["packets_sent"] == sum(c < stop for when in draws for c in when)  # every draw before, none after
        assert row["last_created_cy"] < stop
    m = run(tmp_path, "--drain", "measured", name="m.json")
    assert m["drain"] == "measured" and "drain_lag_ns" not in m and "packets_sent" not in m["curve"][0]
    assert [r["packets"] for r in m["curve"]] == [r["packets"] for r in a["curve"]]  # the same measured packets
    assert a["frames_all_loads"] < m["frames_all_loads"]  # no n x n count messages per load


@pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here")
def test_global_drain_figures_alike_with_the_compiled_core_and_pure_python(tmp_path, monkeypatch):
    comp = run(tmp_path, "--drain", "global", name="c.json")
    monkeypatch.setattr(native, "CORE", None)
    assert run(tmp_path, "--drain", "global", name="p.json") == comp


@pytest.mark.parametrize("args", [
    ["--processes", "2"],
])
def test_global_drain_over_several_processes_is_refused_in_one_line(capsys, args):
    assert main(["run", *argv(), "--drain", "global", *args]) == 2
    out = capsys.readouterr().out
    assert out.startswith("refused:") and ONE_PROCESS in out and out.count("\n") == 1, out


def test_a_job_drains_globally_in_one_process_and_is_refused_over_two(tmp_path, capsys):
    job = "b:hosts=random:4,test=uniform,load=0.5,warmup=20,measure=40,drain=global"
    out = tmp_path / "j.json"
    assert main(["run", "--topo", "star:n=8", "--job", job, "--json", str(out)]) == 0
    (row,) = [r for r in json.loads(out.read_text())["results"] if r.get("drain")][:1]
    assert row["drain"] == "global" and row["frames_all_loads"] == row["curve"][0]["packets_sent"]
    capsys.readouterr()
    assert main(["run", "--topo", "star:n=8", "--job", job, "--processes", "2"]) == 2
    said = capsys.readouterr().out
    assert said.startswith("refused: --job b:") and ONE_PROCESS in said and said.count("\n") == 1, said


def test_the_ledger_stops_injection_a_lag_after_the_last_measured_packet_was_counted():
    from emu.front.traffic_global import Ledger

    led = Ledger(2, 3, 10)
    led.count, led.last = 1, 100
    assert not led.stopped(10**9)  # a measured packet still out: never
    led.count = 2
    assert not led.stopped(109) and led.stopped(110)  # (a host at 109 may be in the window of the count at 100)
    with pytest.raises(ValueError):
        Ledger(0, 3, 0)


def _shuffled_windows(monkeypatch, seed: int) -> list:
    """Pure Python, with the elements of every window run in a shuffled order (``Domain._run``'s pure
    path, but for the shuffle): what ``emu.sync`` promises does not depend on it. The list counts
    the windows whose order the shuffle changed."""
    import heapq
    import random

    from emu import domain as dom

    monkeypatch.setattr(native, "CORE", None)
    rng, changed = random.Random(seed), [0]

    async def run_shuffled(self, w, t0, t1, sent):
        heap, at, elements = self._heap, self._at, self.elements
        active: dict = {}
        while heap and heap[0][0] < t1:
            i = heapq.heappop(heap)[1]
            at[i] = dom.INF
            active[elements[i]] = None
        order = list(active)
        rng.shuffle(order)
        changed[0] += order != list(active)
        first_arrival = dom.INF
        for el in order:
            fa = el.run_window(t1, w, t0 + 1)
            first_arrival = min(first_arrival, fa)
            if fa < dom.INF:
                sent.append(el)
            self.max_time = max(self.max_time, el.active_ns if el.active_ns > el.lost_until else el.lost_until)
            if el.unsent:
                await el.flush_unsent()
            t, i = el.next_time(), self._idx[el]
            if t < at[i]:
                at[i] = t
                heapq.heappush(heap, (t, i))
        return first_arrival, order

    monkeypatch.setattr(dom.Domain, "_run", run_shuffled)
    return changed


def test_global_drain_does_not_depend_on_the_order_of_the_elements_inside_a_window(tmp_path, monkeypatch):
    """The hosts share the ledger inside a window, one after another: with the lag every source reads
    only what was counted in an earlier window, so any order gives the same figures."""
    monkeypatch.setattr(native, "CORE", None)
    plain = run(tmp_path, "--drain", "global", name="o.json")
    changed = _shuffled_windows(monkeypatch, 1)
    assert run(tmp_path, "--drain", "global", name="s.json") == plain
    assert changed[0] > 100  # (the shuffle did change the order)
