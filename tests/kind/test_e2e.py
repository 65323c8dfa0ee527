"""End to end on a real kind cluster, through the real CLI (`python -m launcher ...`).

Every test gets a fresh namespace with Pod Security `restricted` enforced, and a PVC for the
checkpoint directory (fixtures in conftest.py).
"""

from __future__ import annotations

import datetime
import functools
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from local_clusters import measure
from prometheus_check import (
    MONITORING,
    SCRAPE,
    TrainingWatch,
    check_the_finished_training,
    probe_from_monitoring,
    prometheus,  # noqa: F401 (a fixture)
)
from support import REPO, skip_unless_ci, wait_until
from tensorboard_check import check_tensorboard_serves_the_evaluation

from launcher import k8s_contract
from launcher.api import ClusterNotFound, KubernetesBackendConfig, Phase, TFK8sClient

pytestmark = pytest.mark.kind
ROOT = REPO
LABEL = "app.kubernetes.io/instance"
STEPS = 200
PROGRESS = "tfk8s-progress "


def write_spec(
    tmp_path: Path,
    name: str,
    namespace: str,
    pvc: str | None,
    image: str,
    strategy: str = "parameter_server",
    steps: int = STEPS,
    checkpoint_every: int | None = None,
    evaluator: bool = False,
    program_args: tuple[str, ...] = (),
    **extra,
) -> Path:
    """A cluster spec; checkpoints every `checkpoint_every` steps (default a quarter of them).
    An evaluator only where the test checks evaluation: it is a TensorFlow process that
    evaluates every checkpoint, CPU taken from the training the test waits for."""
    spec = {
        "name": name,
        "namespace": namespace,
        "image": image,
        "strategy": strategy,
        "program": {
            "args": [
                "--steps",
                str(steps),
                "--checkpoint-every",
                str(checkpoint_every or steps // 4),
                "--global-batch-size",
                "32",
                *program_args,
            ]
        },
        "roles": {
            "chief": {"replicas": 1},
            "worker": {"replicas": 2},
            "ps": {"replicas": 1},
            **({"evaluator": {"replicas": 1}} if evaluator else {}),
        },
        "checkpoint": {"dir": f"/ckpt/{name}", "volume": {"persistentVolumeClaim": {"claimName": pvc}}},
        "peerTimeoutSeconds": 240,
        "ttlSecondsAfterFinished": 600,
    }
    if strategy == "multi_worker_mirrored":
        spec["roles"] = {"worker": {"replicas": 2}}
    for key, value in extra.items():
        spec[key] = value
    if pvc is None:
        spec["checkpoint"] = {"dir": "gs://unused-in-this-test/model"}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


PACED_PROGRAM = REPO / "tests" / "worker" / "probes" / "paced_program.py"


def paced_program(
    tmp_path: Path, steps: int, checkpoint_every: int, step_seconds: float = 0.1, batch: int = 32
) -> dict:
    """Spec fields for a fault training: the paced probe program (the small digits model, each
    training batch held `step_seconds` in its input pipeline), shipped with `code:`. Its steps
    cost almost no CPU and take a set time, so a fault lands mid-training by the clock, not by
    how fast a CNN steps beside everything else on 2 cores."""
    code = tmp_path / "paced-code"
    code.mkdir(exist_ok=True)
    shutil.copy(PACED_PROGRAM, code / PACED_PROGRAM.name)
    return {
        "code": code.name,
        "env": {"PACED_STEP_SECONDS": str(step_seconds)},
        "program": {
            "module": PACED_PROGRAM.stem,
            "args": [
                "--steps",
                str(steps),
                "--checkpoint-every",
                str(checkpoint_every),
                "--global-batch-size",
                str(batch),
            ],
        },
    }


def cli(cluster, *args: str, timeout: float = 900, check: bool = False):
    cmd = [sys.executable, "-m", "launcher", *args, "--kubeconfig", cluster.kubeconfig, "--context", cluster.context]
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    result.seconds = time.monotonic() - started
    print(
        f"$ {' '.join(cmd[1:])}  ({result.seconds:.1f}s, rc={result.returncode})\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed with {result.returncode}: {result.stderr}")
    return result


def progress(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        at = line.find(PROGRESS)
        if at >= 0:
            out.append(json.loads(line[at + len(PROGRESS) :]))
    return out


def objects(cluster, namespace: str, name: str) -> list[str]:
    kinds = "jobs,pods,services,configmaps,serviceaccounts,roles,rolebindings,networkpolicies"
    result = cluster.kubectl("-n", namespace, "get", kinds, "-l", f"{LABEL}={name}", "-o", "name")
    return result.stdout.split()


def wait_for(predicate, timeout: float, what: str, interval: float = 2.0):
    """support.wait_until, polling the API server every 2 s unless told otherwise."""
    return wait_until(predicate, timeout, what, interval)


def launcher_in_background(cluster, *args: str, stderr=subprocess.STDOUT) -> subprocess.Popen:
    """`python -m launcher ARGS` against the cluster, running on; its output is read with
    .communicate() (stderr into stdout unless told otherwise)."""
    cmd = [sys.executable, "-m", "launcher", *args, "--kubeconfig", cluster.kubeconfig, "--context", cluster.context]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)


def submit_in_background(cluster, spec: Path) -> subprocess.Popen:
    return launcher_in_background(cluster, "submit", str(spec), "--wait")


class StatusSampler(threading.Thread):
    """`status -o json`'s training, sampled while `running()` holds until it has seen `wanted`
    rising steps of the live training (each `status` costs about a second of CPU), or the run
    ended: how many it saw depends on the machine's speed, so the test says what it saw and
    asserts what every speed gives (a step read while the run ran)."""

    def __init__(self, cluster, namespace: str, name: str, running, wanted: int = 2):
        super().__init__(daemon=True, name=f"status-sampler-{name}")
        self.cluster, self.namespace, self.name, self.running, self.wanted = cluster, namespace, name, running, wanted
        self.sampled: list[dict] = []  # every training with a step past the start event's 0
        self.live: list[dict] = []  # those not finished yet, each at a higher step
        self.first_step_at: float | None = None  # time.monotonic()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while (
                self.running() and len(self.live) < self.wanted and not (self.sampled and self.sampled[-1]["finished"])
            ):
                status = cli(self.cluster, "status", self.name, "-n", self.namespace, "-o", "json", check=True)
                training = json.loads(status.stdout)["training"]
                if training and training["step"]:
                    self.first_step_at = self.first_step_at or time.monotonic()
                    self.sampled.append(training)
                    if not training["finished"] and (not self.live or training["step"] > self.live[-1]["step"]):
                        self.live.append(training)
                time.sleep(0.5)
        except BaseException as exc:  # raised again in the test by check()
            self.error = exc

    def check(self, steps: int) -> None:
        self.join(120)
        if self.error is not None:
            raise self.error
        ended = "" if len(self.live) >= self.wanted else f" (the run ended after {len(self.live)} live)"
        print(
            f"MEASURE {self.name} status -o json while the run ran: live steps {[t['step'] for t in self.live]}, "
            f"{len(self.sampled)} samples with a step{ended}"
        )
        assert self.sampled, "`status` never showed a training step while the run ran"
        assert all(t["target"] == steps and t["step"] <= steps for t in self.sampled), self.sampled
        assert all(t["loss"] is not None for t in self.live), self.live
        live_steps = [t["step"] for t in self.live]
        assert live_steps == sorted(set(live_steps)), live_steps


