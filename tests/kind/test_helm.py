"""charts/tfk8s on a real kind cluster: install the PS example, train to success, uninstall.

* `helm install` of examples/ps.yaml (values from `python -m launcher render --helm-values`,
  small steps) trains to success: the chief, evaluator, worker and ps Jobs all Complete (the
  supervisor ends worker/ps), and the evaluator evaluated the final checkpoint.
* The launcher's own `status`/`logs` work on the Helm-installed cluster (as NOTES.txt says).
* `helm uninstall` removes every object carrying app.kubernetes.io/instance=<name>.
* Invalid values are refused by values.schema.json before anything is created.
* With no values at all the chart trains one mirrored pod to success.

helm: env HELM, else PATH (the toolchain's bin dir first), else $TFK8S_CACHE/bin/helm.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support import skip_unless_ci

from launcher import k8s_contract
from launcher.chart import chart_values
from launcher.cluster_spec.loader import load_file, pack_code
from launcher.cluster_spec.spec import ClusterSpec
from launcher.plan.plan import plan
from launcher.render import render
from worker import progress

pytestmark = pytest.mark.kind

from support import REPO  # noqa: E402

CHART = REPO / "charts" / "tfk8s"
EXAMPLE = REPO / "examples" / "ps.yaml"
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path.home() / ".cache" / "tfk8s")
TRAIN_TIMEOUT = float(os.environ.get("TFK8S_HELM_TRAIN_TIMEOUT", "1200"))
STEPS, CHECKPOINT_EVERY = 40, 10
# Everything that may carry the instance label: the chart's objects, their pods, and the
# EndpointSlices that copy the Service's labels.
KINDS = (
    "jobs,pods,services,configmaps,serviceaccounts,roles,rolebindings,"
    "endpointslices.discovery.k8s.io,networkpolicies.networking.k8s.io"
)


class Helm:
    def __init__(self, binary: str, cluster, home: Path):
        self.binary, self.cluster = binary, cluster
        self.env = {
            **cluster.env,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str, check: bool = True, timeout: float = 300):
        cmd = [self.binary, "--kubeconfig", self.cluster.kubeconfig, "--kube-context", self.cluster.context, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(
                f"`helm {' '.join(args)}` failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            )
        return r


@pytest.fixture
def helm(kind_cluster, tmp_path) -> Helm:
    binary = (
        os.environ.get("HELM")
        or shutil.which("helm", path=kind_cluster.env.get("PATH"))
        or (str(CACHE / "bin" / "helm") if os.access(CACHE / "bin" / "helm", os.X_OK) else None)
    )
    if not binary:
        why = "no helm binary (env HELM, PATH, or $TFK8S_CACHE/bin/helm from tests/kind/toolchain.sh)"
        skip_unless_ci(why)
    return Helm(binary, kind_cluster, tmp_path / "helm-home")


def launcher(cluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args, "--kubeconfig", cluster.kubeconfig, "--context", cluster.context],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cluster.env,
        timeout=timeout,
    )


def ps_spec(name: str, namespace: str, claim: str, image: str) -> ClusterSpec:
    """examples/ps.yaml, made small: few steps, tiny requests, the test's PVC."""
    data = load_file(EXAMPLE).model_dump(by_alias=True, mode="json", exclude_none=True)
    data.update(
        name=name,
        namespace=namespace,
        image=image,
        imagePullPolicy="IfNotPresent",
        activeDeadlineSeconds=int(TRAIN_TIMEOUT) + 300,
    )
    data["program"] = {
        **(data.get("program") or {}),
        "args": ["--steps", str(STEPS), "--checkpoint-every", str(CHECKPOINT_EVERY)],
    }
    data["checkpoint"] = {
        "dir": f"/ckpt/{name}",
        "volume": {"persistentVolumeClaim": {"claimName": claim}, "mountPath": "/ckpt"},
    }
    for role in ("chief", "worker", "ps", "evaluator"):
        data["roles"][role]["resources"] = {"requests": {"cpu": "10m", "memory": "128Mi"}, "limits": {"memory": "2Gi"}}
    spec = ClusterSpec.model_validate(data)
    assert spec.replicas("evaluator") == 1 and spec.replicas("ps") >= 1, "examples/ps.yaml changed"
    return spec


