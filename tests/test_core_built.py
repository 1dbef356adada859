"""Where a C compiler is there, the compiled core is built and taken. Its build is optional (a
machine without a compiler runs pure Python), so a header that no longer compiles is skipped by
``pip install`` without an error: without this test the suite would then pass on pure Python
alone, every twin test of the core skipped."""

import os
import shutil
import sysconfig

import pytest

from emu import native


def test_the_compiled_core_is_built_and_current_where_a_compiler_is():
    if os.environ.get("EMU_PURE", "") not in ("", "0"):
        pytest.skip("EMU_PURE is set: pure Python asked for")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}): the core is optional")
    try:
        from emu import _core
    except ImportError as e:
        pytest.fail(f"emu._core is not built though {cc} is there ({e}); see why with: "
                    "python -c 'from setuptools import setup; setup()' build_ext --inplace")
    assert native._refused(_core) is None


def test_every_header_of_the_core_is_a_dependency_of_its_build():
    """An edited header rebuilds the core on the next ``pip install -e .`` (setuptools compares the
    times of ``depends`` only: a header left out keeps the last build, refused as stale or, worse,
    taken while its API number did not change)."""
    import pathlib
    import tomllib

    root = pathlib.Path(__file__).resolve().parents[1]
    with open(root / "pyproject.toml", "rb") as f:
        (ext,) = tomllib.load(f)["tool"]["setuptools"]["ext-modules"]
    headers = {str(h.relative_to(root)) for h in (root / "emu" / "csrc").glob("*.h")}
    assert headers and headers <= set(ext["depends"]), sorted(headers - set(ext["depends"]))