def follow_log(cluster, namespace: str, pod: dict) -> subprocess.Popen:
    """`kubectl logs -f` of a pod about to go (deleted, evicted): its own log, read to its end
    with .communicate(), since the pod object is gone after it terminates."""
    follow = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            cluster.kubeconfig,
            "--context",
            cluster.context,
            "-n",
            namespace,
            "logs",
            "-f",
            pod["metadata"]["name"],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cluster.env,
    )
    time.sleep(1)
    return follow


def follow_with_launcher(cluster, namespace: str, name: str, role: str = "chief") -> subprocess.Popen:
    """`python -m launcher logs -f` of a role's index 0, from a pending pod on: it follows the
    task across its pod's replacement and ends by itself when the cluster has finished."""
    wait_for(lambda: pod_of(cluster, namespace, name, role), 120, f"a {role} pod")
    return launcher_in_background(cluster, "logs", name, "-n", namespace, "--role", role, "-f", stderr=subprocess.PIPE)


def assert_followed_across_the_replacement(follower: subprocess.Popen, namespace: str, name: str) -> None:
    followed, said = follower.communicate(timeout=120)
    print(said, followed[-2000:])
    assert follower.returncode == 0, said
    assert f"[tfk8s] --- chief-0 of {namespace}/{name}: pod " in followed, said
    assert " replaced by " in followed and '"event": "final"' in followed


def kill_running(*processes: subprocess.Popen | None) -> None:
    """For a test's `finally`: kill what is still running (None: never started)."""
    for process in processes:
        if process is not None and process.poll() is None:
            process.kill()


