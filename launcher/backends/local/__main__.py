"""The detached supervisor of a local run: `python -m launcher.backends.local supervise
--workdir W --python P NAME`, started by submit() with LocalProcessBackendConfig(foreground=False); its
output goes to <workdir>/<name>/supervisor.log."""

from __future__ import annotations

import argparse
import sys

from launcher.backends.local.files import RunFiles
from launcher.backends.local.supervisor import Supervisor
from launcher.backends.local.types import LocalProcessBackendConfig


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.backends.local")
    sub = parser.add_subparsers(dest="command", required=True)
    command = sub.add_parser("supervise", help="supervise a submitted local cluster")
    command.add_argument("--workdir", required=True)
    command.add_argument("--python", required=True, help="the interpreter of the worker's tasks")
    command.add_argument("name")
    options = parser.parse_args(argv)
    config = LocalProcessBackendConfig(workdir=options.workdir, python=options.python)
    files = RunFiles(config.resolved_workdir, options.name)
    return Supervisor(files, files.read_spec(), sys.stdout, config).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
