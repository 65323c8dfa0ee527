"""submit's decisions (launcher/backends/kubernetes/submit.py) against a fake API that records
every call: preflight, idempotency of a resubmit, refusal of a different cluster of that name,
--replace, a server dry run, and the rollback of a half-created cluster. The kind tier checks the
same against a real API server (tests/kind)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
import yaml

from launcher import k8s_contract
from launcher.backends.kubernetes import KubernetesBackend, KubernetesBackendConfig
from launcher.backends.kubernetes.api import JOBSET
from launcher.cluster_spec.loader import load_data
from launcher.errors import LauncherError, SubmitRefused
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

from .fake_api import FAKE_ROOT_CA, FakeApi

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def spec_of(example: str = "ps.yaml", **changes):
    data = yaml.safe_load((EXAMPLES / example).read_text())
    data.update(changes)
    return load_data(data)


def backend(api: FakeApi, **options) -> tuple[KubernetesBackend, io.StringIO]:
    out = io.StringIO()
    return KubernetesBackend(KubernetesBackendConfig(**options), out=out, api=api), out


def test_submit_applies_the_root_first_and_every_other_object_owned_by_it():
    api, spec = FakeApi(), spec_of()
    tfk8s, out = backend(api)
    tfk8s.submit(spec)
    applied = [call for call in api.mutations()]
    rendered = render.render(plan(spec))
    assert applied == [("apply", o["kind"], o["metadata"]["name"], False) for o in rendered]
    root = api.get("v1", "ConfigMap", "default", spec.name)
    assert root["metadata"]["annotations"][k8s_contract.SPEC_HASH_ANNOTATION] == plan(spec).spec_hash
    owned = [o for o in api.objects.values() if o["kind"] not in ("Namespace", "ConfigMap")]
    assert len(owned) == len(rendered) - 1
    for obj in owned:
        assert [(r["kind"], r["uid"], r["controller"]) for r in obj["metadata"]["ownerReferences"]] == [
            ("ConfigMap", root["metadata"]["uid"], True)
        ], obj["metadata"]["name"]
    assert out.getvalue().startswith(f"created cluster default/{spec.name}: ConfigMap/")


def test_resubmitting_the_same_spec_applies_nothing():
    api, spec = FakeApi(), spec_of()
    tfk8s, out = backend(api)
    tfk8s.submit(spec)
    before = len(api.mutations())
    tfk8s.submit(spec_of())
    assert api.mutations()[before:] == []
    assert out.getvalue().splitlines()[-1] == f"cluster default/{spec.name} is unchanged; nothing applied"


def test_a_different_spec_of_that_name_is_refused_and_left_alone():
    api = FakeApi()
    tfk8s, _ = backend(api)
    tfk8s.submit(spec_of())
    before, objects = len(api.mutations()), dict(api.objects)
    changed = spec_of(image="tfk8s/worker:other")
    with pytest.raises(
        SubmitRefused, match="exists with a different spec; .* rerun with --replace to delete and recreate it"
    ):
        tfk8s.submit(changed)
    assert api.mutations()[before:] == [] and api.objects == objects


def test_objects_another_tool_created_are_refused_without_replace():
    """A Helm release of the chart has the same objects but no spec hash: never clobbered."""
    api, spec = FakeApi(), spec_of()
    for obj in render.render(plan(spec)):
        api.add(obj)
    tfk8s, _ = backend(api)
    with pytest.raises(SubmitRefused, match="exists but was not created by this launcher"):
        tfk8s.submit(spec)
    assert api.mutations() == []


def test_replace_deletes_the_old_cluster_before_applying_the_new_one():
    api = FakeApi()
    tfk8s, out = backend(api)
    tfk8s.submit(spec_of())
    old_uid = api.get("v1", "ConfigMap", "default", "mnist-ps")["metadata"]["uid"]
    before = len(api.mutations())
    changed = spec_of(image="tfk8s/worker:other")
    tfk8s.submit(changed, replace=True)
    calls = api.mutations()[before:]
    deletes = [c for c in calls if c[0] in ("release", "delete")]  # policies released from the root first
    applies = [c for c in calls if c[0] == "apply"]
    assert calls == deletes + applies, "every delete comes before the first apply"
    assert {c[1] for c in deletes} >= {"ConfigMap", "Job", "Service"}
    assert len(applies) == len(render.render(plan(changed)))
    root = api.get("v1", "ConfigMap", "default", "mnist-ps")
    assert root["metadata"]["uid"] != old_uid
    assert root["metadata"]["annotations"][k8s_contract.SPEC_HASH_ANNOTATION] == plan(changed).spec_hash
    assert "replacing cluster default/mnist-ps" in out.getvalue()


def test_a_server_dry_run_replace_deletes_nothing_and_stores_nothing():
    api = FakeApi()
    backend(api)[0].submit(spec_of())
    objects, before = dict(api.objects), len(api.mutations())
    tfk8s, out = backend(api, dry_run=True)
    changed = spec_of(image="tfk8s/worker:other")
    tfk8s.submit(changed, replace=True)
    calls = api.mutations()[before:]
    assert calls and all(c[0] == "apply" and c[3] is True for c in calls), calls
    assert api.objects == objects
    assert (
        out.getvalue().strip()
        == f"server dry run: {len(render.render(plan(changed)))} objects accepted by the API server"
    )


def test_a_failed_apply_takes_back_everything_this_submit_created():
    api, spec = FakeApi(), spec_of()
    api.fail_apply[("Job", "mnist-ps-worker")] = 'admission webhook "quota" denied the request'
    tfk8s, _ = backend(api)
    with pytest.raises(LauncherError) as raised:
        tfk8s.submit(spec)
    assert str(raised.value) == (
        'submit failed at Job/mnist-ps-worker: admission webhook "quota" denied the request; '
        "everything created so far was deleted again"
    )
    # the namespace and its kube-root-ca.crt
    assert [o["kind"] for o in api.objects.values()] == ["Namespace", "ConfigMap"], "half a cluster left"
    assert ("delete", "ConfigMap", "mnist-ps") in api.mutations()


def test_a_failed_root_apply_creates_and_deletes_nothing():
    api = FakeApi()
    api.fail_apply[("ConfigMap", "mnist-ps")] = "forbidden"
    tfk8s, _ = backend(api)
    with pytest.raises(LauncherError, match="^submit failed at ConfigMap/mnist-ps: forbidden; nothing was created$"):
        tfk8s.submit(spec_of())
    assert api.mutations() == [("apply", "ConfigMap", "mnist-ps", False)]


def test_preflight_refuses_a_missing_namespace_before_creating_anything():
    api = FakeApi(namespaces=())
    with pytest.raises(
        LauncherError,
        match=r"namespace 'default' does not exist \(create it: "
        r"kubectl create namespace default\)",
    ):
        backend(api)[0].submit(spec_of())
    assert api.mutations() == []


def test_preflight_refuses_a_jobset_where_the_jobset_api_is_missing():
    api = FakeApi()
    api.unserved.add(JOBSET)
    with pytest.raises(LauncherError, match="no JobSet API .*install JobSet .*or use workload: jobs"):
        backend(api)[0].submit(spec_of("ps-queued.yaml"))
    assert api.mutations() == []


def test_preflight_refuses_a_queue_without_kueue_or_without_that_local_queue():
    api = FakeApi()
    with pytest.raises(LauncherError, match="has no Kueue .*install Kueue .*or remove queue"):
        backend(api)[0].submit(spec_of("ps-queued.yaml"))
    api.unserved.clear()
    with pytest.raises(LauncherError, match="there is no LocalQueue 'tfk8s-queue' in namespace 'default'"):
        backend(api)[0].submit(spec_of("ps-queued.yaml"))
    assert api.mutations() == []


def test_a_queued_jobset_is_submitted_with_the_jobset_as_root():
    api = FakeApi()
    api.unserved.clear()
    api.add(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "tfk8s-queue", "namespace": "default"},
        }
    )
    spec = spec_of("ps-queued.yaml")
    backend(api)[0].submit(spec)
    applied = [c for c in api.mutations() if c[0] == "apply"]
    assert applied[0][:3] == ("apply", "JobSet", spec.name)
    jobset = api.get(*JOBSET, "default", spec.name)
    assert jobset["metadata"]["annotations"][k8s_contract.SPEC_HASH_ANNOTATION] == plan(spec).spec_hash


def _chief_env(api: FakeApi) -> dict[str, str]:
    """The chief's task container environment as Kubernetes gives it to index 0."""
    [chief] = [job for job in api.stored("Job") if job["metadata"]["name"].endswith("-chief")]
    [container] = [c for c in chief["spec"]["template"]["spec"]["containers"] if c["name"] == k8s_contract.CONTAINER]
    return {e["name"]: e["value"].replace("$(TFK8S_TASK_INDEX)", "0") for e in container["env"] if "value" in e}


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_every_task_is_told_which_kubernetes_cluster_runs_it(workload):
    """OWNER.json names the platform (worker/model_dir/ownership.py): the cluster's CA as
    published in the namespace (readable by a user who may not read kube-system: this API has
    none), in every task container and no other."""
    api = FakeApi()
    api.unserved.clear()
    spec = spec_of(workload=workload)
    backend(api)[0].submit(spec)
    if workload == "jobs":
        templates = [job["spec"]["template"] for job in api.stored("Job")]
    else:
        [jobset] = api.stored("JobSet")
        templates = [job["template"]["spec"]["template"] for job in jobset["spec"]["replicatedJobs"]]
    assert len(templates) == 4
    named = "kubernetes:ca-" + hashlib.sha256(FAKE_ROOT_CA.encode()).hexdigest()[:16]
    for template in templates:
        for container in template["spec"]["containers"]:
            platforms = [e["value"] for e in container.get("env", []) if e["name"] == contract.PLATFORM]
            assert platforms == ([named] if container["name"] == k8s_contract.CONTAINER else [])


