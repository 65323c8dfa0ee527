"""Before a local run starts any task: can this Python environment run the built-in worker, do
its tasks fit this machine's process limits, and what of the spec means nothing to local
processes?

The local tasks run the configured interpreter (types.py `python`, by default this one), so
what it cannot find, every task would fail to import, each restart alike. Found without
importing anything (importlib.util.find_spec), in that interpreter: the launcher never imports
TensorFlow.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from launcher.backends.local import runner, tasks
from launcher.cluster_spec.spec import ClusterSpec, Workload
from launcher.errors import LauncherError
from launcher.plan.plan import ClusterPlan
from launcher.plan.plan import task_command as plan_command
from worker import args as worker_args
from worker import contract
from worker.contract import Role


class WorkerEnvironmentError(LauncherError):
    """The local environment cannot run the built-in worker; a configuration error, like a spec's."""

    exit_code = 2


def check_worker_environment(spec: ClusterSpec, python: str = sys.executable) -> None:
    """Raise WorkerEnvironmentError, in one line, if the built-in worker would fail to start
    in `python`: its program.args are refused, or a module it imports is not installed. A
    bring-your-own command is the user's, but what of it lives only in its image is said."""
    if not spec.builtin:
        problem = image_only_problem(spec)
        if problem:
            raise WorkerEnvironmentError(problem + " (nothing was started)")
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


def image_only_problem(spec: ClusterSpec) -> str | None:
    """What a command of your own needs from its image that this machine does not have: the
    image's working dir, or a script at an absolute path that exists only in the image."""
    image = spec.image or "the image"
    fix = "ship the program with code: (a dir beside the spec, its dir the working dir) or run it on Kubernetes"
    if spec.image_entrypoint:
        return (
            f"command: [] runs the ENTRYPOINT of {image}: --local runs commands on this machine, not images; "
            "write the entrypoint as command (docker image inspect IMAGE shows it) with the program shipped by code:"
        )
    if spec.working_dir is not None:
        return (
            f"workingDir {spec.working_dir} is a dir of {image}: --local runs the command on this machine, "
            f"not in the image; {fix}"
        )
    for role in spec.active_roles():
        if role in contract.DATA_SERVICE_ROLES:
            continue
        for word in plan_command(spec, role):
            if word.startswith("/") and word.endswith(".py") and not os.path.exists(word):
                return (
                    f"the command of {role.value} runs {word}, which is not on this machine (it is in {image}): "
                    f"--local runs the command here, not in the image; {fix}"
                )
    return None


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


def as_processes(spec: ClusterSpec, stream: IO[str], run_dir: Path | None = None) -> ClusterSpec:
    """The spec as local processes run it. They are neither Jobs nor a JobSet, and no Kueue
    queues them: say on `stream` that workload, queue and priorityClassName are ignored, and
    plan the run as plain tasks. With the run's dir, say where each pod mount path is here."""
    ignored = {
        "workload": spec.workload.value if spec.workload is not Workload.JOBS else None,
        "queue": spec.queue,
        "priorityClassName": spec.priority_class_name,
    }
    ignored = {k: v for k, v in ignored.items() if v is not None}
    for line in pod_field_notes(spec) + (mount_notes(spec, run_dir) if run_dir is not None else []):
        print(line, file=stream, flush=True)
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


# What a pod field means to a local task, which is a process on this machine, not a pod. A
# role's command, args and env are honoured as on Kubernetes.
LOCAL_POD_FIELDS = (
    ("image", "the tasks run in this machine's Python (--python)"),
    ("volumes", "no Kubernetes volumes here (each mountPath is a dir of the run)"),
    ("affinity", "every task runs on this machine"),
    ("topologySpreadConstraints", "every task runs on this machine"),
    ("serviceAccountName", "no Kubernetes API here"),
    ("labels", "no pods here"),
    ("annotations", "no pods here"),
    ("podTemplate", "no pods here"),
)


def pod_field_notes(spec: ClusterSpec) -> list[str]:
    """One line per pod field a local run ignores (each role's, then imagePullSecrets)."""
    notes = []
    for role in spec.active_roles():
        own = spec.pods(role).model_dump(by_alias=True)
        notes += [
            f"note: --local ignores roles.{role.value}.{key}: {why}"
            for key, why in LOCAL_POD_FIELDS
            if own[key] not in (None, [], {})
        ]
    if spec.image_pull_secrets:
        notes.append("note: --local ignores imagePullSecrets: the tasks run in this machine's Python")
    return notes + env_notes(spec)


def mount_notes(spec: ClusterSpec, run_dir: Path) -> list[str]:
    """One line per pod mount path: the dir of the run that args and env values under it name."""
    where = tasks.mount_paths(spec)
    return [
        f"note: --local: {where[path]} {path} is {directory} here (made empty at start, kept by delete): "
        f"args and env values under {path} name it, so nothing is written to this machine's {path}"
        for path, directory in tasks.mount_dirs(spec, run_dir).items()
    ]


def _pod_fields_key(role: Role) -> str:
    """Where a role's pod fields are in the spec: roles.<role>, dataService.dispatcher/worker."""
    if role in contract.DATA_SERVICE_ROLES:
        return "dataService." + ("dispatcher" if role is Role.DISPATCHER else "worker")
    return f"roles.{role.value}"


