"""``python -m emu``: the ``emu`` command, for when the script is not on PATH (and the script's entry)."""

import gc
import os
import sys


def main() -> int:
    """The ``emu`` command, with numpy's math library on one thread unless the user chose otherwise
    (``emu.control.one_math_thread``: set before numpy is imported, as the workers have it).

    The imports (trio, numpy, rich, the emulator: ~60,000 objects, nearly all living to the end) run
    with the cyclic collector off: its ~90 young collections during them traversed what the imports
    had just made, ~10 % of their CPU, and found ~1,900 objects of garbage (import machinery's
    cycles), which now stay, once. ``emu run`` then freezes what is there (``emu.sync.freeze_until_run``)
    before the collector is back, so that its first collection does not traverse all of it either."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        from .control import one_math_thread

        one_math_thread(os.environ)
        from .front.cli import main as cli

        if sys.argv[1:2] == ["run"]:  # (as cli.main does for a command's process: then it does nothing)
            from .sync import freeze_until_run

            freeze_until_run()
    finally:
        if enabled:
            gc.enable()
    return cli()


if __name__ == "__main__":
    sys.exit(main())
