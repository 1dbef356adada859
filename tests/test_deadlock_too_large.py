"""A frame larger than the switch buffer it must enter waits for a credit that can never cover it:
the credit deadlock says which frame, how large the buffer is, and what to set (the coded
broadcast ``combine`` sends a group's payloads in one frame, beyond the input-queued router's
default buffer of two message frames on a mesh)."""

import re
import subprocess
import sys


def _run(*extra):
    cmd = [sys.executable, "-m", "emu", "run", "--topo", "mesh:k=4,n=2", "--test", "mcast_all", "--algo", "combine",
           "--size", "2KiB", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_a_frame_larger_than_the_buffer_is_named_with_the_setting_that_lets_it_pass():
    code, out = _run()
    assert code == 1, out
    said = re.search(r"the one at (h\d+-nic0) vc\d takes ([\d,]+) B of (s\d+)'s buffer, which holds ([\d,]+) B per VC: "
                     r"it can never enter; give switch.vc_buffer_bytes=(\d+) or more", out)
    assert said, out
    need, held = int(said.group(2).replace(",", "")), int(said.group(4).replace(",", ""))
    assert need > held and int(said.group(5)) == need
    code, out = _run("--set", f"switch.vc_buffer_bytes={need}")  # (what it says is enough)
    assert code == 0 and "result=equal to numpy" in out, out
