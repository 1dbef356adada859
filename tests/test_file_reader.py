"""Files from others are data (issue 41): emu.config.files reads only regular files of bounded size
and turns what parsing raises into one line; emu report checks each field it draws."""

import json
import os

import pytest

from emu.config import ConfigError
from emu.config import files as F
from emu.front.report import load_run, load_trace
from emu.front.runrecord import load


def refused(fn, *args, **kw) -> str:
    with pytest.raises(ConfigError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_a_regular_file_is_read_whole(tmp_path):
    p = tmp_path / "a.json"
    p.write_text('{"a": [1, 2, {"b": null}]}')
    assert F.read_json(str(p), "x", "results") == {"a": [1, 2, {"b": None}]}
    assert F.read(str(p), "x", "config") == p.read_bytes()


def test_special_files_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)  # no writer: a blocking open would hang here
    assert "FIFO" in refused(F.read, str(fifo), "--config pipe.toml", "config")
    assert "character device" in refused(F.read, "/dev/zero", "--config /dev/zero", "config")
    link = tmp_path / "t.json"
    link.symlink_to("/dev/zero")
    assert "character device" in refused(F.read, str(link), "--topo t.json", "topology")
    assert "directory" in refused(F.read, str(tmp_path), "--config d", "config")
    assert refused(F.read, str(tmp_path / "none"), "--config none", "config", "give a TOML file") == \
        "--config none: no such file; give a TOML file"


def test_a_file_larger_than_its_kind_allows_is_refused(tmp_path, monkeypatch):
    p = tmp_path / "big.toml"
    with open(p, "wb") as f:
        f.truncate(F.LIMITS["config"] + 1)  # sparse: no disk used
    msg = refused(F.read, str(p), "--config big.toml", "config")
    assert f"{F.LIMITS['config']:,}" not in msg and "16 MiB" in msg and f"{F.LIMITS['config'] + 1:,} bytes" in msg
    monkeypatch.setitem(F.LIMITS, "config", 10)
    (tmp_path / "ten.toml").write_bytes(b"a = 12345\n")  # exactly the limit: read
    assert F.read_toml(str(tmp_path / "ten.toml"), "x") == {"a": 12345}


@pytest.mark.parametrize("raw, word", [
    (b"[" * 5000 + b"]" * 5000, "deeper than 64"),
    (b"[" * (F.MAX_DEPTH + 1) + b"]" * (F.MAX_DEPTH + 1), "deeper than 64"),  # parses, still refused
    (b"1" * 100_000, "digits"),
    (b'{"a": \xff}', "not UTF-8"),
    (b'{"a": ', "not JSON"),
])
def test_json_that_cannot_be_data_is_refused_in_one_line(raw, word):
    assert word in refused(F.parse_json, raw, "f.json")


def test_json_exactly_as_deep_as_allowed_is_read():
    raw = b"[" * F.MAX_DEPTH + b"]" * F.MAX_DEPTH
    assert F.depth(F.parse_json(raw, "f.json")) == F.MAX_DEPTH


@pytest.mark.parametrize("raw, word", [
    (b"a = " + b"[" * 5000 + b"]" * 5000, "deeper than 64"),
    (b"a = " + b"1" * 100_000, "digits"),
    (b"a = \xff", "not UTF-8"),
    (b"[a\n", "TOML"),
])
def test_toml_that_cannot_be_data_is_refused_in_one_line(raw, word):
    assert word in refused(F.parse_toml, raw, "c.toml")


def test_a_config_file_goes_through_the_reader(tmp_path):
    from emu.config import load_settings

    assert "character device" in refused(load_settings, "/dev/zero")
    (tmp_path / "c.toml").write_text("[link]\nlatency_ns = 250\n")
    assert load_settings(str(tmp_path / "c.toml")) == {"link": {"latency_ns": 250}}


def _results(tmp_path, row=None, run=None):
    r = {"topology": "star:n=2", "seed": 0, "name": "allreduce", "completion_ns": 1478,
         "per_link": {"h0-nic0": {"busy_ns": 100}}, **(row or {})}
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"run": {"seed": 0, **(run or {})}, "results": [r]}))
    return str(p)


def test_emu_report_reads_good_rows_and_names_the_bad_field(tmp_path):
    run, rows = load_run(_results(tmp_path))
    assert rows[0]["per_link"] == {"h0-nic0": {"busy_ns": 100}}
    cases = [({"per_link": {"h0-nic0": "busy"}}, None, "rows[0].per_link['h0-nic0'] must be an object"),
             ({"per_link": {"p": {"busy_ns": float("inf")}}}, None, "busy_ns must be a finite number"),
             ({"completion_ns": "soon"}, None, "rows[0].completion_ns"),
             ({"completion_ns": True}, None, "rows[0].completion_ns"),
             ({"topology": ["star:n=2"]}, None, "rows[0].topology must be a string"),
             ({"point": {"size": 5}}, {"sweep": {"size": ["1KiB"]}}, "rows[0].point['size']"),
             (None, {"sweep": {"size": 5}}, "run.sweep['size'] must be a list"),
             (None, {"sweep": {"size": ["1"]}, "sweep_order": ["algo"]}, "run.sweep_order[0]"),
             ({"per_rank": [{"rank": "zero"}]}, None, "rows[0].per_rank[0].rank must be an integer"),
             ({"per_rank": [{"rank": 0, "calls": {"send": {"count": 1.5}}}]}, None, "count must be an integer")]
    for row, run, want in cases:
        assert want in refused(load_run, _results(tmp_path, row, run)), (row, run)


def test_emu_report_refuses_more_panels_than_it_can_draw(tmp_path):
    from emu.front.report_input import MAX_PANELS

    rows = [{"topology": "star:n=2", "name": f"t{i}", "per_link": {}} for i in range(MAX_PANELS + 1)]
    (tmp_path / "r.json").write_text(json.dumps({"run": {}, "results": rows}))
    assert f"at most {MAX_PANELS} tests" in refused(load_run, str(tmp_path / "r.json"))


def test_a_trace_whose_events_are_not_data_is_refused(tmp_path):
    p = tmp_path / "tr.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "B", "pid": 1, "ts": 5, "name": "x"}]}))
    assert load_trace(str(p))["traceEvents"][0]["ts"] == 5
    p.write_text(json.dumps({"traceEvents": [{"ph": "B", "pid": [1], "ts": 5}]}))
    assert "traceEvents[0].pid" in refused(load_trace, str(p))
    p.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": 3}]}))
    assert "traceEvents[0].args must be an object" in refused(load_trace, str(p))


def test_replay_reads_through_the_reader(tmp_path):
    assert refused(load, "/dev/zero").startswith("--replay /dev/zero: is a character device")
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    assert "nests deeper than 64 levels" in refused(load, str(tmp_path / "deep.json"))


def test_brackets_inside_strings_do_not_make_a_file_too_deep():
    raw = b'{"name": "' + b"[" * 100 + b'"}'
    assert F.bracket_bound(raw) == 101 and F.parse_json(raw, "f.json") == {"name": "[" * 100}
    nested = b"[" * 10 + b"]" * 10
    assert F.bracket_bound(nested) == F.depth(F.parse_json(nested, "f.json")) == 10
