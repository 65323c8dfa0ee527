"""What a task's exit means, on both backends alike (issue 60: items 5, 7 and 10).

Kubernetes: the rendered Job's podFailurePolicy applied as the Job controller applies it
(pkg/controller/job/pod_failure_policy.go: the first rule that matches wins; onExitCodes looks
at the named container's terminated state, exit code 0 never matching; onPodConditions at the
pod's conditions; no rule matched: the failure is counted) to a failed pod as the kubelet writes
it, with the condition the scheduler or the eviction API adds when it disrupts one.
`--local`: launcher/backends/local/policy.restart_decision with the same task's rules.
"""

from __future__ import annotations

import signal

import job_controller
import pytest
from job_controller import failed_pod, job_controller_action

from launcher.backends.local import policy
from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import plan
from launcher.status import failure_reasons
from worker import contract

PS = "name: p\nstrategy: parameter_server\nroles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}}\n"
COMMAND = "image: me/train:1\ncommand: [python, train.py]\n"
DATA_SERVICE = "dataService: {workers: 2}\n"
# What the scheduler adds to a pod it preempts (and the eviction API to a drained one: reason
# EvictionByEvictionAPI) before it deletes it.
PREEMPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "default-scheduler: preempting to accommodate a higher priority pod",
    "lastTransitionTime": "2026-11-24T16:39:30Z",
}


def jobs_of(text: str) -> dict[str, dict]:
    """The rendered Jobs of a cluster.yaml text, by role."""
    return job_controller.jobs_of(load_text(text))


def local(text: str, role: str, code: int, restarts_used: int = 0) -> policy.RestartDecision:
    cluster = plan(load_text(text))
    failure = cluster.failure_of(role)
    return policy.restart_decision(failure, failure.budget(role, 0), code, restarts_used)


# --- item 5: a command's own SIGTERM -------------------------------------------------------


@pytest.mark.parametrize("role", ["chief", "worker", "ps"])
def test_a_commands_own_sigterm_is_counted_and_only_a_disruption_is_a_preemption(role):
    """A command of your own that dies of its own SIGTERM (`trap 'kill 0' EXIT` after a bug)
    was 'preempted': never counted, restarted without end. Only its pod's DisruptionTarget
    says it was; a local task has none."""
    job = jobs_of(PS + COMMAND)[role]
    assert job_controller_action(job, failed_pod(job, 143)) == "Count"
    assert job_controller_action(job, failed_pod(job, 143, conditions=(PREEMPTED,))) == "Ignore"
    for code in (143, -signal.SIGTERM):
        said = local(PS + COMMAND + "backoffLimit: 1\n", role, code)
        assert said.restart and said.counted, said
        assert "preempted" not in said.reason and policy.OWN_SIGTERM in said.reason
        assert not local(PS + COMMAND + "backoffLimit: 1\n", role, code, restarts_used=1).restart
    # the built-in worker's SIGTERM comes from outside: it saved first, not counted on either side
    builtin = jobs_of(PS)[role]
    assert job_controller_action(builtin, failed_pod(builtin, 143)) == "Ignore"
    assert not local(PS, role, 143).counted


def test_a_commands_sigterm_is_read_for_its_cause_locally():
    """Its output says why it killed itself (the traceback before the trap's kill)."""
    assert policy.explains_itself(-signal.SIGTERM, own_program=True)
    assert policy.explains_itself(143, own_program=True)
    assert not policy.explains_itself(143) and not policy.explains_itself(-signal.SIGTERM)
    assert not policy.explains_itself(-signal.SIGKILL, own_program=True)


# --- item 7: the data service is judged by the built-in worker's codes ---------------------


