"""A person's mistyped command line: one line on stderr naming the mistake, a "did you mean" where
something close exists, exit 2, no usage block (issues 41 and 42)."""

import pytest

from emu.front.cli import main
from emu.front.cli_parser import did_you_mean


@pytest.mark.parametrize("argv, line", [
    (["run", "--js", "x.json"], "emu run: refused: unrecognized arguments: --js x.json (did you mean --json?); "
                                "see emu run --help"),
    (["rn"], "(did you mean run?); see emu --help"),
    (["topo", "star:n=2", "--lnks"], "emu topo: refused: unrecognized arguments: --lnks (did you mean --links"),
    (["run", "--processes", "x"], "emu run: refused: argument --processes: 'x' is not an integer; see emu run --help"),
    (["run", "--zzzzzz"], "emu run: refused: unrecognized arguments: --zzzzzz; see emu run --help"),
])
def test_a_mistyped_command_line_is_one_line(argv, line, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "usage" not in err
    assert line in err
    assert list(tmp_path.iterdir()) == []  # --js x.json wrote nothing


def test_did_you_mean_prefers_what_the_word_begins():
    assert did_you_mean("--pca", ["--pcap", "--json", "--csv"]) == " (did you mean --pcap?)"
    assert did_you_mean("--jsno", ["--pcap", "--json"]) == " (did you mean --json?)"
    assert did_you_mean("--qqq", ["--pcap", "--json"]) == ""
