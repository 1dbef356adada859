"""``emu.front.cli._command_parser``: a library caller's commands share their subcommand's parser,
which no parse changes; one whose help was shown (its lists of what is installed read then) is made
anew."""

import contextlib
import io

import pytest

from emu.front import cli


def test_kept_and_parses_alike():
    ap = cli._command_parser("run")
    assert cli._command_parser("run") is ap
    a = ap.parse_args(["run", "--topo", "star:n=4", "--test", "pingall", "--set", "link.latency_ns=5"])
    b = ap.parse_args(["run", "--topo", "mesh:k=4,n=2", "--test", "uniform"])
    assert (a.topo, a.test, a.set) == ("star:n=4", ["pingall"], ["link.latency_ns=5"])
    assert (b.topo, b.test, b.set) == ("mesh:k=4,n=2", ["uniform"], None)  # (nothing of the first parse kept)
    fresh = cli._parser(only="run").parse_args(["run", "--topo", "mesh:k=4,n=2", "--test", "uniform"])
    assert vars(fresh) == vars(b)


def test_made_anew_once_its_help_was_shown():
    ap = cli._command_parser("run")
    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(SystemExit):
        ap.parse_args(["run", "--help"])
    assert "--topo" in out.getvalue()
    again = cli._command_parser("run")
    assert again is not ap and cli._command_parser("run") is again


def test_the_whole_parser_is_made_each_time():
    assert cli._command_parser(None) is not cli._command_parser(None)
