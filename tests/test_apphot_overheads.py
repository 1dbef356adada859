"""``--drain global``'s application (``emu.front.traffic_global.global_app``) with send and receive
overheads: it keeps the time itself between awaits, reading ``host.now`` again only after an await
that may take time (a send or a receive with an overhead). The figures with overheads: the compiled
core's and pure Python's alike, every measured packet in, every source's draws before the cut-off
sent and none after, and the run's figures those of a host that reads the time at every step."""

import json
import sys
from pathlib import Path

import pytest

from emu import native
from emu.front.cli import main
from emu.front.traffic_checks import DRAIN_FACTOR, schedule

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FAITHFUL, FLIT, OURS  # noqa: E402

K, WARMUP, MEASURE, LOAD, SEED = 3, 20, 40, 0.6, 3
PINNED = {(13,): (1013, 427, 83, 155.7), (7,): (1270, 474, 91, 137.2), (4, 25): (3536, 909, 309, 141.2)}
"""(end_ns, packets sent, the injection's cut-off cycle, the mean latency in ns) per case: the figures
of the application before it kept the time itself (it read ``host.now`` after every await)."""


def run(tmp_path, name: str, **over) -> dict:
    out = tmp_path / name
    argv = ["run", "--topo", f"mesh:k={K},n=2", "--test", "uniform", "--direct", "--load", str(LOAD),
            "--warmup", str(WARMUP), "--measure", str(MEASURE), "--size", f"{FLIT - 24}B", "--to-self",
            "--seed", str(SEED), "--drain", "global", "--json", str(out)]
    for key, v in {**OURS, **FAITHFUL, "switch.vcs": 2, "switch.model": "input_queued", **over}.items():
        argv += ["--set", f"{key}={v}"]
    assert main(argv) == 0
    (r,) = json.loads(out.read_text())["results"]
    r.pop("wall_s")
    return r


@pytest.mark.parametrize("over", [{"host.send_overhead_ns": 13}, {"host.recv_overhead_ns": 7},
                                  {"host.send_overhead_ns": 4, "host.recv_overhead_ns": 25}])
def test_global_drain_with_overheads(tmp_path, monkeypatch, over):
    r = run(tmp_path, "c.json", **over)
    if native.CORE is not None:
        monkeypatch.setattr(native, "CORE", None)
        assert run(tmp_path, "p.json", **over) == r
    (row,) = r["curve"]
    n, total = K * K, (WARMUP + MEASURE) * (1 + DRAIN_FACTOR)
    draws = [schedule("uniform", n, i, LOAD, total, SEED, to_self=True)[0] for i in range(n)]
    assert row["packets"] == sum(WARMUP <= c < WARMUP + MEASURE for when in draws for c in when)
    stop = row["inject_stop_cy"]
    assert row["measured_in_cy"] >= WARMUP + MEASURE and row["last_created_cy"] < stop
    assert row["packets_sent"] == r["frames_all_loads"] <= sum(c < stop for when in draws for c in when)
    # (a source whose send returns late asks the ledger later than its cycle: it may stop one cycle early)
    assert (r["end_ns"], row["packets_sent"], row["inject_stop_cy"], row["mean_ns"]) == PINNED[tuple(over.values())]
