"""One fault, one verdict (launcher/status/verdicts.py) on Kubernetes: a role the training cannot
go on without, out of retries, fails the cluster with its own task's cause and exit code, as
`--local` does (tests/launcher/backends/local/test_policy.py); a bad image on the `code:` init
container is Stuck like one on the task's container. Jobs and pods are shaped as the Job
controller (1.31+: FailureTarget before Failed, `failedIndexes` under backoffLimitPerIndex) and
the kubelet write them."""

from __future__ import annotations

from launcher.status import verdicts
from launcher.status.lifecycle import compute_status
from worker.contract import Role

T0 = "2026-11-24T10:00:00Z"


def job(role, completions=1, strategy="parameter_server", failure=None, **status):
    """A Job; `failure`: (reason, message) of its FailureTarget and Failed conditions."""
    conditions = []
    if failure:
        reason, message = failure
        conditions = [
            {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": when}
            for kind, when in (("FailureTarget", "2026-11-24T10:05:00Z"), ("Failed", "2026-11-24T10:05:01Z"))
        ]
    return {
        "metadata": {
            "name": f"c-{role}",
            "labels": {"app.kubernetes.io/component": role, "tfk8s.io/strategy": strategy},
        },
        "spec": {"completions": completions},
        "status": {"conditions": conditions, **status},
    }


def pod(role, index=0, phase="Running", terminated=None, created=T0, strategy="parameter_server", memory=None):
    """A task's pod; `terminated`: its tensorflow container's terminated state."""
    state = {"terminated": {"startedAt": T0, "finishedAt": T0, **terminated}} if terminated else {"running": {}}
    container = {"name": "tensorflow", "env": [{"name": "TFK8S_PROGRAM", "value": "mnist"}]}
    if memory:
        container["resources"] = {"limits": {"memory": memory}}
    return {
        "metadata": {
            "name": f"c-{role}-{index}-{created[-6:-1].replace(':', '')}",
            "creationTimestamp": created,
            "labels": {"app.kubernetes.io/component": role, "tfk8s.io/strategy": strategy},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"containers": [container]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "tensorflow", "restartCount": 0, "ready": phase == "Running", "state": state}
            ],
        },
    }


OOM = {"exitCode": 137, "reason": "OOMKilled"}
# What the Job controller's deletion leaves of the pods still running when their Job fails.
ENDED_BY_THE_JOB = {"exitCode": 143, "reason": "Error", "message": "tfk8s worker-0: preempted at step 80\n"}
BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def test_ps_workers_out_of_retries_fail_the_cluster_with_their_cause():
    """Before: `[Running]`, no message, `--wait` waiting without end (the chief waits for its
    workers). PS workers OOM-killed under 150Mi with backoffLimit 1, as on kind."""
    pods = [
        pod("chief"),
        pod("ps"),
        pod("worker", 0, "Failed", OOM, memory="150Mi"),
        pod("worker", 1, "Failed", ENDED_BY_THE_JOB, memory="150Mi"),
    ]
    jobs = [job("chief", active=1), job("ps", active=1), job("worker", 2, failure=BACKOFF, failed=2)]
    s = compute_status("c", "ns", jobs, pods)
    assert s.phase == "Failed", s
    assert s.message.startswith(
        "worker failed: worker-0: OOMKilled: exit code 137, the task exceeded its memory limit 150Mi "
        "(BackoffLimitExceeded: Job has reached the specified backoff limit); the training cannot go on without it"
    ), s.message
    assert s.exit_code == 137
    [workers] = [r for r in s.roles if r.role == "worker"]
    assert workers.reason.startswith("OOMKilled"), workers


def test_every_role_the_training_needs_fails_it_and_the_evaluator_does_not():
    crashed = {"exitCode": 3, "reason": "Error", "message": "tfk8s x: error: a peer never answered\n"}
    for role in verdicts.needed_roles():
        if role is Role.CHIEF:
            continue
        jobs = [job("chief", active=1), job(role.value, failure=BACKOFF)]
        s = compute_status("c", "ns", jobs, [pod("chief"), pod(role.value, 0, "Failed", crashed)])
        assert s.phase == "Failed" and s.exit_code == 3, (role, s)
        assert s.message.startswith(f"{role.value} failed: a peer never answered"), s.message
    jobs = [job("chief", active=1), job("evaluator", failure=BACKOFF)]
    s = compute_status("c", "ns", jobs, [pod("chief"), pod("evaluator", 0, "Failed", crashed)])
    assert s.phase == "Running", s


