"""Smoke test of scripts/qsnet_alltoall.py on its smallest configuration."""

from load_script import load


def test_the_script_measures_every_pattern_policy_and_link_state_below_the_model(tmp_path):
    q = load("qsnet_alltoall")
    rows = q.main(["--topos", "fattree:k=2,n=2;star:n=4", "--routing", "static,qsnet,qsnet/next_free",
                   "--jobs", "1", "--out", str(tmp_path)])
    keys = [(r["topology"], r["pattern"], r["routing"], bool(r["broken"])) for r in rows]
    assert sorted(keys) == sorted((t, p, r, b) for t in ("fattree:k=2,n=2", "star:n=4")
                                  for p in ("alltoall", "bisection", "permutation")
                                  for r in ("static", "qsnet", "qsnet/next_free")
                                  for b in (False, True))
    for r in rows:
        assert r["nodes"] == 4 and 17.5 < r["inj_gbps"] < 17.7          # 20 Gbit/s less packet and ACK overhead
        if r["broken"] == "-":                                         # a star has no up link to break
            assert r["topology"] == "star:n=4" and r["avg_gbps"] is None and r["status"] == "no up link"
            continue
        assert r["status"] == "ok" or r["status"].endswith("puts failed"), r
        assert 0 < r["avg_gbps"] <= r["inj_gbps"] and 0 <= r["worst_gbps"] <= r["avg_gbps"]
        if not r["broken"]:
            assert r["worst_gbps"] > 0 and r["failed_puts"] == 0 and 0 < r["alone_gbps"] <= r["inj_gbps"]
    broken = {r["routing"]: r for r in rows if r["broken"] and r["broken"] != "-"}
    assert broken and all(r["loss_pct"] is not None for r in broken.values())
    assert any(r["failed_puts"] for r in rows if r["routing"] == "static" and r["broken"] not in ("", "-"))
    assert all(r["failed_puts"] == 0 for r in rows if r["routing"].startswith("qsnet"))
    # the same seed, the same figures
    again = q.main(["--topos", "fattree:k=2,n=2", "--routing", "qsnet", "--jobs", "1", "--no-broken",
                    "--out", str(tmp_path / "again")])
    first = [r for r in rows if r["topology"] == "fattree:k=2,n=2" and r["routing"] == "qsnet" and not r["broken"]]
    assert [(r["avg_gbps"], r["completion_ns"]) for r in again] == [(r["avg_gbps"], r["completion_ns"]) for r in first]
    # a seeded bit-error rate on every link: resends, nothing lost, the loss against the clean run
    ber = q.main(["--topos", "fattree:k=2,n=2", "--routing", "qsnet", "--jobs", "1", "--no-broken", "--ber", "1e-5",
                  "--patterns", "permutation", "--out", str(tmp_path / "ber")])
    clean, hurt = sorted(ber, key=lambda r: r["ber"])
    assert clean["ber"] == 0 and hurt["ber"] == 1e-5 and hurt["resent"] > 0 and hurt["failed_puts"] == 0
    assert hurt["loss_pct"] is not None and hurt["avg_gbps"] < clean["avg_gbps"]
    for name in ("results.csv", "results.md", "qsnet_alltoall.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert len((tmp_path / "results.csv").read_text().splitlines()) == 1 + len(rows)


def test_the_manager_actions_and_the_vc_sweep_on_the_same_runs(tmp_path):
    q = load("qsnet_alltoall")
    rows = q.main(["--topos", "qsnet:nodes=20", "--routing", "qsnet", "--patterns", "bisection", "--peers", "4",
                   "--manager", "reset,rewrite", "--jobs", "1", "--out", str(tmp_path)])
    assert [(r["manager"], bool(r["broken"])) for r in rows] == [("", False), ("reset", True), ("rewrite", True)]
    assert all(r["peers"] == 4 and r["failed_puts"] == 0 and r["status"] == "ok" for r in rows)
    reset, rewrite = rows[1], rows[2]
    assert "s8's links reset" in reset["mgr_actions"] and "out of the tables" in rewrite["mgr_actions"]
    assert reset["broken"] == rewrite["broken"]  # the same fault, at the same time
    assert q.shifts(1024, 32)[:3] == [1, 32, 64] and len(q.shifts(1024, 32)) == 32 and q.shifts(5, 0) == [1, 2, 3, 4]
    vcs = q.main(["--topos", "fattree:k=2,n=2", "--routing", "qsnet", "--patterns", "bisection", "--vcs", "1,2",
                  "--no-broken", "--jobs", "1", "--out", str(tmp_path / "vcs")])
    assert [r["vcs"] for r in vcs] == [1, 2] and all(0 < r["avg_gbps"] <= r["inj_gbps"] for r in vcs)
