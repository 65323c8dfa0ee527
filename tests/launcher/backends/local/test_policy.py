"""LocalBackend's policy (launcher/backends/local/policy.py), pure: no process is started.

restart_decision follows the Jobs the launcher renders: each case is checked against the
rendered Job too (where the local run does not count a failure, the Job's podFailurePolicy
ignores that exit code; where it gives up at once, FailJob). decide() is the end of a run from
task snapshots and the clock, like launcher.status.lifecycle.compute_status on Kubernetes.
"""

from __future__ import annotations

import signal

import pytest

from launcher.backends.local import policy
from launcher.backends.local.policy import (
    TaskSnapshot,
    TaskState,
    decide,
    evaluator_outcome,
    interrupted,
)
from launcher.cluster_spec.loader import load_text
from launcher.plan import plan
from launcher.render import render
from launcher.status import failure_reasons
from launcher.status.status import Phase
from worker.contract import Role
from worker.errors import EXIT_CONFIG, EXIT_NODE_FAULT, EXIT_PEER_LOST, EXIT_PREEMPTED

PS = """\
name: p
strategy: parameter_server
roles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}}
"""


def spec(extra: str = "", byo: bool = False):
    text = PS + extra
    if byo:
        text += "image: me/train:1\ncommand: [python, train.py]\n"
    return load_text(text)


def decision(s, role: str, code: int, **kwargs) -> policy.RestartDecision:
    return policy.restart_decision(plan.failure_policy(s), role, code, **kwargs)


def job_action(s, role: str, exit_code: int, disrupted: bool = False) -> str:
    """What the rendered Job's podFailurePolicy does with a pod of `role` exiting `exit_code`
    (`disrupted`: with a DisruptionTarget condition, as a drained or evicted pod has): the first
    matching rule's action, or 'Count' (counted against backoffLimit)."""
    [job] = [
        o
        for o in render.render(plan.plan(s))
        if o["kind"] == "Job" and o["metadata"]["labels"]["app.kubernetes.io/component"] == role
    ]
    for rule in (job["spec"].get("podFailurePolicy") or {}).get("rules", []):
        codes = rule.get("onExitCodes")
        if codes and codes["operator"] == "In" and exit_code in codes["values"]:
            return rule["action"]
        if disrupted and {"type": "DisruptionTarget", "status": "True"} in rule.get("onPodConditions", []):
            return rule["action"]
    return "Count"


@pytest.mark.parametrize("role", ["chief", "worker", "ps"])
@pytest.mark.parametrize("code", [EXIT_PREEMPTED, -signal.SIGTERM])
def test_never_preemption_is_replaced_without_counting(role, code):
    s = spec("backoffLimit: 0\n")
    d = decision(s, role, code, restarts_used=0)
    assert d.restart and not d.counted
    assert "preempted" in d.reason and "not counted against backoffLimit" in d.message
    assert job_action(s, role, EXIT_PREEMPTED) == "Ignore"


def test_never_failure_replaces_the_task_counted_until_backoff_limit():
    s = spec("backoffLimit: 2\n")
    first = decision(s, "chief", 3, restarts_used=0)
    assert first.restart and first.counted
    assert "replacing it (restartPolicy Never: a new pod, failure 1 of backoffLimit 2" in first.message
    last = decision(s, "chief", -signal.SIGKILL, restarts_used=2)
    assert not last.restart and last.counted
    assert last.reason == "was killed by SIGKILL"
    assert "backoffLimit 2 reached for role chief" in last.message
    assert job_action(s, "chief", 3) == job_action(s, "chief", 137) == "Count"


