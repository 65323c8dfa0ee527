"""Phase rules from Job and pod status (the documented lifecycle), on plain API-shaped dicts."""

from launcher.status.lifecycle import compute_status


def job(role, completions=1, condition=None, strategy="parameter_server", **status):
    conds = (
        [
            {
                "type": condition,
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ]
        if condition
        else []
    )
    return {
        "metadata": {
            "name": f"c-{role}",
            "labels": {"app.kubernetes.io/component": role, "tfk8s.io/strategy": strategy},
        },
        "spec": {"completions": completions},
        "status": {"conditions": conds, **status},
    }


def pod(role, index=0, phase="Running", exit_code=None, waiting=None, restarts=0):
    cs = {"restartCount": restarts, "state": {}}
    if exit_code is not None:
        cs["state"] = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting, "message": "pull access denied"}}
    return {
        "metadata": {
            "name": f"c-{role}-{index}-x",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app.kubernetes.io/component": role},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "status": {"phase": phase, "containerStatuses": [cs]},
    }


def test_running():
    s = compute_status(
        "c",
        "ns",
        [job("chief", active=1), job("worker", 2, active=2)],
        [pod("chief"), pod("worker", 0), pod("worker", 1)],
    )
    assert s.phase == "Running" and s.exit_code is None


def test_chief_done_but_servers_still_up_is_finishing():
    s = compute_status(
        "c",
        "ns",
        [job("chief", condition="Complete", succeeded=1), job("ps", active=1)],
        [pod("chief", phase="Succeeded", exit_code=0), pod("ps")],
    )
    assert s.phase == "Finishing" and "ps" in s.message


def test_succeeded_when_every_job_ended():
    s = compute_status(
        "c",
        "ns",
        [job("chief", condition="Complete"), job("ps", condition="Complete"), job("evaluator", condition="Complete")],
        [pod("chief", phase="Succeeded", exit_code=0)],
    )
    assert s.phase == "Succeeded" and s.exit_code == 0


def test_evaluator_failure_does_not_fail_training():
    s = compute_status(
        "c",
        "ns",
        [job("chief", condition="Complete"), job("ps", condition="Complete"), job("evaluator", condition="Failed")],
        [],
    )
    assert s.phase == "Succeeded" and "evaluator failed" in s.message


def test_chief_backoff_exhausted_fails_with_its_exit_code():
    s = compute_status(
        "c",
        "ns",
        [job("chief", condition="Failed"), job("ps", active=1)],
        [pod("chief", phase="Failed", exit_code=3, restarts=6), pod("ps")],
    )
    assert s.phase == "Failed" and s.exit_code == 3 and "BackoffLimitExceeded" in s.message
    assert s.roles[0].failed == 6


def test_mwms_success_is_the_worker_job():
    s = compute_status(
        "c",
        "ns",
        [job("worker", 2, condition="Complete", strategy="multi_worker_mirrored")],
        [pod("worker", 0, phase="Succeeded", exit_code=0)],
    )
    assert s.phase == "Succeeded"


def test_image_pull_error_is_stuck_not_pending():
    s = compute_status("c", "ns", [job("chief", active=1)], [pod("chief", phase="Pending", waiting="ErrImagePull")])
    assert s.phase == "Stuck" and "cannot be pulled" in s.message


def test_unschedulable_is_stuck():
    p = pod("chief", phase="Pending")
    p["status"]["containerStatuses"] = []
    p["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient memory.",
        }
    ]
    s = compute_status("c", "ns", [job("chief", active=1)], [p])
    assert s.phase == "Stuck" and "Insufficient memory" in s.message


