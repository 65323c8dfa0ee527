"""Who this task is and where things go, read from TF_CONFIG and the TFK8S_* environment.

Parsed without TensorFlow so that argument and environment mistakes fail in a fraction of a
second and peers can be awaited before TF's multi-second import. The TF-side view of the same
TF_CONFIG (TFConfigClusterResolver) is created later by `__main__` and checked against this one.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from launcher import podenv
from launcher.spec import BUILTIN_PROGRAM, Strategy
from worker import errors

# Roles that run under each strategy; the launcher's spec validation allows exactly these.
ROLES_BY_STRATEGY = {
    Strategy.parameter_server.value: ("chief", "worker", "ps", "evaluator"),
    Strategy.multi_worker_mirrored.value: ("worker", "evaluator"),
    Strategy.mirrored.value: ("chief", "evaluator"),
}
DEFAULT_PEER_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class TaskContext:
    strategy: str
    role: str
    index: int
    cluster: dict[str, list[str]]  # the training cluster from TF_CONFIG (empty for the evaluator)
    model_dir: str
    program_module: str
    peer_timeout_seconds: float
    cluster_name: str = "tfk8s"  # TFK8S_CLUSTER: the spec's name

    @property
    def name(self) -> str:
        """`worker-1`: how the launcher's log prefixes and error messages name a task."""
        return f"{self.role}-{self.index}"

    @property
    def is_writer(self) -> bool:
        """The one task that writes the real checkpoints, SavedModel and FINAL marker."""
        if self.strategy == Strategy.multi_worker_mirrored.value:
            return self.role == "worker" and self.index == 0
        return self.role == "chief"

    def address(self, role: str, index: int) -> str:
        return self.cluster[role][index]


def from_environment(environ: dict[str, str] | None = None) -> TaskContext:
    env = os.environ if environ is None else environ
    problems: list[str] = []

    strategy = env.get(podenv.STRATEGY, "")
    if strategy not in ROLES_BY_STRATEGY:
        problems.append(
            f"{podenv.STRATEGY}={strategy!r}: set it to one of {', '.join(ROLES_BY_STRATEGY)} "
            "(the launcher sets it from the spec's strategy)"
        )
    model_dir = env.get(podenv.MODEL_DIR, "")
    if not model_dir:
        problems.append(
            f"{podenv.MODEL_DIR} is not set: set it to the checkpoint directory (a local path "
            "or gs:// URL shared by the chief and the evaluator)"
        )
    timeout_text = env.get(podenv.PEER_TIMEOUT, str(DEFAULT_PEER_TIMEOUT_SECONDS))
    try:
        peer_timeout = float(timeout_text)
        if peer_timeout <= 0:
            raise ValueError
    except ValueError:
        problems.append(f"{podenv.PEER_TIMEOUT}={timeout_text!r} must be a positive number of seconds")
        peer_timeout = DEFAULT_PEER_TIMEOUT_SECONDS

    role, index, cluster = "", 0, {}
    raw = env.get("TF_CONFIG", "")
    if not raw:
        problems.append("TF_CONFIG is not set: it names this task's role and the cluster")
    else:
        try:
            role, index, cluster = _parse_tf_config(raw)
        except ValueError as exc:
            problems.append(f"TF_CONFIG: {exc}")
    if role and strategy in ROLES_BY_STRATEGY and role not in ROLES_BY_STRATEGY[strategy]:
        problems.append(
            f"TF_CONFIG task type {role!r} does not run under {strategy} (allowed: "
            f"{', '.join(ROLES_BY_STRATEGY[strategy])})"
        )
    if problems:
        raise errors.ConfigError("; ".join(problems))
    return TaskContext(
        strategy=strategy,
        role=role,
        index=index,
        cluster=cluster,
        model_dir=model_dir.rstrip("/"),
        program_module=env.get(podenv.PROGRAM) or BUILTIN_PROGRAM,
        peer_timeout_seconds=peer_timeout,
        cluster_name=env.get(podenv.CLUSTER_NAME) or "tfk8s",
    )


def _parse_tf_config(raw: str) -> tuple[str, int, dict[str, list[str]]]:
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError("must be a JSON object with 'cluster' and 'task'")
    task = config.get("task")
    if not isinstance(task, dict) or "type" not in task:
        raise ValueError('missing "task": {"type": ..., "index": ...}')
    role = str(task["type"])
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise ValueError(f"task index {task.get('index')!r} is not an integer") from None
    cluster = config.get("cluster") or {}
    if not isinstance(cluster, dict) or not all(isinstance(v, list) for v in cluster.values()):
        raise ValueError('"cluster" must map each role to a list of "host:port" addresses')
    if role != "evaluator":
        members = cluster.get(role, [])
        if index < 0 or index >= len(members):
            raise ValueError(
                f"task {role}-{index} is not in the cluster ({role} has {len(members)} addresses)"
            )
    return role, index, {str(k): [str(a) for a in v] for k, v in cluster.items()}
