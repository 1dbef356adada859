"""``python -m emu``: the ``emu`` command, for when the script is not on PATH (and the script's entry)."""

import os
import sys


def main() -> int:
    """The ``emu`` command, with numpy's math library on one thread unless the user chose otherwise
    (``emu.control.one_math_thread``: set before numpy is imported, as the workers have it)."""
    from .control import one_math_thread

    one_math_thread(os.environ)
    from .front.cli import main as cli

    return cli()


if __name__ == "__main__":
    sys.exit(main())