def test_a_peer_lost_after_saving_is_replaced_without_counting_like_its_job():
    s = spec("backoffLimit: 0\n")
    d = decision(s, "chief", EXIT_PEER_LOST, restarts_used=0)
    assert d.restart and not d.counted
    assert "a peer lost after this task had saved is not counted against backoffLimit" in d.message
    assert job_action(s, "chief", EXIT_PEER_LOST) == "Ignore"
    # a user's command may exit 6 for its own reasons: counted, on both sides
    byo = spec("backoffLimit: 0\n", byo=True)
    assert decision(byo, "chief", EXIT_PEER_LOST, restarts_used=0).counted
    assert job_action(byo, "chief", EXIT_PEER_LOST) == "Count"


def test_mwms_workers_use_a_budget_per_index_locally_as_on_kubernetes():
    s = load_text(
        "name: m\nstrategy: multi_worker_mirrored\nroles: {worker: {replicas: 3}}\n"
        "checkpoint: {dir: gs://b/m}\nbackoffLimit: 1\n"
    )
    failure = plan.failure_policy(s)
    budget = failure.budget("worker", 2)
    d = policy.restart_decision(failure, budget, 1, restarts_used=0)
    assert d.restart and d.counted
    assert "failure 1 of backoffLimit 1 for worker-2 (backoffLimitPerIndex)" in d.message
    last = policy.restart_decision(failure, budget, 1, restarts_used=1)
    assert not last.restart and "backoffLimit 1 reached for worker-2 (backoffLimitPerIndex)" in last.message
    assert failure.budget("worker", 0) != budget


def test_a_node_fault_is_replaced_and_counted_like_its_job():
    """Not the program's fault (not FailJob), retried in a new pod; counted, so that an
    environment broken on every node still ends at backoffLimit."""
    s = spec("backoffLimit: 1\n")
    first = decision(s, "chief", EXIT_NODE_FAULT, restarts_used=0, last_words="node fault on node n1: port taken")
    assert first.restart and first.counted
    assert "failure 1 of backoffLimit 1" in first.message and "node fault on node n1" in first.reason
    assert not decision(s, "chief", EXIT_NODE_FAULT, restarts_used=1).restart
    assert job_action(s, "chief", EXIT_NODE_FAULT) == "Count"


def test_a_disrupted_pod_spends_no_retry_even_killed_by_sigkill():
    """A drain whose grace ran out ends in SIGKILL (137) with DisruptionTarget set: the node's
    doing, ignored before any Count rule; the same 137 without a disruption (OOM) counts."""
    s = spec("backoffLimit: 1\n")
    for role in ("chief", "worker", "ps"):
        assert job_action(s, role, 137, disrupted=True) == "Ignore"
        assert job_action(s, role, EXIT_NODE_FAULT, disrupted=True) == "Ignore"
        assert job_action(s, role, 137) == "Count"
    assert job_action(s, "chief", EXIT_CONFIG, disrupted=True) == "FailJob"


def test_built_in_config_error_fails_at_once():
    s = spec("backoffLimit: 6\n")
    d = decision(s, "chief", EXIT_CONFIG, restarts_used=0)
    assert not d.restart and d.counted
    assert "deterministic failure" in d.message and "FailJob" in d.message
    assert job_action(s, "chief", EXIT_CONFIG) == "FailJob"


def test_bring_your_own_exit_2_is_an_ordinary_failure():
    s = spec("backoffLimit: 6\n", byo=True)
    d = decision(s, "chief", EXIT_CONFIG, restarts_used=0)
    assert d.restart and d.counted
    # said to be the program's own code, not the built-in worker's configuration error
    assert d.reason == "exited 2 (your program's exit code)"
    assert decision(spec("backoffLimit: 6\n"), "chief", EXIT_CONFIG, restarts_used=0).reason.startswith(
        "exited 2 (deterministic"
    )
    assert job_action(s, "chief", EXIT_CONFIG) == "Count"
    # A bring-your-own task killed by SIGTERM (143) may have sent it itself: counted, unless its
    # pod carries DisruptionTarget (a real preemption), which a local task never does.
    assert decision(s, "worker", -signal.SIGTERM, restarts_used=0).counted
    assert job_action(s, "worker", EXIT_PREEMPTED) == "Count"
    assert job_action(s, "worker", EXIT_PREEMPTED, disrupted=True) == "Ignore"


