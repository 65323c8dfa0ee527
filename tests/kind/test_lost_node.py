"""A node that dies mid-training (its kind node container killed: no drain, no SIGTERM).

The chief alone runs on the kind worker node (the control plane carries a test taint that only
the ps and workers tolerate, and they are pinned there); its node container is
killed after the first checkpoint. `status` must say NodeLost and name the node within 60 s of
the node going NotReady. Then the remedy `status` names: the Node object is deleted (as a
cloud's node controller would), or tainted node.kubernetes.io/out-of-service (bare metal): the
chief is replaced on the control plane, resumes at its last checkpoint, and the cluster
succeeds without the chief's Job counting a failure. The killed node container is started
again before the next kind test (its kubelet registers the Node anew, or finds it), so later
tests see two nodes; after the tier's last test the cluster is deleted instead.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime

import pytest
from conftest import _restart_kube_router, run
from support import skip_unless_ci
from test_e2e import (
    LABEL,
    checkpointed_step,
    chief_events,
    cli,
    kill_running,
    paced_program,
    pod_of,
    submit_in_background,
    wait_for,
    write_spec,
)
from test_network import measured

# The killed node is started again afterwards, but in the shared CI cluster (clean-clone run,
# 2026-11-24) cross-node pod traffic stayed broken for the tests after it (its second variant
# and test_network timed out). So the tier runs it last (tests/kind/conftest.py orders
# `node_kill` tests after every other kind test), and only the delete-node variant; the
# out-of-service variant needs a cluster of its own:
#   TFK8S_NODE_KILL=1 TFK8S_KIND_CLUSTER=tfk8s-node python -m pytest tests/kind/test_lost_node.py
# TFK8S_NODE_KILL=0 skips both.
NODE_KILL = os.environ.get("TFK8S_NODE_KILL", "")
pytestmark = [
    pytest.mark.kind,
    pytest.mark.node_kill,
    pytest.mark.skipif(NODE_KILL == "0", reason="TFK8S_NODE_KILL=0"),
]

HOLD_TAINT = "tfk8s-test/chief-elsewhere"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
REMEDIES = {
    "delete-node": lambda node: ("delete", "node", node),
    "out-of-service": lambda node: ("taint", "nodes", node, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute"),
}


def restart_node(cluster, node: str) -> None:
    """Start a killed node container again and wait until its Node is Ready."""
    run(["docker", "start", node], env=cluster.env, check=False)
    wait_for(
        lambda: cluster.kubectl("get", "node", node, check=False).returncode == 0, 300, f"node {node} registered again"
    )
    cluster.kubectl("wait", "node", node, "--for=condition=Ready", "--timeout=300s", timeout=330, check=False)
    _restart_kube_router(cluster)


def ready_since(cluster, node: str) -> float | None:
    """When the node's Ready condition last changed, if it is no longer True."""
    found = cluster.kubectl("get", "node", node, "-o", "json", check=False)
    if found.returncode:
        return None
    ready = next(c for c in json.loads(found.stdout)["status"]["conditions"] if c["type"] == "Ready")
    if ready["status"] == "True":
        return None
    return datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


