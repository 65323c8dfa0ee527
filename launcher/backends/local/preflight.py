"""Before a local run starts any task: can this Python environment run the built-in worker, and
what of the spec means nothing to local processes?

The local tasks run the configured interpreter (types.py `python`, by default this one), so
what it cannot find, every task would fail to import, each restart alike. Found without
importing anything (importlib.util.find_spec), in that interpreter: the launcher never imports
TensorFlow.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from typing import IO

from launcher.cluster_spec.spec import ClusterSpec, Workload
from launcher.errors import LauncherError
from worker import args as worker_args
from worker import contract


class WorkerEnvironmentError(LauncherError):
    """The local environment cannot run the built-in worker; a configuration error, like a spec's."""

    exit_code = 2


def check_worker_environment(spec: ClusterSpec, python: str = sys.executable) -> None:
    """Raise WorkerEnvironmentError, in one line, if the built-in worker would fail to start
    in `python`: its program.args are refused, or a module it imports is not installed. A
    bring-your-own command is the user's: nothing to check."""
    if not spec.builtin:
        return
    try:
        options = worker_args.check(list(spec.effective_program.args))
    except worker_args.UsageError as exc:
        raise WorkerEnvironmentError(
            f"program.args {list(spec.effective_program.args)}: {exc} (see python -m worker --help)"
        ) from None
    missing = missing_modules(python, contract.worker_needs(options.uses_legacy_keras(spec.strategy)))
    if missing:
        raise WorkerEnvironmentError(
            "; ".join(contract.missing_module_message(module) for module in missing)
            + f" (a local run's tasks use {python}; nothing was started)"
        )


# Run by another interpreter: the modules of argv it cannot find, one per line.
_FIND_MISSING = (
    "import importlib.util, sys\nprint('\\n'.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)


def missing_modules(python: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` the interpreter `python` cannot import (this one: in-process)."""
    if python == sys.executable:
        return [module for module in modules if importlib.util.find_spec(module) is None]
    try:
        found = subprocess.run([python, "-c", _FIND_MISSING, *modules], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise WorkerEnvironmentError(
            f"the interpreter for the local tasks, {python}, cannot run: {exc.strerror}; "
            "pass an existing Python (--python, LocalProcessBackendConfig.python)"
        ) from None
    if found.returncode:
        raise WorkerEnvironmentError(
            f"the interpreter for the local tasks, {python}, failed to look for the worker's "
            f"modules (exit {found.returncode}): {found.stderr.strip()[-500:]}"
        )
    return found.stdout.split()


def as_processes(spec: ClusterSpec, stream: IO[str]) -> ClusterSpec:
    """The spec as local processes run it. They are neither Jobs nor a JobSet, and no Kueue
    queues them: say on `stream` that workload, queue and priorityClassName are ignored, and
    plan the run as plain tasks."""
    ignored = {
        "workload": spec.workload.value if spec.workload is not Workload.JOBS else None,
        "queue": spec.queue,
        "priorityClassName": spec.priority_class_name,
    }
    ignored = {k: v for k, v in ignored.items() if v is not None}
    if spec.mwms_storage_problem():  # accepted here: loader's shared_disk
        print(
            f"note: --local: the {spec.replicas(contract.Role.WORKER)} workers share this "
            "machine's disk, so they need no claim; on Kubernetes set checkpoint.volume."
            "persistentVolumeClaim.claimName (ReadWriteMany) or a gs:// checkpoint.dir",
            file=stream,
            flush=True,
        )
    if not ignored:
        return spec
    print(
        "note: --local ignores "
        + ", ".join(f"{k}: {v}" for k, v in ignored.items())
        + " (Kubernetes only); the tasks run as local processes now",
        file=stream,
        flush=True,
    )
    return spec.model_copy(update={"workload": Workload.JOBS, "queue": None, "priority_class_name": None})