def test_a_commands_fatal_exit_codes_fail_at_once_like_its_job():
    s = spec("backoffLimit: 6\nfatalExitCodes: [1, 42]\n", byo=True)
    for code in (1, 42):
        d = decision(s, "worker", code, restarts_used=0)
        assert not d.restart and d.counted
        assert d.reason == f"exited {code} (deterministic: not retried)"  # neither is a code of ours
        assert "listed in fatalExitCodes" in d.message and "FailJob" in d.message
        assert job_action(s, "worker", code) == "FailJob"
    # An exit not listed, a signal (128 + N) or an OOM kill is retried, counted.
    for code, status in ((3, 3), (-signal.SIGABRT, 128 + signal.SIGABRT), (-signal.SIGKILL, 137)):
        assert decision(s, "worker", code, restarts_used=0).restart
        assert job_action(s, "worker", status) == "Count"
    # SIGTERM is retried, counted: only a pod's DisruptionTarget makes it a preemption.
    assert decision(s, "worker", -signal.SIGTERM, restarts_used=0).counted
    assert job_action(s, "worker", EXIT_PREEMPTED) == "Count"


def test_on_failure_restarts_in_place_and_counts_preemptions():
    s = spec("restartPolicy: OnFailure\nbackoffLimit: 1\n")
    d = decision(s, "chief", EXIT_PREEMPTED, restarts_used=0)
    assert d.restart and d.counted and "in place" in d.message and "preempted" in d.reason
    assert not decision(s, "chief", EXIT_PREEMPTED, restarts_used=1).restart
    # A config error restarts in place too: no podFailurePolicy with OnFailure.
    assert decision(s, "chief", EXIT_CONFIG, restarts_used=0).restart
    assert job_action(s, "chief", EXIT_PREEMPTED) == job_action(s, "chief", EXIT_CONFIG) == "Count"


def test_a_tasks_last_words_end_its_reason_and_change_nothing_else():
    s = spec("backoffLimit: 6\n")
    plain = decision(s, "chief", EXIT_CONFIG, restarts_used=0)
    said = decision(s, "chief", EXIT_CONFIG, restarts_used=0, last_words="--steps: bad")
    assert said.reason == "exited 2 (deterministic: not retried): --steps: bad"
    assert said.message == plain.message + ". It said: --steps: bad"
    assert (said.restart, said.counted) == (plain.restart, plain.counted)


@pytest.mark.parametrize(
    "code, own", [(1, True), (2, True), (EXIT_PREEMPTED, False), (-signal.SIGKILL, False), (0, False)]
)
def test_only_an_exit_status_of_its_own_is_explained_by_the_task(code, own):
    assert policy.explains_itself(code) is own


def test_no_restart_once_training_is_over():
    d = decision(spec(), "worker", EXIT_PREEMPTED, restarts_used=0, training_over=True)
    assert not d.restart and "training is over" in d.message


# --- the end of a run (policy.decide): snapshots in, decision out, no processes ---------------

EVALUATOR = """\
checkpoint: {volume: {persistentVolumeClaim: {claimName: ckpt}}}
evaluatorGraceSeconds: 30
"""
MWMS = """\
name: m
strategy: multi_worker_mirrored
roles: {worker: {replicas: 2}}
checkpoint: {dir: "gs://bucket/m"}
"""
T0 = 1000.0  # the monotonic clock when the chief ended


def plan_of(text: str = PS, byo: bool = False) -> plan.ClusterPlan:
    if byo:
        text += "image: me/train:1\ncommand: [python, train.py]\n"
    return plan.plan(load_text(text))


def with_evaluator(text: str = PS) -> str:
    return text.replace("roles: {", "roles: {evaluator: {replicas: 1}, ", 1) + EVALUATOR