def test_the_chief_leads_when_it_failed_too_and_the_lost_role_follows():
    jobs = [
        job("chief", failure=BACKOFF),
        job("ps", failure=BACKOFF),
    ]
    lost_ps = {"exitCode": 4, "reason": "Error", "message": "tfk8s chief-0: error: lost ps-0\n"}
    s = compute_status("c", "ns", jobs, [pod("chief", 0, "Failed", lost_ps), pod("ps", 0, "Failed", OOM)])
    assert s.phase == "Failed" and s.exit_code == 4
    assert s.message.startswith("chief failed: lost ps-0 (BackoffLimitExceeded")
    assert " after ps failed: OOMKilled: exit code 137" in s.message


MAX_FAILED = ("MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes")


def test_mwms_worker_1_out_of_retries_leads_with_its_cause_and_exit_code():
    """Before: `worker failed: killed by SIGTERM (signal 15) (MaxFailedIndexesExceeded: ...)`
    and exit 143, worker 0's, which the Job controller ended as the Job failed."""
    strategy = "multi_worker_mirrored"
    crashed = {
        "exitCode": 1,
        "reason": "Error",
        "message": 'Traceback (most recent call last):\n  File "train.py", line 9\nValueError: bad shard 3\n',
    }
    pods = [
        pod("worker", 1, "Failed", crashed, strategy=strategy),
        pod("worker", 1, "Failed", crashed, created="2026-11-24T10:02:00Z", strategy=strategy),
        pod("worker", 0, "Failed", ENDED_BY_THE_JOB, created="2026-11-24T10:03:00Z", strategy=strategy),
    ]
    jobs = [job("worker", 2, strategy, failure=MAX_FAILED, failedIndexes="1", failed=3)]
    s = compute_status("c", "ns", jobs, pods)
    assert s.phase == "Failed" and s.exit_code == 1, s
    assert s.message == (
        "worker failed: worker-1: ValueError: bad shard 3 (MaxFailedIndexesExceeded: "
        "Job has exceeded the specified maximal number of failed indexes)"
    )
    [workers] = [r for r in s.roles if r.role == "worker"]
    assert workers.reason == "Error: ValueError: bad shard 3"


def test_a_bad_image_on_the_code_init_container_is_stuck():
    """With `code:`, the init container pulls the image first: before, `[Pending]` forever."""
    waiting = pod("chief", phase="Pending")
    waiting["status"]["initContainerStatuses"] = [
        {
            "name": "code",
            "image": "tensorflow/tensorflow:2.99.0",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": 'Back-off pulling image "tensorflow/tensorflow:2.99.0"',
                }
            },
        }
    ]
    waiting["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    s = compute_status("c", "ns", [job("chief", active=1)], [waiting])
    assert s.phase == "Stuck", s
    assert s.message == (
        "pod c-chief-0-0000 (init container code): the image cannot be pulled "
        '(ImagePullBackOff: Back-off pulling image "tensorflow/tensorflow:2.99.0")'
    )


def test_docs_lifecycle_table_is_the_verdicts_table():
    """docs/verdicts.md says what launcher/status/verdicts.py decides, row for row."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "verdicts.md").read_text()
    start = doc.index("<!-- role losses:")
    rows = [line.strip() for line in doc[start:].splitlines()[3:] if line.strip().startswith("|")]
    rows = rows[: len(verdicts.ROLE_OUT_OF_RETRIES)]
    expected = [
        f"| {role.value} | {'Failed' if loss.fails_training else 'noted, training goes on'} | {loss.why} |"
        for role, loss in verdicts.ROLE_OUT_OF_RETRIES.items()
    ]
    assert rows == expected


def test_the_docs_exception_table_is_the_exception_checks():
    """docs/verdicts.md's exception kinds are worker/exit_cause.py's EXCEPTION_KINDS, in order."""
    from pathlib import Path

    from worker import exit_cause

    doc = (Path(__file__).resolve().parents[3] / "docs" / "verdicts.md").read_text()
    start = doc.index("<!-- exception kinds:")
    rows = []
    for line in doc[start:].splitlines()[3:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    expected = [f"| `{kind}` | {verdict} |" for kind, verdict in exit_cause.EXCEPTION_KINDS.items()]
    assert rows == [*expected, "| any other | retried |"]
