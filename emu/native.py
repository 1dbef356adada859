"""The optional compiled core (``emu._core``, built from ``emu/_core.c`` when a C compiler is there).

It takes over the plain cases of the element loop's hottest paths (a port's enqueue, a static-table
switch's forwarding, the in-memory hand-over) and gives every other case back to the pure-Python
code, which stays the specification: the two paths give the same figures, counters and capture
bytes (``tests/test_native.py`` runs the pinned golden runs on both). Chosen automatically; set
``EMU_PURE=1`` to run pure Python (the benchmarks print which is in use).
"""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path
from types import ModuleType


API = 22
"""The interface of ``emu/_core.c`` this code calls (its ``CORE_API``)."""
FUNCTIONS = ("setup", "switch_setup", "enqueue", "forward", "hand_over", "transmit_local", "take", "records",
             "arrived", "due", "window", "forget", "forget_elements", "domain_setup", "element_setup", "nic_setup",
             "nic_send", "host_setup", "await_setup", "api_setup", "heappush", "heappop", "crc32", "crc32_byte", "counts", "sendparts", "iq_setup", "iq_round", "iq_retime",
             "iq_receive", "start_ready", "recv_records", "crc32_path")
log = logging.getLogger(__name__)


def _refused(core: ModuleType) -> str | None:
    """Why ``core`` must not be used, or None: built from other sources than these (its API number,
    a function missing), or older than them (an editable checkout changed them since the build)."""
    if getattr(core, "API", None) != API or any(not hasattr(core, f) for f in FUNCTIONS):
        return f"{core.__file__} is not the one these sources expect (API {getattr(core, 'API', None)}, want {API})"
    here = Path(__file__).parent
    sources = [p for p in [here / "_core.c", *here.glob("csrc/*.h")] if p.exists()]  # (an editable install)
    built = Path(core.__file__)
    src = max(sources, key=lambda p: p.stat().st_mtime, default=None)
    if src is not None and src.stat().st_mtime > built.stat().st_mtime:
        return f"{built.name} is older than {src}"
    return None


WHY: str | None = None
"""Why the compiled core is not in use, when it was built but refused (stale, another API)."""


def _load() -> ModuleType | None:
    global WHY
    if os.environ.get("EMU_PURE", "") not in ("", "0"):
        return None
    try:
        from . import _core
    except ImportError:
        return None
    why = _refused(_core)
    if why is not None:
        WHY = f"{why}; rebuild it: pip install -e ."
        log.warning("the compiled core %s: running pure Python (rebuild it: pip install -e .)", why)
        return None
    return _core


CORE: ModuleType | None = _load()
"""The compiled core, or None (not built, or ``EMU_PURE`` set): the pure-Python path."""


def disable(why: str) -> None:
    """Run pure Python from now on (the core refused its setup: a layout it does not know)."""
    global CORE, WHY
    log.warning("compiled core not used: %s", why)
    WHY = why
    CORE = None


def in_use() -> str:
    """``compiled`` or ``pure-python``: which element loop runs (the benchmarks print it)."""
    return "compiled" if CORE is not None else "pure-python"


def crc32():
    """The CRC-32 function to check frames with: the core's when it is in use (the same function,
    tested against zlib's), else zlib's."""
    return zlib.crc32 if CORE is None else CORE.crc32