def task(
    name: str, state: str = "running", code: int | None = None, reason: str = "", ended_at: float | None = None
) -> TaskSnapshot:
    role, index = name.rsplit("-", 1)
    if state in ("succeeded", "failed") and ended_at is None:
        ended_at = T0
    if code is not None and not reason:
        reason = policy.describe_exit(code)
    return TaskSnapshot(Role(role), int(index), TaskState(state), code, reason, ended_at)


def ps_tasks(chief: str = "running", **states) -> list[TaskSnapshot]:
    """chief-0, worker-0, worker-1, ps-0 (and evaluator-0 if given), running unless given."""
    tasks = [task("chief-0", chief)] if isinstance(chief, str) else [chief]
    for name in ("worker-0", "worker-1", "ps-0", "evaluator-0"):
        given = states.get(name.replace("-", "_"))
        if given is None and name == "evaluator-0":
            continue
        tasks.append(given if isinstance(given, TaskSnapshot) else task(name, given or "running"))
    return tasks


def stopped(d) -> dict[str, tuple[str, str | None]]:
    return {f"{s.role}-{s.index}": (s.state.value, s.reason) for s in d.stop}


def test_running_while_the_chief_runs():
    d = decide(plan_of(), ps_tasks(), now=T0)
    assert d.phase is Phase.RUNNING and not d.finished and d.stop == () and d.exit_code is None


def test_chief_exit_0_stops_the_servers_which_count_as_succeeded():
    d = decide(plan_of(), ps_tasks(task("chief-0", "succeeded", 0)), now=T0)
    assert d.phase is Phase.SUCCEEDED and d.exit_code == 0 and d.message == ""
    never_exits = ("succeeded", "stopped after training (never exits)")
    assert stopped(d) == {"worker-0": never_exits, "worker-1": never_exits, "ps-0": never_exits}
    assert d.stop_reason == "training is over"
    assert d.notes == ("training ended: chief-0 exited 0",)


def test_a_server_waiting_to_restart_is_stopped_too():
    d = decide(plan_of(), ps_tasks(task("chief-0", "succeeded", 0), worker_1="waiting-restart"), now=T0)
    assert d.phase is Phase.SUCCEEDED and "worker-1" in stopped(d)


def test_ps_failed_for_good_gives_the_running_chief_the_failure_grace():
    dead_ps = task("ps-0", "failed", -signal.SIGKILL, ended_at=T0)
    d = decide(plan_of(), ps_tasks(ps_0=dead_ps), now=T0 + 5, failure_grace_seconds=20)
    assert d.phase is Phase.RUNNING and d.stop == ()
    assert d.notes == ("ps-0 cannot restart; giving chief-0 20 s to exit by itself",)

    d = decide(plan_of(), ps_tasks(ps_0=dead_ps), now=T0 + 20, failure_grace_seconds=20)
    assert d.phase is Phase.FAILED and d.exit_code == 137  # the failure's code (verdicts.failed_exit_code)
    assert d.message == "ps-0 was killed by SIGKILL; chief-0 was stopped"
    assert stopped(d) == {n: ("stopped", None) for n in ("chief-0", "worker-0", "worker-1")}
    assert d.stop_reason == "cluster ended"


def test_mwms_worker_1_out_of_retries_leads_with_its_cause_and_exit_code():
    """As on Kubernetes (tests/launcher/status/test_verdicts.py): the task that failed leads and
    its exit code is the run's. Before: exit 1 whatever worker-1's code."""
    crashed = task("worker-1", "failed", 3, "exited 3: a peer never answered", ended_at=T0)
    d = decide(plan_of(MWMS), [task("worker-0"), crashed], now=T0 + 60, failure_grace_seconds=20)
    assert d.phase is Phase.FAILED and d.exit_code == 3
    assert d.message == "worker-1 exited 3: a peer never answered; worker-0 was stopped"


