"""Phase rules from Job and pod status (the documented lifecycle), on plain API-shaped dicts."""
from launcher.lifecycle import compute_status


def job(role, completions=1, condition=None, strategy="parameter_server", **status):
    conds = [{"type": condition, "status": "True", "reason": "BackoffLimitExceeded",
              "message": "Job has reached the specified backoff limit"}] if condition else []
    return {"metadata": {"name": f"c-{role}", "labels": {
        "app.kubernetes.io/component": role, "tfk8s.io/strategy": strategy}},
        "spec": {"completions": completions}, "status": {"conditions": conds, **status}}


def pod(role, index=0, phase="Running", exit_code=None, waiting=None, restarts=0):
    cs = {"restartCount": restarts, "state": {}}
    if exit_code is not None:
        cs["state"] = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting, "message": "pull access denied"}}
    return {"metadata": {"name": f"c-{role}-{index}-x", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"app.kubernetes.io/component": role},
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": phase, "containerStatuses": [cs]}}


def test_running():
    s = compute_status("c", "ns", [job("chief", active=1), job("worker", 2, active=2)],
                       [pod("chief"), pod("worker", 0), pod("worker", 1)])
    assert s.phase == "Running" and s.exit_code is None


def test_chief_done_but_servers_still_up_is_finishing():
    s = compute_status("c", "ns", [job("chief", condition="Complete", succeeded=1),
                                   job("ps", active=1)],
                       [pod("chief", phase="Succeeded", exit_code=0), pod("ps")])
    assert s.phase == "Finishing" and "ps" in s.message


def test_succeeded_when_every_job_ended():
    s = compute_status("c", "ns", [job("chief", condition="Complete"), job("ps", condition="Complete"),
                                   job("evaluator", condition="Complete")],
                       [pod("chief", phase="Succeeded", exit_code=0)])
    assert s.phase == "Succeeded" and s.exit_code == 0


def test_evaluator_failure_does_not_fail_training():
    s = compute_status("c", "ns", [job("chief", condition="Complete"), job("ps", condition="Complete"),
                                   job("evaluator", condition="Failed")], [])
    assert s.phase == "Succeeded" and "evaluator failed" in s.message


def test_chief_backoff_exhausted_fails_with_its_exit_code():
    s = compute_status("c", "ns", [job("chief", condition="Failed"), job("ps", active=1)],
                       [pod("chief", phase="Failed", exit_code=3, restarts=6), pod("ps")])
    assert s.phase == "Failed" and s.exit_code == 3 and "BackoffLimitExceeded" in s.message
    assert s.roles[0].failed == 6


def test_mwms_success_is_the_worker_job():
    s = compute_status("c", "ns", [job("worker", 2, condition="Complete", strategy="multi_worker_mirrored")],
                       [pod("worker", 0, phase="Succeeded", exit_code=0)])
    assert s.phase == "Succeeded"


def test_image_pull_error_is_stuck_not_pending():
    s = compute_status("c", "ns", [job("chief", active=1)],
                       [pod("chief", phase="Pending", waiting="ErrImagePull")])
    assert s.phase == "Stuck" and "cannot be pulled" in s.message


def test_unschedulable_is_stuck():
    p = pod("chief", phase="Pending")
    p["status"]["containerStatuses"] = []
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                  "message": "0/1 nodes are available: 1 Insufficient memory."}]
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
