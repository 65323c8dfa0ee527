"""The cluster's phase, computed from its Jobs and pods (pure: plain dicts in, status out).

Lifecycle (docs/lifecycle.md):
- Succeeded: the chief's Job (MWMS: the worker Job, whose success policy is worker 0) completed,
  the evaluator (if any) has finished, and the supervised workers/ps have been ended.
- Failed: the chief's Job failed (backoff exhausted, a podFailurePolicy FailJob rule, or
  deadline passed), or the Job of another role the training cannot go on without
  (verdicts.ROLE_OUT_OF_RETRIES, as --local decides). The message leads with the task whose
  failure failed the Job (of its failedIndexes; not a pod the Job controller then ended), and
  why it ended: what Kubernetes recorded (OOMKilled with the limit, Evicted, a deadline, a taint
  or a lost node: failure_reasons.py), else the task's own words, the cause in its container's termination message
  (worker/exit_cause.py: the built-in worker writes its one-line error there; other commands' log
  tails get there through terminationMessagePolicy FallbackToLogsOnError).
- Evaluator failure never fails training: it is reported in the message only.
- A JobSet (workload jobset) decides Succeeded/Failed itself (its success and failure
  policies); while suspended it is Queued, with Kueue's reason from its Workload.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher import k8s_contract
from launcher.k8s_contract import JOB_SUCCEEDED as SUCCEEDED  # the supervisor's
from launcher.k8s_contract import JOB_TERMINAL as TERMINAL
from launcher.status import failure_reasons, node_loss, verdicts
from launcher.status.status import ClusterStatus, Phase, RoleStatus
from worker import contract, exit_cause
from worker.contract import ROLES, Role, Strategy


def job_condition(job: dict) -> tuple[str | None, str]:
    """('Complete'|'Failed'|None, message) from a Job's terminal conditions."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") in SUCCEEDED:
            return "Complete", ""
        if cond.get("type") in TERMINAL:  # and not SUCCEEDED: a failure
            return "Failed", f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return None, ""


def role_of(obj: dict) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(k8s_contract.LABEL_COMPONENT)


def index_of(pod: dict) -> int:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(k8s_contract.INDEX_ANNOTATION, 0))
    except ValueError:
        return 0


def _terminated(pod: dict) -> dict | None:
    """The most recent termination of the task container (current or previous run); not the
    job-watch container's, which ends 0 and whose status Kubernetes may list first."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name", k8s_contract.CONTAINER) != k8s_contract.CONTAINER:
            continue
        state = cs.get("state") or {}
        if "terminated" in state:
            return state["terminated"]
        last = cs.get("lastState") or {}
        if "terminated" in last:
            return last["terminated"]
    return None


@dataclass(frozen=True)
class RoleFailure:
    """A role whose Job failed, and the task whose failure failed it."""

    role: str
    cause: str  # "worker-1: exited 3: ValueError: ... (BackoffLimitExceeded: ...)"
    task: tuple[dict, dict | None] | None  # its pod and termination (failed_task)
    exit_code: int | None  # the task's
    at: str  # when the Job's Failed condition was set (RFC 3339 sorts as text)


def failed_indexes(job: dict) -> set[int] | None:
    """A Job's `status.failedIndexes` ("1,3-5": the indexes out of their backoffLimitPerIndex),
    or None when it has none."""
    text = (job.get("status") or {}).get("failedIndexes")
    if not text:
        return None
    found: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


def failed_task(job: dict, role_pods: list[dict]) -> tuple[dict, dict | None] | None:
    """The pod (and its termination) whose failure failed `job`: of its failed indexes, if the
    Job counts per index, the newest pod that failed by itself; the pods the Job controller
    ended with SIGTERM as the Job failed (exit 143) only when no other failed. None: no pod left."""
    indexes = failed_indexes(job)
    ended = []
    for pod in role_pods:
        if indexes is not None and index_of(pod) not in indexes:
            continue
        term = _terminated(pod)
        if (term is not None and term.get("exitCode")) or failure_reasons.recorded_by_kubernetes(pod, term):
            by_itself = (term or {}).get("exitCode") != contract.EXIT_PREEMPTED
            ended.append(((by_itself, (pod.get("metadata") or {}).get("creationTimestamp") or ""), pod, term))
    if not ended:
        return None
    _, pod, term = max(ended, key=lambda found: found[0])
    return pod, term


def _role_failure(role: str, job: dict, role_pods: list[dict]) -> RoleFailure:
    _, why = job_condition(job)
    at = next(
        (
            c.get("lastTransitionTime") or ""
            for c in (job.get("status") or {}).get("conditions") or []
            if c.get("type") in TERMINAL and c.get("status") == "True"
        ),
        "",
    )
    found = failed_task(job, role_pods)
    if found is None:
        return RoleFailure(role, why, None, None, at)
    pod, term = found
    said = failure_reasons.failure_reason(pod, term)
    index = index_of(pod)
    # the task is named when its role has others: which MWMS worker, which PS worker
    task = f"{contract.task_name(role, index)}: " if index != contract.SUCCESS_INDEX or len(role_pods) > 1 else ""
    cause = f"{task}{said} ({why})" if said else f"{task}{why}"
    return RoleFailure(role, cause, found, (term or {}).get("exitCode"), at)


def role_reason(pod: dict, term: dict | None) -> str | None:
    """A pod's reason in its role's line: what Kubernetes recorded, else the termination's
    reason and the task's own words."""
    recorded = failure_reasons.recorded_by_kubernetes(pod, term)
    if recorded is not None or term is None:
        return recorded
    # a task that exited non-zero without a word: its exit code (as --local says it), not a bare "Error"
    said = termination_reason(term) or failure_reasons.failure_reason(pod, term)
    return f"{term.get('reason')}: {said}" if said else term.get("reason")


