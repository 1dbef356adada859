"""Seeing inside a run (issue 26): ``per_link`` statistics, the Chrome trace-event file of ``--trace``,
``emu report``'s plots and the progress bar's silence off a terminal.

The trace is checked against the trace-event format by an independent reader (:func:`check_trace`):
phases, required fields, B/E nesting per track, timestamps within the run with nanosecond precision.
The statistics are checked against frames counted elsewhere (the capture, the hop count) and
against the trace's own counters."""

import json
import math
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest
import trio

import emu
from emu.element import DIR_OUT
from emu.front.checks import Options, run_check
from emu.front.cli import main

PHASES = {"B", "E", "i", "C", "M"}
META = {"process_name", "process_sort_index", "thread_name"}


def check_trace(trace: dict) -> dict:
    """Check ``trace`` against the trace-event format (JSON Object Format); returns per (pid, tid)
    the spans as (start, end, depth, name, args) and the counters as name -> [(ts, args)]."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace["displayTimeUnit"] == "ns"
    end_us = trace["otherData"]["end_ns"] / 1000
    named = set()
    used = set()
    stacks: dict[tuple, list] = defaultdict(list)
    last_ts: dict[tuple, float] = {}
    spans: dict[tuple, list] = defaultdict(list)
    counters: dict[str, list] = defaultdict(list)
    for e in trace["traceEvents"]:
        ph = e["ph"]
        assert ph in PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if ph == "M":
            assert e["name"] in META and isinstance(e["args"], dict), e
            if e["name"] == "process_name":
                named.add(e["pid"])
            continue
        ts = e["ts"]
        assert isinstance(ts, (int, float)) and 0 <= ts <= end_us, (e, end_us)
        assert math.isclose(ts * 1000, round(ts * 1000), abs_tol=1e-6), e  # whole nanoseconds
        used.add(e["pid"])
        assert isinstance(e["name"], str) and e["name"], e  # an E too: viewers other than Perfetto need it
        if "args" in e:
            assert isinstance(e["args"], dict), e
        track = (e["pid"], e["tid"])
        if ph in "BE":
            assert ts >= last_ts.get(track, 0), f"time goes back on track {track}: {e}"
            last_ts[track] = ts
        if ph == "B":
            stacks[track].append(e)
        elif ph == "E":
            assert stacks[track], f"E without B on track {track}: {e}"
            b = stacks[track].pop()
            assert (e["name"], e.get("cat")) == (b["name"], b.get("cat")), f"E {e} ends B {b}"
            spans[track].append((b["ts"], ts, len(stacks[track]), b["name"], {**b.get("args", {}), **e.get("args", {})},
                                 b.get("cat")))
        elif ph == "i":
            assert e["s"] in ("g", "p", "t"), e
        elif ph == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), e
            counters[e["name"]].append((ts, e["args"]))
    assert not any(stacks.values()), f"spans never ended: {[s[-1] for s in stacks.values() if s][:3]}"
    assert used <= named | {0}, f"pids without a process_name: {used - named}"
    return {"spans": spans, "counters": counters}


def _run(tmp_path, *extra, topo="fattree:k=2,n=2", tests="allreduce+alltoall"):
    out, tr = tmp_path / "r.json", tmp_path / "t.json"
    code = main(["run", "--topo", topo, "--test", tests, "--size", "4KiB", "--json", str(out), "--trace", str(tr),
                 *extra])
    return code, json.loads(out.read_text())["results"], json.loads(tr.read_text())


def test_the_trace_holds_each_rank_s_test_collective_calls_and_steps(tmp_path, capsys):
    code, rows, trace = _run(tmp_path, "--algo", "ring", tests="allreduce")
    assert code == 0
    assert "trace written to" in capsys.readouterr().out
    got = check_trace(trace)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    [row] = rows
    hosts = [p for p, n in names.items() if n.startswith("h")]
    assert len(hosts) == 4
    end_us = trace["otherData"]["end_ns"] / 1000
    for pid in hosts:
        spans = got["spans"][(pid, 1)]
        [test] = [s for s in spans if s[2] == 0]
        assert test[3] == "allreduce" and test[5] == "test" and test[1] == end_us
        assert test[1] - test[0] == row["completion_ns"] / 1000  # the test's span is its completion time
        [call] = [s for s in spans if s[2] == 1]
        assert call[3] == "allreduce" and call[4]["algo"] == "ring" and call[4]["bytes"] == 4096
        assert test[0] <= call[0] <= call[1] <= test[1]
        steps = [s for s in spans if s[2] == 2]
        # a ring allreduce on 4 ranks: 2 (4 - 1) sendrecv steps, each a send and a recv inside
        assert len(steps) == 6 and all(s[3].startswith("step") for s in steps)
        assert all(s[4]["bytes"] == 1024 and s[4]["to"] in names.values() for s in steps)
        inner = [s for s in spans if s[2] == 3]
        assert sorted(s[3] for s in inner) == ["recv"] * 6 + ["send"] * 6
        assert all(s[4]["bytes"] == 1024 for s in inner if s[3] == "recv")


def test_per_link_adds_up_and_matches_the_capture_and_the_trace(tmp_path):
    """per_link's frames add up to hop_count and are the frames each port captured on the way out;
    busy_ns is the sum of those frames' times on the line; the trace's queue counters peak at
    peak_queue_frames and its load bins add up to busy_ns."""
    async def go():
        run = emu.RunConfig(trace=str(tmp_path / "t.json"), capture=True, trace_bin_ns=500)
        async with emu.Cluster("fattree:k=2,n=2", run=run) as net:
            r = await run_check(net, "alltoall", Options(extra={"size": "8KiB"}))
            recs = await net.capture_records()
            names = net.plan.interfaces()
            bw = {net.topology.port_name(lk.a, lk.a_port): lk.spec.bandwidth_bps for lk in net.topology.links}
            bw.update({net.topology.port_name(lk.b, lk.b_port): lk.spec.bandwidth_bps for lk in net.topology.links})
        return r, recs, names, bw, net.trace_summary

    r, recs, names, bw, summary = trio.run(go)
    assert r.ok and summary["omitted"] == {}
    per = r.per_link
    assert sum(v["frames"] for v in per.values()) == r.hop_count
    frames, busy = defaultdict(int), defaultdict(int)
    for _, iface, flags, frame in recs:
        if flags == DIR_OUT:
            port = names[iface]
            frames[port] += 1
            busy[port] += -(-len(frame) * 8_000_000_000 // bw[port])
    assert {p: v["frames"] for p, v in per.items() if v["frames"]} == dict(frames)
    assert {p: v["busy_ns"] for p, v in per.items() if v["frames"]} == dict(busy)
    assert all(v["drops"] == 0 and v["credit_stall_ns"] == 0 and v["peak_queue_bytes"] >= v["peak_queue_frames"] * 64
               for v in per.values())
    got = check_trace(json.loads((tmp_path / "t.json").read_text()))
    for port, v in per.items():
        q = got["counters"][f"{port} queue"]
        assert max(a["frames"] for _, a in q) == v["peak_queue_frames"], port
        assert max(a["bytes"] for _, a in q) == v["peak_queue_bytes"], port
        assert q[-1][1] == {"frames": 0, "bytes": 0}, port  # every frame left by the end
        load = got["counters"][f"{port} load"]
        assert sum(round(a["load"] * 500) for _, a in load) == v["busy_ns"], port
        assert all(0 <= a["load"] <= 1 for _, a in load)


def test_one_trace_over_two_processes_holds_the_same_events(tmp_path):
    traces = []
    for p in (1, 2):
        path = tmp_path / f"t{p}.json"
        assert main(["run", "--topo", "fattree:k=2,n=2", "--test", "allreduce+barrier", "--processes", str(p),
                     "--trace", str(path)]) == 0
        trace = json.loads(path.read_text())
        check_trace(trace)
        traces.append(sorted(json.dumps(e, sort_keys=True) for e in trace["traceEvents"]))
    assert traces[0] == traces[1]
    assert not list(tmp_path.glob(".*part*"))  # the parts were merged and removed


def test_faults_drops_retransmissions_and_deadlocks_are_instant_events(tmp_path):
    code, rows, trace = _run(tmp_path, "--fault", "at=1us,link=s0-s2,down", "--manager", "none", tests="allreduce")
    assert code == 1 and "DeadlockError" in rows[0]["error"]
    check_trace(trace)
    instants = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "i":
            instants[e["name"]].append(e)
    assert [e["ts"] for e in instants["link down"]] == [1.0, 1.0]  # both ends, at the fault's time
    assert instants["drop"] and all(e["args"]["reason"] == "link down" for e in instants["drop"])
    assert sum(v["drops"] for v in rows[0]["per_link"].values()) == len(instants["drop"])
    assert instants["retransmit"] and all(e["args"]["what"] == "message" for e in instants["retransmit"])
    assert any(e["s"] == "g" and "no events left" in e["args"]["report"] for e in instants["deadlock"])
    assert {e["pid"] for e in instants["deadlock"] if e["s"] == "t"}  # on the hosts still waiting
    assert [e["ts"] for e in instants["end of run"]] == [trace["otherData"]["end_ns"] / 1000]


def test_past_its_size_limit_the_trace_stops_and_says_what_it_left_out(tmp_path, capsys):
    code, rows, trace = _run(tmp_path, "--trace-limit", "16KiB")
    assert code == 0
    got = check_trace(trace)  # still valid, every span it began ended
    other = trace["otherData"]
    assert other["omitted"]["counter"] > 0 and other["first_omitted_ns"] is not None
    assert len((tmp_path / "t.json").read_bytes()) < 16 * 1024 + 8192
    out = capsys.readouterr().out
    assert "reached its size limit" in out and "left out" in out
    assert got["spans"]


def test_an_application_s_own_spans(tmp_path):
    async def app(host):
        with host.span("phase", n=1):
            await host.sleep(1500)
            with host.span("inner"):
                await host.compute(250)
        return host.now

    async def go():
        async with emu.Cluster("star:n=2", run=emu.RunConfig(trace=str(tmp_path / "t.json"))) as net:
            return await net.run({"h0": app})

    assert trio.run(go) == {"h0": 1750}
    got = check_trace(json.loads((tmp_path / "t.json").read_text()))
    assert sorted(got["spans"][(1, 1)]) == [(0.0, 1.75, 0, "phase", {"n": 1}, "span"),
                                            (1.5, 1.75, 1, "inner", {}, "span")]


def test_trace_options_are_refused_in_one_line(tmp_path, capsys):
    assert main(["run", "--topo", "star:n=2", "--trace", "-"]) == 2
    assert main(["run", "--topo", "star:n=2", "--trace-limit", "1MiB"]) == 2
    assert main(["run", "--topo", "star:n=2", "--trace", str(tmp_path / "t.json"), "--trace-limit", "1KiB"]) == 2
    assert main(["run", "--topo", "star:n=2", "--trace", str(tmp_path / "no" / "t.json")]) == 2
    out = capsys.readouterr().out
    assert out.count("refused:") == 4 and "Traceback" not in out


def _png(path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _svg(path) -> bool:
    return ET.parse(path).getroot().tag.endswith("svg")


@pytest.mark.parametrize("topo", ["fattree:k=2,n=2", "mesh:k=3,n=2", "star:n=4"])
def test_emu_report_draws_loads_and_timeline_side_by_side(tmp_path, topo, capsys):
    code, rows, _ = _run(tmp_path, topo=topo)
    assert code == 0 and len(rows) == 2
    out = tmp_path / "plots"
    assert main(["report", str(tmp_path / "r.json"), "--trace", str(tmp_path / "t.json"), "--out", str(out)]) == 0
    for stem in ("topology", "timeline"):
        assert _png(out / f"{stem}.png") and _svg(out / f"{stem}.svg")
    assert "wrote" in capsys.readouterr().out


def test_emu_report_refuses_what_it_cannot_read(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"not": "results"}')
    assert main(["report", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert main(["report", str(tmp_path / "none.json"), "--out", str(tmp_path / "o")]) == 2
    out = capsys.readouterr().out
    assert out.count("refused:") == 2 and "not the --json of emu run" in out


def test_the_progress_bar_is_silent_off_a_terminal(tmp_path, capfd):
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--json", "-"]) == 0
    cap = capfd.readouterr()
    assert json.loads(cap.out)["results"][0]["ok"]
    assert "frames/s" not in cap.err and "\x1b[" not in cap.err  # no bar, no cursor codes


def test_the_progress_bar_shows_virtual_time_and_frames_per_second_on_a_terminal(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "160"}  # rich takes stderr for a terminal
    p = subprocess.run([sys.executable, "-m", "emu", "run", "--topo", "fattree:k=4,n=2", "--test", "alltoall",
                        "--size", "64KiB"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-500:]
    assert "alltoall: virtual" in p.stderr and "frames/s" in p.stderr


@pytest.mark.parametrize("settings", [[], ["--set", "switch.vc_buffer_bytes=4096", "--set", "switch.vcs=2"]])
def test_a_traced_run_has_the_figures_of_an_untraced_one(tmp_path, settings):
    rows = []
    for extra in ([], ["--trace", str(tmp_path / "t.json")]):
        out = tmp_path / "r.json"
        assert main(["run", "--topo", "fattree:k=2,n=3", "--test", "alltoall+allreduce", "--size", "16KiB",
                     "--json", str(out), *settings, *extra]) == 0
        rows.append([{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(out.read_text())["results"]])
    assert rows[0] == rows[1]
    got = check_trace(json.loads((tmp_path / "t.json").read_text()))
    for port, v in rows[1][1]["per_link"].items():  # the allreduce, the last test: its queue peaks
        assert v["peak_queue_frames"] <= max(a["frames"] for _, a in got["counters"][f"{port} queue"])
    if settings:
        assert any(v["credit_stall_ns"] for r in rows[1] for v in r["per_link"].values())
