"""The ``emu`` command. The CLI decides what a person sees; library code only logs."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="emu", description="Packet-level HPC interconnect emulator")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-v info, -vv debug)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run a small cluster and print what the fabric does")
    d.add_argument("--hosts", type=int, default=8, help="hosts on the star (default 8)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.cmd == "demo":
            from .demo import main as demo_main

            return demo_main(args.hosts)
    except KeyboardInterrupt:
        print("interrupted; the cluster was torn down", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