def termination_reason(term: dict) -> str | None:
    """Why a container exited non-zero, in its own words: the cause in its termination message
    (the built-in worker's one-line error, or the log's tail under FallbackToLogsOnError)."""
    if not term.get("exitCode"):
        return None
    return exit_cause.exit_cause(term.get("message") or "", term.get("exitCode"))


@dataclass(frozen=True)
class SchedulingFacts:
    """What the cluster says of unscheduled pods beyond their own status: the newest
    cluster-autoscaler event of each (by pod UID; verdicts.AUTOSCALER_EVENTS) and the time of the
    reading (epoch seconds; None: a claim's wait is never judged overdue)."""

    autoscaler: dict[str, dict] = field(default_factory=dict)
    now: float | None = None


NO_FACTS = SchedulingFacts()


def newest_autoscaler_events(pods: list[dict], events: list[dict]) -> dict[str, dict]:
    """{pod UID: its newest cluster-autoscaler event} for the task pods among `pods`."""
    uids = {(p.get("metadata") or {}).get("uid") for p in task_pods(pods)}
    return newest_events_of(events, verdicts.AUTOSCALER_EVENTS, uids)


def newest_events_of(events: list[dict], reasons, uids) -> dict[str, dict]:
    """{object UID: its newest event of one of `reasons`} for the objects `uids`."""
    newest: dict[str, dict] = {}
    for event in events:
        uid = (event.get("involvedObject") or {}).get("uid")
        if event.get("reason") not in reasons or uid not in uids:
            continue
        if uid not in newest or event_time(event) >= event_time(newest[uid]):
            newest[uid] = event
    return newest


