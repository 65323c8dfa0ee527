"""The detached supervisor of a local run: `python -m launcher.backends.local supervise
--workdir W NAME`, started by LocalBackend(foreground=False).submit(); its output goes to
<workdir>/<name>/supervisor.log."""
from __future__ import annotations

import argparse
import sys

from launcher.backends.local import supervise


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.backends.local")
    sub = parser.add_subparsers(dest="command", required=True)
    command = sub.add_parser("supervise", help="supervise a submitted local cluster")
    command.add_argument("--workdir", required=True)
    command.add_argument("name")
    options = parser.parse_args(argv)
    return supervise(options.workdir, options.name, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
