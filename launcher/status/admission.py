"""Pods (or a JobSet's Jobs) the API server refused to create, as the cluster's cause (pure).

ResourceQuota admission (which checks every container, init containers included), a policy
webhook or Pod Security on a relabelled namespace refuse a pod at creation: no pod exists to
carry a reason, and the refusal shows only as an Event of its owner, `FailedCreate` on the
Job (the Job controller's pods) or `JobCreationFailed` on a JobSet (its Jobs). The cluster
would sit in Pending with nothing said, `submit --wait` waiting forever. Here the newest such
event of each of this submission's owners (by UID, so an earlier cluster of the same name does
not speak) becomes the role's reason and the cluster's message, while the role lacks pods.
The Job controller retries the creation with a backoff: a quota freed later lets it through,
and the message goes away once every pod exists. A refusal older than the role's newest pod
says nothing: a pod was created after it, so it no longer holds (events live an hour, and a
later gap, a retry's backoff or a long save at preemption, would otherwise read as refused).
"""

from __future__ import annotations

import datetime

from launcher.status.lifecycle import event_time, role_of, task_pods
from launcher.status.status import ClusterStatus, Phase

REFUSAL_REASONS = ("FailedCreate", "JobCreationFailed")
MAX_MESSAGE_CHARS = 300


def _short(message: str) -> str:
    message = " ".join(message.split()).removeprefix("Error creating: ")
    return message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 3] + "..."


def _seconds(stamp: str) -> float:
    """An API timestamp (RFC 3339, second or microsecond precision) as epoch seconds; 0 if none."""
    if not stamp:
        return 0.0
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def newest_pods(pods: list[dict]) -> dict[str, float]:
    """{role: the creation time of its newest task pod}."""
    newest: dict[str, float] = {}
    for pod in task_pods(pods):
        role = role_of(pod)
        created = _seconds((pod.get("metadata") or {}).get("creationTimestamp") or "")
        if role and created > newest.get(role, 0.0):
            newest[role] = created
    return newest


def refusals(events: list[dict], owners: dict[str, str], pods_since: dict[str, float] | None = None) -> dict[str, str]:
    """{owner label: the newest refusal's message} for events of `owners` ({UID: label}, the
    label a role for a Job, "" for a JobSet), leaving out a role's refusals that are older than
    its newest pod (`pods_since`, newest_pods())."""
    pods_since = pods_since or {}
    newest: dict[str, dict] = {}
    for event in events:
        uid = (event.get("involvedObject") or {}).get("uid")
        if event.get("reason") not in REFUSAL_REASONS or uid not in owners:
            continue
        label = owners[uid]
        if _seconds(event_time(event)) < pods_since.get(label, 0.0):
            continue  # a pod of the role was created after it: it no longer holds
        if label not in newest or _seconds(event_time(event)) >= _seconds(event_time(newest[label])):
            newest[label] = event
    return {label: _short(event.get("message") or "no message") for label, event in newest.items()}


def jobless_roles(jobset: dict, jobs: list[dict]) -> set[str]:
    """A JobSet's roles (its replicatedJobs) with no Job: the JobSet controller's creation of
    it was refused, or is a moment away."""
    wanted = {r["name"] for r in (jobset.get("spec") or {}).get("replicatedJobs") or []}
    return wanted - {role_of(job) for job in jobs}


def missing_pods(status: ClusterStatus) -> set[str]:
    """Roles with fewer pods than replicas (active or succeeded)."""
    return {r.role for r in status.roles if r.active + r.succeeded < r.replicas}


def apply(status: ClusterStatus, refused: dict[str, str], jobless: set[str] = frozenset()) -> ClusterStatus:
    """The status with the refusals as its cause, while they hold: an unfinished cluster whose
    refused role still lacks pods, or a JobSet with a role that has no Job (`jobless`, while the
    JobSet's own refusal event stands: it is said whatever phase the roles it has are in; once
    every role has its Job, the JobSet's refusals are past)."""
    if status.finished or not refused:
        return status
    lacking = missing_pods(status)
    known = {r.role for r in status.roles}
    said = []
    for label, message in sorted(refused.items()):
        if label == "":  # the JobSet's own event: one of its Jobs was refused
            # With every Job there, the controller got past it (events live an hour).
            if jobless:
                roles = ", ".join(sorted(jobless))
                said.append(f"the API server refused the JobSet's Job of {roles} (it has none): {message}")
        elif label in lacking or label not in known:
            said.append(f"the API server refused the {label}'s pod: {message}")
            for role in status.roles:
                if role.role == label:
                    role.reason = f"pod refused: {message}"
    if not said:
        return status
    status.phase = Phase.STUCK
    status.message = "; ".join(said)
    return status
