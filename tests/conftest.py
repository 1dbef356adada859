import logging

import pytest


@pytest.fixture(autouse=True)
def _quiet_drop_warnings(caplog):
    caplog.set_level(logging.ERROR, logger="emu.element")
    yield
