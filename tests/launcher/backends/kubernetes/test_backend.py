"""KubernetesBackend's status, wait, list and delete from the objects a fake API holds: Jobs and
pods shaped as the API server returns them (the phase rules themselves:
tests/launcher/status/test_lifecycle.py; the real thing: tests/kind)."""

from __future__ import annotations

import json

import pytest

from launcher import k8s_contract
from launcher.backends.kubernetes.api import JOBSET
from launcher.errors import ClusterNotFound
from launcher.status.status import Phase
from worker.contract import PROGRESS_PREFIX

from .fake_api import FakeApi, instance_labels
from .test_submit import backend, spec_of

NAME = "mnist-ps"


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def submitted(api: FakeApi, **options):
    tfk8s, out = backend(api, **options)
    tfk8s.submit(spec_of())
    return tfk8s, out


def job(api: FakeApi, role: str) -> dict:
    return api.objects[("batch/v1", "Job", "default", f"{NAME}-{role}")]


def add_pod(api: FakeApi, role: str, index: int = 0, *, phase: str = "Running", state: dict | None = None) -> dict:
    """A task's pod owned by its role's Job (deleting the Job takes it along)."""
    owner = job(api, role)["metadata"]
    labels = {
        **instance_labels(NAME),
        k8s_contract.LABEL_COMPONENT: role,
        k8s_contract.LABEL_STRATEGY: "parameter_server",
    }
    return api.add(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{NAME}-{role}-{index}-x",
                "namespace": "default",
                "labels": labels,
                "annotations": {k8s_contract.INDEX_ANNOTATION: str(index)},
                "creationTimestamp": "2026-11-24T10:00:00Z",
                "ownerReferences": [{"kind": "Job", "name": owner["name"], "uid": owner["uid"]}],
            },
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {"name": k8s_contract.CONTAINER, "restartCount": 0, "state": state or {"running": {}}}
                ],
            },
        }
    )


def end_job(api: FakeApi, role: str, condition: str, reason: str = "") -> None:
    job(api, role)["status"] = {"conditions": [{"type": condition, "status": "True", "reason": reason, "message": ""}]}


def test_status_of_a_cluster_that_does_not_exist_is_cluster_not_found(api):
    tfk8s, _ = backend(api)
    with pytest.raises(ClusterNotFound, match="no cluster named 'nope' in namespace 'default'"):
        tfk8s.status("nope")


def test_running_pods_give_running_with_the_chiefs_progress(api):
    tfk8s, _ = submitted(api)
    for role in ("chief", "worker", "ps", "evaluator"):
        add_pod(api, role)
    api.logs[f"{NAME}-chief-0-x"] = [
        PROGRESS_PREFIX + json.dumps({"event": "step", "step": 40, "target": 400, "loss": 0.5, "steps_per_s": 10.0})
    ]
    status = tfk8s.status(NAME)
    assert status.phase is Phase.RUNNING
    assert (status.training.step, status.training.target, status.training.loss) == (40, 400, 0.5)
    assert [r.role for r in status.roles] == ["chief", "worker", "ps", "evaluator"]


def test_a_complete_chief_job_with_every_other_job_ended_is_succeeded(api):
    tfk8s, _ = submitted(api)
    for role in ("chief", "worker", "ps", "evaluator"):
        end_job(api, role, "Complete")
    assert tfk8s.status(NAME).phase is Phase.SUCCEEDED
    assert tfk8s.wait(NAME) == 0


def test_a_failed_chief_job_is_failed_with_the_chiefs_exit_code(api):
    tfk8s, _ = submitted(api)
    add_pod(api, "chief", phase="Failed", state={"terminated": {"exitCode": 3, "reason": "Error"}})
    end_job(api, "chief", "Failed", "BackoffLimitExceeded")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.FAILED and status.exit_code == 3, status
    assert "BackoffLimitExceeded" in status.message
    assert tfk8s.wait(NAME) == 3


