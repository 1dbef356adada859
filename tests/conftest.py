import logging

import pytest

import emu.front.engines  # noqa: F401 -- the engine kinds that come with the emulator, for tests without a Cluster


@pytest.fixture(autouse=True)
def _quiet_drop_warnings(caplog):
    caplog.set_level(logging.ERROR, logger="emu.element")
    yield