def helm_values_file(spec: ClusterSpec, tmp_path: Path) -> Path:
    """What a user does: write cluster.yaml, then `python -m launcher render ... --helm-values`."""
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(by_alias=True, mode="json", exclude_none=True)))
    r = subprocess.run(
        [sys.executable, "-m", "launcher", "render", str(spec_file), "--helm-values"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == chart_values.helm_values(spec)
    values = tmp_path / "values.yaml"
    values.write_text(r.stdout)
    return values


def instance_objects(cluster, namespace: str, name: str) -> list[str]:
    out = cluster.get_json("-n", namespace, KINDS, "-l", f"app.kubernetes.io/instance={name}")
    return [f"{o['kind']}/{o['metadata']['name']}" for o in out["items"]]


def job_state(job: dict) -> str:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition["type"] in ("Complete", "Failed"):
            return condition["type"]
    return "Running"


def diagnostics(cluster, namespace: str, name: str) -> str:
    parts = []
    for args in (("get", "jobs,pods", "-o", "wide"), ("get", "events", "--sort-by=.lastTimestamp")):
        r = cluster.kubectl("-n", namespace, *args, check=False)
        parts.append(f"$ kubectl {' '.join(args)}\n{r.stdout[-4000:]}{r.stderr[-1000:]}")
    pods = cluster.get_json("-n", namespace, "pods", "-l", f"app.kubernetes.io/instance={name}")
    for pod in pods["items"]:
        pod_name = pod["metadata"]["name"]
        r = cluster.kubectl("-n", namespace, "logs", pod_name, "--tail=40", check=False)
        parts.append(f"--- logs {pod_name}\n{r.stdout}{r.stderr}")
    return "\n".join(parts)


def wait_for_jobs(cluster, namespace: str, name: str, expected: set[str]) -> None:
    deadline = time.monotonic() + TRAIN_TIMEOUT
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        jobs = cluster.get_json("-n", namespace, "jobs", "-l", f"app.kubernetes.io/instance={name}")
        states = {j["metadata"]["name"]: job_state(j) for j in jobs["items"]}
        assert set(states) == expected, f"unexpected Jobs {sorted(states)}, want {sorted(expected)}"
        failed = [j for j, s in states.items() if s == "Failed"]
        if failed:
            pytest.fail(f"Jobs failed: {failed}\n{diagnostics(cluster, namespace, name)}", pytrace=False)
        if all(s == "Complete" for s in states.values()):
            return
        time.sleep(5)
    pytest.fail(
        f"not all Jobs Complete after {TRAIN_TIMEOUT:.0f}s: {states}\n{diagnostics(cluster, namespace, name)}",
        pytrace=False,
    )


def progress_events(log: str) -> list[dict]:
    return [record for line in log.splitlines() if (record := progress.parse_line(line))]


def role_log(cluster, namespace: str, name: str, role: str) -> str:
    selector = (
        f"app.kubernetes.io/instance={name},app.kubernetes.io/component={role},"
        "batch.kubernetes.io/job-completion-index=0"
    )
    return cluster.kubectl("-n", namespace, "logs", "-l", selector, "--tail=-1", "-c", "tensorflow").stdout


def _evaluated_before(cluster, checkpoint_pvc, name: str) -> set[str]:
    """Checkpoints in metrics.jsonl (a restarted evaluator does not evaluate them again)."""
    node_path = getattr(checkpoint_pvc, "node_path", None)
    if not node_path:
        return set()
    text = cluster.docker_exec("cat", f"{node_path}/{name}/eval/metrics.jsonl", check=False).stdout
    return {json.loads(line)["checkpoint"] for line in text.splitlines() if line.strip()}


@pytest.mark.tf_trainings(1)
def test_helm_install_ps_example_trains_evaluates_and_uninstalls(
    kind_cluster, namespace, checkpoint_pvc, worker_image, helm, tmp_path
):
    name = "helm-ps"
    claim = getattr(checkpoint_pvc, "claim_name", checkpoint_pvc)
    spec = ps_spec(name, namespace, claim, worker_image)
    values = helm_values_file(spec, tmp_path)

    helm("install", name, str(CHART), "-n", namespace, "-f", str(values), "--timeout", "2m")
    # Exactly the launcher's objects, as the API server stored them.
    want = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in render.render(plan(spec)))
    created = sorted(
        o for o in instance_objects(kind_cluster, namespace, name) if not o.startswith(("Pod/", "EndpointSlice/"))
    )
    assert created == want

    jobs = {f"{name}-{role}" for role in spec.active_roles()}
    assert jobs == {f"{name}-chief", f"{name}-worker", f"{name}-ps", f"{name}-evaluator"}
    wait_for_jobs(kind_cluster, namespace, name, jobs)

    # The chief's final checkpoint (FINAL.json) is the one the evaluator evaluated last.
    chief = progress_events(role_log(kind_cluster, namespace, name, "chief"))
    final = [e for e in chief if e["event"] == "final"]
    assert final, f"no final event in the chief's log: {chief[-5:]}"
    final_step = final[-1]["step"]
    assert final_step >= STEPS
    evaluator = progress_events(role_log(kind_cluster, namespace, name, "evaluator"))
    done = [e for e in evaluator if e["event"] == "evaluator_done"]
    assert done, f"the evaluator did not finish: {evaluator[-5:]}"
    assert done[-1]["step"] == final_step, (done[-1], final[-1])
    assert any(e["event"] == "evaluated" and e["checkpoint"] == done[-1]["final"] for e in evaluator) or done[-1][
        "final"
    ] in _evaluated_before(kind_cluster, checkpoint_pvc, name)
    node_path = getattr(checkpoint_pvc, "node_path", None)
    if node_path:  # on the shared volume: the marker, and the metrics marking the final checkpoint
        marker = json.loads(kind_cluster.docker_exec("cat", f"{node_path}/{name}/FINAL.json").stdout)
        assert marker["step"] == final_step and marker["requested_steps"] == STEPS, marker
        text = kind_cluster.docker_exec("cat", f"{node_path}/{name}/eval/metrics.jsonl").stdout
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        finals = [r for r in records if r["final"]]
        assert len(finals) == 1 and finals[0]["step"] == final_step, records
        assert finals[0]["checkpoint"] == marker["checkpoint"], (finals, marker)

    # The launcher reads a Helm-installed cluster like its own (NOTES.txt tells users to).
    r = launcher(kind_cluster, "status", name, "-n", namespace, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phase"] == "Succeeded", r.stdout
    r = launcher(kind_cluster, "logs", name, "--role", "evaluator", "--index", "0", "-n", namespace)
    assert r.returncode == 0, r.stderr
    assert any(e["event"] == "evaluator_done" and e["step"] == final_step for e in progress_events(r.stdout)), r.stdout[
        -2000:
    ]

    helm("uninstall", name, "-n", namespace, "--wait", "--timeout", "3m")
    deadline = time.monotonic() + 180
    while (left := instance_objects(kind_cluster, namespace, name)) and time.monotonic() < deadline:
        time.sleep(2)
    assert left == [], f"left after helm uninstall: {left}"
    assert helm("status", name, "-n", namespace, check=False).returncode != 0
    secrets = kind_cluster.get_json("-n", namespace, "secrets", "-l", f"owner=helm,name={name}")
    assert secrets["items"] == []


def test_helm_install_refuses_invalid_values_before_creating_anything(kind_cluster, namespace, helm, tmp_path):
    name = "helm-bad"
    good = ClusterSpec.model_validate(
        {
            "name": name,
            "namespace": namespace,
            "strategy": "parameter_server",
            "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}, "ps": {"replicas": 1}},
        }
    )
    cases = {
        "unknown key": ({"replica": 2}, "additional properties 'replica' not allowed"),
        "wrong enum": ({"strategy": "data_parallel"}, "at '/strategy': value must be one of"),
        "70-char name": ({"name": "a" * 70}, "at '/name': maxLength: got 70, want 63"),
        "cross-field": (
            {"roles": {**chart_values.helm_values(good)["roles"], "ps": {"replicas": 0}}},
            "at '/roles/ps/replicas': minimum: got 0, want 1",
        ),
    }
    for what, (change, message) in cases.items():
        values = tmp_path / f"bad-{what.replace(' ', '-')}.json"
        values.write_text(json.dumps({**chart_values.helm_values(good), **change}))
        r = helm("install", name, str(CHART), "-n", namespace, "-f", str(values), check=False)
        assert r.returncode != 0, f"{what}: helm install accepted invalid values"
        assert "values don't meet the specifications of the schema" in r.stderr, (what, r.stderr)
        assert message in r.stderr, (what, r.stderr)
        assert instance_objects(kind_cluster, namespace, name) == [], what
        assert kind_cluster.get_json("-n", namespace, "secrets", "-l", f"owner=helm,name={name}")["items"] == [], (
            f"{what}: a Helm release record was created"
        )
    assert json.loads(helm("list", "-n", namespace, "-a", "-o", "json").stdout) == []


@pytest.mark.tf_trainings(1)
def test_helm_install_without_values_trains_one_mirrored_pod(kind_cluster, namespace, worker_image, helm):
    """The chart's defaults alone: one mirrored pod, its checkpoint dir an emptyDir (the
    image's filesystem is not writable by the non-root user)."""
    name = "helm-bare"
    if worker_image != "tfk8s/worker:dev":
        skip_unless_ci(f"the chart's default image is tfk8s/worker:dev, the tests use {worker_image}")
    helm("install", name, str(CHART), "-n", namespace, "--timeout", "2m")
    # The platform OWNER.json names: read at install from the published CA, as submit names it.
    published = kind_cluster.get_json("-n", namespace, "configmap", k8s_contract.ROOT_CA_CONFIGMAP)
    job = kind_cluster.get_json("-n", namespace, "job", f"{name}-chief")
    [task] = [c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == k8s_contract.CONTAINER]
    platforms = [e["value"] for e in task["env"] if e["name"] == "TFK8S_PLATFORM"]
    assert platforms == [k8s_contract.kubernetes_platform(published["data"][k8s_contract.ROOT_CA_KEY])]
    wait_for_jobs(kind_cluster, namespace, name, {f"{name}-chief"})
    chief = progress_events(role_log(kind_cluster, namespace, name, "chief"))
    final = [e for e in chief if e["event"] == "final"]
    # No checkpoint.dir: the cluster's own, <mountPath>/<namespace>/<release name>.
    assert final and final[-1]["checkpoint"].startswith(f"/ckpt/{namespace}/{name}/"), chief[-5:]
    r = launcher(kind_cluster, "status", name, "-n", namespace, "-o", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["phase"] == "Succeeded", r.stdout + r.stderr
    helm("uninstall", name, "-n", namespace, "--wait", "--timeout", "3m")


def _code_spec_file(tmp_path: Path, name: str, namespace: str, image: str, blob: int) -> Path:
    """A mirrored cluster whose code: dir holds its program and `blob` incompressible bytes."""
    src = tmp_path / f"src-{blob}"
    src.mkdir()
    (src / "train.py").write_text("from worker.examples.digits import *  # noqa: F401,F403\n")
    (src / "weights.bin").write_bytes(os.urandom(blob))
    spec = {
        "name": name,
        "namespace": namespace,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "strategy": "mirrored",
        "code": f"./{src.name}",
        "program": {"module": "train", "args": ["--steps", "20", "--checkpoint-every", "10"]},
        "roles": {"chief": {"replicas": 1}},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.tf_trainings(1)
def test_helm_install_of_shipped_code_up_to_the_release_limit_and_our_refusal_above(
    kind_cluster, namespace, worker_image, helm, tmp_path
):
    """Helm keeps a release (values and rendered manifests) in one Secret of at most 1 MiB, and
    codeArchive is in it twice: 300 kB installs and trains; 600 kB is refused by
    `render --helm-values` in one line that names the limit, before Helm is asked."""
    name = "helm-code"
    spec_file = _code_spec_file(tmp_path, name, namespace, worker_image, 300_000)
    r = subprocess.run(
        [sys.executable, "-m", "launcher", "render", str(spec_file), "--helm-values"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    values = tmp_path / "values.yaml"
    values.write_text(r.stdout)
    helm("install", name, str(CHART), "-n", namespace, "-f", str(values), "--timeout", "2m")
    release = kind_cluster.get_json("-n", namespace, "secret", f"sh.helm.release.v1.{name}.v1")
    stored = len(release["data"]["release"]) * 3 // 4  # the Secret's data, decoded
    wait_for_jobs(kind_cluster, namespace, name, {f"{name}-chief"})
    objects = sorted(instance_objects(kind_cluster, namespace, name))
    spec = load_file(spec_file)
    launched = sorted(
        f"{o['kind']}/{o['metadata']['name']}"
        for o in render.render(plan(spec, pack_code(spec)))
        if o["kind"] in ("Job", "Service", "ConfigMap", "NetworkPolicy")
    )
    assert set(launched) <= set(objects), (launched, objects)
    helm("upgrade", name, str(CHART), "-n", namespace, "-f", str(values), "--timeout", "2m")
    helm("uninstall", name, "-n", namespace, "--wait", "--timeout", "3m")
    assert instance_objects(kind_cluster, namespace, name) == []

    big = _code_spec_file(tmp_path, "helm-big", namespace, worker_image, 600_000)
    refused = subprocess.run(
        [sys.executable, "-m", "launcher", "render", str(big), "--helm-values"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout[:500]
    line = refused.stderr.strip().splitlines()[-1]
    assert "over the 1024 KiB a Secret holds, where Helm keeps each release" in line, line
    print(f"helm code: 300 kB archive installed (release Secret {stored / 1024:.0f} KiB); 600 kB refused: {line}")