def test_the_same_spec_after_a_failure_names_replace(api):
    """The same spec again changes nothing: a Failed cluster stays Failed, and submit says how to rerun it."""
    tfk8s, out = submitted(api)
    add_pod(api, "chief", phase="Failed", state={"terminated": {"exitCode": 3, "reason": "Error"}})
    end_job(api, "chief", "Failed", "BackoffLimitExceeded")
    tfk8s.submit(spec_of())
    assert out.getvalue().splitlines()[-2:] == [
        f"cluster default/{NAME} is unchanged; nothing applied",
        f"cluster default/{NAME} ended Failed: submit --replace deletes it and runs this spec again (the model dir "
        f"is kept: it resumes from its checkpoints); `python -m launcher status {NAME} -n default` says why it failed",
    ]


def test_a_quiet_training_whose_tasks_alive_only_serve_says_so(api):
    """ps and workers running since long ago, the chief not running, no progress line: status says
    that nothing has trained for a while and why."""
    tfk8s, _ = submitted(api)
    long_ago = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    for role, index in (("ps", 0), ("worker", 0), ("worker", 1)):
        add_pod(api, role, index, state=long_ago)
    add_pod(api, "chief", phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})
    status = tfk8s.status(NAME)
    assert status.phase is Phase.RUNNING, status
    quiet = status.message if status.message.startswith("no step") else next(iter(status.notes), "")
    assert quiet.startswith("no step and no checkpoint since "), status
    assert quiet.endswith(
        "(over 5 min): every task alive is a server (ps, worker) and the chief, which trains under "
        "parameter_server, is not running (see its reason)"
    )


def test_a_cluster_whose_jobs_are_gone_is_unknown(api):
    tfk8s, _ = submitted(api)
    for role in ("chief", "worker", "ps", "evaluator"):
        api.delete("batch/v1", "Job", "default", f"{NAME}-{role}")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.UNKNOWN and "no Jobs left" in status.message


def test_wait_gives_up_on_a_stuck_cluster_and_leaves_it_in_place(api):
    tfk8s, out = submitted(api, stuck_seconds=0, poll_seconds=0)
    add_pod(
        api,
        "chief",
        phase="Pending",
        state={"waiting": {"reason": "ImagePullBackOff", "message": "tfk8s/worker:dev not found"}},
    )
    before = len(api.mutations())
    assert tfk8s.wait(NAME) == 1
    assert api.mutations()[before:] == [], "wait deleted something"
    assert (
        f"error: cluster default/{NAME} made no progress for 0s: pod {NAME}-chief-0-x: "
        "the image cannot be pulled" in out.getvalue()
    )
    assert f"python -m launcher delete {NAME} -n default" in out.getvalue()


def test_list_shows_each_cluster_once_whatever_its_roots(api):
    api.unserved.clear()  # Kueue too: the queued example's LocalQueue
    api.add(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "tfk8s-queue", "namespace": "default"},
        }
    )
    tfk8s, _ = submitted(api)
    tfk8s.submit(spec_of("ps-queued.yaml"))  # a JobSet and a ConfigMap, both roots
    assert sorted(c.name for c in tfk8s.list()) == [NAME, "mnist-ps-queued"]


def test_delete_removes_every_object_and_says_so(api):
    tfk8s, out = submitted(api)
    add_pod(api, "chief")
    tfk8s.delete(NAME)
    assert [o["kind"] for o in api.objects.values()] == ["Namespace", "ConfigMap"]  # its kube-root-ca.crt
    deleted, kept = out.getvalue().splitlines()[-2:]
    # what it deleted, by kind and name, and what it kept: the claim with the model dir
    assert deleted.startswith(f"deleted cluster default/{NAME}: ")
    for role in ("chief", "worker", "ps", "evaluator"):
        assert f"Job/{NAME}-{role}" in deleted
    assert f"Service/{NAME}" in deleted and "NetworkPolicy/" in deleted
    assert kept.startswith("kept: PersistentVolumeClaim/tfk8s-checkpoints with the model dir")
    with pytest.raises(ClusterNotFound):
        tfk8s.delete(NAME)


