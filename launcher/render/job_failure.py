"""The plan's FailurePolicy (launcher/plan/job_failure.py) as Job fields: podFailurePolicy and
the retry budget, in every Job (a JobSet's too) and in the chart's contract (scripts/gen_chart.py)."""

from __future__ import annotations

from launcher import k8s_contract
from launcher.plan.job_failure import FailurePolicy
from worker.contract import Role


def pod_failure_policy(failure: FailurePolicy) -> dict | None:
    """The plan's failure rules as a Job podFailurePolicy (first matching rule wins). None under
    OnFailure: Kubernetes refuses a podFailurePolicy there."""
    if failure.restart_policy != "Never":
        return None

    def on_exit(action: str, codes: tuple[int, ...]) -> list[dict]:
        return (
            [
                {
                    "action": action,
                    "onExitCodes": {
                        # Kubernetes refuses values out of order
                        "containerName": k8s_contract.CONTAINER,
                        "operator": "In",
                        "values": sorted(codes),
                    },
                }
            ]
            if codes
            else []
        )

    # The DisruptionTarget rule before any Count rule: a disrupted pod (drain, eviction,
    # preemption) is the node's or the scheduler's doing, also when its grace ran out and it
    # died of SIGKILL (137), so it spends no retry.
    rules = [*on_exit("Ignore", failure.ignored_exit_codes), *on_exit("FailJob", failure.fatal_exit_codes)]
    if failure.ignores_disruptions:
        rules.append({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    rules += on_exit("Count", failure.counted_exit_codes)
    return {"rules": rules}


def backoff(failure: FailurePolicy, role: Role) -> dict:
    """A Job's retry budget: backoffLimit for the role, or backoffLimitPerIndex with
    maxFailedIndexes 0 (the first index out of retries fails the Job). backoffLimit is then left
    unset (Kubernetes: unlimited), or every peer's failure would count against it again."""
    if failure.restart_policy == "Never" and role in failure.per_index_roles:
        return {"backoffLimitPerIndex": failure.backoff_limit, "maxFailedIndexes": k8s_contract.MAX_FAILED_INDEXES}
    return {"backoffLimit": failure.backoff_limit}