def pod_of(cluster, namespace: str, name: str, role: str, index: int = 0) -> dict | None:
    pods = cluster.get_json(
        "pods",
        "-n",
        namespace,
        "-l",
        f"{LABEL}={name},app.kubernetes.io/component={role},batch.kubernetes.io/job-completion-index={index}",
    )["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return max(live, key=lambda p: p["metadata"]["creationTimestamp"]) if live else None


def chief_events(cluster, name: str, namespace: str) -> list[dict]:
    result = cli(cluster, "logs", name, "-n", namespace, "--role", "chief", "--index", "0", timeout=60)
    return progress(result.stdout) if result.returncode == 0 else []


def polled_events(cluster, name: str, namespace: str, role: str = "chief", index: int = 0) -> list[dict]:
    """Progress events of a task's current pods, read with kubectl: for the waits that poll
    every 2 s while training runs. Each `python -m launcher logs` (checked where its output is
    the point) costs about 1.3 s of CPU, taken from the training the test waits for."""
    selector = f"{LABEL}={name},app.kubernetes.io/component={role},batch.kubernetes.io/job-completion-index={index}"
    result = cluster.kubectl(
        "-n",
        namespace,
        "logs",
        "-l",
        selector,
        "-c",
        k8s_contract.CONTAINER,
        "--tail=-1",
        "--max-log-requests=20",
        check=False,
        timeout=60,
    )
    return progress(result.stdout) if result.returncode == 0 else []


def checkpointed_step(cluster, name, namespace, role: str = "chief") -> int | None:
    """The highest step a checkpoint event of the task (index 0) reports."""
    steps = [e["step"] for e in polled_events(cluster, name, namespace, role) if e["event"] == "checkpoint"]
    return max(steps) if steps else None


def evaluated_steps(cluster, name: str, namespace: str) -> list[int]:
    result = cli(cluster, "logs", name, "-n", namespace, "--role", "evaluator", "--index", "0", timeout=60)
    return [e.get("step") for e in progress(result.stdout) if e["event"] == "evaluated"]


def assert_all_jobs_complete(cluster, namespace: str, name: str) -> None:
    jobs = cluster.get_json("jobs", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
    assert jobs
    for job in jobs:
        conditions = {c["type"]: c["status"] for c in job["status"].get("conditions", [])}
        assert conditions.get("Complete") == "True", (job["metadata"]["name"], conditions)
    pods = cluster.get_json("pods", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
    running = [p["metadata"]["name"] for p in pods if p["status"]["phase"] in ("Running", "Pending")]
    assert not running, running


def _api_time(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def startup_breakdown(cluster, namespace: str, name: str, submitted: float) -> str:
    """Where the time from submit to the chief's first step went: the API's pod timestamps
    (1 s resolution) and the chief's progress events (wall clock; kind nodes share the host's)."""
    pod = pod_of(cluster, namespace, name, "chief")
    state = next(c["state"] for c in pod["status"]["containerStatuses"] if c["name"] == "tensorflow")
    started = (state.get("running") or state.get("terminated"))["startedAt"]
    events = chief_events(cluster, name, namespace)
    first = {}
    for event in events:
        first.setdefault(event["event"], event["wall"])
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    marks = [
        ("pod created", _api_time(pod["metadata"]["creationTimestamp"])),
        ("scheduled", _api_time(scheduled["lastTransitionTime"])),
        ("container started", _api_time(started)),
        ("worker process", events[0]["wall"] - events[0]["t"]),
    ]
    marks += [
        (label, first[event])
        for label, event in (
            ("peers ready", "peers_ready"),
            ("TF imported", "tensorflow_imported"),
            ("strategy connected", "connected"),
            ("restored", "start"),
            ("first step", "first_step"),
        )
        if event in first
    ]
    for role in ("ps", "worker"):  # when the peers the chief waits for began to serve
        logs = cli(cluster, "logs", name, "-n", namespace, "--role", role, "--index", "0", timeout=60)
        serving = [e["wall"] for e in progress(logs.stdout) if e["event"] == "serving"]
        if serving:
            marks.append((f"{role}-0 serving", serving[0]))
    return ", ".join(f"{label} {at - submitted:.1f}" for label, at in marks)


TFJOB_TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
DATA_CLAIM = "training-data"
PULL_SECRET = "registry-cred"  # the images are in the nodes already: never used to pull


def as_tfjob(spec_file: Path, data_claim: str) -> Path:
    """The cluster of `spec_file` (write_spec's) as the TFJob a team would have run it with:
    the worker image as the team's own, with no command (the image's ENTRYPOINT, `python -m
    worker`, runs with the program's args, as Kubeflow's dist-mnist example does), the
    checkpoint claim mounted in every pod but the ps (they never write one), and a data claim
    read-only in the workers; `import` converts it (docs/migrating-from-tfjob.md)."""
    spec = yaml.safe_load(spec_file.read_text())
    claim = spec["checkpoint"]["volume"]["persistentVolumeClaim"]["claimName"]
    replicas = {}
    for role, own in spec["roles"].items():
        env = {**spec.get("env", {}), **own.get("env", {})}
        container = {
            "name": "tensorflow",
            "image": spec["image"],
            "args": list(spec["program"]["args"]),
            "env": [{"name": name, "value": value} for name, value in env.items()],
            "volumeMounts": [] if role == "ps" else [{"name": "ckpt", "mountPath": "/ckpt"}],
        }
        volumes = [] if role == "ps" else [{"name": "ckpt", "persistentVolumeClaim": {"claimName": claim}}]
        if role == "worker":
            container["volumeMounts"].append({"name": "data", "mountPath": "/data", "readOnly": True})
            volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": data_claim, "readOnly": True}})
        # The team's pod fields: a registry secret, placement by affinity, a pod field of its own.
        pod = {"containers": [container], "volumes": volumes, "imagePullSecrets": [{"name": PULL_SECRET}]}
        pod["enableServiceLinks"] = False  # into the role's podTemplate
        if own.get("nodeSelector"):
            terms = [{"key": k, "operator": "In", "values": [v]} for k, v in own["nodeSelector"].items()]
            pod["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": terms}]
                    }
                }
            }
        replicas[TFJOB_TYPES[role]] = {"replicas": own["replicas"], "restartPolicy": "Never", "template": {"spec": pod}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": spec["name"], "namespace": spec["namespace"]},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "ttlSecondsAfterFinished": spec["ttlSecondsAfterFinished"]},
            "tfReplicaSpecs": replicas,
        },
    }
    path = spec_file.with_name(f"{spec['name']}-tfjob.yaml")
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def bind_data_claim(cluster, namespace: str, checkpoint_pvc) -> None:
    """DATA_CLAIM in `namespace`: a read-only claim on the checkpoint volume's node dir (a data
    set's claim, as TFJob teams mount one); deleted with the namespace's test."""
    pv = f"data-{namespace}"
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": {"tfk8s-test": "data"}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "tfk8s-hostpath",
                "hostPath": {"path": checkpoint_pvc.node_path, "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": DATA_CLAIM},
            },
        }
    )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": DATA_CLAIM, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "storageClassName": "tfk8s-hostpath",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    cluster.kubectl(
        "-n", namespace, "wait", "--for=jsonpath={.status.phase}=Bound", f"pvc/{DATA_CLAIM}", "--timeout=60s"
    )