def test_delete_removes_a_cluster_another_tool_created_by_its_labels(api):
    """A Helm install has no ownerReferences: every object with the instance label goes."""
    from launcher.plan.plan import plan
    from launcher.render import render

    for obj in render.render(plan(spec_of())):
        api.add(obj)
    backend(api)[0].delete(NAME)
    assert [o["kind"] for o in api.objects.values()] == ["Namespace", "ConfigMap"]  # its kube-root-ca.crt


QUOTA_REFUSAL = (
    'Error creating: pods "mnist-ps-chief-0-x7k2p" is forbidden: exceeded quota: team, '
    "requested: requests.cpu=4, used: requests.cpu=0, limited: requests.cpu=2"
)


def refusal_event(api: FakeApi, role: str, message: str, when: str, reason="FailedCreate"):
    owner = job(api, role)["metadata"]
    return api.add(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{owner['name']}.{when}", "namespace": "default"},
            "reason": reason,
            "type": "Warning",
            "message": message,
            "lastTimestamp": when,
            "involvedObject": {"kind": "Job", "name": owner["name"], "uid": owner["uid"]},
        }
    )


def test_a_pod_the_api_server_refused_is_the_clusters_cause_and_wait_gives_up_on_it(api):
    """ResourceQuota admission refused the chief's pod: no pod exists, the Job only has an
    event. Before, `status` said Pending and `--wait` waited forever."""
    tfk8s, out = submitted(api, stuck_seconds=0.05, poll_seconds=0.01)
    for role in ("worker", "ps"):
        add_pod(api, role)
    refusal_event(api, "chief", "Error creating: an older refusal", "2026-11-26T10:00:00Z")
    refusal_event(api, "chief", QUOTA_REFUSAL, "2026-11-26T10:00:05Z")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK, status
    assert status.message == (
        'the API server refused the chief\'s pod: pods "mnist-ps-chief-0-x7k2p" is forbidden: '
        "exceeded quota: team, requested: requests.cpu=4, used: requests.cpu=0, limited: "
        "requests.cpu=2"
    )
    [chief] = [r for r in status.roles if r.role == "chief"]
    assert chief.reason.startswith('pod refused: pods "mnist-ps-chief-0-x7k2p" is forbidden')
    assert tfk8s.wait(NAME) == 1
    assert "exceeded quota: team" in out.getvalue() and "It is left in place" in out.getvalue()
    assert api.stored("Job"), "the cluster was deleted"
    # once the quota lets the pod through, the old event says nothing any more
    add_pod(api, "chief")
    job(api, "chief")["status"] = {"active": 1}
    assert tfk8s.status(NAME).phase is not Phase.STUCK


def test_a_refusal_older_than_the_roles_newest_pod_does_not_make_the_cluster_stuck(api):
    """Events live an hour: a quota refusal the chief's pod got through later must not speak
    for a later gap (its pod failed, the retry waits out its backoff). A newer one does."""
    tfk8s, _ = submitted(api)
    for role in ("worker", "ps"):
        add_pod(api, role)
    refusal_event(api, "chief", QUOTA_REFUSAL, "2026-11-26T10:00:05Z")
    pod = add_pod(api, "chief", phase="Failed")
    pod["metadata"]["creationTimestamp"] = "2026-11-26T10:10:00Z"
    job(api, "chief")["status"] = {"failed": 1}
    status = tfk8s.status(NAME)
    assert status.phase is not Phase.STUCK, status
    refusal_event(api, "chief", QUOTA_REFUSAL, "2026-11-26T10:50:00.000001Z")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK and "exceeded quota: team" in status.message, status


JOB_QUOTA_REFUSAL = (
    'jobs.batch "mnist-ps-worker-0" is forbidden: exceeded quota: team-jobs, requested: '
    "count/jobs.batch=1, used: count/jobs.batch=3, limited: count/jobs.batch=3"
)