@pytest.mark.tf_trainings(1)
@pytest.mark.parametrize(
    "remedy",
    [
        "delete-node",
        pytest.param(
            "out-of-service",
            marks=pytest.mark.skipif(
                NODE_KILL != "1",
                reason="a second node kill in one cluster: run it on its own with "
                "TFK8S_NODE_KILL=1 TFK8S_KIND_CLUSTER=tfk8s-node",
            ),
        ),
    ],
)
def test_killed_chief_node_is_named_then_the_remedy_resumes_the_chief(
    kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path, remedy
):
    nodes = sorted(kind_cluster.node_names())
    control = kind_cluster.node
    others = [n for n in nodes if n != control]
    if not others:
        skip_unless_ci("needs a second (worker) node to kill")
    victim_node = others[0]
    name, steps = "nodekill", 500  # killed after the first checkpoint (200), 300 before the end
    pinned = {
        "replicas": 1,
        "nodeSelector": {"kubernetes.io/hostname": control},
        "tolerations": [{"key": HOLD_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
    }
    roles = {"chief": {"replicas": 1}, "worker": {**pinned, "replicas": 2}, "ps": pinned}
    spec = write_spec(
        tmp_path,
        name,
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        roles=roles,
        **paced_program(tmp_path, steps, 200),
    )
    kind_cluster.kubectl("taint", "nodes", control, f"{HOLD_TAINT}=yes:NoSchedule")
    proc = follow = None
    killed = False
    try:
        proc = submit_in_background(kind_cluster, spec)
        wait_for(lambda: checkpointed_step(kind_cluster, name, namespace), 600, "the first checkpoint")
        victim = pod_of(kind_cluster, namespace, name, "chief")
        assert victim["spec"]["nodeName"] == victim_node
        saved_before_kill = checkpointed_step(kind_cluster, name, namespace)
        kind_cluster.kubectl("taint", "nodes", control, f"{HOLD_TAINT}-")  # the chief may go there now
        killed_at = time.time()
        run(["docker", "kill", victim_node], env=kind_cluster.env)
        killed = True

        said = {}

        def names_the_node():
            result = cli(kind_cluster, "status", name, "-n", namespace, "-o", "json", timeout=60)
            if result.returncode == 0:
                status = json.loads(result.stdout)
                if status["phase"] == "NodeLost" and victim_node in status["message"]:
                    said.update(status)
                    return True
            return False

        wait_for(names_the_node, 300, "status saying NodeLost", interval=3)
        named_at = time.time()
        not_ready_at = ready_since(kind_cluster, victim_node)
        text = cli(kind_cluster, "status", name, "-n", namespace, timeout=60).stdout
        print(f"status after the kill:\n{text}")
        assert not_ready_at is not None
        assert named_at - not_ready_at <= 60, (named_at, not_ready_at)

        deleted_at = time.time()
        kind_cluster.kubectl(*REMEDIES[remedy](victim_node))
        output, _ = proc.communicate(timeout=900)
        done_at = time.time()
    finally:
        kill_running(proc, follow)
        kind_cluster.kubectl("taint", "nodes", control, f"{HOLD_TAINT}-", check=False)
        kind_cluster.kubectl("taint", "nodes", victim_node, f"{OUT_OF_SERVICE}-", check=False)
        if killed:  # not needed when this was the tier's last test: the cluster goes next
            kind_cluster.repair_before_next_use(
                f"node {victim_node} started again", lambda: restart_node(kind_cluster, victim_node)
            )
    print(output[-3000:])
    assert proc.returncode == 0, output[-3000:]
    chief = pod_of(kind_cluster, namespace, name, "chief")
    assert chief["spec"]["nodeName"] == control
    events = chief_events(kind_cluster, name, namespace)
    starts = [e for e in events if e["event"] == "start"]
    first_step = [e["wall"] for e in events if e["event"] == "first_step"]
    resumed_at = starts[-1]["step"]
    assert resumed_at >= saved_before_kill, (resumed_at, saved_before_kill)
    chief_job = kind_cluster.get_json(
        "jobs", "-n", namespace, "-l", f"{LABEL}={name},app.kubernetes.io/component=chief"
    )["items"][0]
    assert not chief_job["status"].get("failed"), chief_job["status"]
    measured(
        f"node kill: docker kill {victim_node} (the chief's node) after checkpoint step "
        f"{saved_before_kill}; NotReady {not_ready_at - killed_at:.0f}s after the kill; status "
        f"said NodeLost naming it {named_at - killed_at:.0f}s after the kill "
        f"({named_at - not_ready_at:.0f}s after NotReady); remedy {remedy} at "
        f"+{deleted_at - killed_at:.0f}s; chief resumed at step {resumed_at} on {control}"
        + (f" {first_step[-1] - deleted_at:.0f}s after the remedy" if first_step else "")
        + f"; succeeded {done_at - killed_at:.0f}s after the kill; chief Job failed count 0. "
        f"Status said: {said.get('message', '')}"
    )
