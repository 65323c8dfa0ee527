"""The plan's FailurePolicy as Job fields: podFailurePolicy and the retry budget (pure).

launcher/render.py puts them into every Job (a JobSet's too); scripts/gen_chart.py writes the
same rules into the chart's contract, so the chart never spells them out by hand.
"""
from __future__ import annotations

from launcher import k8s_contract
from launcher.plan import FailurePolicy, RolePlan


def pod_failure_policy(failure: FailurePolicy) -> dict | None:
    """The plan's failure rules as a Job podFailurePolicy (first matching rule wins). None under
    OnFailure: Kubernetes refuses a podFailurePolicy there."""
    if failure.restart_policy != "Never":
        return None

    def on_exit(action: str, codes: tuple[int, ...]) -> list[dict]:
        return [{"action": action, "onExitCodes": {
            # Kubernetes refuses values out of order
            "containerName": k8s_contract.CONTAINER, "operator": "In", "values": sorted(codes)}}
        ] if codes else []

    # Exit-code rules first: a pod that was disrupted and exited 143 (saved) or 137 (killed
    # before saving) is judged by its exit, the DisruptionTarget rule catches the rest.
    rules = [*on_exit("Ignore", failure.ignored_exit_codes),
             *on_exit("FailJob", failure.fatal_exit_codes),
             *on_exit("Count", failure.counted_exit_codes)]
    if failure.ignores_disruptions:
        rules.append({"action": "Ignore",
                      "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    return {"rules": rules}


def backoff(failure: FailurePolicy, role: RolePlan) -> dict:
    """A Job's retry budget: backoffLimit for the role, or backoffLimitPerIndex with
    maxFailedIndexes 0 (the first index out of retries fails the Job). backoffLimit is then left
    unset (Kubernetes: unlimited), or every peer's failure would count against it again."""
    if failure.restart_policy == "Never" and failure.per_index(role.role):
        return {"backoffLimitPerIndex": failure.backoff_limit,
                "maxFailedIndexes": k8s_contract.MAX_FAILED_INDEXES}
    return {"backoffLimit": failure.backoff_limit}
