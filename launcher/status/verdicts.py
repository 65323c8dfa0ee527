"""The verdicts both backends give, as data (pure): which role's loss ends the training, which
waits never end by themselves, and the exit code of a failed training.

Kubernetes (launcher/status/lifecycle.py, launcher/backends/kubernetes/backend.py) and `--local`
(launcher/backends/local/policy.py) read these tables; neither spells a rule of its own.
docs/verdicts.md's table is checked against them
(tests/launcher/status/test_verdicts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.contract import Role, Strategy


@dataclass(frozen=True)
class RoleLoss:
    """What a role out of retries means (Kubernetes: its Job's Failed condition; --local: a task
    that may not restart)."""

    fails_training: bool  # the cluster is Failed, this role's task named first
    why: str  # for docs/verdicts.md's table and the status message
    # where the reason differs by strategy, the status message says its own strategy's only
    why_by_strategy: tuple[tuple[Strategy, str], ...] = ()

    def why_under(self, strategy: Strategy | str) -> str:
        return dict(self.why_by_strategy).get(Strategy(strategy), self.why)


_PS_WORKER_LOSS = "its Job's failure ends every PS worker, and the coordinator waits for its workers without end"
_MWMS_WORKER_LOSS = "the all-reduce needs every worker"

ROLE_OUT_OF_RETRIES: dict[Role, RoleLoss] = {
    Role.CHIEF: RoleLoss(True, "it runs the training loop"),
    Role.WORKER: RoleLoss(
        True,
        f"PS: {_PS_WORKER_LOSS}; MWMS: {_MWMS_WORKER_LOSS}",
        ((Strategy.PARAMETER_SERVER, _PS_WORKER_LOSS), (Strategy.MULTI_WORKER_MIRRORED, _MWMS_WORKER_LOSS)),
    ),
    Role.PS: RoleLoss(True, "it holds the variables"),
    Role.EVALUATOR: RoleLoss(False, "it evaluates beside the training: said in the message only"),
    Role.DISPATCHER: RoleLoss(True, "the trainers read their data through it"),
    Role.DATA_WORKER: RoleLoss(True, "its Job's failure ends every data worker, and the trainers read from them"),
}


def needed_roles() -> tuple[Role, ...]:
    """The roles whose loss ends the training (ROLE_OUT_OF_RETRIES)."""
    return tuple(role for role, loss in ROLE_OUT_OF_RETRIES.items() if loss.fails_training)


# A container's (init containers' too: `code:` unpacks in one) waiting reasons that will not fix
# themselves: the pod is Stuck with the reason, not Pending forever.
STUCK_WAITING_REASONS: dict[str, str] = {
    "ErrImagePull": "the image cannot be pulled",
    "ImagePullBackOff": "the image cannot be pulled",
    "InvalidImageName": "the image name is invalid",
    "ErrImageNeverPull": "the image is not on the node and imagePullPolicy is Never",
    "CreateContainerConfigError": "the container config is invalid",
    "CreateContainerError": "the container cannot be created",
}

# Pod events (the kubelet's, the attach-detach controller's) of a volume a pod cannot mount: while
# its containers wait to be created, the pod is Stuck with the event's message.
MOUNT_FAILURE_EVENTS: dict[str, str] = {
    "FailedMount": "a volume cannot be mounted",
    "FailedAttachVolume": "a volume cannot be attached",
}
# Cluster-autoscaler's events on a pod it was asked to place ({reason: whether the pod waits}): a
# node on its way (TriggeredScaleUp) is a wait, shown and never Stuck; a refusal to add one
# (NotTriggerScaleUp: no node group fits, or every group is at its maximum) is Stuck with its
# words. The newest of them speaks; a pod with neither is Stuck once Unschedulable.
AUTOSCALER_EVENTS: dict[str, bool] = {"TriggeredScaleUp": True, "NotTriggerScaleUp": False}
# The scheduler's Unschedulable messages of a wait that normally ends by itself: a
# PersistentVolumeClaim still binding (WaitForFirstConsumer, a provisioner at work).
CLAIM_BINDING_MESSAGES = ("unbound immediate PersistentVolumeClaims",)
# How long a claim may take to bind before the pod is Stuck: a provisioner that has not bound it
# in this time is failing (no such StorageClass, no capacity, no matching PersistentVolume).
CLAIM_BIND_PATIENCE_SECONDS = 300.0

# What a container waits in while its pod's volumes are set up: only then does a mount event speak
# (events live an hour; once the containers start, the mount succeeded).
MOUNTING_WAITS = ("ContainerCreating", "PodInitializing")


def failed_exit_code(task_exit_code: int | None) -> int:
    """The exit code of `--wait` (`status -w`) for a failed training: the exit code (a shell's
    status: 128 + N for signal N) of the task named first, the one whose failure ended it; 1 when
    it has none (a pod deleted before it ran, a deadline)."""
    return task_exit_code if task_exit_code not in (None, 0) else 1
