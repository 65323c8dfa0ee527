"""workload: jobset on a real kind cluster with JobSet and Kueue (built offline by toolchain.sh):
training to success (the PS set in the preemption test, the MWMS set in the crash tests),
all-or-nothing admission through a queue, and priority preemption that loses no steps. Where
TensorFlow is not the subject (admission, the preemptor, the submit contract) the clusters'
tasks are stand-ins (test_e2e.STAND_IN) in the real JobSets, Jobs and pods."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
import yaml
from local_clusters import measure
from support import REPO
from test_e2e import (
    LABEL,
    checkpointed_step,
    cli,
    evaluated_steps,
    launcher_in_background,
    polled_events,
    progress,
    submit_in_background,
    wait_for,
    write_spec,
    write_stand_in_spec,
)

from launcher import k8s_contract

pytestmark = pytest.mark.kind
# Small requests so that one cluster fits a quota that the second cannot share, and both fit
# the 2-CPU kind node beside the control plane.
REQUESTS = {"requests": {"cpu": "100m", "memory": "200Mi"}}
PS_ROLES = {
    role: {"replicas": n, "resources": REQUESTS}
    for role, n in (("chief", 1), ("worker", 2), ("ps", 1), ("evaluator", 1))
}
PS_CPU_MILLI = 5 * 100
# A stand-in PS cluster (no evaluator) asks 400m: alone it fits the queue's quota, not beside
# another stand-in or a PS_ROLES cluster.
STAND_IN_ROLES = {role: {"replicas": n, "resources": REQUESTS} for role, n in (("chief", 1), ("worker", 2), ("ps", 1))}
SLOW_SAVE_PROGRAM = REPO / "tests" / "worker" / "probes" / "slow_save.py"


def jobset_of(cluster, namespace: str, name: str) -> dict:
    return cluster.get_json("jobsets.jobset.x-k8s.io", name, "-n", namespace)


def live_pods(cluster, namespace: str, name: str) -> list[dict]:
    pods = cluster.get_json("pods", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
    return [p for p in pods if p["status"]["phase"] in ("Pending", "Running")]


def status_json(cluster, namespace: str, name: str) -> dict:
    return json.loads(cli(cluster, "status", name, "-n", namespace, "-o", "json", check=True).stdout)


def chief_step(cluster, namespace: str, name: str) -> int:
    return max(
        (
            e["step"]
            for e in polled_events(cluster, name, namespace)
            if e["event"] in ("step", "checkpoint") and e.get("step") is not None
        ),
        default=0,
    )


def completed(cluster, namespace: str, name: str) -> bool:
    conditions = {
        c["type"]: c["status"] for c in (jobset_of(cluster, namespace, name).get("status") or {}).get("conditions", [])
    }
    return conditions.get("Completed") == "True"


def assert_ended_clean(cluster, namespace: str, name: str) -> None:
    assert completed(cluster, namespace, name), jobset_of(cluster, namespace, name).get("status")
    assert not live_pods(cluster, namespace, name), "a pod is left running"


def assert_succeeded_and_deleted(cluster, namespace: str, name: str, submit_output: str) -> None:
    """A JobSet cluster that trained to success: created as one JobSet, Completed with no pod
    left, Succeeded with exit 0, and `delete` leaves nothing of it."""
    assert "created cluster" in submit_output and "JobSet/" + name in submit_output, submit_output[-2000:]
    assert_ended_clean(cluster, namespace, name)
    data = status_json(cluster, namespace, name)
    assert data["phase"] == "Succeeded" and data["exitCode"] == 0, data
    cli(cluster, "delete", name, "-n", namespace, check=True)
    assert not cluster.kubectl(
        "-n", namespace, "get", "jobsets,jobs,configmaps", "-l", f"{LABEL}={name}", "-o", "name"
    ).stdout.strip()


@pytest.fixture
def queue(kind_cluster, kueue_installed, namespace):
    """A ResourceFlavor, a ClusterQueue whose CPU quota fits ONE small PS cluster (and lets a
    higher priority preempt a lower one), and the LocalQueue `tfk8s-queue` in the namespace."""
    suffix = uuid.uuid4().hex[:6]
    flavor, cq = f"tfk8s-flavor-{suffix}", f"tfk8s-cq-{suffix}"
    kind_cluster.apply(
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {
                    "namespaceSelector": {},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": f"{PS_CPU_MILLI + 50}m"},
                                        {"name": "memory", "nominalQuota": "8Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": "tfk8s-queue", "namespace": namespace},
                "spec": {"clusterQueue": cq},
            },
        ]
    )
    for low_high, value in (("low", 100), ("high", 1000)):
        kind_cluster.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"tfk8s-{low_high}"},
                "value": value,
            }
        )
    try:
        yield "tfk8s-queue"
    finally:
        kind_cluster.kubectl("-n", namespace, "delete", "jobsets", "--all", "--wait=true", check=False)
        kind_cluster.kubectl("delete", "clusterqueue", cq, "--wait=false", check=False)
        kind_cluster.kubectl("delete", "resourceflavor", flavor, "--wait=false", check=False)


def test_server_dry_run_of_the_queued_example(kind_cluster, namespace, queue):
    example = REPO / "examples" / "ps-queued.yaml"
    result = cli(kind_cluster, "submit", str(example), "-n", namespace, "--dry-run=server")
    assert result.returncode == 0, result.stderr
    assert "accepted by the API server" in result.stderr


def test_missing_local_queue_is_one_clear_line(kind_cluster, worker_image, kueue_installed, namespace, tmp_path):
    spec = write_spec(tmp_path, "noq", namespace, None, worker_image, workload="jobset", queue="no-such-queue")
    result = cli(kind_cluster, "submit", str(spec))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: queue: there is no LocalQueue 'no-such-queue' in namespace '{namespace}' "
        f"(kubectl get localqueues -n {namespace} lists them; an administrator creates one that "
        "points at a ClusterQueue)"
    )


def test_second_cluster_waits_with_zero_pods_until_quota_frees(kind_cluster, worker_image, namespace, tmp_path, queue):
    specs = {
        name: write_stand_in_spec(
            tmp_path, name, namespace, worker_image, chief_seconds, workload="jobset", queue=queue, roles=STAND_IN_ROLES
        )
        for name, chief_seconds in (("q-first", 40), ("q-second", 5))
    }
    first = submit_in_background(kind_cluster, specs["q-first"])
    wait_for(lambda: len(live_pods(kind_cluster, namespace, "q-first")) == 4, 300, "the first cluster's 4 pods")
    assert first.poll() is None, "the first cluster ended before the second was submitted"
    # --stuck-timeout: a queued cluster is not stuck, submit --wait keeps waiting
    second = launcher_in_background(kind_cluster, "submit", str(specs["q-second"]), "--wait", "--stuck-timeout", "10")
    try:
        most_pods, queued_status = 0, None
        # until the first one's JobSet completes: then Kueue releases its quota
        while not completed(kind_cluster, namespace, "q-first"):
            most_pods = max(most_pods, len(live_pods(kind_cluster, namespace, "q-second")))
            # once the second submit has created it, and Kueue has looked at it
            if queued_status is None or "quota" not in queued_status["message"]:
                shown = cli(kind_cluster, "status", "q-second", "-n", namespace, "-o", "json")
                if shown.returncode == 0 and json.loads(shown.stdout)["phase"] == "Queued":
                    queued_status = json.loads(shown.stdout)
            time.sleep(1)
        first_out, _ = first.communicate()
        second_out, _ = second.communicate(timeout=900)
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
    print(second_out[-3000:])
    assert first.returncode == 0, first_out[-2000:]
    assert most_pods == 0, f"the queued cluster started {most_pods} pods beside the admitted one"
    assert queued_status is not None, "status never said Queued"
    assert "waiting for quota in queue tfk8s-queue" in queued_status["message"], queued_status
    assert "[Queued]" in second_out
    assert second.returncode == 0, second_out[-2000:]
    assert_ended_clean(kind_cluster, namespace, "q-second")
    print(f"MEASURE kueue queued cluster: {most_pods} pods while waiting; status said: {queued_status['message']}")


# The preemption comes 150-350 steps after the trigger step, step 30 (the high cluster's submit,
# Kueue's decision, the SIGTERM): at step 251 for a trigger of 100 in a quiet run, at 371 for 30
# on a machine loaded beyond CI's. The end, 600, leaves the chief training.
PREEMPTED_STEPS = 600


@pytest.mark.tf_trainings(1)
def test_higher_priority_preempts_and_the_preempted_cluster_resumes_without_loss(
    kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path, queue
):
    """Kueue suspends the whole low-priority JobSet: every pod gets SIGTERM at once. Its chief
    runs tests/worker/probes/slow_save.py (shipped with `code:`), whose save at the SIGTERM takes
    12 s more: the ps must serve on while the chief saves the step it reached, and the resumed
    cluster starts there, with no failure counted. It is also the PS JobSet trained to success:
    Completed, the final checkpoint evaluated, deleted without a trace."""
    code = tmp_path / "slow-save-code"
    code.mkdir()
    shutil.copy(SLOW_SAVE_PROGRAM, code / "slow_save.py")
    low = write_spec(
        tmp_path,
        "p-low",
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        steps=PREEMPTED_STEPS,
        workload="jobset",
        queue=queue,
        roles=PS_ROLES,
        priorityClassName="tfk8s-low",
        code=code.name,
        # No periodic save before the SIGTERM: one under way when it came (a 0.5 s
        # window in each 200 steps) made the SIGTERM's save unnecessary, and the
        # slow save this test is about never ran (seen once in CI). The end, then.
        program={
            "module": "slow_save",
            "args": ["--steps", str(PREEMPTED_STEPS), "--checkpoint-every", str(PREEMPTED_STEPS)]
            + ["--global-batch-size", "32"],
        },
    )
    # the preemptor: stand-ins that hold the quota for 20 s
    high = write_stand_in_spec(
        tmp_path,
        "p-high",
        namespace,
        worker_image,
        20,
        workload="jobset",
        queue=queue,
        roles=STAND_IN_ROLES,
        priorityClassName="tfk8s-high",
    )
    low_run = submit_in_background(kind_cluster, low)
    follow = None
    try:
        # training, with unsaved steps for the suspension's SIGTERM to save
        wait_for(lambda: chief_step(kind_cluster, namespace, "p-low") > 30, 600, "the low-priority chief past step 30")
        chief = [
            p
            for p in live_pods(kind_cluster, namespace, "p-low")
            if p["metadata"]["labels"].get("app.kubernetes.io/component") == "chief"
        ][0]
        # the chief's own log to its end: its pod is deleted when the JobSet is suspended
        follow = subprocess.Popen(
            [
                "kubectl",
                "--kubeconfig",
                kind_cluster.kubeconfig,
                "--context",
                kind_cluster.context,
                "-n",
                namespace,
                "logs",
                "-f",
                chief["metadata"]["name"],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=kind_cluster.env,
        )
        preempted_at = time.monotonic()
        high_result = cli(kind_cluster, "submit", str(high), "--wait")
        low_status = None
        assert high_result.returncode == 0, high_result.stderr
        victim_log, _ = follow.communicate(timeout=300)
        low_out, _ = low_run.communicate(timeout=900)
        resumed_after = time.monotonic() - preempted_at
        low_status = status_json(kind_cluster, namespace, "p-low")
    finally:
        for process in (low_run, follow):
            if process is not None and process.poll() is None:
                process.kill()
    print(low_out[-3000:])
    assert "[Queued] " in low_out and "preempted" in low_out, low_out[-3000:]
    assert low_run.returncode == 0 and low_status["phase"] == "Succeeded", low_out[-2000:]
    saved = [e["step"] for e in progress(victim_log) if e["event"] == "preempted"]
    assert saved, victim_log[-3000:]
    assert "slow_save: checkpoint delayed" in victim_log, victim_log[-3000:]  # the shipped program ran
    events = progress(victim_log)
    before = [e["wall"] for e in events if e["event"] in ("step", "checkpoint") and e["step"] < saved[0]]
    stopped = next(e["wall"] for e in events if e["event"] == "preempted")
    # The save at the SIGTERM takes the program's 12 s more: the ps
    # served on for it, or the save would have failed and counted (checked below).
    failed = {
        job["metadata"]["name"]: (job.get("status") or {}).get("failed", 0)
        for job in kind_cluster.get_json("jobs", "-n", namespace, "-l", f"{LABEL}=p-low")["items"]
    }
    assert not any(failed.values()), failed
    assert (jobset_of(kind_cluster, namespace, "p-low").get("status") or {}).get("restarts", 0) == 0
    chief_log = cli(kind_cluster, "logs", "p-low", "-n", namespace, "--role", "chief", check=True).stdout
    starts = [e["step"] for e in progress(chief_log) if e["event"] == "start"]
    assert starts and starts[0] == saved[0], (starts, saved)
    # the evaluator is in the set's success policy: the final checkpoint was evaluated
    assert PREEMPTED_STEPS in evaluated_steps(kind_cluster, "p-low", namespace)
    assert_succeeded_and_deleted(kind_cluster, namespace, "p-low", low_out)
    print(
        f"MEASURE kueue preemption (the SIGTERM save 12 s slower): low-priority cluster preempted "
        f"at step {saved[0]} (the chief's last step before it reported at "
        f"{stopped - max(before, default=stopped):.1f}s before its preempted event), resumed "
        f"at step {starts[0]} (0 lost steps); high-priority cluster succeeded in "
        f"{high_result.seconds:.1f}s; low finished {resumed_after:.1f}s after the high was submitted"
    )


def test_jobset_submit_is_idempotent_refuses_changes_and_replaces(
    kind_cluster, worker_image, jobset_installed, namespace, tmp_path
):
    """The submit contract of `workload: jobs` holds for a JobSet too: the same spec twice
    changes nothing, a changed one is refused (exit 2) unless --replace, delete leaves nothing;
    a Job of the JobSet that the API server refuses is `status`'s cause within 30 s."""
    spec = write_stand_in_spec(tmp_path, "js-idem", namespace, worker_image, 3600, workload="jobset")
    cli(kind_cluster, "submit", str(spec), check=True)
    uid = jobset_of(kind_cluster, namespace, "js-idem")["metadata"]["uid"]
    again = cli(kind_cluster, "submit", str(spec))
    assert again.returncode == 0 and "is unchanged; nothing applied" in again.stderr
    changed = write_stand_in_spec(tmp_path, "js-idem", namespace, worker_image, 3600, workload="jobset", backoffLimit=2)
    refused = cli(kind_cluster, "submit", str(changed))
    assert refused.returncode == 2 and "--replace" in refused.stderr
    assert jobset_of(kind_cluster, namespace, "js-idem")["metadata"]["uid"] == uid
    cli(kind_cluster, "submit", str(changed), "--replace", check=True)
    replaced = jobset_of(kind_cluster, namespace, "js-idem")
    assert replaced["metadata"]["uid"] != uid
    assert replaced["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] == 2
    listed = cli(kind_cluster, "list", "-n", namespace, check=True).stdout
    assert listed.count("js-idem") == 1, listed
    cli(kind_cluster, "delete", "js-idem", "-n", namespace, check=True)
    assert not kind_cluster.kubectl(
        "-n", namespace, "get", "jobsets,jobs,pods,configmaps", "-l", f"{LABEL}=js-idem", "-o", "name"
    ).stdout.strip()

    # A Job of the JobSet that the API server refuses (an object-count quota; a policy webhook
    # alike): the JobSet controller only records a JobCreationFailed event, and `status` says it.
    kind_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "one-job", "namespace": namespace},
            "spec": {"hard": {"count/jobs.batch": "1"}},
        }
    )
    wait_for(  # until the quota controller has counted, every create is refused as "status unknown"
        lambda: kind_cluster.get_json("-n", namespace, "resourcequota", "one-job").get("status", {}).get("hard"),
        60,
        "the quota's status",
    )
    quota_spec = write_stand_in_spec(tmp_path, "js-quota", namespace, worker_image, 3600, workload="jobset")
    started = time.monotonic()
    cli(kind_cluster, "submit", str(quota_spec), check=True)

    def refusal_said() -> dict | None:
        result = cli(kind_cluster, "status", "js-quota", "-n", namespace, "-o", "json")
        status = json.loads(result.stdout) if result.returncode == 0 else {}
        return status if "refused the JobSet's Job of" in status.get("message", "") else None

    status = wait_for(refusal_said, 30, "status to say the JobSet's refused Job")
    said_after = time.monotonic() - started
    assert status["phase"] == "Stuck", status
    assert "\n" not in status["message"] and "exceeded quota: one-job" in status["message"], status
    measure(f"kind JobSet refusal: `status` said it {said_after:.1f} s after submit: {status['message'][:200]}")
    cli(kind_cluster, "delete", "js-quota", "-n", namespace, check=True)