def run_ids(api) -> set[str]:
    """The TFK8S_RUN values in the stored Jobs' task containers (None: a task container without)."""
    ids = set()
    for job in api.stored("Job"):
        for container in job["spec"]["template"]["spec"]["containers"]:
            if container["name"] == k8s_contract.CONTAINER:
                values = [e["value"] for e in container.get("env", []) if e["name"] == contract.RUN]
                ids.add(values[0] if len(values) == 1 else None)
    return ids


def test_every_task_of_a_submission_gets_its_run_id_and_a_replace_a_new_one():
    """TFK8S_RUN (worker/contract.py RUN): one id for every task of a submission, so its
    evaluator ends on its own run's FINAL.json; the same spec submitted again changes nothing,
    --replace is a new run."""
    api = FakeApi()
    backend(api)[0].submit(spec_of())
    [first] = run_ids(api)
    assert first is not None and len(first) == 32, first
    backend(api)[0].submit(spec_of())  # unchanged: nothing applied, the same run
    assert run_ids(api) == {first}
    backend(api)[0].submit(spec_of(backoffLimit=2), replace=True)
    [second] = run_ids(api)
    assert second is not None and second != first


def test_a_namespace_without_the_published_ca_is_refused_before_anything_is_changed():
    api = FakeApi()
    backend(api)[0].submit(spec_of())
    api.delete("v1", "ConfigMap", "default", k8s_contract.ROOT_CA_CONFIGMAP)
    before = len(api.mutations())
    with pytest.raises(LauncherError) as refused:
        backend(api)[0].submit(spec_of(backoffLimit=2), replace=True)  # a changed spec, replaced
    assert str(refused.value) == (
        "no ca.crt in ConfigMap kube-root-ca.crt in namespace 'default', which Kubernetes (1.20+) publishes "
        "in every namespace and which names this Kubernetes cluster in the model dir's OWNER.json: check "
        "that the kube-controller-manager's root-ca-cert-publisher controller runs"
    )
    assert api.mutations()[before:] == [], "the running cluster was left as it was"


def test_two_same_named_clusters_of_namespace_scoped_users_on_one_model_dir_do_not_both_train(tmp_path):
    """Two Kubernetes clusters, each running default/<name> submitted by a user who may not read
    kube-system, with one gs:// dir (a shared dir here): the second's writer is refused at its
    start, naming both platforms, instead of training beside the first."""
    from worker import args, errors
    from worker.context import from_environment
    from worker.model_dir import ownership

    spec, options = spec_of(), args.parse(["--steps", "20", "--data", "digits"])
    writers = []
    for root_ca in ("CA of cluster one", "CA of cluster two"):
        api = FakeApi(root_ca=root_ca)
        backend(api)[0].submit(spec)
        writers.append(from_environment({**_chief_env(api), contract.MODEL_DIR: str(tmp_path)}))
    first, second = writers
    assert (first.namespace, first.cluster_name) == (second.namespace, second.cluster_name)
    assert ownership.check(first, options)
    with pytest.raises(errors.ConfigError) as refused:
        ownership.check(second, options)
    assert f"belongs to cluster default/{spec.name} on another platform ({first.platform} there, " in str(refused.value)
    assert f"{second.platform} here;" in str(refused.value)
