"""The training cluster's gRPC port on a cluster shaped like production: two nodes, a pod
network that routes between them and enforces NetworkPolicy (kube-router, see
tests/kind/cni/kube-router.yaml).

* Isolation: pods that are not a cluster's own (a pod labelled as another tfk8s cluster's, a pod
  in another namespace carrying this cluster's labels) fail a real TCP connect to its ps,
  worker and chief ports; with `networkPolicy: false` the same connects succeed, so the check
  can fail. The cluster's tasks are stand-ins listening on their TF_CONFIG ports (the policy is
  about pods, labels and ports, not TensorFlow); the chief on one node and ps/workers on the
  other. A real PS training across the two nodes with its policies in force:
  test_e2e.py's first test.
* Drain: `kubectl drain` (evictions, grace periods respected, no --force) of the node running
  the chief mid-training: the chief saves the step it reached and its pod is gone within
  seconds, no replacement runs beside it, the Job's failed count does not move, the replacement
  runs on the other node and resumes at exactly the saved step, and `logs -f` follows the chief
  across its replacement. Lost steps and recovery seconds are measured.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from local_clusters import MEASUREMENTS
from port_probe import probe_results, start_probe
from test_e2e import (
    LABEL,
    assert_all_jobs_complete,
    assert_followed_across_the_replacement,
    checkpointed_step,
    chief_events,
    cli,
    follow_log,
    follow_with_launcher,
    kill_running,
    paced_program,
    pod_of,
    progress,
    submit_in_background,
    wait_for,
    write_spec,
    write_stand_in_spec,
)
from test_graceful_delete import job_failed, watch_the_replacement

pytestmark = pytest.mark.kind

GRPC_PORT = 2222  # the spec's default `port`
# the labels a tfk8s pod carries that say which cluster and role it is (no Job labels: a pod
# carrying a Job's controller-uid could be adopted by that Job)
CLUSTER_LABEL_PREFIXES = ("app.kubernetes.io/", "tfk8s.io/")


def cluster_labels(pod: dict, **override: str) -> dict[str, str]:
    labels = {k: v for k, v in pod["metadata"]["labels"].items() if k.startswith(CLUSTER_LABEL_PREFIXES)}
    labels.update(override)
    return labels


def training_targets(cluster, namespace: str, name: str) -> list[tuple[str, str, int]]:
    targets = []
    for role, count in (("chief", 1), ("worker", 2), ("ps", 1)):
        for index in range(count):
            pod = wait_for(
                lambda role=role, index=index: (
                    (p := pod_of(cluster, namespace, name, role, index)) and p["status"].get("podIP") and p
                ),
                300,
                f"{name} {role}-{index}'s IP",
            )
            targets.append((f"{role}-{index}", pod["status"]["podIP"], GRPC_PORT))
    return targets


def node_of(cluster, namespace: str, name: str, role: str, index: int = 0) -> str:
    return pod_of(cluster, namespace, name, role, index)["spec"]["nodeName"]


def probe_cluster(cluster, namespace, other_namespace, name, image) -> dict[str, dict[str, dict]]:
    """Connect to every training port of `name` from a pod of another tfk8s cluster (same
    namespace) and from a pod with `name`'s own labels in another namespace."""
    targets = training_targets(cluster, namespace, name)
    ps = pod_of(cluster, namespace, name, "ps", 0)
    probes = {
        "another tfk8s cluster's pod": (namespace, cluster_labels(ps, **{LABEL: f"{name}-other"})),
        "a pod in another namespace": (other_namespace, cluster_labels(ps)),
    }
    for i, (ns, labels) in enumerate(probes.values()):
        start_probe(cluster, ns, f"probe-{name}-{i}", image, labels, targets, attempts=4)
    return {who: probe_results(cluster, ns, f"probe-{name}-{i}") for i, (who, (ns, _)) in enumerate(probes.items())}