def jobset_refusal_event(api: FakeApi, jobset: dict) -> dict:
    """The JobSet controller's JobCreationFailed event: a count/jobs.batch quota refused a Job."""
    return api.add(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{NAME}.refused", "namespace": "default"},
            "reason": "JobCreationFailed",
            "type": "Warning",
            "message": JOB_QUOTA_REFUSAL,
            "lastTimestamp": "2026-11-26T10:00:01Z",
            "involvedObject": {"kind": "JobSet", "name": NAME, "uid": jobset["metadata"]["uid"]},
        }
    )


def test_a_jobset_whose_job_was_refused_says_so_while_its_other_roles_run(api):
    """A count/jobs.batch quota (or a policy webhook) refused one Job of the JobSet: the roles
    that have Jobs run, the refused role has none, and only the JobSet's event tells. Before,
    status read Running with nothing said, and the chief later failed "peers unreachable"."""
    api.unserved.clear()
    tfk8s, _ = backend(api)
    tfk8s.submit(spec_of(workload="jobset"))
    jobset = api.get(*JOBSET, "default", NAME)
    roles = [r["name"] for r in jobset["spec"]["replicatedJobs"]]
    assert "worker" in roles
    for role in (r for r in roles if r != "worker"):
        labels = {**instance_labels(NAME), k8s_contract.LABEL_COMPONENT: role}
        child = api.add(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{NAME}-{role}-0", "namespace": "default", "labels": labels},
                "spec": {"completions": 1},
                "status": {"active": 1},
            }
        )
        api.add(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{NAME}-{role}-0-0-x",
                    "namespace": "default",
                    "labels": labels,
                    "annotations": {k8s_contract.INDEX_ANNOTATION: "0"},
                    "creationTimestamp": "2026-11-26T10:00:00Z",
                    "ownerReferences": [
                        {"kind": "Job", "name": child["metadata"]["name"], "uid": child["metadata"]["uid"]}
                    ],
                },
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": k8s_contract.CONTAINER, "restartCount": 0, "state": {"running": {}}}
                    ],
                },
            }
        )
    assert tfk8s.status(NAME).phase is not Phase.STUCK  # no event: a Job a moment away says nothing
    jobset_refusal_event(api, jobset)
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK, status
    assert status.message == f"the API server refused the JobSet's Job of worker (it has none): {JOB_QUOTA_REFUSAL}"


def test_a_jobset_refusal_the_controller_got_past_leaves_a_normal_start_pending(api):
    """Events live an hour: a JobCreationFailed of this JobSet that its controller got past (a
    quota freed, every Job created since) made each normal Pending start Stuck, and `--wait`
    exit 1 after its stuck timeout."""
    api.unserved.clear()
    tfk8s, _ = backend(api)
    tfk8s.submit(spec_of(workload="jobset"))
    jobset = api.get(*JOBSET, "default", NAME)
    for replicated in jobset["spec"]["replicatedJobs"]:
        labels = {**instance_labels(NAME), k8s_contract.LABEL_COMPONENT: replicated["name"]}
        api.add(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{NAME}-{replicated['name']}-0", "namespace": "default", "labels": labels},
                "spec": {"completions": 1},
                "status": {},
            }
        )
    jobset_refusal_event(api, jobset)
    status = tfk8s.status(NAME)
    assert status.phase is Phase.PENDING, status
    assert JOB_QUOTA_REFUSAL not in status.message


def unschedulable(pod: dict, message: str, since: str = "2026-11-24T10:00:00Z") -> dict:
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": since,
            }
        ],
    }
    return pod


NO_CPU = (
    "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found."
)


def autoscaler_event(api: FakeApi, pod: dict, reason: str, message: str, when: str) -> dict:
    """An event as cluster-autoscaler records it on a pod it was asked to place."""
    return mount_event(api, pod, reason, message, when, component="cluster-autoscaler")