@pytest.mark.tf_trainings(1)
def test_ps_training_succeeds_with_final_checkpoint_evaluated(
    kind_cluster, worker_image, probe_image, namespace, checkpoint_pvc, prometheus, tmp_path
):
    """Imported from a TFJob file (as_tfjob: the team's own image and command, a data claim) by
    the client's import_tfjob, a `dataService` added to the cluster.yaml it writes. Also the
    placement across nodes with the NetworkPolicies in force: the chief (and the evaluator) on
    one node, ps and workers on the other, so cross-node TF_CONFIG addresses and the policy's
    own-pod rule carry a real training (test_network.py probes the policy itself on stand-in
    pods). And a Prometheus in the cluster watches it (prometheus_check.py). The input pipeline
    runs on a tf.data service (its pods beside the chief): the workers read their batches across
    nodes through its policies, the scrapers' namespace reaches neither its dispatcher's nor its
    data worker's gRPC port, and its pods end with the training (docs/data-service.md)."""
    # Long enough, with a step event every second, for status and Prometheus to see the step
    # advance after Prometheus has found the pods, and for the monitoring probes to find the data
    # service serving then on a loaded machine (at 400 steps one came after it had ended).
    steps, progress_env = 3 * STEPS, {"TFK8S_PROGRESS_SECONDS": "1"}
    nodes = sorted(kind_cluster.node_names())
    assert len(nodes) >= 2, f"the kind tier needs two nodes, has {nodes}"
    pin = {"chief": nodes[0], "evaluator": nodes[0], "ps": nodes[1], "worker": nodes[1]}
    roles = {
        role: {"replicas": n, "nodeSelector": {"kubernetes.io/hostname": pin[role]}}
        for role, n in (("chief", 1), ("worker", 2), ("ps", 1), ("evaluator", 1))
    }
    data_service = {
        "workers": 1,
        "dispatcher": {"nodeSelector": {"kubernetes.io/hostname": nodes[0]}},
        "worker": {"nodeSelector": {"kubernetes.io/hostname": nodes[0]}},
    }
    ps_spec = functools.partial(
        write_spec,
        tmp_path,
        "ps",
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        steps=steps,
        env=progress_env,
        roles=roles,
        program_args=("--data-service",),
        dataService=data_service,
    )
    spec = ps_spec()
    bind_data_claim(kind_cluster, namespace, checkpoint_pvc)
    kind_cluster.kubectl(
        "-n", namespace, "create", "secret", "docker-registry", PULL_SECRET,
        "--docker-server=registry.invalid", "--docker-username=team", "--docker-password=unused",
    )  # fmt: skip
    (imported,) = TFK8sClient.import_tfjob(as_tfjob(spec, DATA_CLAIM))
    assert any("spec.tfReplicaSpecs: strategy parameter_server, from the replica types" in n for n in imported.notes)
    # no command in the TFJob: the image's ENTRYPOINT, read from the image here, written out
    assert any("no command: the image's ENTRYPOINT ['python', '-m', 'worker']" in n for n in imported.notes), (
        imported.notes
    )
    cluster_yaml = tmp_path / "ps-imported.yaml"  # the TFJob's cluster.yaml, its comments kept
    cluster_yaml.write_text(imported.text + yaml.safe_dump({"dataService": data_service}, sort_keys=False))
    started, submitted = time.monotonic(), time.time()
    proc = submit_in_background(kind_cluster, cluster_yaml)
    try:

        def all_running():
            pods = kind_cluster.get_json("pods", "-n", namespace, "-l", f"{LABEL}=ps")["items"]
            return len(pods) == 7 and all(p["status"]["phase"] == "Running" for p in pods)

        wait_for(all_running, 600, "all 7 pods Running", interval=0.5)
        running = time.monotonic() - started
        selector = f'training_namespace="{namespace}", training="ps"'
        wait_for(
            lambda: prometheus.value(f'tfk8s_global_step{{{selector}, role="chief"}} > 0'),
            600,
            "Prometheus scraping the chief's first step",
        )
        first_scraped = time.monotonic() - started
        watch = TrainingWatch(prometheus, namespace, "ps", lambda: proc.poll() is None)
        watch.start()
        # status read the step from the chief's log through the API while it trained
        sampler = StatusSampler(kind_cluster, namespace, "ps", lambda: proc.poll() is None)
        sampler.start()
        # The NetworkPolicies: the scrapers' namespace reaches the metrics port, not TF's gRPC port.
        # The data service is fenced alike. Its servers listen: the chief has made a step.
        fenced = {role: pod_of(kind_cluster, namespace, "ps", role) for role in ("chief", "dispatcher", "data-worker")}
        for role, reached in probe_from_monitoring(kind_cluster, probe_image, fenced, 9401, 2222).items():
            assert reached["metrics"]["connected"] and not reached["grpc"]["connected"], (role, reached)
        output, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    total = time.monotonic() - started
    watch.check()
    sampler.check(steps)
    first_step = sampler.first_step_at - started if sampler.first_step_at else None
    print(output[-3000:])
    print(
        f"MEASURE ps submit->all pods Running {running:.1f}s, ->first step in status "
        f"{first_step or float('nan'):.1f}s, ->succeeded {total:.1f}s"
    )
    assert proc.returncode == 0, output[-2000:]
    assert "[Succeeded]" in output
    assert_all_jobs_complete(kind_cluster, namespace, "ps")  # the ps ended: its Job completed
    worker_pod = pod_of(kind_cluster, namespace, "ps", "worker")
    data = [v for v in worker_pod["spec"]["volumes"] if v["name"] == "data"]
    assert data == [{"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM, "readOnly": True}}]
    task = worker_pod["spec"]["containers"][0]
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in task["volumeMounts"]
    assert task["command"][-len(spec_args(spec)) - 3 :] == ["python", "-m", "worker", *spec_args(spec)]
    assert worker_pod["spec"]["imagePullSecrets"] == [{"name": PULL_SECRET}]
    assert worker_pod["spec"]["enableServiceLinks"] is False  # the podTemplate's override
    assert worker_pod["spec"]["affinity"]["nodeAffinity"]  # placed by it: the node checks below
    policies = kind_cluster.get_json("networkpolicies", "-n", namespace, "-l", f"{LABEL}=ps")["items"]
    assert policies, "networkPolicy (on by default) rendered no NetworkPolicy"
    placed = {
        f"{role}-{i}": pod_of(kind_cluster, namespace, "ps", role, i)["spec"]["nodeName"]
        for role, i in (("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1))
    }
    assert placed["chief-0"] != placed["ps-0"] == placed["worker-0"] == placed["worker-1"], placed
    accuracy = check_the_finished_training(prometheus, namespace, "ps", steps)
    measure(
        f"kind: in-cluster Prometheus (pod SD, scrape {SCRAPE}) watched the PS training: first step scraped "
        f"{first_scraped:.0f} s after submit; steps seen {watch.steps_seen[:3]}... -> {steps}; final accuracy "
        f"{accuracy:.3f}; every panel answered; gRPC port refused from {MONITORING}, metrics port open"
    )
    measure("kind ps start-up, s after submit (chief): " + startup_breakdown(kind_cluster, namespace, "ps", submitted))

    events = chief_events(kind_cluster, "ps", namespace)
    final = [e for e in events if e["event"] == "final"]
    assert final and final[0]["step"] >= steps
    assert steps in evaluated_steps(kind_cluster, "ps", namespace) or final[0]["step"] in evaluated_steps(
        kind_cluster, "ps", namespace
    )
    for role in ("worker", "ps"):
        logs = cli(kind_cluster, "logs", "ps", "-n", namespace, "--role", role, "--index", "0")
        assert logs.returncode == 0 and logs.stdout.strip()

    status = cli(kind_cluster, "status", "ps", "-n", namespace, "-o", "json", check=True)
    data = json.loads(status.stdout)
    assert data["phase"] == "Succeeded" and data["exitCode"] == 0
    counts = {r["role"]: r["succeeded"] for r in data["roles"]}
    assert counts == {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1, "dispatcher": 1, "data-worker": 1}
    # status reads the final step and evaluation after the end (and read the step while the
    # run ran: sampler.check above)
    training = data["training"]
    assert training["finished"] and training["step"] == training["target"] == steps
    assert training["evaluation"]["final"] and training["evaluation"]["step"] == steps
    assert training["evaluation"]["checkpoint"] == f"ckpt-{steps}"
    assert 0 < training["evaluation"]["metrics"]["accuracy"] <= 1
    text = cli(kind_cluster, "status", "ps", "-n", namespace, check=True).stdout
    assert f"training: step {steps}/{steps}" in text and f"final eval ckpt-{steps}" in text
    every = cli(kind_cluster, "logs", "ps", "-n", namespace, "--all", check=True).stdout
    for task in ("chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0", "dispatcher-0", "data-worker-0"):
        assert f"[{task}] " in every, task

    # The same cluster.yaml again: nothing changes. A changed spec is refused without --replace.
    again = cli(kind_cluster, "submit", str(cluster_yaml))
    assert again.returncode == 0 and "unchanged" in again.stderr
    changed = ps_spec(backoffLimit=3)
    refused = cli(kind_cluster, "submit", str(changed))
    assert refused.returncode == 2 and "--replace" in refused.stderr

    check_tensorboard_serves_the_evaluation(kind_cluster, namespace, "ps", final[0]["step"], tmp_path)
    # The Python API on the same cluster: status, wait, list, logs (tail, follow), delete.
    client = TFK8sClient(
        KubernetesBackendConfig(namespace=namespace, context=kind_cluster.context, kubeconfig=kind_cluster.kubeconfig)
    )
    job = client.wait_for_job_status("ps", timeout=60)
    assert job.phase is Phase.SUCCEEDED and job.training.step == steps
    assert "ps" in [j.name for j in client.list_jobs()]
    assert len(list(client.get_job_logs("ps", "chief", tail=2))) == 2
    evaluator = list(client.get_job_logs("ps", "evaluator", follow=True))  # ends with the task
    assert any(f"ckpt-{steps}" in line for line in evaluator)
    before = objects(kind_cluster, namespace, "ps")
    assert any(o.startswith("configmap") for o in before)
    client.delete_job("ps")
    assert objects(kind_cluster, namespace, "ps") == []
    with pytest.raises(ClusterNotFound):
        client.get_job("ps")
    kind_cluster.kubectl("delete", "pv", f"data-{namespace}", "--wait=false", "--ignore-not-found", check=False)


def spec_args(spec_file: Path) -> list[str]:
    return yaml.safe_load(spec_file.read_text())["program"]["args"]


def _conditions(job: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


@pytest.mark.tf_trainings(1)
def test_failed_chief_ends_every_pod(kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path):
    """A PS cluster whose chief crashes after start ends completely: the chief's Job fails, and
    every other pod, the built-in evaluator's included (it used to wait forever for a final
    checkpoint), has ended within 60 s. The crash is a program module that does not exist,
    found once the peers answered and TensorFlow loaded: the built-in worker's config error,
    exit 2, which the podFailurePolicy turns into FailJob at once despite backoffLimit 1."""
    name = "chieffail"
    spec = write_spec(
        tmp_path,
        name,
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        backoffLimit=1,
        roles={
            "chief": {"replicas": 1, "env": {"TFK8S_PROGRAM": "no.such.module"}},
            "worker": {"replicas": 1},
            "ps": {"replicas": 1},
            "evaluator": {"replicas": 1},
        },
    )
    proc = submit_in_background(kind_cluster, spec)
    try:

        def jobs() -> dict[str, dict]:
            items = kind_cluster.get_json("jobs", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
            return {j["metadata"]["labels"]["app.kubernetes.io/component"]: j for j in items}

        def pods() -> list[dict]:
            return kind_cluster.get_json("pods", "-n", namespace, "-l", f"{LABEL}={name}")["items"]

        seen_running: set[str] = set()

        def chief_failed():
            for pod in pods():
                if pod["status"].get("phase") == "Running":
                    seen_running.add(pod["metadata"]["labels"]["app.kubernetes.io/component"])
            chief = jobs().get("chief")
            return chief is not None and "Failed" in _conditions(chief)

        wait_for(chief_failed, 600, "the chief's Job to fail", interval=0.5)
        failed_at = time.monotonic()

        def every_pod_ended():
            current = pods()
            return current and all(p["status"].get("phase") in ("Succeeded", "Failed") for p in current)

        wait_for(every_pod_ended, 120, "every pod to end", interval=0.5)
        cleanup = time.monotonic() - failed_at
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(output[-3000:])
    print(
        f"MEASURE failed chief: every pod (evaluator included) ended {cleanup:.1f}s after the "
        f"chief's Job failed (Running before: {sorted(seen_running)})"
    )
    assert "evaluator" in seen_running and "ps" in seen_running, seen_running
    assert cleanup <= 60, f"pods still running {cleanup:.1f}s after the chief's Job failed"
    assert proc.returncode == 2, output[-2000:]  # the chief's exit code

    # The supervisor stopped the others and exited 0: their Jobs complete (the Job controller
    # adds the condition shortly after the pods ended), nothing holds a CPU.
    final = wait_for(
        lambda: (
            lambda js: js if all("Complete" in _conditions(js[r]) for r in ("worker", "ps", "evaluator")) else None
        )(jobs()),
        60,
        "the worker, ps and evaluator Jobs to complete",
    )
    failed = _conditions(final["chief"])["Failed"]
    assert failed["reason"] == "PodFailurePolicy", failed  # FailJob: no retry despite backoffLimit 1
    chief_pods = [p for p in pods() if p["metadata"]["labels"]["app.kubernetes.io/component"] == "chief"]
    assert len(chief_pods) == 1, [p["metadata"]["name"] for p in chief_pods]
    chief_log = cli(kind_cluster, "logs", name, "-n", namespace, "--role", "chief").stdout
    assert "program module 'no.such.module'" in chief_log
    evaluator_log = cli(kind_cluster, "logs", name, "-n", namespace, "--role", "evaluator").stdout
    assert "training ended (failed); stopping the task" in evaluator_log, evaluator_log[-2000:]

    status = cli(kind_cluster, "status", name, "-n", namespace, "-o", "json", check=True)
    data = json.loads(status.stdout)
    assert data["phase"] == "Failed" and data["exitCode"] == 2, data
    assert "chief failed" in data["message"], data


# A stand-in for a TensorFlow task where TensorFlow is not the subject (the pods, policies,
# API objects and controllers are the real ones): a bring-your-own PS cluster's task that takes
# no CPU. It listens on its own TF_CONFIG port, as a TF server would; the chief ends after
# CHIEF_SECONDS, every other task would serve forever (the supervisor ends it).
STAND_IN = (
    "import json, os, socket, time; config = json.loads(os.environ['TF_CONFIG']); "
    "task = config['task']; server = socket.socket(); "
    "server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "server.bind(('', int(config['cluster'][task['type']][task['index']].rsplit(':', 1)[1]))); "
    "server.listen(64); print(task['type'], 'up', flush=True); "
    "time.sleep(float(os.environ['CHIEF_SECONDS']) if task['type'] == 'chief' else 3600)"
)  # no evaluator: it is outside the training cluster, and the built-in one ends with training


def stand_in_spec(name: str, namespace: str, image: str, chief_seconds: int, **extra) -> dict:
    """A PS cluster of stand-in tasks (chief, 1 worker, 1 ps unless `roles` says otherwise)."""
    return {
        "name": name,
        "namespace": namespace,
        "image": image,
        "strategy": "parameter_server",
        "command": ["python3", "-c", STAND_IN],
        "env": {"CHIEF_SECONDS": str(chief_seconds)},
        "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}, "ps": {"replicas": 1}},
        "checkpoint": {"dir": "gs://unused-in-this-test/model"},
        "backoffLimit": 0,
        "terminationGracePeriodSeconds": 10,
        "ttlSecondsAfterFinished": 600,
        **extra,
    }


def write_stand_in_spec(tmp_path: Path, name: str, namespace: str, image: str, chief_seconds: int, **extra) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(stand_in_spec(name, namespace, image, chief_seconds, **extra)))
    return path


def running_pod(cluster, namespace: str, name: str, role: str) -> dict:
    def ready():
        pod = pod_of(cluster, namespace, name, role)
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        return pod if statuses and all(cs.get("ready") for cs in statuses) else None

    return wait_for(ready, 180, f"{name}'s {role} pod to run")


def test_the_tf_container_holds_no_token_and_the_job_watch_ends_the_servers(
    kind_cluster, worker_image, namespace, tmp_path
):
    """TF's gRPC server can read any file of its container for any caller: the token is only
    in the job-watch container, which still ends the servers once the chief is done."""
    name = "notoken"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(stand_in_spec(name, namespace, worker_image, chief_seconds=20)))
    cli(kind_cluster, "submit", str(spec), check=True, timeout=120)
    ps = running_pod(kind_cluster, namespace, name, "ps")
    sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    probe = (
        "import os, sys; found = [os.path.join(d, f) for d, _, fs in os.walk('/var/run') "
        "for f in fs if f == 'token']; print(os.path.exists(sys.argv[1]), found)"
    )

    def look(container: str) -> str:
        return kind_cluster.kubectl(
            "-n", namespace, "exec", ps["metadata"]["name"], "-c", container, "--", "python3", "-c", probe, sa_dir
        ).stdout.strip()

    assert look("tensorflow") == "False []"  # nothing at the standard path, no token anywhere
    assert look("job-watch").startswith(f"True ['{sa_dir}/")
    rss = kind_cluster.kubectl(
        "-n", namespace, "exec", ps["metadata"]["name"], "-c", "job-watch", "--", "grep", "VmRSS", "/proc/1/status"
    ).stdout.split()[1]
    print(f"MEASURE job-watch container: {int(rss) / 1024:.1f} MiB resident while watching")
    assert ps["spec"]["automountServiceAccountToken"] is False

    def all_complete():
        jobs = kind_cluster.get_json("jobs", "-n", namespace, "-l", f"{LABEL}={name}")["items"]
        return len(jobs) == 3 and all("Complete" in _conditions(j) for j in jobs)

    wait_for(all_complete, 180, "the chief to end, and the job-watch to end ps and worker")
    assert_all_jobs_complete(kind_cluster, namespace, name)


def test_a_supervised_pod_that_cannot_reach_the_api_ends_within_the_bound_and_says_why(
    kind_cluster, worker_image, namespace
):
    """Default-deny egress: the API server never answers the job-watch (here its address is one
    nothing answers at, TEST-NET-1). Within TFK8S_API_GIVE_UP_SECONDS the ps ends, exit 7, and
    `status` says what to open."""
    from launcher.cluster_spec.spec import ClusterSpec
    from launcher.plan.plan import plan
    from launcher.render import render

    name, give_up, api = "noapi", 20, "192.0.2.1"
    objects = render.render(
        plan(ClusterSpec.model_validate(stand_in_spec(name, namespace, worker_image, chief_seconds=3600)))
    )
    for obj in objects:
        for container in obj["spec"]["template"]["spec"]["containers"] if obj["kind"] == "Job" else []:
            if container["name"] == "job-watch":
                container["env"] += [
                    {"name": "KUBERNETES_SERVICE_HOST", "value": api},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "443"},
                    {"name": "TFK8S_API_GIVE_UP_SECONDS", "value": str(give_up)},
                    # kind's network refuses an unroutable address, as an API server restarting does
                    {"name": "TFK8S_API_REFUSED_GIVE_UP_SECONDS", "value": str(give_up)},
                ]
    kind_cluster.apply(objects, namespace)

    def ps_ended():
        pod = pod_of(kind_cluster, namespace, name, "ps")
        return pod if pod and pod["status"].get("phase") == "Failed" else None

    pod = wait_for(ps_ended, 240, "the ps pod without API access to end")
    [task] = [cs for cs in pod["status"]["containerStatuses"] if cs["name"] == "tensorflow"]
    ended = task["state"]["terminated"]
    took = time.mktime(time.strptime(ended["finishedAt"], "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(
        time.strptime(ended["startedAt"], "%Y-%m-%dT%H:%M:%SZ")
    )
    print(
        f"MEASURE no API access: the ps ended {took:.0f}s after its task started "
        f"(give-up {give_up}s); termination message: {ended.get('message', '').strip()}"
    )
    assert ended["exitCode"] == 7
    assert took <= give_up + 15, took
    assert f"the supervised pods need egress to the API server: {api}:443" in ended["message"]
    status = cli(kind_cluster, "status", name, "-n", namespace, timeout=60)
    assert f"egress to the API server: {api}:443" in status.stdout, status.stdout


@pytest.mark.tf_trainings(1)
def test_mwms_training_succeeds(kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path):
    spec = write_spec(
        tmp_path, "mw", namespace, checkpoint_pvc.claim_name, worker_image, strategy="multi_worker_mirrored"
    )
    result = cli(kind_cluster, "submit", str(spec), "--wait")
    assert result.returncode == 0, result.stderr
    print(f"MEASURE mwms submit->succeeded {result.seconds:.1f}s")
    assert_all_jobs_complete(kind_cluster, namespace, "mw")


def test_server_dry_run_of_every_example(kind_cluster, namespace):
    # the queued JobSet example needs JobSet, Kueue and a LocalQueue: test_jobset.py
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        if "workload: jobset" in example.read_text():
            continue
        result = cli(kind_cluster, "submit", str(example), "-n", namespace, "--dry-run=server")
        assert result.returncode == 0, (example.name, result.stderr)
        assert "accepted by the API server" in result.stderr
    assert cluster_is_empty(kind_cluster, namespace)


def test_restricted_admission_refuses_what_the_launcher_refuses_and_admits_its_neighbours(kind_cluster, namespace):
    """The podTemplate policy against a real API server's Pod Security `restricted` (this
    namespace enforces it): each setting the launcher and the chart refuse for `restricted`'s
    sake (tests/restricted_settings.py), laid on a pod the launcher rendered, is refused by the
    admission too; each neighbour they admit, rendered by the launcher with it, is admitted. The
    launcher is then neither weaker than `restricted` nor stricter where it need not be."""
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException
    from restricted_settings import admitted, pod_template, refused, role_fields

    from launcher.cluster_spec.loader import load_data
    from launcher.errors import SpecError
    from launcher.plan.plan import plan
    from launcher.render import render

    def spec_with(setting=None) -> dict:
        data = {
            "name": "psa",
            "namespace": namespace,
            "image": "tfk8s/worker:dev",
            "strategy": "mirrored",
            "roles": {"chief": {"replicas": 1}},
        }
        if setting is not None:
            data["roles"]["chief"].update(role_fields(setting))
        return data

    def rendered_pod_spec(data: dict) -> dict:
        [job] = [o for o in render.render(plan(load_data(data))) if o["kind"] == "Job"]
        return job["spec"]["template"]["spec"]

    def launcher_refuses(data: dict) -> bool:
        try:
            load_data(data)
        except SpecError:
            return True
        return False

    core = k8s.CoreV1Api(kind_cluster.api_client())

    def admission(i: int, pod_spec: dict) -> str:
        """'' if admitted, else the API server's refusal."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"psa-{i}"}, "spec": pod_spec}
        try:
            core.create_namespaced_pod(namespace, pod, dry_run="All")
            return ""
        except ApiException as e:
            return json.loads(e.body).get("message", e.body)

    base = rendered_pod_spec(spec_with())
    assert admission(0, base) == "", "the launcher's own pod is refused"
    launcher_let_through = [s.id for s in refused() if not launcher_refuses(spec_with(s))]
    assert not launcher_let_through, launcher_let_through
    let_through = {s.id: admission(i, pod_template(s, base)) for i, s in enumerate(refused(), 1)}
    assert all('violates PodSecurity "restricted' in m for m in let_through.values()), {
        i: m for i, m in let_through.items() if 'violates PodSecurity "restricted' not in m
    }
    refused_wrongly = {
        s.id: admission(i, rendered_pod_spec(spec_with(s))) for i, s in enumerate(admitted(), len(let_through) + 1)
    }
    assert not any(refused_wrongly.values()), refused_wrongly
    measure(
        f"restricted admission: {len(let_through)} settings the launcher refuses refused by the API server too; "
        f"{len(refused_wrongly)} neighbours the launcher renders admitted"
    )


def test_jobset_without_the_jobset_api_is_one_clear_line(kind_cluster, worker_image, namespace, tmp_path):
    if kind_cluster.kubectl("get", "crd", "jobsets.jobset.x-k8s.io", check=False).returncode == 0:
        skip_unless_ci("JobSet is installed on this reused cluster (a fresh one has none)")
    spec = write_spec(tmp_path, "nojs", namespace, None, worker_image, workload="jobset")
    result = cli(kind_cluster, "submit", str(spec))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: workload: jobset, but this cluster has no JobSet API (jobset.x-k8s.io/v1alpha2): "
        "install JobSet (kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/"
        "releases/download/v0.11.1/manifests.yaml), or use workload: jobs"
    )
    assert cluster_is_empty(kind_cluster, namespace)


def cluster_is_empty(cluster, namespace) -> bool:
    result = cluster.kubectl(
        "-n", namespace, "get", "jobs,configmaps", "-l", "app.kubernetes.io/name=tfk8s", "-o", "name"
    )
    return result.stdout.strip() == ""


def delete_and_wait_for_the_replacement(cluster, namespace: str, name: str, role: str) -> tuple[dict, float]:
    """Delete the role's index-0 pod (graceful, as `kubectl delete pod`); return it and the
    wall time of the deletion once a new pod of that task runs."""
    victim = pod_of(cluster, namespace, name, role)
    assert victim is not None
    deleted_at, deleted_wall = time.monotonic(), time.time()
    cluster.kubectl("-n", namespace, "delete", "pod", victim["metadata"]["name"], "--wait=false")

    def replaced():
        pod = pod_of(cluster, namespace, name, role)
        if pod and pod["metadata"]["uid"] != victim["metadata"]["uid"] and pod["status"]["phase"] == "Running":
            return pod
        return None

    wait_for(replaced, 300, f"a new {role} pod")
    print(f"MEASURE chaos {role}: replacement pod Running {time.monotonic() - deleted_at:.1f}s after deletion")
    return victim, deleted_wall


@pytest.mark.tf_trainings(1)
def test_chaos_delete_a_worker_then_a_ps_mid_training(kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path):
    """One training, two faults. A deleted PS worker is replaced while training goes on; a
    deleted ps is replaced and the chief, restarted after losing it, resumes from a checkpoint.
    (A deleted chief: the drain in test_network.py, the same graceful SIGTERM to the chief.)
    A deleted ps or PS worker serves on while the chief's port answers, up to its grace less
    5 s (for a chief that saves in a whole-cluster preemption): a 20 s grace, so the rest of the
    training cannot end in it, and 1600 paced steps (0.1 s a batch on each of 2 workers: about
    20 steps/s), so that after the worker's replacement the ps deletion still lands
    mid-training with steps to resume."""
    name, steps = "chaos", 1600
    spec = write_spec(
        tmp_path,
        name,
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        terminationGracePeriodSeconds=20,
        **paced_program(tmp_path, steps, 200),
    )
    proc = submit_in_background(kind_cluster, spec)
    try:
        first = wait_for(lambda: checkpointed_step(kind_cluster, name, namespace), 600, "the first checkpoint")
        _, worker_deleted = delete_and_wait_for_the_replacement(kind_cluster, namespace, name, "worker")
        before_ps = checkpointed_step(kind_cluster, name, namespace)
        assert before_ps is not None and before_ps < steps, f"training ended before the ps was deleted: {before_ps}"
        _, ps_deleted = delete_and_wait_for_the_replacement(kind_cluster, namespace, name, "ps")
        output, _ = proc.communicate(timeout=900)
    finally:
        kill_running(proc)
    print(output[-4000:])
    assert proc.returncode == 0, output[-2000:]
    assert_all_jobs_complete(kind_cluster, namespace, name)
    logs = cli(kind_cluster, "logs", name, "-n", namespace, "--role", "worker", "--index", "0")
    serving = [e["wall"] for e in progress(logs.stdout) if e["event"] == "serving"]
    if serving:
        print(
            f"MEASURE chaos worker: replacement serving {serving[-1] - worker_deleted:.1f}s "
            "after the deletion; training never stopped"
        )
    events = chief_events(kind_cluster, name, namespace)
    # The chief restarted after losing its ps resumed from a checkpoint: its start event reports
    # a restored step, not 0, and it trained on after the deletion.
    starts = [e for e in events if e["event"] == "start"]
    assert starts and starts[-1]["step"] >= first, starts
    resumed = [e["wall"] for e in events if e["event"] == "first_step" and e["wall"] > ps_deleted]
    assert resumed
    print(
        f"MEASURE chaos ps: training resumed at step {starts[-1]['step']} "
        f"{resumed[0] - ps_deleted:.1f}s after the deletion (first checkpoint {first}, "
        f"{before_ps} when the ps was deleted)"
    )
    assert any(e["event"] == "final" and e["step"] >= steps for e in events)


@pytest.mark.tf_trainings(1)
def test_image_that_does_not_exist_fails_fast(kind_cluster, namespace, tmp_path):
    spec = write_spec(
        tmp_path,
        "noimg",
        namespace,
        None,
        "tfk8s/does-not-exist:0",
        strategy="mirrored",
        roles={"chief": {"replicas": 1}},
    )
    result = cli(kind_cluster, "submit", str(spec), "--wait", "--stuck-timeout", "5", timeout=300)
    print(f"MEASURE bad image reported after {result.seconds:.1f}s")
    assert result.returncode == 1
    assert "image" in result.stderr and (
        "ErrImagePull" in result.stderr or "ImagePullBackOff" in result.stderr or "ErrImageNeverPull" in result.stderr
    )
    status = cli(kind_cluster, "status", "noimg", "-n", namespace)
    assert "Stuck" in status.stdout


def test_namespace_that_does_not_exist(kind_cluster, worker_image, tmp_path):
    spec = write_spec(
        tmp_path,
        "nons",
        "no-such-namespace-x",
        None,
        worker_image,
        strategy="mirrored",
        roles={"chief": {"replicas": 1}},
    )
    result = cli(kind_cluster, "submit", str(spec), "--wait", timeout=60)
    assert result.returncode == 1
    assert "namespace 'no-such-namespace-x' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.tf_trainings(1)
def test_unsatisfiable_resources_are_reported(kind_cluster, worker_image, namespace, tmp_path):
    spec = write_spec(
        tmp_path,
        "huge",
        namespace,
        None,
        worker_image,
        strategy="mirrored",
        roles={"chief": {"replicas": 1, "resources": {"requests": {"memory": "900Gi"}}}},
    )
    result = cli(kind_cluster, "submit", str(spec), "--wait", "--stuck-timeout", "5", timeout=300)
    print(f"MEASURE unschedulable reported after {result.seconds:.1f}s")
    assert result.returncode == 1
    assert "cannot be scheduled" in result.stderr and "memory" in result.stderr


@pytest.mark.tf_trainings(1)
def test_bring_your_own_script_servers_are_ended(kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path):
    """A plain TF script whose ps/workers block in server.join() forever still completes."""
    spec = write_spec(
        tmp_path,
        "byo",
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        roles={"chief": {"replicas": 1}, "worker": {"replicas": 2}, "ps": {"replicas": 1}},
        command=["python", "-m", "worker.examples.plain_ps"],
        args=["--steps", "100", "--model-dir", "/ckpt/byo"],
    )
    data = yaml.safe_load(spec.read_text())
    del data["program"]
    spec.write_text(yaml.safe_dump(data))
    result = cli(kind_cluster, "submit", str(spec), "--wait")
    assert result.returncode == 0, result.stderr
    print(f"MEASURE byo submit->succeeded {result.seconds:.1f}s")
    assert_all_jobs_complete(kind_cluster, namespace, "byo")
    ps_log = cli(kind_cluster, "logs", "byo", "-n", namespace, "--role", "ps")
    assert "ps 0 serving" in ps_log.stdout


def test_failed_submit_leaves_nothing_behind(kind_cluster, worker_image, namespace, tmp_path):
    # The spec passes our validation, but the API server rejects the Job (a request above its
    # limit), after the ConfigMap and Service were already created.
    spec = write_spec(
        tmp_path,
        "half",
        namespace,
        None,
        worker_image,
        strategy="mirrored",
        roles={"chief": {"replicas": 1, "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}},
    )
    result = cli(kind_cluster, "submit", str(spec), timeout=120)
    assert result.returncode == 1
    assert "submit failed at Job/half-chief" in result.stderr
    assert "everything created so far was deleted again" in result.stderr
    assert objects(kind_cluster, namespace, "half") == []
