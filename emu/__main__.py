"""``python -m emu``: the ``emu`` command, for when the script is not on PATH."""

import sys

from .front.cli import main

if __name__ == "__main__":
    sys.exit(main())
