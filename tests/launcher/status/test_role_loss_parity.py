"""A task of each role out of retries, judged by both backends alike (issue 60's parity; the
rows real processes run are in tests/worker: test_causes.py, test_node_fault_runs.py,
test_faults.py).

Kubernetes: the task's pods failing alike until its Job is out of retries, as the Job controller
fails it (tests/job_controller.py), then `status` (lifecycle.compute_status) with the other Jobs
still running. `--local`: policy.decide over the tasks as the supervisor sees them, the failed
task's last attempt failed for good and every other task still running, once the chief's
failure grace has passed. Same phase and exit code, and the same task named as the cause.
"""

from __future__ import annotations

import pytest
from job_controller import out_of_retries

from launcher.backends.local import policy
from launcher.backends.local.types import FAILURE_GRACE_SECONDS
from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import plan
from launcher.status import verdicts
from worker.contract import Role

CLAIM = "checkpoint: {volume: {persistentVolumeClaim: {claimName: ckpt}}}\n"
PS = "strategy: parameter_server\nroles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}, "
SPECS = {
    "ps": "name: p\n" + PS + "evaluator: {replicas: 1}}\n" + CLAIM + "dataService: {workers: 2}\nbackoffLimit: 1\n",
    "mwms": "name: m\nstrategy: multi_worker_mirrored\nroles: {worker: {replicas: 3}}\n" + CLAIM + "backoffLimit: 1\n",
}
# (spec, role, index, the task's exit as Popen gives it, as the pod's container reports it)
ROWS = [
    ("ps", "chief", 0, 1, 1),
    ("ps", "worker", 1, 1, 1),
    ("ps", "ps", 0, -9, 137),
    ("ps", "dispatcher", 0, 1, 1),
    ("ps", "data-worker", 1, -9, 137),
    ("ps", "evaluator", 0, 1, 1),
    ("mwms", "worker", 0, 1, 1),
    ("mwms", "worker", 2, -9, 137),
]


def local_verdict(text: str, role: str, index: int, code: int) -> policy.Decision:
    cluster = plan(load_text(text))
    tasks = [
        policy.TaskSnapshot(
            Role(r.role),
            i,
            policy.TaskState.FAILED,
            code,
            policy.describe_exit(code),
            ended_at=0.0,
        )
        if (r.role, i) == (role, index)
        else policy.TaskSnapshot(Role(r.role), i, policy.TaskState.RUNNING)
        for r in cluster.roles
        for i in range(r.replicas)
    ]
    return policy.decide(cluster, tasks, now=FAILURE_GRACE_SECONDS + 1)


@pytest.mark.parametrize("spec,role,index,code,exit_code", ROWS, ids=[f"{s}-{r}-{i}" for s, r, i, *_ in ROWS])
def test_a_role_out_of_retries_gets_one_verdict(spec, role, index, code, exit_code):
    text = SPECS[spec]
    actions, on_kubernetes = out_of_retries(load_text(text), role, exit_code, "", index=index)
    assert actions == ["Count", "Count"], actions  # backoffLimit 1 on both: retried once, counted
    local = local_verdict(text, role, index, code)
    print(
        f"{spec} {role}-{index} exit {exit_code}: kubernetes {on_kubernetes.phase.value} {on_kubernetes.exit_code} "
        f"{on_kubernetes.message!r}; local {local.phase.value} {local.exit_code} {local.message!r}"
    )
    if verdicts.ROLE_OUT_OF_RETRIES[Role(role)].fails_training:
        assert on_kubernetes.phase.value == local.phase.value == "Failed"
        assert on_kubernetes.exit_code == local.exit_code == exit_code
        said = (on_kubernetes.message, local.message)
        assert on_kubernetes.message.startswith(role) and local.message.startswith(f"{role}-{index}"), said
        # the task, where its role has others (a lone chief is its role)
        named = f"{role}-{index}" if plan(load_text(text)).role(Role(role)).replicas > 1 else role
        cause = "killed by SIGKILL" if exit_code == 137 else f"exited {exit_code}"
        assert all(named in m and cause in m for m in said), said
        cluster = plan(load_text(text))
        if Role(role) != cluster.success_role:  # Kubernetes adds why the training needs it: its strategy's reason
            why = verdicts.ROLE_OUT_OF_RETRIES[Role(role)].why_under(cluster.strategy)
            assert on_kubernetes.message.endswith(f"; the training cannot go on without it ({why})"), said
            assert "PS:" not in on_kubernetes.message and "MWMS:" not in on_kubernetes.message, said
    else:  # the evaluator: the training goes on, the loss said
        assert on_kubernetes.phase.value == local.phase.value == "Running"
        assert on_kubernetes.exit_code is None and local.exit_code is None
        # its role's line says how it ended, though it said nothing
        [lost] = [r for r in on_kubernetes.roles if r.role == role]
        assert lost.reason == f"Error: exited {exit_code}", lost
