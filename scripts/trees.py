"""The environment that runs a given checkout's code, for the benchmarks' ``--before`` trees."""

import os

TREESITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "treesite")


def tree_env(tree: str | os.PathLike | None, env: dict | None = None) -> dict:
    """``env`` (default: this process's) running ``tree``'s code (None: as it is), numpy's math library
    on one thread as the ``emu`` command has it unless ``env`` says otherwise: the tree first on the
    path, and ``treesite``'s finder mapping ``emu.nodes``, ``emu.switch`` and ``emu.topologies`` to its
    folders (the editable install maps them to the checkout it was installed from)."""
    env = dict(os.environ if env is None else env)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # (as the emu command sets them,
        env.setdefault(k, "1")  # emu.control.one_math_thread: a child run as a library would spin a BLAS pool beside it)
    if tree is None:
        return env
    tree = os.path.abspath(tree)
    env["EMU_TREE"] = tree
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{TREESITE}"
    return env


def fixed_addresses() -> list[str]:
    """A command prefix that runs a counted child with address-space randomisation off (``setarch
    -R``), where the machine allows it: less of the run-to-run spread of a count (addresses hashed,
    allocation patterns). Not all: temporary names still differ (bench_instructions' direct count
    moved 0.15 % between two runs with it)."""
    import shutil
    import subprocess

    if shutil.which("setarch") is None:
        return []
    try:
        ok = subprocess.run(["setarch", "-R", "true"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    return ["setarch", "-R"] if ok else []