# Long enough that training is still on after the first checkpoint (step 100), when worker 1
# is made to crash: 200 steps more, about 30 s: 3 MWMS workers trained 800 steps in under 170 s
# after their restart (their TensorFlow start-up included) beside the process tier on 2 CPUs.
# The built-in CNN, not the paced probe program: under the probe, worker 1's SIGINT left no
# counted failure on its index (seen once on kind; why is not known), so the crash this test
# is about may not happen there.
MWMS_STEPS, MWMS_CHECKPOINT_EVERY = 300, 100


@pytest.mark.tf_trainings(1)
@pytest.mark.parametrize(
    "backoff_limit, set_restarts, workers",
    [(0, 1, 2), (1, 0, 3)],
    ids=["worker-out-of-retries-restarts-the-set", "3-workers-crash-costs-one-retry"],
)
def test_mwms_jobset_worker_crash_resumes_and_the_final_checkpoint_is_evaluated(
    kind_cluster,
    worker_image,
    jobset_installed,
    namespace,
    checkpoint_pvc,
    tmp_path,
    backoff_limit,
    set_restarts,
    workers,
):
    """One MWMS worker crashes once (SIGINT: exit 130, counted). backoffLimit 0: its index is
    out of retries, the worker Job fails (maxFailedIndexes 0) and JobSet restarts the set
    (BlockingRecreate): the new evaluator must not take the old attempt's failed worker Job for
    the end of training. backoffLimit 6: per index, the crash costs worker 1 one retry and
    worker 0 none (it had saved: exit 6, ignored); no set restart. Both: Succeeded, with the
    final checkpoint evaluated. With 3 workers and backoffLimit 1: one crash used to count 3
    failures (one per worker whose collective failed) against one budget; per index it costs
    worker 1 its one retry and no other worker any. (3, not more: every worker restarts after
    the crash, and each TensorFlow start costs CPU the 2-core CI machine does not have.)"""
    name = f"mw-crash-{backoff_limit}"
    roles = {
        "worker": {"replicas": workers, "resources": REQUESTS},
        "evaluator": {"replicas": 1, "resources": REQUESTS},
    }
    spec = write_spec(
        tmp_path,
        name,
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        strategy="multi_worker_mirrored",
        workload="jobset",
        roles=roles,
        backoffLimit=backoff_limit,
        # a global batch that divides over 2 and 3 replicas alike
        program={
            "args": [
                "--steps",
                str(MWMS_STEPS),
                "--checkpoint-every",
                str(MWMS_CHECKPOINT_EVERY),
                "--global-batch-size",
                "48",
            ]
        },
    )
    started = time.monotonic()
    run = submit_in_background(kind_cluster, spec)
    try:
        wait_for(lambda: checkpointed_step(kind_cluster, name, namespace, "worker"), 600, "worker 0's first checkpoint")
        [worker1] = [
            p
            for p in live_pods(kind_cluster, namespace, name)
            if p["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"
            and p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") == "1"
        ]
        # PID 1 gets only signals it handles: Python handles SIGINT (KeyboardInterrupt, exit 130)
        crashed = time.monotonic()
        kind_cluster.kubectl(
            "-n",
            namespace,
            "exec",
            worker1["metadata"]["name"],
            "--",
            "python",
            "-c",
            "import os, signal; os.kill(1, signal.SIGINT)",
        )
        out, _ = run.communicate(timeout=900)
        finished = time.monotonic()
    finally:
        if run.poll() is None:
            run.kill()
    print(out[-3000:])
    assert run.returncode == 0, out[-3000:]
    restarts = (jobset_of(kind_cluster, namespace, name).get("status") or {}).get("restarts", 0)
    assert restarts == set_restarts, jobset_of(kind_cluster, namespace, name).get("status")
    evaluated = evaluated_steps(kind_cluster, name, namespace)
    assert MWMS_STEPS in evaluated, evaluated
    counts = {}
    if set_restarts == 0:  # the same Job all along: its pods carry the per-index counts
        pods = kind_cluster.get_json(
            "pods", "-n", namespace, "-l", f"{LABEL}={name},app.kubernetes.io/component=worker"
        )["items"]
        for pod in pods:
            annotations = pod["metadata"]["annotations"]
            index = int(annotations["batch.kubernetes.io/job-completion-index"])
            counts[index] = max(
                counts.get(index, (0, 0)),
                (
                    int(annotations.get("batch.kubernetes.io/job-index-failure-count", "0")),
                    int(annotations.get("batch.kubernetes.io/job-index-ignored-failure-count", "0")),
                ),
            )
        # (counted, ignored) per index: the crash cost worker 1 one retry; the others, whose
        # collectives failed after they had saved (exit 6), none
        assert {i: c[0] for i, c in counts.items()} == {i: int(i == 1) for i in range(workers)}, counts
        assert all(counts[i][1] <= 1 for i in range(workers) if i != 1), counts
    worker_log = cli(kind_cluster, "logs", name, "-n", namespace, "--role", "worker", "--index", "0", check=True).stdout
    starts = [e["step"] for e in progress(worker_log) if e["event"] == "start"]
    print(
        f"MEASURE mwms jobset crash ({workers} workers, backoffLimit {backoff_limit}): worker-1 SIGINT "
        f"{crashed - started:.1f}s after submit; set restarts {restarts}; last attempt of "
        f"worker-0 started at step {starts[-1] if starts else None}; Succeeded "
        f"{finished - crashed:.1f}s after the crash, final step {MWMS_STEPS} evaluated "
        f"(evaluated steps {evaluated}); per-index (counted, ignored) failures {counts}"
    )
    assert_succeeded_and_deleted(kind_cluster, namespace, name, out)  # the MWMS JobSet trained to success


# A sweep trial's pods: three of them ask 270m, so the queue's quota (PS_CPU_MILLI + 50 = 550m)
# holds two trials and not a third.
TRIAL_REQUESTS = {"requests": {"cpu": "90m", "memory": "200Mi"}}


def admitted_workloads(cluster, namespace: str) -> set[str]:
    """The JobSets whose Kueue Workload holds quota now: admitted, not finished."""
    held = set()
    for workload in cluster.get_json("workloads.kueue.x-k8s.io", "-n", namespace)["items"]:
        conditions = {c["type"]: c["status"] for c in (workload.get("status") or {}).get("conditions") or []}
        if conditions.get("Admitted") == "True" and conditions.get("Finished") != "True":
            held.update(ref["name"] for ref in workload["metadata"].get("ownerReferences") or [])
    return held


@pytest.mark.tf_trainings(4)
def test_a_sweep_of_ps_trials_is_admitted_two_at_a_time_by_a_quota_for_two(
    kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path, queue
):
    """A sweep (#59) of four PS trials, each one JobSet in the queue: all four submitted at once
    (parallelTrials 4), the quota holds two, so Kueue, not the sweep, keeps the other two waiting
    with no pod; a waiting trial says so and is no failure. Every trial trains in its own model
    dir, the best is marked, and `sweep delete` leaves no trial behind."""
    sweep = {
        "name": "sw",
        "cluster": {
            "name": "base",
            "namespace": namespace,
            "image": worker_image,
            "strategy": "parameter_server",
            "workload": "jobset",
            "queue": queue,
            "program": {"args": ["--steps", "30", "--checkpoint-every", "10", "--global-batch-size", "32"]},
            "roles": {role: {"replicas": 1, "resources": TRIAL_REQUESTS} for role in ("chief", "worker", "ps")},
            "checkpoint": {"volume": {"persistentVolumeClaim": {"claimName": checkpoint_pvc.claim_name}}},
            "peerTimeoutSeconds": 240,
        },
        "parameters": [{"name": "lr", "flag": "--learning-rate", "values": [0.003, 0.01, 0.03, 0.1]}],
        "objective": {"metric": "loss", "direction": "minimize"},
        "algorithm": "grid",
        "parallelTrials": 4,
        "maxFailedTrials": 0,
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    trials = [f"sw-t{n}" for n in range(4)]

    def launcher(*args: str, **popen) -> subprocess.Popen:
        """The launcher in tmp_path: the sweep's files (.tfk8s/.sweeps/sw) are kept there."""
        kube = ["--kubeconfig", kind_cluster.kubeconfig, "--context", kind_cluster.context]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        return subprocess.Popen(
            [sys.executable, "-m", "launcher", *args, *kube], cwd=tmp_path, env=env, text=True, **popen
        )

    def launcher_json(*args: str) -> dict:
        out, _ = launcher(*args, "-o", "json", stdout=subprocess.PIPE).communicate(timeout=120)
        return json.loads(out)

    started = time.monotonic()
    run = launcher("sweep", "sweep.yaml", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    most_admitted, ever_admitted, waited, waiting_pods = 0, set(), set(), {}
    waiting_status, sweep_seen_queued = None, False
    try:
        while run.poll() is None:
            # Pods first, admissions last: a trial not admitted after its pods were read had none.
            pods = {trial: len(live_pods(kind_cluster, namespace, trial)) for trial in trials}
            jobsets = kind_cluster.get_json("jobsets.jobset.x-k8s.io", "-n", namespace)["items"]
            admitted = admitted_workloads(kind_cluster, namespace)
            most_admitted = max(most_admitted, len(admitted))
            ever_admitted |= admitted
            waiting = ({j["metadata"]["name"] for j in jobsets} & set(trials)) - ever_admitted
            waited |= waiting
            for trial in waiting:  # never admitted yet: Kueue keeps every pod of it away
                waiting_pods[trial] = max(waiting_pods.get(trial, 0), pods[trial])
            if waiting and waiting_status is None:
                shown = json.loads(cli(kind_cluster, "status", min(waiting), "-n", namespace, "-o", "json").stdout)
                if shown["phase"] == "Queued" and "quota" in shown["message"]:
                    waiting_status = shown
            if waiting and not sweep_seen_queued:
                rows = launcher_json("sweep", "status", "sw")["trials"]
                sweep_seen_queued = any(r["phase"] == "Queued" for r in rows)
            time.sleep(1)
        output, _ = run.communicate()
    finally:
        if run.poll() is None:
            run.kill()
    seconds = time.monotonic() - started
    print(output[-3000:])
    assert run.returncode == 0, output[-3000:]
    assert most_admitted == 2, f"at most {most_admitted} trials held the quota at once (it holds two)"
    assert len(waited) >= 2 and not any(waiting_pods.values()), (waited, waiting_pods)
    assert waiting_status is not None and "waiting for quota in queue tfk8s-queue" in waiting_status["message"]
    assert sweep_seen_queued, "`sweep status` never showed a waiting trial as Queued"

    status = launcher_json("sweep", "status", "sw")
    rows = status["trials"]
    assert status["phase"] == "Succeeded" and [r["cluster"] for r in rows] == trials, status
    assert all(r["phase"] == "Succeeded" and r["value"] is not None for r in rows), rows
    assert sorted(r["parameters"]["lr"] for r in rows) == [0.003, 0.01, 0.03, 0.1], rows
    [best] = [r for r in rows if r["best"]]
    assert best["value"] == min(r["value"] for r in rows), rows
    dirs = kind_cluster.docker_exec("ls", f"{checkpoint_pvc.node_path}/{namespace}").stdout.split()
    assert set(trials) <= set(dirs), f"the trials' model dirs: {dirs}"  # one each, side by side

    deleted = launcher("sweep", "delete", "sw", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    delete_out, _ = deleted.communicate(timeout=300)
    assert deleted.returncode == 0, delete_out
    of_the_sweep = f"{k8s_contract.LABEL_SWEEP}=sw"
    left = kind_cluster.get_json("jobsets.jobset.x-k8s.io", "-n", namespace, "-l", of_the_sweep)["items"]
    assert not left, [j["metadata"]["name"] for j in left]
    measure(
        f"kind sweep of 4 PS trials through a quota for 2: at most {most_admitted} admitted at once, "
        f"{len(waited)} waited with {max(waiting_pods.values(), default=0)} pods; best {best['cluster']} "
        f"(lr {best['parameters']['lr']}) loss {best['value']:.4f}; {seconds:.0f} s"
    )
