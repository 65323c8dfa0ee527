"""Before a local run starts any task: can this Python environment run the built-in worker, and
what of the spec means nothing to local processes?

The local tasks run this interpreter (tasks.py), so what it cannot find, every task would fail
to import, each restart alike. Found without importing anything (importlib.util.find_spec):
the launcher never imports TensorFlow.
"""
from __future__ import annotations

import importlib.util
import sys
from typing import IO

from launcher import checkpoints
from launcher.errors import LauncherError
from launcher.spec import ClusterSpec, Workload
from worker import args as worker_args
from worker import contract


class WorkerEnvironmentError(LauncherError):
    """The local environment cannot run the built-in worker; a configuration error, like a spec's."""

    exit_code = 2


def check_worker_environment(spec: ClusterSpec) -> None:
    """Raise WorkerEnvironmentError, in one line, if the built-in worker would fail to start
    here: its program.args are refused, or a module it imports is not installed. A
    bring-your-own command is the user's: nothing to check."""
    if not spec.builtin:
        return
    try:
        options = worker_args.check(list(spec.effective_program.args))
    except worker_args.UsageError as exc:
        raise WorkerEnvironmentError(
            f"program.args {list(spec.effective_program.args)}: {exc} (see python -m worker --help)"
        ) from None
    needs = contract.worker_needs(options.uses_legacy_keras(spec.strategy))
    missing = [module for module in needs if importlib.util.find_spec(module) is None]
    if missing:
        raise WorkerEnvironmentError(
            "; ".join(contract.missing_module_message(module) for module in missing)
            + f" (a local run's tasks use {sys.executable}; nothing was started)"
        )


def as_processes(spec: ClusterSpec, stream: IO[str]) -> ClusterSpec:
    """The spec as local processes run it. They are neither Jobs nor a JobSet, and no Kueue
    queues them: say on `stream` that workload, queue and priorityClassName are ignored, and
    plan the run as plain tasks."""
    ignored = {"workload": spec.workload.value if spec.workload is not Workload.JOBS else None,
               "queue": spec.queue, "priorityClassName": spec.priority_class_name}
    ignored = {k: v for k, v in ignored.items() if v is not None}
    if checkpoints.mwms_storage_problem(spec):  # accepted here: loader's shared_disk
        print(f"note: --local: the {spec.replicas(contract.Role.WORKER)} workers share this "
              "machine's disk, so they need no claim; on Kubernetes set checkpoint.volume."
              "persistentVolumeClaim.claimName (ReadWriteMany) or a gs:// checkpoint.dir",
              file=stream, flush=True)
    if not ignored:
        return spec
    print("note: --local ignores " + ", ".join(f"{k}: {v}" for k, v in ignored.items())
          + " (Kubernetes only); the tasks run as local processes now", file=stream, flush=True)
    return spec.model_copy(update={"workload": Workload.JOBS, "queue": None,
                                   "priority_class_name": None})
