"""Rendering (golden files per example: tests/test_generated.py): Pod Security `restricted`, ownership, O(N) size."""

import json
from pathlib import Path

import pytest
import yaml
from support import assert_pod_security_restricted

from launcher.cluster_spec.loader import load_file, load_text, pack_code
from launcher.plan.plan import plan
from launcher.render import context, render
from worker.contract import EXIT_DETERMINISTIC_EXCEPTION, EXIT_KERAS_REFUSED
from worker.errors import EXIT_CONFIG, EXIT_NODE_FAULT, EXIT_PEER_LOST, EXIT_PREEMPTED

EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
if not EXAMPLES:  # an empty parametrize would pass by testing nothing
    raise FileNotFoundError(f"no example specs in {EXAMPLES_DIR}")


def _pods(objects):
    return [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Job"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_pods_pass_pod_security_restricted(example):
    for pod in _pods(render.render(plan(load_file(example)))):
        assert_pod_security_restricted(pod)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_labels_and_valid_json_tf_config(example):
    spec = load_file(example)
    objects = render.render(plan(spec))
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == spec.name
        assert labels["app.kubernetes.io/managed-by"] == "tfk8s"
        assert obj["metadata"]["namespace"] == spec.namespace
    for cfg in render.pod_tf_configs(spec, objects).values():
        json.dumps(cfg)  # expanded per pod, it is plain JSON


def test_rbac_is_least_privilege():
    objects = render.render(plan(load_file(EXAMPLES_DIR / "ps.yaml")))
    [role] = [o for o in objects if o["kind"] == "Role"]
    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": ["mnist-ps-chief"], "verbs": ["list", "watch"]}
    ]
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    # No pod gets the kubelet's token; only the supervised pods' (workers, ps, evaluator)
    # job-watch container mounts one, never the container where TF's gRPC server runs.
    pods = {n: j["spec"]["template"]["spec"] for n, j in jobs.items()}
    assert {n: p["automountServiceAccountToken"] for n, p in pods.items()} == dict.fromkeys(pods, False)
    token_holders = {n: [c["name"] for c in p["containers"] if _token_mount(p, c)] for n, p in pods.items()}
    assert token_holders == {
        "mnist-ps-chief": [],
        "mnist-ps-worker": ["job-watch"],
        "mnist-ps-ps": ["job-watch"],
        "mnist-ps-evaluator": ["job-watch"],
    }


def _token_mount(pod: dict, container: dict) -> bool:
    """Whether the container mounts a volume with a service-account token, or anything at the
    token's standard path."""
    token_volumes = {
        v["name"]
        for v in pod["volumes"]
        if any("serviceAccountToken" in source for source in (v.get("projected") or {}).get("sources", []))
    }
    return any(
        m["name"] in token_volumes or m["mountPath"].startswith("/var/run/secrets")
        for m in container.get("volumeMounts", [])
    )


def test_job_watch_container_mounts_what_the_kubelet_would_and_shares_only_the_verdict_dir():
    objects = render.render(plan(load_file(EXAMPLES_DIR / "ps.yaml")))
    pod = _jobs(objects)["ps"]["spec"]["template"]["spec"]
    task, watcher = pod["containers"]
    assert (task["name"], watcher["name"]) == ("tensorflow", "job-watch")
    assert watcher["image"] == task["image"]
    assert watcher["command"] == ["python3", "/var/run/tfk8s/supervise.py", "watch"]
    [token] = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
    sources = token["projected"]["sources"]
    # 600 s, Kubernetes' minimum, renewed by the kubelet (job_watch reads it for each request);
    # 3607 made the API server extend it to a year (--service-account-extend-token-expiration)
    assert sources[0]["serviceAccountToken"] == {"path": "token", "expirationSeconds": 600}
    assert sources[1]["configMap"] == {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert {
        "name": "kube-api-access",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    } in watcher["volumeMounts"]
    shared = {m["name"] for m in task["volumeMounts"]} & {m["name"] for m in watcher["volumeMounts"]}
    assert shared == {"supervisor", "supervisor-state"}
    env = {e["name"]: e.get("value") for e in watcher["env"]}
    assert env == {
        "TFK8S_WATCH_JOB": "mnist-ps-chief",
        "TFK8S_NAMESPACE": "default",
        "TFK8S_POD_RESTART_POLICY": "Never",
    }
    assert "TFK8S_WATCH_JOB" not in _env(_jobs(objects)["ps"])  # the task needs only the verdict


def test_supervisor_wraps_only_servers():
    objects = render.render(plan(load_file(EXAMPLES_DIR / "ps.yaml")))
    commands = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["command"]
        for o in objects
        if o["kind"] == "Job"
    }
    assert commands["mnist-ps-chief"][:3] == ["python", "-m", "worker"]
    assert commands["mnist-ps-ps"][:4] == ["python3", "/var/run/tfk8s/supervise.py", "run", "--"]