@pytest.mark.parametrize("role", ["dispatcher", "data-worker"])
def test_the_data_service_is_not_judged_by_the_users_fatal_exit_codes(role):
    """The data service's servers always run the built-in worker: the spec's fatalExitCodes
    (docs/keras.md's [1]) judged its unexpected exception fatal, and its own deterministic
    exit 2 was retried backoffLimit times; its SIGTERM is a preemption, like any built-in task's."""
    text = PS + COMMAND + DATA_SERVICE + "fatalExitCodes: [1]\n"
    jobs = jobs_of(text)
    job = jobs[role]
    assert job_controller_action(job, failed_pod(job, 1)) == "Count"
    assert job_controller_action(job, failed_pod(job, contract.EXIT_CONFIG)) == "FailJob"
    assert job_controller_action(job, failed_pod(job, 143)) == "Ignore"
    assert job["spec"]["podFailurePolicy"] == jobs_of(PS + DATA_SERVICE)[role]["spec"]["podFailurePolicy"]
    assert local(text, role, 1).restart
    assert not local(text, role, contract.EXIT_CONFIG).restart
    assert not local(text, role, 143).counted
    # the trainers keep the spec's rules
    chief = jobs["chief"]
    assert job_controller_action(chief, failed_pod(chief, 1)) == "FailJob"
    assert not local(text, "chief", 1).restart


def test_a_data_servers_exit_is_not_called_your_programs():
    job = jobs_of(PS + COMMAND + DATA_SERVICE)["data-worker"]
    pod = failed_pod(job, contract.EXIT_CONFIG, "tfk8s data-worker-0: error: --data-service needs a dispatcher")
    assert not failure_reasons.runs_own_program(pod)
    assert failure_reasons.runs_own_program(failed_pod(jobs_of(PS + COMMAND + DATA_SERVICE)["chief"], 2))


# --- item 10: a deterministic exception of a program of your own ---------------------------

# What worker/exception_check.py writes as the termination message (and prints last).
SHAPE_ERROR = (
    "ValueError: Shapes (None, 10) and (None, 1) are incompatible (a ValueError is deterministic: "
    "not retried; retriedExceptions: [ValueError] retries it)"
)


@pytest.mark.parametrize("role", ["chief", "worker", "ps"])
def test_a_deterministic_exception_fails_at_once_another_is_retried(role):
    """The exception check's exit 70 is FailJob for a command's Job and not restarted locally,
    whatever backoffLimit; Python's exit 1 (any other exception) is retried, counted, on both.
    Before: exit 1 for every exception, 7 attempts."""
    job = jobs_of(PS + COMMAND)[role]
    code = contract.EXIT_DETERMINISTIC_EXCEPTION
    assert job_controller_action(job, failed_pod(job, code, SHAPE_ERROR)) == "FailJob"
    assert job_controller_action(job, failed_pod(job, 1)) == "Count"
    fatal = local(PS + COMMAND, role, code)
    assert not fatal.restart and "an exception a retry would meet again" in fatal.message
    assert local(PS + COMMAND, role, 1).restart


def test_kubernetes_status_names_the_exception_and_its_rule_and_exits_70():
    from launcher.status.lifecycle import compute_status

    jobs = jobs_of("name: p\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n" + COMMAND)
    job = jobs["chief"]
    code = contract.EXIT_DETERMINISTIC_EXCEPTION
    pod = failed_pod(job, code, SHAPE_ERROR)
    pod["metadata"]["namespace"] = "team"
    job["status"] = {
        "failed": 1,
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "PodFailurePolicy",
                "message": f"Container tensorflow for pod team/{pod['metadata']['name']} failed with exit code "
                f"{code} matching FailJob rule at index 0",
            }
        ],
    }
    s = compute_status("p", "team", [job], [pod])
    assert s.phase == "Failed" and s.exit_code == code
    assert SHAPE_ERROR in s.message, s.message


def test_the_specs_exception_lists_reach_every_task_and_need_a_command_under_never():
    text = (
        PS + COMMAND + DATA_SERVICE + "fatalExceptions: [RuntimeError]\nretriedExceptions: [tf.errors.NotFoundError]\n"
    )
    cluster = plan(load_text(text))
    for role in cluster.roles:
        assert role.env[contract.FATAL_EXCEPTIONS] == "RuntimeError"
        assert role.env[contract.RETRIED_EXCEPTIONS] == "tf.errors.NotFoundError"
    for refused in (
        PS + "fatalExceptions: [RuntimeError]\n",  # the built-in worker
        PS + COMMAND + "restartPolicy: OnFailure\nfatalExceptions: [RuntimeError]\n",
        PS + COMMAND + "fatalExceptions: [KeyError]\nretriedExceptions: [KeyError]\n",
    ):
        with pytest.raises(Exception, match="Exceptions"):
            load_text(refused)