def test_a_node_the_cluster_autoscaler_adds_is_a_wait_and_one_it_refuses_is_stuck(api):
    """An Unschedulable pod was Stuck at once, and `--wait` gave up, while a cluster-autoscaler
    scale-up was bringing its node."""
    tfk8s, _ = submitted(api)
    for role in ("worker", "ps"):
        add_pod(api, role)
    chief = unschedulable(add_pod(api, "chief", phase="Pending"), NO_CPU)
    assert tfk8s.status(NAME).phase is Phase.STUCK  # nothing is coming for it
    scale_up = "pod triggered scale-up: [{pool-cpu 1->2 (max: 10)}]"
    autoscaler_event(api, chief, "TriggeredScaleUp", scale_up, "2026-11-24T10:00:10Z")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.RUNNING, status
    assert status.message == (
        f"pod {NAME}-chief-0-x waits for a node the cluster autoscaler is adding (TriggeredScaleUp: {scale_up})"
    )
    refused = "pod didn't trigger scale-up: 1 max node group size reached"
    autoscaler_event(api, chief, "NotTriggerScaleUp", refused, "2026-11-24T10:05:00Z")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK, status
    assert status.message == (
        f"pod {NAME}-chief-0-x cannot be scheduled: {NO_CPU}; the cluster autoscaler adds no node for it "
        f"(NotTriggerScaleUp: {refused})"
    )


def test_a_claim_that_never_binds_turns_stuck_after_its_patience(api):
    """A claim still binding is a wait; one that has not bound in CLAIM_BIND_PATIENCE_SECONDS
    was a note forever and `--wait` never gave up."""
    import datetime

    from launcher.status.verdicts import CLAIM_BIND_PATIENCE_SECONDS

    tfk8s, out = submitted(api, stuck_seconds=0, poll_seconds=0)
    for role in ("worker", "ps"):
        add_pod(api, role)
    unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: not eligible"
    now = datetime.datetime.now(datetime.timezone.utc)
    just = (now - datetime.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    chief = unschedulable(add_pod(api, "chief", phase="Pending"), unbound, since=just)
    status = tfk8s.status(NAME)
    assert status.phase is Phase.RUNNING and "waits for its PersistentVolumeClaims to bind" in status.message
    long_ago = (now - datetime.timedelta(seconds=CLAIM_BIND_PATIENCE_SECONDS + 5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    unschedulable(chief, unbound, since=long_ago)
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK, status
    assert status.message.startswith(f"pod {NAME}-chief-0-x: its PersistentVolumeClaims have not bound in 300s")
    assert tfk8s.wait(NAME) == 1 and "have not bound" in out.getvalue()


def test_refusals_of_an_earlier_cluster_of_the_same_name_do_not_speak(api):
    tfk8s, _ = submitted(api)
    event = refusal_event(api, "chief", QUOTA_REFUSAL, "2026-11-26T10:00:05Z")
    event["involvedObject"]["uid"] = "uid-of-a-deleted-job"
    assert tfk8s.status(NAME).phase is Phase.PENDING


def test_a_user_who_may_not_list_events_is_told_so(api):
    tfk8s, _ = submitted(api)
    api.events_forbidden = True
    status = tfk8s.status(NAME)
    assert any("may not list events in default" in note for note in status.notes), status.notes


LOST_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "tfk8s-worker"},
    "spec": {
        "providerID": "kind://docker/tfk8s/tfk8s-worker",
        "taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-11-26T10:00:00Z"}
        ],
    },
    "status": {
        "conditions": [
            {
                "type": "Ready",
                "status": "Unknown",
                "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
                "lastTransitionTime": "2026-11-26T10:00:00Z",
            }
        ]
    },
}


def on_lost_node(api: FakeApi, role: str) -> dict:
    api.add(LOST_NODE)
    pod = add_pod(api, role)
    pod["spec"] = {"nodeName": "tfk8s-worker", "containers": [{"name": k8s_contract.CONTAINER}]}
    return pod


