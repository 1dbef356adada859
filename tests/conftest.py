import logging
import os

import pytest

# The programs the tests start (emu, ranks, scripts) cache their compiled modules in __pycache__ as a
# default python does: an environment with PYTHONDONTWRITEBYTECODE set (this sandbox's) would have each
# of the suite's hundreds of subprocesses compile every module it imports again (~20 % of their CPU).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import emu.front.engines  # noqa: F401 -- the engine kinds that come with the emulator, for tests without a Cluster


@pytest.fixture(autouse=True)
def _quiet_drop_warnings(caplog):
    caplog.set_level(logging.ERROR, logger="emu.element")
    yield
