"""The tasks of one local run: each one's command, environment and TF_CONFIG from the plan, on
ports the run holds (ports.py), and its state between polls."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from launcher.backends.local import runner
from launcher.backends.local.files import MOUNTS_DIR
from launcher.backends.local.policy import TaskSnapshot, TaskState, gpu_env, sees_gpus
from launcher.backends.local.ports import HeldPorts
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.plan.plan import ClusterPlan, env_list
from worker import contract
from worker.contract import Role


@dataclass
class Task:
    role: Role
    index: int
    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None  # the code dir of `code:`, else the launcher's
    state: TaskState = TaskState.PENDING
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    attempts: int = 0
    last_exit_code: int | None = None
    restart_at: float | None = None
    reason: str = ""
    exit_history: list[int] = field(default_factory=list)
    ended_at: float | None = None  # when it succeeded or failed for good
    started_at: float | None = None  # Unix time of its latest start

    @property
    def name(self) -> str:
        return contract.task_name(self.role, self.index)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def snapshot(self) -> TaskSnapshot:
        return TaskSnapshot(self.role, self.index, self.state, self.last_exit_code, self.reason, self.ended_at)


def ports_needed(plan: ClusterPlan) -> int:
    """One gRPC port per training and data service task and, for the built-in worker, which serves Prometheus
    metrics (worker/metrics.py), one metrics port per task (metrics.port is the pods' one), as
    each pod has. A program of the user's gets none to ignore; metrics.port null: none at all."""
    return sum(r.replicas for r in plan.listening_roles) + (len(list(plan.tasks())) if serves_metrics(plan) else 0)


def serves_metrics(plan: ClusterPlan) -> bool:
    return plan.spec.builtin and plan.spec.metrics.port is not None


def plan_tasks(plan: ClusterPlan, python: str, mounts: Mapping[str, str] | None = None) -> tuple[HeldPorts, list[Task]]:
    """One Task per (role, index) of the plan, in creation order, and the ports they were given,
    held until the caller closes them (ports.py); the built-in worker's tasks run by `python`.
    The plan's env carries the model dir it was planned with (the run's model/ unless
    checkpoint.dir is remote); `mounts` ({mountPath: its dir here}, mount_dirs) rewrites the
    args and env values under a pod's mount paths."""
    tasks_planned = list(plan.tasks())
    with_metrics = serves_metrics(plan)
    held = HeldPorts(ports_needed(plan))
    ports = list(held.ports)
    port_of = {(r.role.value, i): ports.pop() for r in plan.listening_roles for i in range(r.replicas)}

    def address(role: str, index: int) -> str:
        return f"{LOCALHOST}:{port_of[(Role(role).value, index)]}"

    run = uuid.uuid4().hex  # this submission's id (worker/contract.py RUN): one supervisor per submit
    tasks = [
        task(plan, python, role, index, address, ports.pop() if with_metrics else None, run, mounts)
        for role, index in tasks_planned
    ]
    return held, tasks


def task(
    plan: ClusterPlan,
    python: str,
    role: Role,
    index: int,
    address: Callable[[str, int], str],
    metrics_port: int | None,
    run: str,
    mounts: Mapping[str, str] | None = None,
) -> Task:
    """The task (role, index) of the plan: its TF_CONFIG names the tasks at address(role, index);
    it serves metrics on metrics_port (None: none); `run` is the submission's id; a word of its
    command or an env value under a mount path of `mounts` names that path's dir here instead
    (in_run_dir)."""
    role_plan = plan.role(role)
    tf_config = json.dumps(plan.tf_config(role, index, address))
    # The container's own env list in the pod's order (manifests/job.yaml.j2: ours, then the
    # user's as written), its $(VAR) references expanded as the kubelet does. A valueFrom (a
    # Secret's, a ConfigMap's, a pod field's) is Kubernetes' to read: unset here, said by
    # preflight.env_notes.
    launcher_env = {
        contract.TASK_INDEX: str(index),
        contract.TF_CONFIG: tf_config,
        **role_plan.env,
        **plan.data_service_env(role, address),
    }
    own_port = any(entry.name == contract.METRICS_PORT for entry in role_plan.user_env)
    if metrics_port is not None and not own_port:  # the spec's own (0: off) wins
        launcher_env[contract.METRICS_PORT], launcher_env[contract.METRICS_HOST] = str(metrics_port), LOCALHOST
    container_env = expand_env(
        (entry.name, entry.value) for entry in env_list(launcher_env, role_plan.user_env) if entry.value_from is None
    )
    argv = expand_command(role_plan.command, container_env)
    pythonpath = module_path(plan, role_plan.builtin, role_plan.workdir, container_env.get("PYTHONPATH"), mounts or {})
    if mounts:  # a pod's mount path is a dir of the run here, never this machine's /train
        container_env = {name: in_run_dir(value, mounts) for name, value in container_env.items()}
        argv = [in_run_dir(word, mounts) for word in argv]
    if role_plan.builtin:
        argv = [python, *argv[1:]]  # "python" -> the configured interpreter and its packages
    env = {
        **os.environ,
        **gpu_env(plan.strategy, role),  # the spec's env may still override it
        contract.PLATFORM: platform(),
        contract.RUN: run,
        **container_env,
        "PYTHONUNBUFFERED": "1",  # lines reach the log as they are printed
        # TF's gRPC server sets SO_REUSEPORT, so it binds beside the off-loopback guard (ports.py)
        "TF_GRPC_REUSE_PORT": "true",
        "PYTHONPATH": pythonpath,
    }
    if not sees_gpus(plan.strategy, role):  # the spec's GPUs are hidden from it here: it expects none
        env.pop(contract.GPUS, None)
    return Task(role=role, index=index, argv=argv, env=env, cwd=role_plan.workdir)


def module_path(
    plan: ClusterPlan, builtin: bool, workdir: str | None, container: str | None, mounts: Mapping[str, str]
) -> str:
    """A local task's PYTHONPATH, in this order:
    1. worker/startup, for a command of your own: its sitecustomize starts the Keras and
       exception checks that the worker image's .pth file starts in a pod;
    2. the container's PYTHONPATH as the pod has it (`container`): the spec's own, each entry
       under the pods' code dir (/opt/tfk8s/code) or a mount path named by its dir here; without
       one, the code dir of `code:` (the plan's), else the role's working dir;
    3. this launcher's checkout (`worker`, `launcher`: the image's site-packages in a pod, which
       come after PYTHONPATH there too), then the launcher's own PYTHONPATH (runner.pythonpath).
    """
    if container is not None:
        here = {**mounts, **({code_bundle.CODE_DIR: plan.code.dir} if plan.code is not None else {})}
        entries = [in_run_dir(entry, here) for entry in container.split(os.pathsep)]
    else:
        entries = [workdir]
    return os.pathsep.join(filter(None, [None if builtin else STARTUP_DIR, *entries, runner.pythonpath()]))


LOCALHOST = "127.0.0.1"
# worker/startup/sitecustomize.py, which Python imports at start: worker/keras_check.py
STARTUP_DIR = os.path.join(os.path.dirname(contract.__file__), "startup")


# --- a pod's mount paths -----------------------------------------------------------
# A pod mounts its claim (checkpoint.volume) and a role's volumeMounts at paths such as /train;
# a local task has no volumes, so a program told `--model-dir /train/model` would write into this
# machine's /train. Each mount path is a dir of the run instead: <run>/mounts/<path>, made at
# start and kept by `delete`, like model/ (a claim outlives its cluster).


def mount_paths(spec: ClusterSpec) -> dict[str, str]:
    """{mountPath: where the spec names it first}, of checkpoint.volume and each role's volumeMounts."""
    found: dict[str, str] = {}
    if spec.checkpoint.volume is not None and spec.checkpoint.volume.mount_path.rstrip("/"):
        found[spec.checkpoint.volume.mount_path.rstrip("/")] = "checkpoint.volume.mountPath"
    for role in spec.active_roles():
        if role in contract.DATA_SERVICE_ROLES:
            continue
        for i, mount in enumerate(spec.pods(role).volume_mounts):
            path = str(mount.get("mountPath", "")).rstrip("/")
            if path:
                found.setdefault(path, f"roles.{role.value}.volumeMounts.{i}.mountPath")
    return found


def mount_dirs(spec: ClusterSpec, run_dir: Path) -> dict[str, str]:
    """{mountPath: its dir in the run}: /train -> <run>/mounts/train."""
    return {path: str(run_dir / MOUNTS_DIR / path.lstrip("/")) for path in mount_paths(spec)}


def in_run_dir(text: str, mounts: Mapping[str, str]) -> str:
    """`text` with a leading mount path (`/train/model`, or an option's value: `--dir=/train`)
    replaced by its dir here; the longest mount path that matches wins (/train/data before /train)."""
    flag, equals, value = text.partition("=") if text.startswith("-") else ("", "", text)
    for path in sorted(mounts, key=len, reverse=True):
        if value == path or value.startswith(path + "/"):
            return flag + equals + mounts[path] + value[len(path) :]
    return text


def metrics_addresses(tasks: list[Task]) -> dict[str, str]:
    """{task: its Prometheus endpoint} of the tasks that serve one."""
    return {
        t.name: f"http://{t.env[contract.METRICS_HOST]}:{t.env[contract.METRICS_PORT]}/metrics"
        for t in tasks
        if t.env.get(contract.METRICS_PORT, "0") != "0"
    }


def platform() -> str:
    """This machine, as OWNER.json names where a cluster ran (worker/model_dir/ownership.py)."""
    return f"local:{socket.gethostname()}"


# --- $(VAR) references------------------------------------------------------------
# Kubernetes' `$(VAR)` references, expanded for a local task as the kubelet expands them for a
# container: each env value from the variables defined before it in the container's env list,
# command and args from the whole list. `$(NAME)` of a defined variable becomes its value, `$$`
# becomes `$` (so `$$(NAME)` stays `$(NAME)`), an undefined `$(NAME)` and an unclosed `$(` stay as
# written. Nothing else is expanded: the host's environment is not the container's list.


def expand(text: str, defined: Mapping[str, str]) -> str:
    """`text` with its `$(NAME)` references to `defined` replaced (rules in the docstring)."""
    out: list[str] = []
    cursor = 0
    while (dollar := text.find("$", cursor)) != -1 and dollar + 1 < len(text):
        out.append(text[cursor:dollar])
        following = text[dollar + 1]
        if following == "$":  # an escaped `$`
            out.append("$")
            cursor = dollar + 2
        elif following == "(" and (closer := text.find(")", dollar + 2)) != -1:
            name = text[dollar + 2 : closer]
            out.append(defined[name] if name in defined else f"$({name})")
            cursor = closer + 1
        else:  # `$x`, or `$(` never closed: kept as written
            out.append("$" + following)
            cursor = dollar + 2
    out.append(text[cursor:])
    return "".join(out)


def expand_env(env: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A container's env list, in order, each value expanded from the ones before it."""
    defined: dict[str, str] = {}
    for name, value in env:
        defined[name] = expand(value, defined)
    return defined


def expand_command(argv: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """A container's command and args, expanded from its (expanded) env."""
    return [expand(arg, env) for arg in argv]