def test_the_roles_a_run_needs_are_the_ones_kubernetes_fails_on():
    """One table (launcher/status/verdicts.py): a data worker out of retries fails the run, an
    evaluator's does not."""
    data = PS + "dataService: {workers: 1}\n"
    for name, phase in (("data-worker-0", Phase.FAILED), ("evaluator-0", Phase.RUNNING)):
        text = with_evaluator(data) if name.startswith("evaluator") else data
        dead = task(name, "failed", 1, ended_at=T0)
        tasks = [*ps_tasks(), dead, *([task("dispatcher-0")] if "data" in name else [])]
        d = decide(plan_of(text), tasks, now=T0 + 60, failure_grace_seconds=20)
        assert d.phase is phase, (name, d)


def test_chief_that_is_not_running_gets_no_failure_grace():
    dead_ps = task("ps-0", "failed", 3)
    d = decide(plan_of(), ps_tasks("waiting-restart", ps_0=dead_ps), now=T0 + 1)
    assert d.phase is Phase.FAILED and d.message == "ps-0 exited 3; chief-0 was stopped"


def test_chief_failure_fails_with_its_exit_code_and_the_first_dead_peer():
    first = task("ps-0", "failed", -signal.SIGKILL, ended_at=T0)
    later = task("worker-1", "failed", 3, ended_at=T0 + 1)
    chief = task("chief-0", "failed", 4, ended_at=T0 + 2)
    d = decide(plan_of(), ps_tasks(chief, ps_0=first, worker_1=later), now=T0 + 2)
    assert d.phase is Phase.FAILED and d.exit_code == 4
    assert d.message == "chief-0 exited 4 after ps-0 was killed by SIGKILL"
    assert set(stopped(d)) == {"worker-0"}


def test_workers_that_failed_alike_are_named_with_their_cause_once():
    """One shape error fails every MWMS replica: its long cause is said once, after the tasks
    that gave it, not once per task ('worker-0 exited 1: X after worker-1 exited 1: X')."""
    shape_error = 'exited 1: ValueError: Input 0 of layer "dense" is incompatible with the layer'
    three = MWMS.replace("replicas: 2", "replicas: 3")
    first = task("worker-1", "failed", 1, shape_error, ended_at=T0)
    other = task("worker-2", "failed", 1, "exited 1: UnavailableError: Collective ops is aborted", ended_at=T0 + 1)
    later = task("worker-2", "failed", 1, shape_error, ended_at=T0 + 1)
    chief = task("worker-0", "failed", 1, shape_error, ended_at=T0 + 2)
    d = decide(plan_of(three), [chief, first, later], now=T0 + 2)
    assert d.phase is Phase.FAILED and d.exit_code == 1
    assert d.message == f"worker-0, worker-1 and worker-2 {shape_error}"
    d = decide(plan_of(three), [chief, first, other], now=T0 + 2)
    assert d.message == f"worker-0 and worker-1 {shape_error}"
    different = task("worker-0", "failed", 4, ended_at=T0 + 2)
    d = decide(plan_of(three), [different, first, other], now=T0 + 2)
    assert d.message == f"worker-0 exited 4 after worker-1 {shape_error}"


def test_a_roles_tasks_are_named_once_per_cause():
    said = [("worker-0", "exited 1: R"), ("worker-1", "running (attempt 2)"), ("worker-2", "exited 1: R")]
    assert failure_reasons.said_once(said) == ["worker-0 and worker-2: exited 1: R", "worker-1: running (attempt 2)"]


@pytest.mark.parametrize("code, status", [(-signal.SIGKILL, 137), (-signal.SIGTERM, 143), (3, 3)])
def test_chief_killed_by_a_signal_exits_128_plus_n(code, status):
    d = decide(plan_of(), ps_tasks(task("chief-0", "failed", code)), now=T0)
    assert d.phase is Phase.FAILED and d.exit_code == status


def test_a_failed_chief_stops_the_evaluator_at_once():
    text = with_evaluator()
    d = decide(plan_of(text), ps_tasks(task("chief-0", "failed", 4), evaluator_0="running"), now=T0)
    assert d.phase is Phase.FAILED and stopped(d)["evaluator-0"] == ("stopped", None)


