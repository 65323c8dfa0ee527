"""Lost nodes under a cluster's pods, on Node and Pod objects shaped as the API server returns
them (a kind worker whose container was killed: Ready Unknown, unreachable taints)."""

from datetime import datetime, timezone

from launcher.status import node_loss
from launcher.status.lifecycle import compute_status
from launcher.status.node_loss import EXIT_NODE_LOST, apply, lost_nodes
from launcher.status.node_loss import node_loss as loss_of

DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def node(
    name="tfk8s-worker",
    ready="True",
    provider="kind://docker/tfk8s/tfk8s-worker",
    taints=(),
    since="2026-11-24T16:40:51Z",
):
    conditions = [
        {
            "type": "MemoryPressure",
            "status": "Unknown" if ready != "True" else "False",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastHeartbeatTime": "2026-11-24T16:40:00Z",
            "lastTransitionTime": since,
        },
        {
            "type": "Ready",
            "status": ready,
            "reason": "NodeStatusUnknown" if ready == "Unknown" else "KubeletReady",
            "message": (
                "Kubelet stopped posting node status." if ready == "Unknown" else "kubelet is posting ready status"
            ),
            "lastHeartbeatTime": "2026-11-24T16:40:00Z",
            "lastTransitionTime": since,
        },
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"podCIDR": "10.244.1.0/24", "providerID": provider, "taints": list(taints)},
        "status": {"conditions": conditions},
    }


def unreachable(added="2026-11-24T16:40:56Z"):
    return [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": "2026-11-24T16:40:51Z"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": added},
    ]


def pod(
    role="chief", index=0, node_name="tfk8s-worker", phase="Running", deleted=False, tolerations=DEFAULT_TOLERATIONS
):
    meta = {
        "name": f"c-{role}-{index}-abcde",
        "namespace": "team",
        "creationTimestamp": "2026-11-24T16:38:00Z",
        "labels": {
            "app.kubernetes.io/component": role,
            "tfk8s.io/strategy": "parameter_server",
            "app.kubernetes.io/instance": "c",
        },
        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
    }
    if deleted:
        meta.update(deletionTimestamp="2026-11-24T16:46:26Z", deletionGracePeriodSeconds=120)
    return {
        "metadata": meta,
        "spec": {"nodeName": node_name, "tolerations": tolerations, "containers": [{"name": "tensorflow"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "tensorflow",
                    "restartCount": 0,
                    "ready": True,
                    "state": {"running": {"startedAt": "2026-11-24T16:38:05Z"}},
                }
            ],
        },
    }


def job(role, **status):
    return {
        "metadata": {
            "name": f"c-{role}",
            "labels": {"app.kubernetes.io/component": role, "tfk8s.io/strategy": "parameter_server"},
        },
        "spec": {"completions": 1},
        "status": {"conditions": [], **status},
    }


def test_ready_node_is_not_lost_and_unknown_ready_is():
    assert loss_of(node()) is None
    why, since = loss_of(node(ready="Unknown", taints=unreachable()))
    assert why == "Ready Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"
    assert since == datetime(2026, 11, 24, 16, 40, 51, tzinfo=timezone.utc)
    # the taint alone (Ready not yet updated in what we read) is enough
    assert loss_of(node(taints=unreachable()))[0] == "tainted node.kubernetes.io/unreachable"


def test_a_task_on_an_unreachable_bare_metal_node_is_node_lost_with_the_taint_remedy():
    pods = [pod("chief"), pod("ps", node_name="tfk8s-worker2")]
    nodes = {"tfk8s-worker": node(ready="Unknown", taints=unreachable()), "tfk8s-worker2": node("tfk8s-worker2")}
    [lost] = lost_nodes(pods, nodes)
    assert lost.node == "tfk8s-worker" and not lost.cloud
    assert [t.task for t in lost.tasks] == ["chief-0"]
    # eviction counts from the NoExecute taint's timeAdded plus the pod's 300 s toleration
    assert lost.tasks[0].evicted_at == datetime(2026, 11, 24, 16, 45, 56, tzinfo=timezone.utc)
    s = apply(compute_status("c", "team", [job("chief", active=1), job("ps", active=1)], pods), pods, nodes)
    assert s.phase == "NodeLost" and not s.finished
    assert s.message == (
        "chief-0 (pod c-chief-0-abcde) on lost node tfk8s-worker: Ready Unknown "
        "(NodeStatusUnknown: Kubelet stopped posting node status.) since 16:40:51Z; "
        "Kubernetes evicts it at 16:45:56Z, then it stays Terminating while the Node exists and "
        "nothing replaces it; to let the Job replace it: make sure the machine is really off "
        "(a partitioned node may still run the task: two chiefs would write one model dir), then: "
        "kubectl taint nodes tfk8s-worker node.kubernetes.io/out-of-service=nodeshutdown:NoExecute "
        "(remove it when the machine is back), or: kubectl delete pod c-chief-0-abcde -n team "
        "--force --grace-period=0"
    )
    assert s.roles[0].reason == "on lost node tfk8s-worker" and s.roles[1].reason is None
    [as_json] = s.to_dict()["lostNodes"]
    assert as_json["node"] == "tfk8s-worker" and as_json["since"] == "2026-11-24T16:40:51Z"
    assert as_json["tasks"] == [
        {"task": "chief-0", "pod": "c-chief-0-abcde", "terminating": False, "evictedAt": "2026-11-24T16:45:56Z"}
    ]


