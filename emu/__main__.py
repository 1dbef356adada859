"""``python -m emu``: the ``emu`` command, for when the script is not on PATH (and the script's entry)."""

import gc
import os
import sys


def main() -> int:
    """The ``emu`` command, with numpy's math library on one thread unless the user chose otherwise
    (``emu.control.one_math_thread``: set before numpy is imported, as the workers have it).

    The imports (trio, numpy, rich, the emulator: ~60,000 objects, nearly all living to the end) run
    with the cyclic collector off: its ~90 young collections during them traversed what the imports
    had just made and found ~1,900 objects of garbage (the import machinery's cycles), which now stay,
    once. ``emu run`` then freezes what is there (``emu.sync.freeze_until_run``) and keeps the
    collector off through its start-up, until its first run (``emu.front.startup_gc``); any other
    command has it back at once."""
    enabled = gc.isenabled()
    gc.disable()
    held = False
    try:
        from .control import one_math_thread

        one_math_thread(os.environ)
        from .front.cli import main as cli

        if sys.argv[1:2] == ["run"]:
            from .front.startup_gc import hold_until_run
            from .sync import freeze_until_run

            freeze_until_run()  # (as cli.main does for a command's process: then it does nothing)
            held = hold_until_run(enabled)  # (back on when the first run starts, or when the command ends)
    finally:
        if enabled and not held:
            gc.enable()
    return cli()

if __name__ == "__main__":
    sys.exit(main())
