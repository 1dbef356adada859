"""``python -m emu.rank PROGRAM.py [ARGS]`` (or ``-m MODULE``, ``-c CODE``): one rank of ``emu mpirun``.

The emulated MPI is put in place of ``mpi4py`` in this process only (``sys.modules``), then the
program runs unchanged as ``__main__``. Its end is told to the emulator: the exit status, or -- when
it raised -- after Python printed the traceback, an abort that ends the job."""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback
import types


def _install() -> None:
    from emu.rank.package import install

    install()


def _end_with_emulator() -> None:
    """This process ends when the emulator that started it does, whatever the program is doing
    (computing, sleeping): Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``). Had the
    emulator already gone before that was set, the process ends now."""
    parent = int(os.environ.get("EMU_MPIRUN_PARENT", "0") or 0)
    if not sys.platform.startswith("linux") or not parent:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # emu mpirun ends the ranks on Ctrl-C
    _end_with_emulator()
    if len(sys.argv) < 2:
        print("usage: python -m emu.rank PROGRAM.py [ARGS] | -m MODULE [ARGS] | -c CODE [ARGS] (started by emu mpirun)", file=sys.stderr)
        return 2
    _install()
    from emu.rank.channel import CHANNEL

    code = 0
    try:
        if sys.argv[1] == "-m":
            mod = sys.argv[2]
            sys.argv = [mod, *sys.argv[3:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(mod, run_name="__main__", alter_sys=True)
        elif sys.argv[1] == "-c":  # (a Comm.Spawn of python -c CODE)
            source = sys.argv[2]
            sys.argv = ["-c", *sys.argv[3:]]
            sys.path[0] = ""
            main_mod = types.ModuleType("__main__")
            sys.modules["__main__"] = main_mod
            exec(compile(source, "<string>", "exec"), main_mod.__dict__)
        else:
            prog = sys.argv[1]
            sys.argv = sys.argv[1:]
            sys.path[0] = os.path.dirname(os.path.abspath(prog))
            runpy.run_path(prog, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:  # noqa: BLE001 -- printed as Python would, then the job ends
        tb = e.__traceback__  # from the program's own frames on, as python PROGRAM.py shows it
        while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        if CHANNEL.sock is None:
            CHANNEL.open()
        CHANNEL.call("abort", why=f"{type(e).__name__}: {e}".strip(), code=1)
        os._exit(1)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    if CHANNEL.sock is None:  # a program that never imported MPI still says it ended
        CHANNEL.open()
    if getattr(CHANNEL, "abort_status", 0):  # (MPI._set_abort_status: mpi4py.run saw the program fail)
        CHANNEL.abort(CHANNEL.abort_status)
    CHANNEL.call("exit", code=code)
    return code


if __name__ == "__main__":
    sys.exit(main())
