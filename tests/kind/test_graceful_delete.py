"""Graceful pod deletion (what a drain, a spot reclaim or `kubectl delete pod` does) mid-training
on a real cluster: the task saves the step it reached and exits 143, its pod is gone within
seconds, no replacement overlaps it, the Job's failed count does not move, and the replacement
resumes at exactly the saved step."""

from __future__ import annotations

import time

import pytest
from test_e2e import (
    assert_all_jobs_complete,
    checkpointed_step,
    cli,
    follow_log,
    kill_running,
    paced_program,
    pod_of,
    progress,
    submit_in_background,
    wait_for,
    write_spec,
)

pytestmark = pytest.mark.kind

LABEL = "app.kubernetes.io/instance"
CASES = {
    # case: (strategy, role deleted, index, (role, index) whose restart must resume at the step)
    # A PS chief deleted gracefully: the drain in test_network.py makes these same checks on it.
    "mwms-worker-1": ("multi_worker_mirrored", "worker", 1, [("worker", 0), ("worker", 1)]),
}


def role_pods(cluster, namespace, name, role, index) -> list[dict]:
    return cluster.get_json(
        "pods",
        "-n",
        namespace,
        "-l",
        f"{LABEL}={name},app.kubernetes.io/component={role},batch.kubernetes.io/job-completion-index={index}",
    )["items"]


def job_failed(cluster, namespace, name, role) -> int:
    jobs = cluster.get_json("jobs", "-n", namespace, "-l", f"{LABEL}={name},app.kubernetes.io/component={role}")[
        "items"
    ]
    return sum(job["status"].get("failed", 0) for job in jobs)


def watch_the_replacement(cluster, namespace, name, role, index, victim, since) -> tuple[list, float | None, float]:
    """Poll the task's pods from `since` (time.time()) until a new one runs: the pod lists seen
    with two live at once (a replacement beside its terminating pod), the seconds until the
    victim was gone and until the replacement ran."""
    overlaps, gone_after, replaced_after = [], None, None
    while replaced_after is None and time.time() - since < 300:
        pods = role_pods(cluster, namespace, name, role, index)
        live = [p for p in pods if p["status"]["phase"] in ("Pending", "Running")]
        if len(live) > 1:
            overlaps.append([p["metadata"]["name"] for p in live])
        names = {p["metadata"]["name"] for p in pods}
        if gone_after is None and victim["metadata"]["name"] not in names:
            gone_after = time.time() - since
        if gone_after is not None and any(
            p["metadata"]["uid"] != victim["metadata"]["uid"] and p["status"]["phase"] == "Running" for p in pods
        ):
            replaced_after = time.time() - since
        time.sleep(0.5)
    assert replaced_after is not None, f"no new {role}-{index} pod ran within 300 s"
    return overlaps, gone_after, replaced_after


def task_events(cluster, namespace, name, role, index) -> list[dict]:
    result = cli(cluster, "logs", name, "-n", namespace, "--role", role, "--index", str(index), timeout=60)
    return progress(result.stdout) if result.returncode == 0 else []


@pytest.mark.tf_trainings(1)
@pytest.mark.parametrize("case", list(CASES))
def test_graceful_delete_saves_the_current_step(kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path, case):
    strategy, role, index, resumers = CASES[case]
    name = f"preempt-{case}"
    # deleted after the first checkpoint (step 100), 300 paced steps (about 12 s) before the end
    spec = write_spec(
        tmp_path,
        name,
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        strategy=strategy,
        **paced_program(tmp_path, 400, 100, step_seconds=0.04),
    )
    proc = submit_in_background(kind_cluster, spec)
    try:
        if strategy == "parameter_server":
            wait_for(lambda: checkpointed_step(kind_cluster, name, namespace), 600, "the first checkpoint")
        else:
            wait_for(
                lambda: checkpointed_step(kind_cluster, name, namespace, "worker"), 600, "worker 0's first checkpoint"
            )
        victim = pod_of(kind_cluster, namespace, name, role, index)
        failed_before = job_failed(kind_cluster, namespace, name, role)
        follow = follow_log(kind_cluster, namespace, victim)
        deleted_at = time.time()
        kind_cluster.kubectl("-n", namespace, "delete", "pod", victim["metadata"]["name"], "--wait=false")
        overlaps, gone_after, replaced_after = watch_the_replacement(
            kind_cluster, namespace, name, role, index, victim, deleted_at
        )
        victim_log, _ = follow.communicate(timeout=60)
        output, _ = proc.communicate(timeout=900)
    finally:
        kill_running(proc, locals().get("follow"))
    print(output[-3000:])
    assert proc.returncode == 0, output[-2000:]
    assert_all_jobs_complete(kind_cluster, namespace, name)
    preempted = [e for e in progress(victim_log) if e["event"] == "preempted"]
    assert preempted, victim_log[-3000:]
    saved = preempted[0]["step"]
    assert gone_after is not None and gone_after < 30, f"pod gone after {gone_after}"
    assert not overlaps, f"a replacement ran beside its terminating pod: {overlaps}"
    assert job_failed(kind_cluster, namespace, name, role) == failed_before
    for resumer_role, resumer_index in resumers:
        events = task_events(kind_cluster, namespace, name, resumer_role, resumer_index)
        start = [e for e in events if e["event"] == "start"][0]
        assert start["step"] == saved, (resumer_role, resumer_index, start, saved)
        resumed = [e["wall"] for e in events if e["event"] == "first_step"][0]
    print(
        f"MEASURE kind preemption {case}: deleted {role}-{index} at step {saved} (saved "
        f"{saved}, 0 lost steps); pod gone {gone_after:.1f}s after the delete, replacement "
        f"Running at {replaced_after:.1f}s, training resumed at step {saved} "
        f"{resumed - deleted_at:.1f}s after the delete; Job failed count "
        f"{failed_before} -> {failed_before}; no overlapping pods"
    )