def test_an_evicted_pod_stuck_terminating_says_so():
    pods = [pod("chief", deleted=True)]
    nodes = {"tfk8s-worker": node(ready="Unknown", taints=unreachable())}
    s = apply(compute_status("c", "team", [job("chief", active=1)], pods), pods, nodes)
    assert s.phase == "NodeLost"
    assert "evicted, but stays Terminating while the Node exists" in s.message


def test_a_cloud_node_names_node_deletion_and_the_toleration_from_the_pod():
    pods = [
        pod(
            "worker",
            1,
            node_name="gke-pool-1-abcd",
            tolerations=[
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 30,
                }
            ],
        )
    ]
    nodes = {
        "gke-pool-1-abcd": node(
            "gke-pool-1-abcd",
            ready="False",
            provider="gce://proj/us-central1-a/gke-pool-1-abcd",
            taints=[
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-11-24T16:41:00Z"}
            ],
        )
    }
    [lost] = lost_nodes(pods, nodes)
    assert lost.cloud
    # NotReady: the not-ready toleration counts; this pod has none, so the 300 s default
    assert lost.tasks[0].evicted_at == datetime(2026, 11, 24, 16, 46, 0, tzinfo=timezone.utc)
    assert "kubectl delete node gke-pool-1-abcd" in node_loss.describe(lost)


def test_finished_pods_deleted_nodes_and_out_of_service_taints():
    nodes = {"tfk8s-worker": node(ready="Unknown", taints=unreachable()), "gone": None}
    assert lost_nodes([pod("chief", phase="Succeeded")], nodes) == []
    [gone] = lost_nodes([pod("chief", node_name="gone")], nodes)
    assert gone.gone and "garbage collector" in node_loss.describe(gone)
    tainted = node(
        ready="Unknown",
        taints=unreachable()
        + [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}],
    )
    [lost] = lost_nodes([pod("chief", deleted=True)], {"tfk8s-worker": tainted})
    assert "force-deletes its pods" in node_loss.describe(lost)


def test_unreadable_node_state_is_said_not_hidden():
    pods = [pod("chief")]
    s = apply(compute_status("c", "team", [job("chief", active=1)], pods), pods, None, "forbidden to get nodes (RBAC)")
    assert s.phase == "Running" and s.message == "node state unknown: forbidden to get nodes (RBAC)"


def test_an_ended_cluster_stays_ended_and_the_exit_code_is_its_own():
    pods = [pod("chief", phase="Running")]
    done = job("chief", succeeded=1)
    done["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    s = apply(compute_status("c", "team", [done], pods), pods, {"tfk8s-worker": node(ready="Unknown")})
    assert s.phase == "Succeeded"
    assert EXIT_NODE_LOST not in (0, 1, 2, 3, 4, 5, 143)


def test_delete_stops_waiting_only_when_every_pod_left_is_on_a_lost_node():
    lost_node = node(ready="Unknown", taints=unreachable())
    nodes = {"tfk8s-worker": lost_node, "tfk8s-worker2": node("tfk8s-worker2")}
    chief, ps = pod("chief", deleted=True), pod("ps", node_name="tfk8s-worker2", deleted=True)
    assert node_loss.delete_blocked("team/c", "team", [chief, ps], nodes) is None
    message = node_loss.delete_blocked("team/c", "team", [chief], nodes)
    assert message == (
        "cluster team/c: everything is deleted but 1 pod(s) on lost nodes, which stay Terminating "
        "while their Node objects exist: c-chief-0-abcde on node tfk8s-worker (Ready Unknown "
        "(NodeStatusUnknown: Kubelet stopped posting node status.)). Once the machine is really "
        "off (a partitioned node may still run the task), finish with: kubectl delete pod "
        "c-chief-0-abcde -n team --force --grace-period=0 (or delete the Node, or taint it "
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute)"
    )
    # a deleted Node: the pod garbage collector finishes it; keep waiting
    assert node_loss.delete_blocked("team/c", "team", [chief], {"tfk8s-worker": None}) is None
