"""Run by test_interrupted: ``emu run`` held in a long stretch without an await (as a long
schedule's draws or a large topology's build hold it), to be sent SIGTERM there."""

import sys
import time

from emu.front import cli, run_cmd

_config = run_cmd.run_config


def stalled(args):
    print("stalled", flush=True)
    t = time.monotonic()
    while time.monotonic() - t < 300:  # (no await: trio cannot deliver a cancellation here)
        time.sleep(0.01)
    return _config(args)


run_cmd.run_config = stalled
sys.exit(cli.main(sys.argv[1:]))