def test_mwms_success_is_worker_zero():
    objects = render.render(plan(load_file(EXAMPLES_DIR / "mwms.yaml")))
    [job] = [o for o in objects if o["kind"] == "Job"]
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding", "ServiceAccount")]


def _spec_with_workers(n: int):
    return load_text(
        f"name: big\nstrategy: parameter_server\nroles: {{chief: {{replicas: 1}}, "
        f"worker: {{replicas: {n}}}, ps: {{replicas: 2}}}}\n"
    )


def test_object_count_is_constant_and_bytes_grow_linearly():
    sizes = {}
    for n in (10, 100, 1000):
        objects = render.render(plan(_spec_with_workers(n)))
        assert len(objects) == 10  # root, service, sa, role, binding, gRPC and metrics policies, 3 Jobs
        sizes[n] = len(json.dumps(objects))
    # Linear: 10x the workers costs about 10x the bytes of the per-worker part, not 100x.
    per_worker_100 = (sizes[100] - sizes[10]) / 90
    per_worker_1000 = (sizes[1000] - sizes[100]) / 900
    assert per_worker_1000 == pytest.approx(per_worker_100, rel=0.1)


def test_yaml_output_round_trips():
    objects = render.render(plan(load_file(EXAMPLES_DIR / "ps.yaml")))
    assert list(yaml.safe_load_all(render.to_yaml(objects))) == objects
    assert json.loads(render.to_json(objects))["items"] == objects


def test_checkpoint_dir_without_volume_is_an_empty_dir():
    # The image's filesystem is not writable by the non-root user: without a volume the
    # checkpoint dir gets an emptyDir, which survives the chief's restarts in place.
    spec = load_text("name: one\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\ncheckpoint: {dir: /ckpt/run}\n")
    [pod] = _pods(render.render(plan(spec)))
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "checkpoint"]
    assert mount["mountPath"] == "/ckpt/run"
    assert {"name": "checkpoint", "emptyDir": {}} in pod["volumes"]
    remote = load_text(
        "name: one\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\ncheckpoint: {dir: gs://bucket/run}\n"
    )
    [pod] = _pods(render.render(plan(remote)))
    assert all(v["name"] != "checkpoint" for v in pod["volumes"])


def _jobs(objects):
    return {o["metadata"]["labels"]["app.kubernetes.io/component"]: o for o in objects if o["kind"] == "Job"}


def _env(job):
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_no_overlapping_pods_and_a_grace_longer_than_a_save(example):
    for job in _jobs(render.render(plan(load_file(example)))).values():
        # A replacement pod waits until the old one has terminated (two coordinators, or two
        # tasks with one hostname, never run at once).
        assert job["spec"]["podReplacementPolicy"] == "Failed"
        assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120


def test_pod_failure_policy_ignores_preemption_and_fails_fast_on_config_errors():
    jobs = _jobs(render.render(plan(load_file(EXAMPLES_DIR / "ps.yaml"))))
    assert set(jobs) == {"chief", "worker", "ps", "evaluator"}
    for job in jobs.values():
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
        assert job["spec"]["podFailurePolicy"] == {
            "rules": [
                {
                    "action": "Ignore",
                    "onExitCodes": {
                        "containerName": "tensorflow",
                        "operator": "In",
                        "values": [EXIT_PEER_LOST, EXIT_PREEMPTED],
                    },
                },
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "tensorflow", "operator": "In", "values": [EXIT_CONFIG]},
                },
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {
                    "action": "Count",
                    "onExitCodes": {
                        "containerName": "tensorflow",
                        "operator": "In",
                        "values": [EXIT_NODE_FAULT, 137],
                    },
                },
            ]
        }
    assert [c["name"] for c in jobs["chief"]["spec"]["template"]["spec"]["containers"]] == ["tensorflow"]


