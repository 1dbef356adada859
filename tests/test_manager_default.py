"""The network manager is there when a fault takes a link or switch down, unless ``--manager none``
(issue 42, item 1); healthy runs have none."""

import json

from emu.front.cli import main


def _run(tmp_path, *args):
    out = tmp_path / "r.json"
    code = main(["run", "--topo", "fattree:k=2,n=2", "--test", "allreduce", "--size", "4KiB", *args,
                 "--json", str(out)])
    return code, json.loads(out.read_text())


def test_a_link_down_brings_the_manager_and_none_leaves_it_out(tmp_path, capsys):
    code, doc = _run(tmp_path, "--fault", "at=1us,link=s0-s2,down")
    said = capsys.readouterr().out
    assert code == 0 and doc["results"][0]["result"] == "equal to numpy"
    assert "manager: a --fault takes a link or switch down: the network manager is attached" in said
    assert "link s0-s2 down: out of the tables" in said
    assert any(v["link"].startswith("mgr-") for v in doc["results"][0]["per_link"].values())
    code, doc = _run(tmp_path, "--fault", "at=1us,link=s0-s2,down", "--manager", "none")
    said = capsys.readouterr().out
    assert code == 1 and "manager:" not in said and "no network manager routes around dead links" in said
    assert not any(v["link"].startswith("mgr-") for v in doc["results"][0]["per_link"].values())
    # the replay of a bare-network run is a bare-network run
    assert main(["run", "--replay", str(tmp_path / "r.json")]) == 1
    said = capsys.readouterr().out
    assert "manager:" not in said and "no network manager routes around dead links" in said


def test_healthy_runs_and_other_faults_have_none(tmp_path, capsys):
    for extra in ([], ["--fault", "at=1us,link=s0-s2,ber=1e-9"]):
        code, doc = _run(tmp_path, *extra)
        assert code == 0 and "manager:" not in capsys.readouterr().out
        assert not any(v["link"].startswith("mgr-") for v in doc["results"][0]["per_link"].values())


def test_an_offload_that_needs_the_manager_refuses_none(capsys):
    assert main(["run", "--topo", "fattree:k=2,n=2", "--test", "allreduce", "--offload", "switch",
                 "--manager", "none"]) == 2
    out = capsys.readouterr().out.strip()
    assert out == "refused: --offload switch asks the network manager for its trees; leave out --manager none"
