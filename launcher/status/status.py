"""A cluster's status as every backend reports it (pure data, no backend code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from launcher.status.progress import TrainingProgress


class Phase(str, Enum):
    QUEUED = "Queued"  # waiting for Kueue to admit it (quota), or suspended after a preemption
    PENDING = "Pending"  # created; no task runs yet
    RUNNING = "Running"
    STUCK = "Stuck"  # a task cannot make progress by itself (image pull error, unschedulable)
    NODE_LOST = "NodeLost"  # a task sits on a node that stopped reporting (launcher/status/node_loss.py)
    FINISHING = "Finishing"  # training succeeded; waiting for the evaluator or servers to end
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"  # the backend cannot tell (Jobs gone after their TTL, supervisor gone)

    def __str__(self) -> str:
        return self.value

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


@dataclass
class RoleStatus:
    role: str
    replicas: int
    active: int = 0
    succeeded: int = 0
    failed: int = 0  # failed attempts, restarts in place included
    last_exit_code: int | None = None
    reason: str | None = None  # why the last attempt ended or why a task waits

    def to_dict(self) -> dict:
        return {
            "role": self.role,
            "replicas": self.replicas,
            "active": self.active,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "lastExitCode": self.last_exit_code,
            "reason": self.reason,
        }


@dataclass
class ClusterStatus:
    name: str
    namespace: str
    phase: Phase
    message: str = ""
    exit_code: int | None = None  # the chief's (MWMS: worker 0's) exit code, once known
    roles: list[RoleStatus] = field(default_factory=list)
    training: TrainingProgress | None = None  # from the tasks' progress lines, once reported
    notes: list[str] = field(default_factory=list)  # standing remarks (launcher/cluster_spec/checkpoints.py)
    lost_nodes: list[dict] = field(default_factory=list)  # tasks on lost nodes (node_loss.py)

    def __post_init__(self):
        self.phase = Phase(self.phase)

    @property
    def finished(self) -> bool:
        return self.phase.finished

    def to_dict(self) -> dict:
        """The JSON (and YAML) of `status -o` and `list -o`: keys in camelCase, as Kubernetes
        writes its own (docs/watching.md)."""
        return {
            "name": self.name,
            "namespace": self.namespace,
            "phase": self.phase.value,
            "message": self.message,
            "exitCode": self.exit_code,
            "roles": [r.to_dict() for r in self.roles],
            "training": self.training.to_dict() if self.training else None,
            "notes": list(self.notes),
            "lostNodes": list(self.lost_nodes),
        }

    def line(self) -> str:
        """One progress line: `[Running] chief 1 active/0 succeeded/0 failed of 1, ...`."""
        roles = ", ".join(
            f"{r.role} {r.active} active/{r.succeeded} succeeded/{r.failed} failed of {r.replicas}" for r in self.roles
        )
        text = f"[{self.phase}] {roles}"
        return text + (f" - {self.message}" if self.message else "")