def test_replaced_chief_pods_the_newest_decides_the_exit_code():
    # restartPolicy Never: each failure is a new pod; a preempted one (143) came first here,
    # then a config error failed the Job (podFailurePolicy FailJob).
    preempted = pod("chief", phase="Failed", exit_code=143)
    failed = pod("chief", phase="Failed", exit_code=2)
    failed["metadata"]["creationTimestamp"] = "2026-01-01T00:05:00Z"
    chief = job("chief", condition="Failed")
    chief["status"]["conditions"][0].update(reason="PodFailurePolicy", message="exit code 2 matching FailJob rule")
    for pods in ([preempted, failed], [failed, preempted]):
        s = compute_status("c", "ns", [chief], pods)
        assert s.phase == "Failed" and s.exit_code == 2 and "PodFailurePolicy" in s.message


def test_a_failed_chief_says_why_in_its_own_words():
    """The termination message's last line (the worker's one-line error, or a log tail under
    FallbackToLogsOnError) leads the Failed message and is the role's reason."""
    failed = pod("chief", phase="Failed", exit_code=2)
    failed["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = (
        "tensorflow is not installed in this Python environment: pip install x\n"
    )
    chief = job("chief", condition="Failed", strategy="mirrored")
    chief["status"]["conditions"][0].update(reason="PodFailurePolicy", message="exit code 2 matching FailJob rule")
    s = compute_status("c", "ns", [chief], [failed])
    assert s.message == (
        "chief failed: tensorflow is not installed in this Python environment: "
        "pip install x (PodFailurePolicy: exit code 2 matching FailJob rule)"
    )
    assert s.roles[0].reason == ("Error: tensorflow is not installed in this Python environment: pip install x")


