"""TF_CONFIG checked through TensorFlow's own TFConfigClusterResolver: real TF, no mocks."""

import json
import os
from pathlib import Path

import pytest

from launcher.cluster_spec.loader import load_file
from launcher.plan import plan
from launcher.render import render, tfconfig
from worker.contract import DATA_SERVICE_ROLES, TRAINING_ROLES

tf = pytest.importorskip("tensorflow")
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"
EXAMPLES = sorted(p.name for p in EXAMPLES_DIR.glob("*.yaml"))
assert EXAMPLES, f"no example specs in {EXAMPLES_DIR}"


def resolve(config: dict):
    old = os.environ.get("TF_CONFIG")
    os.environ["TF_CONFIG"] = json.dumps(config)
    try:
        r = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return r.task_type, r.task_id, r.cluster_spec().as_dict()
    finally:
        if old is None:
            del os.environ["TF_CONFIG"]
        else:
            os.environ["TF_CONFIG"] = old


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_pod_resolves_to_its_task(example):
    spec = load_file(EXAMPLES_DIR / example)
    objects = render.render(plan.plan(spec))
    pods = render.pod_tf_configs(spec, objects)
    # pod hostnames: <job>-<index>; a JobSet's child Job of a role is <name>-<role>-0
    job = {"jobs": "{name}-{role}", "jobset": "{name}-{role}-0"}[spec.workload.value]

    def cluster_of(roles) -> dict:
        return {
            role: [
                f"{job.format(name=spec.name, role=role)}-{i}.{spec.name}.{spec.namespace}.svc:{spec.port}"
                for i in range(spec.replicas(role))
            ]
            for role in spec.active_roles()
            if role in roles
        }

    expected_cluster = cluster_of(TRAINING_ROLES)
    hosts = {
        f"{job.format(name=spec.name, role=role)}-{i}": (role.value, i)
        for role in spec.active_roles()
        for i in range(spec.replicas(role))
    }
    assert sorted(pods) == sorted(hosts)
    for pod, config in pods.items():
        role, index = hosts[pod]
        task_type, task_id, cluster = resolve(config)
        assert (task_type, task_id) == (role, int(index))
        if role == "evaluator":
            # Never in, and never shown, the training cluster (tensorflow#46169).
            assert cluster == {}
        elif role in DATA_SERVICE_ROLES:  # the service's own tasks, never the training cluster
            assert cluster == cluster_of(DATA_SERVICE_ROLES)
        else:
            assert cluster == expected_cluster
            assert "evaluator" not in cluster


def test_template_expands_like_kubernetes():
    cluster = plan.plan(load_file(EXAMPLES_DIR / "ps.yaml"))
    address = tfconfig.kubernetes_address(cluster)
    template = tfconfig.tf_config_template(cluster, "worker", address)
    assert template.count(tfconfig.INDEX_PLACEHOLDER) == 1
    for i in range(2):
        assert tfconfig.expand_template(template, i) == cluster.tf_config("worker", i, address)
