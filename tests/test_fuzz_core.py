"""scripts/fuzz_core.py at a tiny size: one scenario run with the compiled core and with pure Python
in fresh processes, every figure the same; scenarios are the same for the same seed."""

import pytest
from load_script import load

from emu import native


@pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here")
def test_one_scenario_is_the_same_both_ways(capsys):
    fuzz = load("fuzz_core")
    assert fuzz.main(["--seeds", "3:4"]) == 0
    assert "1 scenarios, 0 different" in capsys.readouterr().out


def test_a_seed_is_a_scenario():
    fuzz = load("fuzz_core")
    assert fuzz.scenario(5) == fuzz.scenario(5) != fuzz.scenario(6)
