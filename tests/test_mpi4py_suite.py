"""mpi4py's own test suite (the installed release's ``test/``), a few modules of it, under ``emu mpirun``
and MPICH's ``mpiexec``: every case MPICH passes passes here too (``scripts/mpi4py_suite.py`` runs all
of it and prints the table). The suite comes from mpi4py's sdist on PyPI, downloaded once; without the
network the test says so and skips."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["test_status", "test_request", "test_group", "test_info", "test_errorcode", "test_p2p_obj_matched",
           "test_cco_obj", "test_win", "test_subclass", "test_grequest", "test_session", "test_ulfm", "test_ctypes",
           "test_objmodel", "test_doc", "test_mpiabi", "test_handle"]
"""Modules whose every case MPICH passes must pass under emu (fast ones: about a minute in all). Not
``test_spawn``: its ~130 processes take minutes to start (``tests/test_mpirun_dynamic.py`` checks Spawn
against MPICH; ``scripts/mpi4py_suite.py`` runs the module)."""


def _suite_module():
    spec = importlib.util.spec_from_file_location("mpi4py_suite", os.path.join(HERE, "..", "scripts",
                                                                               "mpi4py_suite.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def suite():
    if shutil.which("mpiexec", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("no mpiexec beside this Python (pip install mpich)")
    mod = _suite_module()

    class Args:
        src = os.environ.get("EMU_MPI4PY_TESTS")
        cache = os.path.join(tempfile.gettempdir(), "emu-mpi4py-suite")

    try:
        tests = mod.suite_dir(Args)
    except SystemExit as e:
        pytest.skip(f"mpi4py's test suite is not at hand: {e}")
    with tempfile.TemporaryDirectory() as tmp:
        driver = os.path.join(tmp, "driver.py")
        with open(driver, "w") as f:
            f.write(mod.DRIVER)
        yield mod, tests, driver


ACCEPTED_SKIPS = {"test_objmodel.TestObjModel.testCAPI": "cython"}
"""Cases emu skips, MPICH passes, for the reason the suite gives an implementation without that feature:
``testCAPI`` reads the C API capsules of a Cython-built ``mpi4py.MPI`` (``__pyx_capi__``), which a module
written in Python has not got."""


@pytest.mark.parametrize("n", [2])  # n=1 is in it: each module runs its cases on COMM_SELF too
def test_every_case_mpich_passes_passes(suite, n):
    mod, tests, driver = suite
    missing = []
    counted = 0
    for m in MODULES:
        ref = mod.run_one("mpich", tests, m, n, 300, driver)
        got = mod.run_one("emu", tests, m, n, 300, driver)
        assert ref["complete"], f"MPICH did not finish {m} at n={n}: {ref['ended']} {ref['tail']}"
        assert got["complete"], f"emu did not finish {m} at n={n}: {got['ended']} {got['tail']}"
        for case, v in ref["cases"].items():
            if v["outcome"] != "pass":
                continue
            counted += 1
            mine = got["cases"].get(case, {"outcome": "fail", "why": "never ran"})
            if mine["outcome"] != "pass" and not (mine["outcome"] == "skip" and ACCEPTED_SKIPS.get(case) == mine["why"]):
                missing.append(f"{case}: {mine['outcome']}: {(mine.get('why') or '').strip()[-300:]}")
    assert counted > 100, f"only {counted} cases ran under MPICH: the suite or the driver is broken"
    assert not missing, "cases MPICH passes and emu does not:\n" + "\n".join(missing)