def test_grpc_ports_admit_only_the_clusters_own_pods_across_nodes(
    kind_cluster, worker_image, probe_image, namespace, other_namespace, tmp_path
):
    nodes = sorted(kind_cluster.node_names())
    assert len(nodes) >= 2, f"the kind tier needs two nodes, has {nodes}"
    # Placement: the chief on one node, ps and workers on the other.
    pin = {"chief": nodes[0], "ps": nodes[1], "worker": nodes[1]}
    results = {}
    for policy in (True, False):
        name = f"iso-{'on' if policy else 'off'}"
        roles = {
            role: {"replicas": n, "nodeSelector": {"kubernetes.io/hostname": pin[role]}}
            for role, n in (("chief", 1), ("worker", 2), ("ps", 1))
        }
        # the chief serves until the namespace's deletion at teardown ends the cluster
        spec = write_stand_in_spec(
            tmp_path, name, namespace, worker_image, chief_seconds=3600, roles=roles, networkPolicy=policy
        )
        cli(kind_cluster, "submit", str(spec), check=True, timeout=120)
        for role, count in (("chief", 1), ("worker", 2), ("ps", 1)):
            for index in range(count):
                wait_for(
                    lambda role=role, index=index, name=name: (
                        "up" in cluster_log(kind_cluster, namespace, name, role, index)
                    ),
                    180,
                    f"{name} {role}-{index} listening",
                )
        results[policy] = probe_cluster(kind_cluster, namespace, other_namespace, name, probe_image)
        if policy:
            policies = kind_cluster.get_json("networkpolicies", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
            assert policies, "networkPolicy: true rendered no NetworkPolicy"
        placed = {
            f"{role}-{i}": node_of(kind_cluster, namespace, name, role, i)
            for role, i in (("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1))
        }
        assert placed["chief-0"] != placed["ps-0"] == placed["worker-0"] == placed["worker-1"], placed
    for who, by_target in results[True].items():
        for target, r in by_target.items():
            assert not r["connected"], f"networkPolicy on: {who} reached {target}: {r}"
            assert len(r["errors"]) == 4, r
    for who, by_target in results[False].items():
        for target, r in by_target.items():
            assert r["connected"], f"networkPolicy off: {who} could not reach {target}: {r}"
    blocked = sum(len(r["errors"]) for t in results[True].values() for r in t.values())
    tried = len(results[True]) * 4 * len(next(iter(results[True].values())))
    allowed = sum(r["connected"] for t in results[False].values() for r in t.values())
    measured(
        f"isolation: networkPolicy on: {blocked}/{tried} connect attempts to the "
        f"chief/worker/ps gRPC ports blocked ({'; '.join(sorted(results[True]))}; e.g. "
        f"{next(iter(next(iter(results[True].values())).values()))['errors'][0]}); "
        f"networkPolicy off: {allowed}/{sum(len(t) for t in results[False].values())} "
        f"targets reached. Placement: chief on {pin['chief']}, ps and workers on {pin['ps']}"
    )


def cluster_log(cluster, namespace: str, name: str, role: str, index: int) -> str:
    pod = pod_of(cluster, namespace, name, role, index)
    if not pod or pod["status"].get("phase") != "Running":
        return ""
    return cluster.kubectl("-n", namespace, "logs", pod["metadata"]["name"], "-c", "tensorflow", check=False).stdout


def measured(line: str) -> None:
    """A figure for the run's "tfk8s measurements" summary (shown without -s too)."""
    print(f"\nMEASURE {line}")
    MEASUREMENTS.append(f"kind {line}")


def drain_command(cluster, node: str) -> list[str]:
    # Evictions, each pod's grace period, no --force: what an administrator runs. DaemonSet
    # pods (kube-proxy, kube-router) stay; static control-plane pods are mirror pods, skipped.
    return [
        "kubectl",
        "--kubeconfig",
        cluster.kubeconfig,
        "--context",
        cluster.context,
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=300s",
    ]


@pytest.mark.tf_trainings(1)
def test_drain_of_the_chiefs_node_mid_training_loses_no_steps(
    kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path
):
    name, steps = "drained", 800  # drained after the first checkpoint (200), 600 before the end
    spec = write_spec(
        tmp_path, name, namespace, checkpoint_pvc.claim_name, worker_image, **paced_program(tmp_path, steps, 200)
    )
    proc = submit_in_background(kind_cluster, spec)
    node = follower = follow = drainer = None
    try:
        follower = follow_with_launcher(kind_cluster, namespace, name)  # from a pending pod on
        wait_for(lambda: checkpointed_step(kind_cluster, name, namespace), 600, "the first checkpoint")
        node = node_of(kind_cluster, namespace, name, "chief")
        before = {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in kind_cluster.get_json("pods", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
        }
        victim = pod_of(kind_cluster, namespace, name, "chief")
        failed_before = job_failed(kind_cluster, namespace, name, "chief")
        follow = follow_log(kind_cluster, namespace, victim)
        drained_at = time.time()
        drainer = subprocess.Popen(
            drain_command(kind_cluster, node),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=kind_cluster.env,
        )
        overlaps, gone_after, replaced_after = watch_the_replacement(
            kind_cluster, namespace, name, "chief", 0, victim, drained_at
        )
        drained, _ = drainer.communicate(timeout=330)
        drain_seconds = time.time() - drained_at
        print(drained[-2000:])
        assert drainer.returncode == 0, drained[-2000:]
        victim_log, _ = follow.communicate(timeout=120)
        output, _ = proc.communicate(timeout=900)
        assert_followed_across_the_replacement(follower, namespace, name)
    finally:
        kill_running(proc, follow, follower, drainer)
        if node:
            kind_cluster.kubectl("uncordon", node, check=False)
    print(output[-3000:])
    assert proc.returncode == 0, output[-3000:]
    assert_all_jobs_complete(kind_cluster, namespace, name)
    events = chief_events(kind_cluster, name, namespace)  # the last chief pod's log
    starts = [e for e in events if e["event"] == "start"]
    assert starts, events
    # the replacement chief ran on the other node and resumed where the evicted one saved
    chief = pod_of(kind_cluster, namespace, name, "chief")
    assert chief["metadata"]["uid"] != victim["metadata"]["uid"] and chief["spec"]["nodeName"] != node
    resumed_at = starts[-1]["step"]
    saved = checkpointed_step(kind_cluster, name, namespace)
    evicted = sorted(p for p, n in before.items() if n == node)
    preempted = [e["step"] for e in progress(victim_log) if e["event"] == "preempted"]
    assert preempted, f"the evicted chief did not save at SIGTERM: {victim_log[-3000:]}"
    preempted_step = preempted[0]
    lost = preempted_step - resumed_at
    first_step = [e["wall"] for e in events if e["event"] == "first_step"]
    assert first_step and first_step[-1] > drained_at, "the replacement chief never trained a step"
    recovery = first_step[-1] - drained_at
    final = [e for e in events if e["event"] == "final"]
    assert final and final[-1]["step"] == steps, final
    assert lost == 0, f"preempted at step {preempted_step}, resumed at {resumed_at}"
    # a graceful end, not a failure: gone within seconds, never beside its replacement, not counted
    assert gone_after is not None and gone_after < 30, f"pod gone after {gone_after}"
    assert not overlaps, f"a replacement ran beside its terminating pod: {overlaps}"
    assert job_failed(kind_cluster, namespace, name, "chief") == failed_before
    measured(
        f"drain: kubectl drain {node} (chief's node; evicted {', '.join(evicted)}) "
        f"took {drain_seconds:.1f}s; the chief saved step {preempted_step} and the "
        f"replacement resumed at step {resumed_at} on {chief['spec']['nodeName']}: {lost} "
        f"lost steps; chief pod gone {gone_after:.1f}s and the replacement Running "
        f"{replaced_after:.1f}s after the drain began, no overlap, Job failed count "
        f"{failed_before} -> {failed_before}; training resumed {recovery:.1f}s after the drain "
        f"began; cluster succeeded at step {final[-1]['step']} (last checkpoint {saved})"
    )
