"""The local backend's options: one typed object, used by the Python API and the CLI alike."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WORKDIR = ".tfk8s"  # also the CLI's --workdir default
RESTART_DELAY_SECONDS = 1.0
FAILURE_GRACE_SECONDS = 20.0  # lets the chief report a dead peer itself before it is stopped


@dataclass(frozen=True)
class LocalProcessBackendConfig:
    """Every task as a process on this machine, its files under `workdir/<name>/`.

    foreground: False (the API's default) has submit() start a detached supervisor process, so
    the cluster survives the caller; True (the CLI's `submit --local`) supervises it in a thread
    of this process, so its tasks live only as long as this process and wait() stops every task
    on Ctrl-C or SIGTERM. Either way submit() starts the tasks and returns; wait() waits.
    echo_tasks: in the foreground, copy every task's output to the output stream as it comes
    (otherwise only to the logs, and the view shows the run).
    restart_delay_seconds: pause before a failed task starts again. stop_grace_seconds: SIGTERM
    to SIGKILL when a task is stopped (None: the spec's terminationGracePeriodSeconds).
    failure_grace_seconds: how long a failed cluster's chief gets to exit with its own error.
    python: the interpreter that runs the built-in worker's tasks, e.g. a virtualenv's with
    TensorFlow while the launcher runs from another (None: the launcher's own, sys.executable).
    A bring-your-own command runs as its spec says."""

    workdir: str | Path = DEFAULT_WORKDIR
    foreground: bool = False
    echo_tasks: bool = False
    restart_delay_seconds: float = RESTART_DELAY_SECONDS
    stop_grace_seconds: float | None = None
    failure_grace_seconds: float = FAILURE_GRACE_SECONDS
    python: str | None = None

    @property
    def task_python(self) -> str:
        return self.python or sys.executable

    @property
    def resolved_workdir(self) -> Path:
        return Path(self.workdir).expanduser().resolve()