def test_every_task_knows_its_node_and_a_role_given_gpus_their_number():
    """What a node fault names (the pod's spec.nodeName) and what it checks (TFK8S_GPUS)."""
    gpus = (
        "name: g\nstrategy: parameter_server\nroles:\n  chief: {replicas: 1}\n"
        "  worker: {replicas: 2, resources: {limits: {nvidia.com/gpu: 2}}}\n  ps: {replicas: 1}\n"
    )
    for text in (gpus, gpus + "image: me/train:1\ncommand: [python, train.py]\n"):
        jobs = _jobs(render.render(plan(load_text(text))))
        for job in jobs.values():
            env = job["spec"]["template"]["spec"]["containers"][0]["env"]
            assert {"name": "TFK8S_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in env
        assert "TFK8S_GPUS" not in _env(jobs["ps"]) and "TFK8S_GPUS" not in _env(jobs["chief"])
    assert _env(_jobs(render.render(plan(load_text(gpus))))["worker"])["TFK8S_GPUS"] == "2"
    # a user's command gets no variable of the built-in worker's to ignore
    assert "TFK8S_GPUS" not in _env(jobs["worker"])


def test_bring_your_own_exit_2_is_an_ordinary_failure():
    # Exit code 2 means a config error only for the built-in worker.
    jobs = _jobs(render.render(plan(load_file(EXAMPLES_DIR / "byo.yaml"))))
    for job in jobs.values():
        rules = job["spec"]["podFailurePolicy"]["rules"]
        assert [r["action"] for r in rules] == ["FailJob", "Ignore", "Count"]
        # the Keras check's and the exception check's only
        assert rules[0]["onExitCodes"]["values"] == [EXIT_DETERMINISTIC_EXCEPTION, EXIT_KERAS_REFUSED]


def test_fatal_exit_codes_of_a_command_fail_the_job_at_once():
    """fatalExitCodes become a FailJob rule, codes in order (Kubernetes refuses others), before
    the disruption's Ignore, so a drained pod's SIGKILL is still ignored; a command's 143 has no
    rule: its pod's DisruptionTarget says whether it was preempted."""
    spec = load_file(EXAMPLES_DIR / "byo.yaml").model_copy(update={"fatal_exit_codes": [3, 1, 100]})
    jobs = _jobs(render.render(plan(type(spec).model_validate(spec.model_dump(by_alias=True)))))
    for job in jobs.values():
        rules = job["spec"]["podFailurePolicy"]["rules"]
        assert [r["action"] for r in rules] == ["FailJob", "Ignore", "Count"]
        assert rules[0]["onExitCodes"] == {
            "containerName": "tensorflow",
            "operator": "In",
            "values": [1, 3, EXIT_DETERMINISTIC_EXCEPTION, EXIT_KERAS_REFUSED, 100],  # our checks' codes always
        }
        assert "onPodConditions" in rules[1]


def test_on_failure_restarts_in_place_without_pod_failure_policy():
    # Kubernetes refuses a podFailurePolicy unless restartPolicy is Never.
    spec = load_text(
        "name: one\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n"
        "restartPolicy: OnFailure\nterminationGracePeriodSeconds: 300\n"
    )
    [job] = _jobs(render.render(plan(spec))).values()
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    assert "podFailurePolicy" not in job["spec"]
    assert job["spec"]["podReplacementPolicy"] == "Failed"


def test_built_in_evaluator_is_supervised():
    # It exits by itself only after the final checkpoint, which a failed training never writes.
    spec = load_text(
        "name: mw\nstrategy: multi_worker_mirrored\n"
        "roles: {worker: {replicas: 2}, evaluator: {replicas: 1}}\n"
        "checkpoint: {dir: gs://b/m}\nevaluatorGraceSeconds: 90\n"
        "terminationGracePeriodSeconds: 60\n"
    )
    objects = render.render(plan(spec))
    jobs = _jobs(objects)
    command = jobs["evaluator"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == ["python3", "/var/run/tfk8s/supervise.py", "run", "--", "python", "-m", "worker"]
    env = _env(jobs["evaluator"])
    assert (env["TFK8S_GRACE_SECONDS"], env["TFK8S_POD_GRACE_SECONDS"]) == ("90", "60")
    task, watcher = jobs["evaluator"]["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in watcher["env"]}["TFK8S_WATCH_JOB"] == "mw-worker"
    # MWMS workers end by themselves
    assert [c["name"] for c in jobs["worker"]["spec"]["template"]["spec"]["containers"]] == ["tensorflow"]
    [role] = [o for o in objects if o["kind"] == "Role"]
    assert role["rules"][0]["resourceNames"] == ["mw-worker"]
    [root] = [o for o in objects if o["kind"] == "ConfigMap"]
    assert root["data"] == context.supervisor_sources()
    assert set(root["data"]) == {"supervise.py", "job_watch.py"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_rendered_kind_is_one_the_backend_lists_and_deletes(example):
    """submit's idempotency check, `list` and `delete` look only at these kinds: an object of
    another kind would be left behind."""
    from launcher.backends.kubernetes.api import OWNED_KINDS

    spec = load_file(example)
    for workload in ("jobs", "jobset"):
        data = {**spec.model_dump(by_alias=True, mode="json"), "workload": workload}
        if workload == "jobs":
            data["queue"] = None
        for obj in render.render(plan(load_text(json.dumps(data)))):
            assert (obj["apiVersion"], obj["kind"]) in OWNED_KINDS, obj["kind"]


def _job_specs(text: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"] for o in render.render(plan(load_text(text))) if o["kind"] == "Job"}


MWMS8 = "name: m\nstrategy: multi_worker_mirrored\nroles: {worker: {replicas: 8}}\ncheckpoint: {dir: gs://b/m}\n"


def test_mwms_workers_count_retries_per_index_and_fail_with_the_first_failed_index():
    job = _job_specs(MWMS8)["m-worker"]
    assert job["backoffLimitPerIndex"] == 6 and job["maxFailedIndexes"] == 0
    # unset: Kubernetes' global limit is then unlimited; set, every peer's failure counted again
    assert "backoffLimit" not in job
    assert job["completionMode"] == "Indexed" and job["template"]["spec"]["restartPolicy"] == "Never"


def test_other_roles_keep_one_budget_per_role():
    jobs = _job_specs(
        "name: p\nstrategy: parameter_server\nroles: {chief: {replicas: 1}, worker: {replicas: 3}, ps: {replicas: 2}}\n"
    )
    for name, job in jobs.items():
        assert job["backoffLimit"] == 6 and "backoffLimitPerIndex" not in job, name
    on_failure = _job_specs(MWMS8 + "restartPolicy: OnFailure\n")["m-worker"]
    assert on_failure["backoffLimit"] == 6 and "backoffLimitPerIndex" not in on_failure
    assert "podFailurePolicy" not in on_failure


def test_pod_failure_policy_rules_in_order():
    rules = _job_specs(MWMS8)["m-worker"]["podFailurePolicy"]["rules"]
    codes = [(r["action"], r.get("onExitCodes", {}).get("values")) for r in rules]
    assert codes == [
        ("Ignore", [6, 143]),  # lost a peer after saving; preempted after saving (in order)
        ("FailJob", [2]),  # the built-in worker's configuration error
        # any disruption (drain, eviction, preemption), also one whose grace ran out (137),
        # before any Count rule: it spends no retry
        ("Ignore", None),
        ("Count", [9, 137]),  # a node fault; SIGKILL (OOM)
    ]
    assert rules[2]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    assert all(r["onExitCodes"]["containerName"] == "tensorflow" for r in rules if "onExitCodes" in r)
    byo = _job_specs(MWMS8 + "command: [python, t.py]\n")["m-worker"]["podFailurePolicy"]["rules"]
    assert [(r["action"], r.get("onExitCodes", {}).get("values")) for r in byo] == [
        ("FailJob", [EXIT_DETERMINISTIC_EXCEPTION, EXIT_KERAS_REFUSED]),
        ("Ignore", None),
        ("Count", [137]),  # a user's command may exit 9 for anything: counted as any exit is
    ]


@pytest.mark.parametrize("example", sorted(EXAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_exit_codes_are_in_order(example):
    """The API server refuses onExitCodes values out of order ("must be ordered"), which the
    OpenAPI schema does not say: seen on kind, as a JobSet that never created its Jobs."""
    for name, spec in render.job_specs(render.render(plan(load_file(example)))):
        for rule in (spec.get("podFailurePolicy") or {}).get("rules", []):
            values = rule.get("onExitCodes", {}).get("values")
            assert values is None or values == sorted(set(values)), (name, rule)


def test_node_loss_toleration_seconds_reach_every_pod_unless_a_role_sets_its_own():
    base = (
        "name: t\nstrategy: parameter_server\n"
        "roles: {chief: {replicas: 1, tolerations: [{key: node.kubernetes.io/unreachable, "
        "operator: Exists, effect: NoExecute, tolerationSeconds: 900}]}, "
        "worker: {replicas: 1}, ps: {replicas: 1}}\n"
    )
    untouched = _jobs(render.render(plan(load_text(base))))
    assert [t["key"] for t in untouched["worker"]["spec"]["template"]["spec"].get("tolerations", [])] == []
    jobs = _jobs(render.render(plan(load_text(base + "nodeLossTolerationSeconds: 45\n"))))
    seconds = {
        role: {t["key"]: t["tolerationSeconds"] for t in job["spec"]["template"]["spec"]["tolerations"]}
        for role, job in jobs.items()
    }
    loss = {"node.kubernetes.io/not-ready": 45, "node.kubernetes.io/unreachable": 45}
    assert seconds["worker"] == seconds["ps"] == loss
    assert seconds["chief"] == {**loss, "node.kubernetes.io/unreachable": 900}  # its own wins


SHAPES = sorted((Path(__file__).resolve().parents[2] / "charts" / "specs").glob("*.yaml"))


@pytest.mark.parametrize("spec_file", EXAMPLES + SHAPES, ids=lambda p: p.stem)
def test_every_container_we_add_has_requests_and_limits(spec_file):
    """ResourceQuota admission checks every container, init containers included: one without
    cpu and memory requests and limits makes a namespace with such a quota refuse the pod (the
    code init container did). The task's own container has the role's resources, the user's."""
    from launcher import k8s_contract

    spec = load_file(spec_file)
    pods = [job["template"]["spec"] for _, job in render.job_specs(render.render(plan(spec, pack_code(spec))))]
    added = [
        c
        for pod in pods
        for c in pod.get("initContainers", []) + pod["containers"]
        if c["name"] != k8s_contract.CONTAINER
    ]
    assert pods and (added or "code" not in spec_file.stem), spec_file
    for container in added:
        for kind in ("requests", "limits"):
            assert set(container["resources"].get(kind, {})) >= {"cpu", "memory"}, container


def test_render_lays_out_the_plan_it_is_given_and_plans_nothing_itself():
    """render takes the caller's plan: a plan with its own model dir (as a local run makes) is
    the one rendered, and the plan carries the spec hash a submit stamps on the root."""
    spec = load_file(EXAMPLES_DIR / "ps.yaml")
    cluster = plan(spec, model_dir="/elsewhere/model")
    for _, job in render.job_specs(render.render(cluster)):
        [task] = [c for c in job["template"]["spec"]["containers"] if c["name"] == "tensorflow"]
        assert {"name": "TFK8S_MODEL_DIR", "value": "/elsewhere/model"} in task["env"]
    assert cluster.spec_hash == plan(spec).spec_hash  # where the model dir goes is not the spec
    assert cluster.spec_hash != plan(spec.model_copy(update={"port": spec.port + 1})).spec_hash
