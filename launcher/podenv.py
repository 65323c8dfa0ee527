"""What every task process gets besides TF_CONFIG: the same on Kubernetes and as a local process."""
from __future__ import annotations

from launcher.spec import ClusterSpec

# The worker reads these (see worker/__main__.py); users' own scripts may ignore them.
STRATEGY = "TFK8S_STRATEGY"
MODEL_DIR = "TFK8S_MODEL_DIR"
PROGRAM = "TFK8S_PROGRAM"
PEER_TIMEOUT = "TFK8S_PEER_TIMEOUT"
CLUSTER_NAME = "TFK8S_CLUSTER"


def launcher_env(spec: ClusterSpec, role: str, model_dir: str | None = None) -> dict[str, str]:
    """Environment for one role, user values last so they can't be mistaken for ours.

    GRPC_FAIL_FAST=use_caller on every task: without it the coordinator stalls on a dead
    worker instead of moving its closures to the survivors (TF PS tutorial).
    """
    env = {
        "GRPC_FAIL_FAST": "use_caller",
        STRATEGY: spec.strategy.value,
        MODEL_DIR: model_dir or spec.checkpoint.dir,
        PEER_TIMEOUT: str(spec.peer_timeout_seconds),
        CLUSTER_NAME: spec.name,
    }
    if spec.builtin:
        env[PROGRAM] = spec.effective_program.module
    # Sorted: Helm values are maps, so the chart can only emit them in name order too.
    env.update(sorted(spec.env.items()))
    env.update(sorted(spec.roles.get(role).env.items()))
    return env


def command(spec: ClusterSpec) -> list[str]:
    """The task's command line: the built-in worker with program args, or the user's own."""
    if spec.builtin:
        return ["python", "-m", "worker", *spec.effective_program.args]
    return [*spec.command, *(spec.args or [])]
