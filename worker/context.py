"""Who this task is and where things go, read from TF_CONFIG and the TFK8S_* environment.

Parsed without TensorFlow so that argument and environment mistakes fail in a fraction of a
second and peers can be awaited before TF's multi-second import. The TF-side view of the same
TF_CONFIG (TFConfigClusterResolver) is created later by `__main__` and checked against this one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from worker import contract, errors
from worker.contract import Role, Strategy

STRATEGIES = ", ".join(s.value for s in Strategy)
DEFAULT_NAMESPACE = "default"  # a task started by hand, without the launcher's environment


@dataclass(frozen=True)
class TaskContext:
    strategy: Strategy
    role: Role
    index: int
    # TF_CONFIG's cluster: the training cluster (empty for the evaluator; the data service's own
    # tasks for the dispatcher and data workers)
    cluster: dict[str, list[str]]
    model_dir: str
    program_module: str
    peer_timeout_seconds: float
    cluster_name: str = contract.DEFAULT_CLUSTER_NAME  # TFK8S_CLUSTER: the spec's name
    namespace: str = DEFAULT_NAMESPACE  # TFK8S_NAMESPACE: the spec's namespace
    code_digest: str | None = None  # TFK8S_CODE_DIGEST: the shipped code's, if any
    platform: str | None = None  # TFK8S_PLATFORM: the Kubernetes cluster or machine, when known
    run: str | None = None  # TFK8S_RUN: this submission's id, when the launcher set one

    @property
    def name(self) -> str:
        """`worker-1`: how the launcher's log prefixes and error messages name a task."""
        return contract.task_name(self.role, self.index)

    @property
    def is_writer(self) -> bool:
        """The one task that writes the real checkpoints, SavedModel and FINAL marker."""
        return contract.is_writer(self.strategy, self.role, self.index)

    def address(self, role: str, index: int) -> str:
        return self.cluster[role][index]

    @property
    def own_port(self) -> int | None:
        """The port of this task's TF_CONFIG address, which its gRPC server binds; None outside
        the training cluster (the evaluator)."""
        members = self.cluster.get(self.role.value, [])
        port = members[self.index].rpartition(":")[2] if self.index < len(members) else ""
        return int(port) if port.isdigit() else None


def from_environment(environ: dict[str, str] | None = None) -> TaskContext:
    env = os.environ if environ is None else environ
    problems: list[str] = []

    strategy_text = env.get(contract.STRATEGY, "")
    strategy = next((s for s in Strategy if s.value == strategy_text), None)
    if strategy is None:
        problems.append(
            f"{contract.STRATEGY}={strategy_text!r}: set it to one of {STRATEGIES} "
            "(the launcher sets it from the spec's strategy)"
        )
    model_dir = env.get(contract.MODEL_DIR, "")
    if not model_dir:
        problems.append(
            f"{contract.MODEL_DIR} is not set: set it to the checkpoint directory (a local path "
            "or gs:// URL shared by the chief and the evaluator)"
        )
    timeout_text = env.get(contract.PEER_TIMEOUT, str(contract.DEFAULT_PEER_TIMEOUT_SECONDS))
    try:
        peer_timeout = float(timeout_text)
        if peer_timeout <= 0:
            raise ValueError
    except ValueError:
        problems.append(f"{contract.PEER_TIMEOUT}={timeout_text!r} must be a positive number of seconds")
        peer_timeout = contract.DEFAULT_PEER_TIMEOUT_SECONDS

    role, index, cluster = "", 0, {}
    raw = env.get(contract.TF_CONFIG, "")
    if not raw:
        problems.append("TF_CONFIG is not set: it names this task's role and the cluster")
    else:
        try:
            role, index, cluster = _parse_tf_config(raw)
        except ValueError as exc:
            problems.append(f"TF_CONFIG: {exc}")
    if role and strategy is not None and role not in contract.allowed_roles(strategy):
        problems.append(
            f"TF_CONFIG task type {role.value!r} does not run under {strategy} (allowed: "
            f"{', '.join(r.value for r in contract.allowed_roles(strategy))})"
        )
    if problems:
        raise errors.ConfigError("; ".join(problems))
    return TaskContext(
        strategy=strategy,
        role=role,
        index=index,
        cluster=cluster,
        model_dir=model_dir.rstrip("/"),
        program_module=env.get(contract.PROGRAM) or contract.BUILTIN_PROGRAM,
        peer_timeout_seconds=peer_timeout,
        cluster_name=env.get(contract.CLUSTER_NAME) or contract.DEFAULT_CLUSTER_NAME,
        namespace=env.get(contract.NAMESPACE) or DEFAULT_NAMESPACE,
        code_digest=env.get(contract.CODE_DIGEST) or None,
        platform=env.get(contract.PLATFORM) or None,
        run=env.get(contract.RUN) or None,
    )


def _parse_tf_config(raw: str) -> tuple[Role, int, dict[str, list[str]]]:
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError("must be a JSON object with 'cluster' and 'task'")
    task = config.get("task")
    if not isinstance(task, dict) or "type" not in task:
        raise ValueError('missing "task": {"type": ..., "index": ...}')
    role = next((r for r in Role if r.value == str(task["type"])), None)
    if role is None:
        raise ValueError(f"task type {task['type']!r} is not one of {', '.join(r.value for r in Role)}")
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise ValueError(f"task index {task.get('index')!r} is not an integer") from None
    cluster = config.get("cluster") or {}
    if not isinstance(cluster, dict) or not all(isinstance(v, list) for v in cluster.values()):
        raise ValueError('"cluster" must map each role to a list of "host:port" addresses')
    if role in contract.TRAINING_ROLES + contract.DATA_SERVICE_ROLES:
        members = cluster.get(role.value, [])
        if index < 0 or index >= len(members):
            raise ValueError(f"task {role}-{index} is not in the cluster ({role} has {len(members)} addresses)")
    return role, index, {str(k): [str(a) for a in v] for k, v in cluster.items()}
