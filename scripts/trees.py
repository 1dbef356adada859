"""The environment that runs a given checkout's code, for the benchmarks' ``--before`` trees."""

import os

TREESITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "treesite")


def tree_env(tree: str | os.PathLike | None, env: dict | None = None) -> dict:
    """``env`` (default: this process's) running ``tree``'s code (None: as it is): the tree first on
    the path, and ``treesite``'s finder mapping ``emu.nodes``, ``emu.switch`` and ``emu.topologies``
    to its folders (the editable install maps them to the checkout it was installed from)."""
    env = dict(os.environ if env is None else env)
    if tree is None:
        return env
    tree = os.path.abspath(tree)
    env["EMU_TREE"] = tree
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{TREESITE}"
    return env