def test_wait_gives_up_on_a_task_on_a_lost_node_with_exit_69(api):
    """Past --stuck-timeout a cluster whose task sits on a lost node ends `--wait` with
    EXIT_NODE_LOST (69, documented for scripts), not 1 and not forever."""
    from launcher.status.node_loss import EXIT_NODE_LOST

    tfk8s, out = submitted(api, stuck_seconds=0.05, poll_seconds=0.01)
    on_lost_node(api, "chief")
    assert tfk8s.status(NAME).phase is Phase.NODE_LOST
    assert tfk8s.wait(NAME) == EXIT_NODE_LOST == 69
    assert "has a task on a lost node" in out.getvalue()
    assert api.stored("Job"), "wait deleted the cluster"


class PodsStayTerminating(FakeApi):
    """Pods on a node that does not answer: deleted, they stay (Terminating) while the Node
    object exists."""

    def delete(self, api_version, kind, namespace, name):
        if kind == "Pod":
            self.calls.append(("delete", kind, name))
            return
        super().delete(api_version, kind, namespace, name)


def test_delete_stops_at_pods_on_lost_nodes_at_once_with_the_commands_to_finish():
    import time

    from launcher.backends.kubernetes.cleanup import PodsOnLostNodes

    api = PodsStayTerminating()
    tfk8s, _ = submitted(api, delete_timeout=20)  # without the check: a timeout after 20 s, not 600
    pod = on_lost_node(api, "chief")
    pod["metadata"]["ownerReferences"] = []  # the Job's deletion does not take it along
    started = time.monotonic()
    with pytest.raises(PodsOnLostNodes) as raised:
        tfk8s.delete(NAME)
    assert time.monotonic() - started < 10, "waited for the delete timeout"
    assert raised.value.exit_code == 69
    assert f"kubectl delete pod {NAME}-chief-0-x -n default --force --grace-period=0" in str(raised.value)


# --- one fault, one verdict (launcher/status/verdicts.py) --------------------------------------


def test_wait_ends_when_the_ps_workers_run_out_of_retries(api):
    """Before: `status` said Running with no message and `--wait` never returned (the chief
    waits for its workers without end), while `--local` failed the same run."""
    tfk8s, out = submitted(api, poll_seconds=0)
    for role in ("chief", "ps"):
        add_pod(api, role)
    oom = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    add_pod(api, "worker", 0, phase="Failed", state=oom)
    add_pod(api, "worker", 1, phase="Failed", state={"terminated": {"exitCode": 143, "reason": "Error"}})
    end_job(api, "worker", "Failed", "BackoffLimitExceeded")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.FAILED, status
    assert status.message.startswith("worker failed: worker-0: OOMKilled: exit code 137"), status.message
    assert tfk8s.wait(NAME) == 137


def mount_event(api: FakeApi, pod: dict, reason: str, message: str, when: str, component: str = "kubelet"):
    """An event as the kubelet (FailedMount) or the attach-detach controller (FailedAttachVolume)
    records it on the pod."""
    meta = pod["metadata"]
    return api.add(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{when}", "namespace": "default"},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": "default",
                **{k: meta[k] for k in ("name", "uid")},
            },
            "reason": reason,
            "message": message,
            "source": {"component": component, "host": "kind-worker"},
            "firstTimestamp": when,
            "lastTimestamp": when,
            "count": 3,
            "type": "Warning",
        }
    )


CREATING = {"waiting": {"reason": "ContainerCreating"}}
MULTI_ATTACH = 'Multi-Attach error for volume "pvc-3f2a9c1e" Volume is already used by pod(s) mnist-ps-chief-0-old'


def test_a_volume_that_cannot_mount_is_the_cause_and_wait_gives_up_on_it(api):
    """Before: Running (the other pods run) with no cause, later a peer timeout naming the peer."""
    tfk8s, out = submitted(api, stuck_seconds=0, poll_seconds=0)
    for role in ("worker", "ps"):
        add_pod(api, role)
    chief = add_pod(api, "chief", phase="Pending", state=CREATING)
    mount_event(api, chief, "FailedAttachVolume", MULTI_ATTACH, "2026-11-24T10:01:00Z", "attachdetach-controller")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK, status
    assert status.message == (f"pod {NAME}-chief-0-x: a volume cannot be attached (FailedAttachVolume: {MULTI_ATTACH})")
    [chief_role] = [r for r in status.roles if r.role == "chief"]
    assert chief_role.reason == status.message
    assert tfk8s.wait(NAME) == 1 and "a volume cannot be attached" in out.getvalue()