def event_time(event: dict) -> str:
    """When an event last happened (a core/v1 Event's lastTimestamp, an events.k8s.io eventTime)."""
    return (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def unschedulable(pod: dict) -> dict | None:
    """The pod's PodScheduled=False condition with reason Unschedulable, or None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return cond
    return None


def _claim_binding(cond: dict, now: float | None) -> str | None:
    """For an Unschedulable condition: "binding" while its claims may still bind, "overdue" once
    they have not bound in verdicts.CLAIM_BIND_PATIENCE_SECONDS, None when claims are not why."""
    if not any(m in (cond.get("message") or "") for m in verdicts.CLAIM_BINDING_MESSAGES):
        return None
    since = node_loss.parse_time(cond.get("lastTransitionTime"))
    overdue = now is not None and since is not None and now - since.timestamp() > verdicts.CLAIM_BIND_PATIENCE_SECONDS
    return "overdue" if overdue else "binding"


def pod_waits(pod: dict, facts: SchedulingFacts = NO_FACTS) -> str | None:
    """A reason this pod waits that normally resolves by itself (shown, never Stuck), or None."""
    cond = unschedulable(pod)
    if cond is None:
        return None
    name = (pod.get("metadata") or {}).get("name", "?")
    if _claim_binding(cond, facts.now) == "binding":
        return (
            f"pod {name} waits for its PersistentVolumeClaims to bind "
            "(if this lasts, see `kubectl get pvc` and the StorageClass's provisioner)"
        )
    event = facts.autoscaler.get((pod.get("metadata") or {}).get("uid"))
    if event is not None and verdicts.AUTOSCALER_EVENTS[event["reason"]]:
        return f"pod {name} waits for a node the cluster autoscaler is adding ({_said(event)})"
    return None


def _said(event: dict) -> str:
    return f"{event.get('reason')}: {' '.join((event.get('message') or 'no message').split())}"


def pod_problem(pod: dict, facts: SchedulingFacts = NO_FACTS) -> str | None:
    """A reason this pod cannot make progress, or None."""
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name", "?")
    # init containers first: `code:` unpacks in one, and the task's container waits behind it
    for init, cs in [(True, cs) for cs in status.get("initContainerStatuses") or []] + [
        (False, cs) for cs in status.get("containerStatuses") or []
    ]:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in verdicts.STUCK_WAITING_REASONS:
            detail = waiting.get("message") or cs.get("image", "")
            which = f" (init container {cs.get('name', '?')})" if init else ""
            return f"pod {name}{which}: {verdicts.STUCK_WAITING_REASONS[reason]} ({reason}: {detail})"
    cond = unschedulable(pod)
    if cond is None or pod_waits(pod, facts) is not None:
        return None
    message = cond.get("message", "")
    if _claim_binding(cond, facts.now) == "overdue":
        return (
            f"pod {name}: its PersistentVolumeClaims have not bound in {verdicts.CLAIM_BIND_PATIENCE_SECONDS:.0f}s "
            f"({message}): see `kubectl get pvc` and `kubectl describe pvc` for the StorageClass's provisioner"
        )
    event = facts.autoscaler.get((pod.get("metadata") or {}).get("uid"))
    refused = f"; the cluster autoscaler adds no node for it ({_said(event)})" if event is not None else ""
    return f"pod {name} cannot be scheduled: {message}{refused}"


def waits_for_volumes(pod: dict) -> bool:
    """Whether a pod's containers still wait for their volumes (verdicts.MOUNTING_WAITS)."""
    status = pod.get("status") or {}
    return status.get("phase") == "Pending" and any(
        ((cs.get("state") or {}).get("waiting") or {}).get("reason") in verdicts.MOUNTING_WAITS
        for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    )


def mount_failures(pods: list[dict], events: list[dict]) -> dict[str, str]:
    """{role: why its pod cannot start} from the newest mount or attach failure event
    (verdicts.MOUNT_FAILURE_EVENTS) of each task pod still waiting for its volumes."""
    waiting = {(p.get("metadata") or {}).get("uid"): p for p in task_pods(pods) if waits_for_volumes(p)}
    newest = newest_events_of(events, verdicts.MOUNT_FAILURE_EVENTS, waiting)
    found: dict[str, str] = {}
    for uid, event in sorted(newest.items(), key=lambda item: waiting[item[0]]["metadata"].get("name", "")):
        pod = waiting[uid]
        meaning = verdicts.MOUNT_FAILURE_EVENTS[event["reason"]]
        message = " ".join((event.get("message") or "no message").split())
        found.setdefault(
            role_of(pod) or "?", f"pod {pod['metadata'].get('name', '?')}: {meaning} ({event['reason']}: {message})"
        )
    return found


def with_mount_failures(status: ClusterStatus, failures: dict[str, str]) -> ClusterStatus:
    """The status with its pods' mount failures as its cause: Stuck, each role's reason said."""
    if status.finished or not failures:
        return status
    for role in status.roles:
        if role.role in failures:
            role.reason = failures[role.role]
    said = list(failures.values())
    status.message = "; ".join(said + ([status.message] if status.phase is Phase.STUCK and status.message else []))
    status.phase = Phase.STUCK
    return status


def task_pods(pods: list[dict]) -> list[dict]:
    """The pods of the cluster's tasks: not the other pods with its labels (`tensorboard`'s)."""
    roles = {r.value for r in ROLES}
    return [p for p in pods if role_of(p) in roles]


def compute_status(
    name: str, namespace: str, jobs: list[dict], pods: list[dict], facts: SchedulingFacts = NO_FACTS
) -> ClusterStatus:
    pods = task_pods(pods)
    by_role = {role_of(j): j for j in jobs if role_of(j)}
    strategy = next(
        (((j.get("metadata") or {}).get("labels") or {}).get(k8s_contract.LABEL_STRATEGY) for j in jobs),
        None,
    )
    if strategy not in {s.value for s in Strategy}:
        return ClusterStatus(
            name, namespace, Phase.UNKNOWN, f"no Job carries a known {k8s_contract.LABEL_STRATEGY} label", None
        )
    success_role = contract.success_role(strategy).value
    roles: list[RoleStatus] = []
    problems: list[str] = []
    waits: list[str] = []
    for role in ROLES:
        job = by_role.get(role)
        if job is None:
            continue
        st = job.get("status") or {}
        role_pods = [p for p in pods if role_of(p) == role]
        restarts = sum(
            cs.get("restartCount", 0)
            for p in role_pods
            for cs in (p.get("status") or {}).get("containerStatuses") or []
        )
        rs = RoleStatus(
            role=role,
            replicas=(job.get("spec") or {}).get("completions") or 0,
            active=st.get("active") or 0,
            succeeded=st.get("succeeded") or 0,
            failed=(st.get("failed") or 0) + restarts,
        )
        newest = sorted(role_pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        for pod in newest:
            term = _terminated(pod)
            if term is not None:
                rs.last_exit_code = term.get("exitCode")
            if (reason := role_reason(pod, term)) is not None:
                rs.reason = reason
            if (wait := pod_waits(pod, facts)) is not None:
                waits.append(wait)
            problem = pod_problem(pod, facts)
            if problem:
                problems.append(problem)
                rs.reason = problem
        roles.append(rs)

    main = by_role.get(success_role)
    if main is None:
        return ClusterStatus(name, namespace, Phase.UNKNOWN, f"no {success_role} Job found", None, roles)
    outcome, _ = job_condition(main)
    # Roles out of retries (their Job Failed) that the training cannot go on without
    # (verdicts.ROLE_OUT_OF_RETRIES), the earliest first; the success role leads whenever it failed.
    lost = sorted(
        (
            _role_failure(role, by_role[role], [p for p in pods if role_of(p) == role])
            for role in verdicts.needed_roles()
            if role in by_role and job_condition(by_role[role])[0] == "Failed"
        ),
        key=lambda f: (f.role != success_role, f.at),
    )
    for failure in lost:  # the role's reason is its failed task's, not the Job's SIGTERMs as it failed
        for rs in roles:
            if rs.role == failure.role and failure.task is not None:
                rs.reason = role_reason(*failure.task) or rs.reason
    if outcome != "Complete" and lost:
        first, *later = lost
        message = f"{first.role} failed: {first.cause}"
        if first.role != success_role:
            loss = verdicts.ROLE_OUT_OF_RETRIES[Role(first.role)]
            message += f"; the training cannot go on without it ({loss.why_under(strategy)})"
        if later:
            message += " after " + "; ".join(f"{f.role} failed: {f.cause}" for f in later)
        return ClusterStatus(name, namespace, Phase.FAILED, message, verdicts.failed_exit_code(first.exit_code), roles)
    if outcome == "Complete":
        waiting = [r for r, j in by_role.items() if r != success_role and job_condition(j)[0] is None]
        notes = []
        evaluator = by_role.get(Role.EVALUATOR)
        if evaluator is not None and job_condition(evaluator)[0] == "Failed":
            notes.append("evaluator failed (training is not affected)")
        if waiting:
            return ClusterStatus(
                name, namespace, Phase.FINISHING, f"training done; waiting for {', '.join(waiting)} to end", 0, roles
            )
        return ClusterStatus(name, namespace, Phase.SUCCEEDED, "; ".join(notes), 0, roles)
    if problems:
        return ClusterStatus(name, namespace, Phase.STUCK, "; ".join(problems), None, roles)
    running = any((p.get("status") or {}).get("phase") == "Running" for p in pods)
    return ClusterStatus(name, namespace, Phase.RUNNING if running else Phase.PENDING, "; ".join(waits), None, roles)


# JobSet conditions (jobset.x-k8s.io/v1alpha2 JobSetConditionType)
JOBSET_COMPLETED, JOBSET_FAILED = "Completed", "Failed"


def _true_conditions(obj: dict | None) -> dict[str, dict]:
    return {
        c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }


def admission_message(queue: str | None, workload: dict | None) -> str:
    """Why a suspended JobSet waits, from its Kueue Workload (kueue.x-k8s.io Workload)."""
    if queue is None:
        return "suspended (no queue label: something other than Kueue suspended it)"
    if workload is None:
        return (
            f"waiting for Kueue to create its Workload in queue {queue} "
            "(is Kueue installed, and does the LocalQueue exist?)"
        )
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
    parts = []
    evicted = conditions.get("Evicted")
    if evicted is not None and evicted.get("status") == "True":
        parts.append(
            f"preempted ({evicted.get('reason', '')}: {evicted.get('message', '')}); "
            "requeued, resumes from its last checkpoint when readmitted"
        )
    reserved = conditions.get("QuotaReserved")
    admitted = conditions.get("Admitted")
    if admitted is not None and admitted.get("status") == "True":
        parts.append(f"admitted by queue {queue}; starting")
    elif reserved is not None and reserved.get("status") == "False":
        parts.append(f"waiting for quota in queue {queue}: {reserved.get('message', '')}")
    else:
        parts.append(f"waiting for queue {queue} to admit it")
    return "; ".join(parts)


def compute_jobset_status(
    name: str,
    namespace: str,
    jobset: dict,
    jobs: list[dict],
    pods: list[dict],
    workload: dict | None,
    facts: SchedulingFacts = NO_FACTS,
) -> ClusterStatus:
    """Status of a cluster projected as one JobSet: its terminal conditions first, Kueue's
    admission while it is suspended, otherwise the Jobs' own rules (compute_status)."""
    pods = task_pods(pods)
    base = compute_status(name, namespace, jobs, pods, facts) if jobs else None
    roles = base.roles if base else []
    conditions = _true_conditions(jobset)
    if JOBSET_COMPLETED in conditions:
        # JobSet deletes the Jobs still running (ps, PS workers): done once their pods are gone.
        ending = [
            p["metadata"].get("name", "?")
            for p in pods
            if (p.get("status") or {}).get("phase") in ("Pending", "Running")
        ]
        if ending:
            return ClusterStatus(
                name,
                namespace,
                Phase.FINISHING,
                f"training done; waiting for {len(ending)} pods to end: " + ", ".join(sorted(ending)),
                0,
                roles,
            )
        notes = base.message if base is not None and base.phase is Phase.SUCCEEDED else ""
        return ClusterStatus(name, namespace, Phase.SUCCEEDED, notes, 0, roles)
    if JOBSET_FAILED in conditions:
        failed = conditions[JOBSET_FAILED]
        code = base.exit_code if base is not None else None
        message = f"JobSet failed: {failed.get('reason', '')}: {failed.get('message', '')}"
        if base is not None and base.phase is Phase.FAILED:
            message += f"; {base.message}"  # the chief's own words, when its Job failed
        return ClusterStatus(name, namespace, Phase.FAILED, message, code if code not in (None, 0) else 1, roles)
    if (jobset.get("spec") or {}).get("suspend"):
        queue = ((jobset.get("metadata") or {}).get("labels") or {}).get(k8s_contract.QUEUE_LABEL)
        return ClusterStatus(name, namespace, Phase.QUEUED, admission_message(queue, workload), None, roles)
    if base is None or base.phase is Phase.UNKNOWN:
        return ClusterStatus(name, namespace, Phase.PENDING, "the JobSet's Jobs are being created", None, roles)
    if base.phase is Phase.SUCCEEDED:  # every Job ended, the set not yet marked: a moment
        return ClusterStatus(name, namespace, Phase.FINISHING, "waiting for the JobSet to complete", 0, roles)
    if base.phase is Phase.FAILED:
        # Only the set's Failed condition ends the cluster: its failure policy may recreate
        # every Job instead (MWMS: maxRestarts), so a failed child Job is not the end yet.
        restarts = (jobset.get("status") or {}).get("restarts") or 0
        return ClusterStatus(
            name,
            namespace,
            Phase.RUNNING,
            (f"{base.message}; the JobSet restarts its Jobs or fails (restarts so far: {restarts})"),
            None,
            roles,
        )
    return base