def test_a_log_tail_message_gives_its_last_line_and_a_success_none():
    ok = pod("chief", phase="Succeeded", exit_code=0)
    ok["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "done\n"
    crashed = pod("chief", phase="Failed", exit_code=1)
    crashed["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = (
        'Traceback (most recent call last):\n  File x\nValueError: bad shard\ntfk8s-progress {"event": "exit"}\n'
    )
    s = compute_status("c", "ns", [job("chief", condition="Failed", strategy="mirrored")], [crashed])
    assert s.message.startswith("chief failed: ValueError: bad shard (BackoffLimitExceeded")
    s = compute_status("c", "ns", [job("chief", condition="Complete", strategy="mirrored")], [ok])
    assert s.phase == "Succeeded" and s.message == "" and s.roles[0].reason == "Completed"


def test_a_supervised_pods_reason_is_its_task_containers_not_the_job_watchs():
    """Kubernetes lists container statuses by name: job-watch (ended 0 after handing over the
    verdict) before tensorflow, whose exit and message are the pod's story."""
    blocked = pod("ps", phase="Failed", exit_code=7)
    [task] = blocked["status"]["containerStatuses"]
    task.update(name="tensorflow")
    task["state"]["terminated"]["message"] = (
        "tfk8s supervisor: no answer from the API server https://10.96.0.1:443 for 300s; "
        "the supervised pods need egress to the API server: 10.96.0.1:443\n"
    )
    watcher = {"name": "job-watch", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    blocked["status"]["containerStatuses"] = [watcher, task]
    ps = job("ps", condition="Failed")
    s = compute_status("c", "ns", [job("chief", active=1), ps], [pod("chief"), blocked])
    [ps_status] = [r for r in s.roles if r.role == "ps"]
    assert ps_status.reason.startswith("Error: tfk8s supervisor: no answer from the API server"), ps_status
    assert "egress to the API server: 10.96.0.1:443" in ps_status.reason


# --------------------------------------------------------------------- workload jobset
from launcher.status.lifecycle import compute_jobset_status  # noqa: E402


def jobset(*conditions, suspend=False, queue="q"):
    return {
        "metadata": {"name": "c", "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {}},
        "spec": {"suspend": suspend},
        "status": {"conditions": [{"type": t, "status": "True", "reason": r, "message": m} for t, r, m in conditions]},
    }


def workload(*conditions):
    return {
        "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}
    }


def test_suspended_jobset_is_queued_with_kueues_reason():
    w = workload(
        (
            "QuotaReserved",
            "False",
            "Pending",
            "couldn't assign flavors to pod set chief: insufficient unused quota for cpu in "
            "flavor default-flavor, 1 more needed",
        )
    )
    s = compute_jobset_status("c", "ns", jobset(suspend=True), [job("chief")], [], w)
    assert s.phase == "Queued"
    assert s.message == (
        "waiting for quota in queue q: couldn't assign flavors to pod set chief: "
        "insufficient unused quota for cpu in flavor default-flavor, 1 more needed"
    )
    assert not s.finished


def test_queued_before_kueue_made_a_workload_names_the_queue():
    s = compute_jobset_status("c", "ns", jobset(suspend=True), [], [], None)
    assert s.phase == "Queued" and "create its Workload in queue q" in s.message


def test_preempted_jobset_says_it_resumes():
    w = workload(
        ("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"),
        ("QuotaReserved", "False", "Pending", "insufficient unused quota"),
    )
    s = compute_jobset_status("c", "ns", jobset(suspend=True), [job("chief")], [], w)
    assert s.phase == "Queued"
    assert s.message.startswith("preempted (Preempted: Preempted to accommodate")
    assert "resumes from its last checkpoint" in s.message and "insufficient unused quota" in s.message


def test_jobset_conditions_decide_the_end():
    done = compute_jobset_status(
        "c",
        "ns",
        jobset(("Completed", "AllJobsCompleted", "")),
        [job("chief", condition="Complete")],
        [pod("chief", phase="Succeeded", exit_code=0)],
        None,
    )
    assert done.phase == "Succeeded" and done.exit_code == 0
    ending = compute_jobset_status(
        "c",
        "ns",
        jobset(("Completed", "AllJobsCompleted", "")),
        [job("chief", condition="Complete")],
        [pod("chief", phase="Succeeded", exit_code=0), pod("ps")],
        None,
    )
    assert ending.phase == "Finishing" and "waiting for 1 pods to end: c-ps-0-x" in ending.message
    failed = compute_jobset_status(
        "c",
        "ns",
        jobset(("Failed", "FailedJobs", "jobset failed due to one or more job failures")),
        [job("chief", condition="Failed")],
        [pod("chief", phase="Failed", exit_code=3)],
        None,
    )
    assert failed.phase == "Failed" and failed.exit_code == 3 and "FailedJobs" in failed.message


def test_running_jobset_follows_the_job_rules():
    s = compute_jobset_status(
        "c",
        "ns",
        jobset(),
        [job("chief", condition="Complete"), job("evaluator", active=1)],
        [pod("chief", phase="Succeeded", exit_code=0), pod("evaluator")],
        None,
    )
    assert s.phase == "Finishing" and "evaluator" in s.message
    s = compute_jobset_status("c", "ns", jobset(), [], [], None)
    assert s.phase == "Pending"


def test_a_failed_jobset_gives_the_chiefs_own_words_too():
    failed_pod = pod("chief", phase="Failed", exit_code=2)
    failed_pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "--data x.npz: no such file"
    chief = job("chief", condition="Failed", strategy="mirrored")
    chief["status"]["conditions"][0].update(reason="PodFailurePolicy", message="FailJob rule")
    s = compute_jobset_status(
        "c", "ns", jobset(("Failed", "FailedJobs", "job c-chief-0 failed")), [chief], [failed_pod], None
    )
    assert s.message == (
        "JobSet failed: FailedJobs: job c-chief-0 failed; chief failed: "
        "--data x.npz: no such file (PodFailurePolicy: FailJob rule)"
    )


def test_a_failed_child_job_is_not_the_end_until_the_jobset_says_so():
    """MWMS: a worker Job out of retries makes JobSet restart the set (maxRestarts); `submit
    --wait` must wait for that, not report Failed (seen on kind)."""
    restarting = jobset()
    restarting["status"]["restarts"] = 0
    s = compute_jobset_status(
        "c", "ns", restarting, [job("chief", condition="Failed")], [pod("chief", phase="Failed", exit_code=130)], None
    )
    assert s.phase == "Running" and not s.finished and s.exit_code is None
    assert "the JobSet restarts its Jobs or fails (restarts so far: 0)" in s.message