def test_a_missing_secret_is_named_and_an_old_mount_event_says_nothing_once_the_pod_runs(api):
    tfk8s, _ = submitted(api)
    secret = 'MountVolume.SetUp failed for volume "gcs-key" : secret "gcs-key" not found'
    chief = add_pod(api, "chief", phase="Pending", state=CREATING)
    mount_event(api, chief, "FailedMount", secret, "2026-11-24T10:01:00Z")
    status = tfk8s.status(NAME)
    assert status.phase is Phase.STUCK and status.message.endswith(f"(FailedMount: {secret})"), status
    # the Secret was created: the containers run, the event (it lives an hour) no longer holds
    chief["status"] = {"phase": "Running", "containerStatuses": [{"name": "tensorflow", "state": {"running": {}}}]}
    api.add(chief)
    assert tfk8s.status(NAME).phase is Phase.RUNNING


class PodsTakeTheirGrace(FakeApi):
    """Deleted pods stay (Terminating, their containers still serving) for a few looks, as for
    their termination grace; every NetworkPolicy deletion records the pods still there."""

    def __init__(self):
        super().__init__()
        self.terminating: dict[tuple, int] = {}  # pod key -> looks left
        self.pods_at_policy_delete: list[list[str]] = []

    def delete(self, api_version, kind, namespace, name):
        if kind == "Pod":
            self.calls.append(("delete", kind, name))
            self.terminating.setdefault((api_version, kind, namespace, name), 3)
            return
        if kind == "NetworkPolicy":
            self.pods_at_policy_delete.append([p["metadata"]["name"] for p in self.stored("Pod")])
        super().delete(api_version, kind, namespace, name)

    def select(self, api_version, kind, namespace, selector):
        if kind == "Pod":
            for key in list(self.terminating):
                self.terminating[key] -= 1
                if self.terminating[key] == 0:
                    del self.terminating[key]
                    self.objects.pop(key, None)
        return super().select(api_version, kind, namespace, selector)


@pytest.mark.parametrize("workload", ["jobs", "jobset"])  # a ConfigMap root; a JobSet root
def test_delete_removes_the_network_policies_only_after_the_pods_are_gone(workload):
    """Deleted pods answer gRPC through their grace: the policies that keep the rest of the
    cluster out must outlive them. Before: the root's deletion took the policies along (the
    garbage collector) or they were deleted right after the Jobs, pods still running."""
    api = PodsTakeTheirGrace()
    tfk8s, _ = backend(api)
    spec = spec_of(workload=workload)
    tfk8s.submit(spec)
    for obj in list(api.stored("Job")) + list(api.stored("JobSet")):
        add_pod_of(api, obj, spec.name)
    policies = sorted(p["metadata"]["name"] for p in api.stored("NetworkPolicy"))
    assert policies and api.stored("Pod")
    tfk8s.delete(spec.name)
    assert api.pods_at_policy_delete == [[] for _ in policies]
    deleted = [call[2] for call in api.mutations() if call[:2] == ("delete", "NetworkPolicy")]
    assert sorted(deleted) == policies
    assert [o["kind"] for o in api.objects.values()] == ["Namespace", "ConfigMap"]  # its kube-root-ca.crt


def add_pod_of(api: FakeApi, owner: dict, name: str) -> None:
    """A running pod owned by `owner` (a Job, or a JobSet's: deleting the owner deletes it)."""
    api.add(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{owner['metadata']['name']}-0-x",
                "namespace": "default",
                "labels": instance_labels(name),
                "ownerReferences": [
                    {"kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
                ],
            },
            "status": {"phase": "Running"},
        }
    )