def test_mwms_worker_0_done_waits_for_its_peers_up_to_the_peer_grace():
    p = plan_of(MWMS)
    tasks = [task("worker-0", "succeeded", 0), task("worker-1")]
    d = decide(p, tasks, now=T0 + 59, peer_exit_grace_seconds=60)
    assert d.phase is Phase.FINISHING and not d.finished and d.stop == ()
    assert "worker-1" in d.message and d.notes == ("training ended: worker-0 exited 0",)
    d = decide(p, tasks, now=T0 + 60, peer_exit_grace_seconds=60)
    assert d.phase is Phase.SUCCEEDED and stopped(d) == {"worker-1": ("stopped", None)}
    done = [task("worker-0", "succeeded", 0), task("worker-1", "succeeded", 0)]
    assert decide(p, done, now=T0).phase is Phase.SUCCEEDED


def test_mwms_worker_1_success_alone_is_not_the_end():
    p = plan_of(MWMS)
    d = decide(p, [task("worker-0"), task("worker-1", "succeeded", 0)], now=T0 + 100)
    assert d.phase is Phase.RUNNING


@pytest.mark.parametrize("byo", [False, True], ids=["builtin", "byo"])
def test_evaluator_gets_its_grace_after_training(byo):
    p = plan_of(with_evaluator(), byo=byo)
    tasks = ps_tasks(task("chief-0", "succeeded", 0), evaluator_0="running")
    d = decide(p, tasks, now=T0 + 29)
    assert d.phase is Phase.FINISHING and "evaluatorGraceSeconds" in d.message and d.stop == ()
    d = decide(p, tasks, now=T0 + 30)
    assert d.phase is Phase.SUCCEEDED and d.exit_code == 0
    assert stopped(d)["evaluator-0"] == ("succeeded", "stopped after training (never exits)")
    if byo:
        assert d.message == "evaluator stopped 30 s (evaluatorGraceSeconds) after training ended"
    else:
        assert d.message == (
            "training succeeded; the evaluator had not evaluated the final "
            "checkpoint 30 s (evaluatorGraceSeconds) after training ended and "
            "was stopped"
        )


@pytest.mark.parametrize("byo, message", [(False, ""), (True, "evaluator exited by itself")])
def test_evaluator_that_exited_by_itself(byo, message):
    p = plan_of(with_evaluator(), byo=byo)
    evaluator = task("evaluator-0", "succeeded", 0)
    assert evaluator_outcome(p, evaluator, elapsed=0) == message
    d = decide(p, ps_tasks(task("chief-0", "succeeded", 0), evaluator_0=evaluator), now=T0)
    assert d.phase is Phase.SUCCEEDED and d.message == message


def test_evaluator_failure_is_a_note_not_a_failure():
    p = plan_of(with_evaluator())
    evaluator = task("evaluator-0", "failed", 7)
    d = decide(p, ps_tasks(task("chief-0", "succeeded", 0), evaluator_0=evaluator), now=T0)
    assert d.phase is Phase.SUCCEEDED and d.exit_code == 0
    assert d.message == "training succeeded; the evaluator failed (exited 7)"
    # ... and does not fail a running training either.
    assert decide(p, ps_tasks(evaluator_0=evaluator), now=T0 + 100).phase is Phase.RUNNING


def test_no_evaluator_no_note():
    assert evaluator_outcome(plan_of(), None, elapsed=0) == ""


def test_interrupted_fails_with_128_plus_the_signal_and_stops_everything():
    d = interrupted(ps_tasks(worker_1="waiting-restart"), signal.SIGTERM)
    assert d.phase is Phase.FAILED and d.exit_code == 143 and d.message == "interrupted by SIGTERM"
    assert set(stopped(d)) == {"chief-0", "worker-0", "worker-1", "ps-0"}