def env_notes(spec: ClusterSpec) -> list[str]:
    """One line per env entry whose value Kubernetes reads from elsewhere (valueFrom): a local
    task does not get it, and a `$(NAME)` of it stays as written, as for any undefined name."""
    where = [("env", spec.env)] + [
        (f"{_pod_fields_key(role)}.env", spec.pods(role).env) for role in spec.active_roles()
    ]
    return [
        f"note: --local does not set {at} {entry.name}: its valueFrom ({next(iter(entry.value_from))}) is read "
        "by Kubernetes in a pod; a $(" + entry.name + ") of it stays as written (set a value to run it here)"
        for at, entries in where
        for entry in entries
        if entry.value_from is not None
    ]


class ResourceLimitError(LauncherError):
    """A local run's tasks would not fit this machine's process limits; refused before any starts."""

    exit_code = 2


# Linux: the most one argument or NAME=value of the environment may have (MAX_ARG_STRLEN).
MAX_ARG_STRLEN = 32 * 4096
# Per task, the supervisor holds its output pipe and its log open, and runs a thread that copies
# them (threads count against RLIMIT_NPROC, with the task's process).
FILES_PER_TASK = 2
PROCESSES_PER_TASK = 2
# The supervisor's own files besides: the combined log, status and pid writes, Popen's pipes.
FILES_OF_THE_SUPERVISOR = 16
# The longest address a task can have: TF_CONFIG's size does not depend on the ports chosen later.
_LONGEST_ADDRESS = "127.0.0.1:65535"


def check_resource_limits(plan: ClusterPlan, python: str = sys.executable) -> None:
    """Raise ResourceLimitError, in one line, if the run's tasks would exceed this process's
    limits: open files (RLIMIT_NOFILE), processes and threads (RLIMIT_NPROC), or the size of
    one task's arguments and environment (ARG_MAX, MAX_ARG_STRLEN)."""
    problems = resource_problems(plan, python)
    if problems:
        raise ResourceLimitError(
            f"local cluster {plan.spec.name!r} does not fit this machine: "
            + "; ".join(problems)
            + " (nothing was started)"
        )


def resource_problems(plan: ClusterPlan, python: str = sys.executable) -> list[str]:
    count = len(list(plan.tasks()))
    problems = []
    files = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    files += FILES_OF_THE_SUPERVISOR + FILES_PER_TASK * count + tasks.ports_needed(plan)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and files > soft:
        problems.append(
            f"{count} tasks need about {files} open files, over the limit of {soft} {_raise('n', files, hard)}"
        )
    processes = threading.active_count() + PROCESSES_PER_TASK * count
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and processes > soft:
        problems.append(
            f"{count} tasks need about {processes} processes and threads, over the limit of {soft} "
            + _raise("u", processes, hard)
        )
    too_long: set[str] = set()  # each variable or argument said once, for the first task over
    for role_plan in plan.roles:
        # the last index: the longest TASK_INDEX and TF_CONFIG of the role
        task = tasks.task(
            plan,
            python,
            role_plan.role,
            role_plan.replicas - 1,
            lambda role, index: _LONGEST_ADDRESS,
            65535 if tasks.serves_metrics(plan) else None,
            "0" * 32,  # a run id is a uuid4 hex
        )
        problems += _exec_size_problems(task.name, runner.launch_argv(task.argv), task.env, too_long)
    return problems


def _exec_size_problems(name: str, argv: list[str], env: dict[str, str], said: set[str]) -> list[str]:
    """What execve() would refuse with E2BIG ("Argument list too long") for this task; what is
    in `said` is not said again (and what is said is added to it)."""
    problems = []
    strings = [(arg, f"argument {arg[:40]!r}") for arg in argv]
    strings += [(f"{key}={value}", f"env {key}") for key, value in env.items()]
    for text, what in strings:
        size = len(text.encode()) + 1  # with its NUL
        if size > MAX_ARG_STRLEN and what not in said:
            said.add(what)
            fix = (
                "it lists every task's address: run fewer replicas locally"
                if what == f"env {contract.TF_CONFIG}"
                else "make it smaller"
            )
            problems.append(
                f"{name}'s {what} is {size} bytes, over the {MAX_ARG_STRLEN} Linux allows one variable "
                f"or argument ({fix})"
            )
    total = sum(len(text.encode()) + 1 + 8 for text, _ in strings)  # each with its NUL and pointer
    arg_max = os.sysconf("SC_ARG_MAX")
    if total > arg_max and "ARG_MAX" not in said:
        said.add("ARG_MAX")
        problems.append(
            f"{name}'s arguments and environment are {total} bytes, over this machine's "
            f"ARG_MAX of {arg_max} (a smaller env:, or fewer replicas)"
        )
    return problems


def _raise(option: str, needed: int, hard: int) -> str:
    """How to fit: raise the soft limit (`ulimit -<option>`) if the hard one allows, else fewer tasks."""
    if hard == resource.RLIM_INFINITY or needed <= hard:
        return f"(raise it with `ulimit -{option} {needed}`, or run fewer replicas)"
    return f"(the most it can be raised to is {hard}: run fewer replicas locally)"
