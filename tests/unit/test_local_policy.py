"""LocalBackend's restart policy (restart_decision) follows the Jobs the launcher renders.

Each case is checked against the rendered Job too: where the local run does not count a failure,
the Job's podFailurePolicy ignores that exit code; where it gives up at once, FailJob.
"""
from __future__ import annotations

import signal

import pytest

from launcher import render
from launcher.backends.local import restart_decision
from launcher.loader import load_text
from worker.errors import EXIT_CONFIG, EXIT_PREEMPTED

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


def job_action(s, role: str, exit_code: int) -> str:
    """What the rendered Job's podFailurePolicy does with a pod of `role` exiting `exit_code`:
    the first matching rule's action, or 'Count' (counted against backoffLimit)."""
    [job] = [o for o in render.render(s) if o["kind"] == "Job"
             and o["metadata"]["labels"]["app.kubernetes.io/component"] == role]
    for rule in (job["spec"].get("podFailurePolicy") or {}).get("rules", []):
        codes = rule.get("onExitCodes")
        if codes and codes["operator"] == "In" and exit_code in codes["values"]:
            return rule["action"]
    return "Count"


@pytest.mark.parametrize("role", ["chief", "worker", "ps"])
@pytest.mark.parametrize("code", [EXIT_PREEMPTED, -signal.SIGTERM])
def test_never_preemption_is_replaced_without_counting(role, code):
    s = spec("backoffLimit: 0\n")
    d = restart_decision(s, role, code, restarts_used=0)
    assert d.restart and not d.counted
    assert "preempted" in d.reason and "not counted against backoffLimit" in d.message
    assert job_action(s, role, EXIT_PREEMPTED) == "Ignore"


def test_never_failure_replaces_the_task_counted_until_backoff_limit():
    s = spec("backoffLimit: 2\n")
    first = restart_decision(s, "chief", 3, restarts_used=0)
    assert first.restart and first.counted
    assert "replacing it (restartPolicy Never: a new pod, failure 1 of backoffLimit 2" in first.message
    last = restart_decision(s, "chief", -signal.SIGKILL, restarts_used=2)
    assert not last.restart and last.counted
    assert last.reason == "was killed by SIGKILL"
    assert "backoffLimit 2 reached for role chief" in last.message
    assert job_action(s, "chief", 3) == job_action(s, "chief", 137) == "Count"


def test_built_in_config_error_fails_at_once():
    s = spec("backoffLimit: 6\n")
    d = restart_decision(s, "chief", EXIT_CONFIG, restarts_used=0)
    assert not d.restart and d.counted
    assert "configuration error" in d.message and "FailJob" in d.message
    assert job_action(s, "chief", EXIT_CONFIG) == "FailJob"


def test_bring_your_own_exit_2_is_an_ordinary_failure():
    s = spec("backoffLimit: 6\n", byo=True)
    d = restart_decision(s, "chief", EXIT_CONFIG, restarts_used=0)
    assert d.restart and d.counted
    assert job_action(s, "chief", EXIT_CONFIG) == "Count"
    # A preempted bring-your-own task (killed by SIGTERM: 143) is not counted either.
    assert not restart_decision(s, "worker", -signal.SIGTERM, restarts_used=0).counted
    assert job_action(s, "worker", EXIT_PREEMPTED) == "Ignore"


def test_on_failure_restarts_in_place_and_counts_preemptions():
    s = spec("restartPolicy: OnFailure\nbackoffLimit: 1\n")
    d = restart_decision(s, "chief", EXIT_PREEMPTED, restarts_used=0)
    assert d.restart and d.counted and "in place" in d.message and "preempted" in d.reason
    assert not restart_decision(s, "chief", EXIT_PREEMPTED, restarts_used=1).restart
    # A config error restarts in place too: no podFailurePolicy with OnFailure.
    assert restart_decision(s, "chief", EXIT_CONFIG, restarts_used=0).restart
    assert job_action(s, "chief", EXIT_PREEMPTED) == job_action(s, "chief", EXIT_CONFIG) == "Count"


def test_no_restart_once_training_is_over():
    d = restart_decision(spec(), "worker", EXIT_PREEMPTED, restarts_used=0, training_over=True)
    assert not d.restart and "training is over" in d.message
