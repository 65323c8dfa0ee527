"""Fixtures for tests that run against a real Kubernetes cluster made by kind.

Where the cluster comes from:

* ``TFK8S_KIND_CLUSTER=<name>`` naming an existing kind cluster: it is reused (and kept).
* otherwise a cluster is created (``kind create cluster --config kind-config.yaml``) and
  deleted after the last kind test unless ``TFK8S_KEEP_CLUSTER=1``. A cluster of the default
  name (``tfk8s-test``) that already exists is reused and kept, except in CI (``CI`` set), where
  it is deleted and created afresh.
* node image: ``TFK8S_KIND_NODE_IMAGE``, else the one the offline toolchain
  (``tests/kind/toolchain.sh``) wrote into ``$TFK8S_CACHE/env.sh``, else kind's default
  image (users with Docker + kind + internet run the same tests unchanged).
* ``TFK8S_RUN_TOOLCHAIN=1`` runs ``toolchain.sh`` first (a warm run takes seconds).
* nodes: a control plane and a worker (kind-config.yaml). Every node mounts the same host
  directory (``TFK8S_KIND_SHARED_DIR``, default ``/var/tmp/tfk8s-kind/<cluster>``) at
  ``/var/local/tfk8s-checkpoints``: the checkpoint volume is shared across nodes.

Tools: ``kind``/``kubectl`` from ``$TFK8S_CACHE/bin`` when the toolchain made them,
otherwise from ``PATH``. Without Docker the tests skip, except under ``CI``, where they
fail loudly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pytest
import yaml
from support import TierResource, in_ci, wait_for_the_toolchain

HERE = Path(__file__).resolve().parent
KIND_CONFIG = HERE / "kind-config.yaml"
# where every node mounts the shared host directory (checkpoint volumes live below it)
NODE_SHARED_PATH = "/var/local/tfk8s-checkpoints"
TOOLCHAIN = HERE / "toolchain.sh"
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path.home() / ".cache" / "tfk8s")
DEFAULT_CLUSTER = "tfk8s-test"
DEFAULT_WORKER_IMAGE = "tfk8s/worker:dev"
# For the probe pods of the smoke tests: any image with python3 works.
OFFLINE_PROBE_IMAGE = "tfk8s/python-base:3.11-bookworm"
ONLINE_PROBE_IMAGE = "python:3.11-slim-bookworm"
RESTRICTED = "pod-security.kubernetes.io/enforce"

# securityContext bits that the "restricted" Pod Security level asks for
RESTRICTED_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "runAsGroup": 65534,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kind: needs a kind cluster (built by tests/kind/toolchain.sh)")
    config.addinivalue_line(
        "markers", "node_kill: kills a kind node; runs after every other kind test (the order is tests/conftest.py's)"
    )
    config.addinivalue_line(
        "markers",
        "tf_trainings(n): the TensorFlow clusters the test submits (stand-ins do not count); the tier's "
        "sum is held to its budget (tests/test_tier_budget.py), and the test fails if it submits more",
    )


TF_TRAININGS = "tf_trainings"


def declared_tf_trainings(item: pytest.Item) -> int:
    marker = item.get_closest_marker(TF_TRAININGS)
    return marker.args[0] if marker else 0


def runs_tensorflow(job: dict) -> bool:
    """A tfk8s Job that made a pod whose task would run TensorFlow: anything but an inline
    `python3 -c` script that does not mention it (test_e2e.STAND_IN). A Job whose pods were all
    refused (a quota) made none."""
    status = job.get("status") or {}
    if not any(status.get(k) for k in ("active", "succeeded", "failed", "terminating")):
        return False
    containers = job["spec"]["template"]["spec"]["containers"]
    [task] = [c for c in containers if c["name"] == "tensorflow"] or [containers[0]]
    command = task.get("command") or []
    if "--" in command:  # a supervised task: the supervisor runs what follows `--`
        command = command[command.index("--") + 1 :]
    inline = command[:2] == ["python3", "-c"] and len(command) > 2
    return not (inline and "tensorflow" not in command[2])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Holds a kind test to its tf_trainings marker: the clusters whose Jobs run TensorFlow,
    created while the test body ran and still there at its end (a cluster the test deleted
    itself is not seen, so a count can only fall short, never pass a test that submits more)."""
    cluster = item.funcargs.get("kind_cluster") if hasattr(item, "funcargs") else None
    started = time.time() - 2  # the API server's timestamps have 1 s resolution
    result = yield
    if cluster is None:
        return result
    jobs = cluster.get_json("jobs", "-A", "-l", "app.kubernetes.io/name=tfk8s")["items"]
    trainings = sorted(
        {
            (job["metadata"]["namespace"], job["metadata"]["labels"].get("app.kubernetes.io/instance", "?"))
            for job in jobs
            if _api_seconds(job["metadata"]["creationTimestamp"]) >= started and runs_tensorflow(job)
        }
    )
    declared = declared_tf_trainings(item)
    assert len(trainings) <= declared, (
        f"{item.nodeid} submitted {len(trainings)} TensorFlow clusters {trainings} but declares "
        f"@pytest.mark.tf_trainings({declared}): join an existing training, use stand-in tasks where "
        f"TensorFlow is not the subject (test_e2e.STAND_IN), or raise the marker and the tier's budget "
        f"(docs/development.md)"
    )
    return result


def _api_seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# --------------------------------------------------------------------------- helpers
def _env_file_vars() -> dict[str, str]:
    """The exports of the toolchain's env.sh (PATH, TFK8S_KIND_NODE_IMAGE), if it ran."""
    env_sh = CACHE / "env.sh"
    if not env_sh.is_file():
        return {}
    out = subprocess.run(
        ["bash", "-c", f". {shlex.quote(str(env_sh))} && env -0"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    wanted = (
        "PATH",
        "TFK8S_KIND_NODE_IMAGE",
        "TFK8S_CACHE",
        "TFK8S_K8S_VERSION",
        "TFK8S_JOBSET_MANIFEST",
        "TFK8S_JOBSET_IMAGE",
        "TFK8S_KUEUE_MANIFEST",
        "TFK8S_KUEUE_IMAGE",
        "TFK8S_KWOK",
        "TFK8S_PROMETHEUS",
        "TFK8S_PROMETHEUS_IMAGE",
    )
    return {k: v for k, _, v in (e.partition("=") for e in out.split("\0") if e) if k in wanted}


def tool_env() -> dict[str, str]:
    """os.environ with the toolchain's bin dir (if any) first on PATH."""
    env = dict(os.environ)
    env.update({k: v for k, v in _env_file_vars().items() if k == "PATH" or k not in env})
    bindir = CACHE / "bin"
    if bindir.is_dir() and str(bindir) not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return env


def _which(name: str, env: dict[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH"))


def docker_available(env: dict[str, str]) -> tuple[bool, str]:
    docker = _which("docker", env)
    if not docker:
        return False, "no docker client on PATH"
    try:
        r = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30, env=env
        )
    except subprocess.TimeoutExpired:
        return False, "`docker info` timed out"
    if r.returncode != 0:
        return False, f"docker daemon unreachable: {r.stderr.strip()[:300]}"
    return True, r.stdout.strip()


def run(
    cmd: Sequence[str], *, env: dict[str, str], input: str | None = None, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(cmd), input=input, capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(
            f"command failed (exit {r.returncode}): {shlex.join(cmd)}\n"
            f"--- stdout ---\n{r.stdout[-4000:]}\n--- stderr ---\n{r.stderr[-4000:]}"
        )
    return r


@dataclasses.dataclass
class KindCluster:
    name: str
    kubeconfig: str
    context: str
    node_image: str | None
    reused: bool
    env: dict[str, str]
    worker_image: str | None = None
    # repairs the next kind test needs (a killed node started again); none is run when the
    # tier's cluster is deleted first (the node-kill test runs last)
    repairs: list[tuple[str, Callable[[], None]]] = dataclasses.field(default_factory=list)

    def repair_before_next_use(self, what: str, repair: Callable[[], None]) -> None:
        self.repairs.append((what, repair))

    def run_repairs(self) -> None:
        while self.repairs:
            what, repair = self.repairs.pop(0)
            t0 = time.monotonic()
            repair()
            print(f"[kind] repaired: {what} ({time.monotonic() - t0:.0f}s)")

    @property
    def node(self) -> str:
        """The docker container of the control-plane node (shares NODE_SHARED_PATH with the others)."""
        return f"{self.name}-control-plane"

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.get_json("nodes")["items"]]

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return run(
            ["kubectl", "--kubeconfig", self.kubeconfig, "--context", self.context, *args],
            env=self.env,
            input=input,
            check=check,
            timeout=timeout,
        )

    def apply(self, obj: dict | list, namespace: str | None = None) -> None:
        doc = {"apiVersion": "v1", "kind": "List", "items": obj} if isinstance(obj, list) else obj
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=json.dumps(doc))

    def get_json(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def docker_exec(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["docker", "exec", self.node, *cmd], env=self.env, check=check)

    def load_image(self, image: str) -> None:
        run(["kind", "load", "docker-image", image, "--name", self.name], env=self.env, timeout=900)

    def warm_image(self, image: str) -> None:
        """Starts, without waiting for it, a pod of `image` running `true` on every node. A node's
        first container of an image waits while containerd prepares the image's layers: 13 s on
        an idle machine for the worker image, about 50 s for the first training's pods on a loaded
        one (docs/benchmarks.md). Paid here, beside the light first tests, not inside a training."""
        pods = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"generateName": "warm-image-", "namespace": "default", "labels": {"tfk8s-test": "warm"}},
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "warm", "image": image, "imagePullPolicy": "Never", "command": ["true"]}],
                },
            }
            for node in self.node_names()
        ]
        self.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))

    def node_images(self) -> list[str]:
        return self.docker_exec("ctr", "-n", "k8s.io", "images", "ls", "-q").stdout.split()

    def api_client(self):
        """An official `kubernetes` Python client bound to this cluster."""
        from kubernetes import config as k8s_config

        return k8s_config.new_client_from_config(config_file=self.kubeconfig, context=self.context)


def _local_image_exists(image: str, env: dict[str, str]) -> bool:
    return run(["docker", "image", "inspect", image], env=env, check=False).returncode == 0


def _cluster_exists(name: str, env: dict[str, str]) -> bool:
    return name in run(["kind", "get", "clusters"], env=env).stdout.split()


def _node_running(name: str, env: dict[str, str]) -> bool:
    r = run(["docker", "inspect", "-f", "{{.State.Running}}", f"{name}-control-plane"], env=env, check=False)
    return r.stdout.strip() == "true"


def _need(cond: bool, reason: str) -> None:
    if not cond:
        pytest.fail(reason, pytrace=False)


def _kind_config_with_shared_dir(name: str, workdir: Path) -> Path:
    """kind-config.yaml with the shared host directory mounted into every node."""
    shared = Path(os.environ.get("TFK8S_KIND_SHARED_DIR") or f"/var/tmp/tfk8s-kind/{name}")
    shared.mkdir(parents=True, exist_ok=True)
    shared.chmod(0o777)
    config = yaml.safe_load(KIND_CONFIG.read_text())
    for node in config["nodes"]:
        node.setdefault("extraMounts", []).append({"hostPath": str(shared), "containerPath": NODE_SHARED_PATH})
    path = workdir / "kind-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _restart_kube_router(cluster: KindCluster) -> None:
    """Restart the offline node image's kube-router once every node has joined.

    kube-router v2.1.0 learns the pod CIDRs of nodes that join after it started for its
    routes but not for the ipset that exempts pod-to-pod traffic from masquerading
    (kube-router#1559): traffic from the first node's pods to a later node's pods is SNATed
    to the node address, and NetworkPolicy rejects it as coming from outside the cluster.
    kind's own kindnet (its default image) has no kube-router DaemonSet: nothing to do."""
    ds = ("-n", "kube-system", "daemonset/kube-router")
    if cluster.kubectl("get", *ds, check=False).returncode != 0:
        return
    t0 = time.monotonic()
    cluster.kubectl("rollout", "restart", *ds)
    cluster.kubectl("rollout", "status", *ds, "--timeout=180s", timeout=200)
    print(f"[kind] restarted kube-router after every node joined ({time.monotonic() - t0:.0f}s)")


def create_cluster(name: str, config: Path, kubeconfig: str, node_image: str | None, env: dict[str, str]) -> float:
    """`kind create cluster` (the test fails with kind's error, nothing left behind); seconds."""
    cmd = [
        "kind",
        "create",
        "cluster",
        "--name",
        name,
        "--config",
        str(config),
        "--kubeconfig",
        kubeconfig,
        "--wait",
        "5m",
    ]
    if node_image:
        cmd += ["--image", node_image]
    t0 = time.monotonic()
    r = run(cmd, env=env, check=False, timeout=900)
    if r.returncode != 0:
        run(["kind", "delete", "cluster", "--name", name], env=env, check=False)
        pytest.fail(f"`{shlex.join(cmd)}` failed:\n{r.stderr[-4000:]}", pytrace=False)
    return time.monotonic() - t0


# --------------------------------------------------------------------------- fixtures
_KIND = TierResource("kind")

# the cluster is deleted after the tier's last test, or at the session's end
pytest_runtest_teardown, pytest_sessionfinish = _KIND.hooks()


@pytest.fixture(scope="session")
def kind_cluster(tmp_path_factory: pytest.TempPathFactory) -> KindCluster:
    """The tier's cluster, deleted after the last kind test (support.TierResource)."""
    return _KIND.open(_cluster_for_the_tier(tmp_path_factory))


@contextlib.contextmanager
def _cluster_for_the_tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindCluster]:
    wait_for_the_toolchain()  # CI's cold path builds it beside the process tier
    env = tool_env()
    ok, why = docker_available(env)
    if not ok:
        if in_ci():
            pytest.fail(
                f"kind tests need Docker and CI is set: {why}. Run tests/kind/toolchain.sh first (it starts dockerd).",
                pytrace=False,
            )
        pytest.skip(f"Docker unavailable ({why}); set CI=1 to make this an error")
    if os.environ.get("TFK8S_RUN_TOOLCHAIN") == "1":
        r = subprocess.run(["bash", str(TOOLCHAIN)], env=env)
        _need(r.returncode == 0, f"{TOOLCHAIN} failed (exit {r.returncode})")
        env = tool_env()
    _need(
        _which("kind", env) is not None, "no `kind` binary: run tests/kind/toolchain.sh (offline build) or install kind"
    )
    _need(_which("kubectl", env) is not None, "no `kubectl` binary: run tests/kind/toolchain.sh or install kubectl")

    name = os.environ.get("TFK8S_KIND_CLUSTER") or DEFAULT_CLUSTER
    node_image = os.environ.get("TFK8S_KIND_NODE_IMAGE") or _env_file_vars().get("TFK8S_KIND_NODE_IMAGE")
    kubeconfig = str(tmp_path_factory.mktemp("kind") / "kubeconfig")
    reused = _cluster_exists(name, env)
    if reused and not os.environ.get("TFK8S_KIND_CLUSTER") and (in_ci() or not _node_running(name, env)):
        # Left over from an earlier run: in CI its add-ons and objects would decide tests that
        # need a fresh cluster; elsewhere only when its node no longer runs (dockerd stopped).
        print(f"\n[kind] cluster {name} left over from an earlier run; recreating it")
        run(["kind", "delete", "cluster", "--name", name], env=env, check=False)
        reused = False
    if reused:
        kc = run(["kind", "get", "kubeconfig", "--name", name], env=env).stdout
        Path(kubeconfig).write_text(kc)
    else:
        if node_image and not _local_image_exists(node_image, env) and in_ci():
            pytest.fail(f"node image {node_image} is not a local image: run tests/kind/toolchain.sh", pytrace=False)
        config = _kind_config_with_shared_dir(name, tmp_path_factory.mktemp("kind-config"))
        seconds = create_cluster(name, config, kubeconfig, node_image, env)
        print(f"\n[kind] created cluster {name} ({node_image or 'kind default image'}) in {seconds:.0f}s")
    os.chmod(kubeconfig, 0o600)
    cluster = KindCluster(
        name=name, kubeconfig=kubeconfig, context=f"kind-{name}", node_image=node_image, reused=reused, env=env
    )
    if not reused:
        _restart_kube_router(cluster)
    try:
        worker = os.environ.get("TFK8S_WORKER_IMAGE") or DEFAULT_WORKER_IMAGE
        if _local_image_exists(worker, env):
            cluster.load_image(worker)
            cluster.worker_image = worker
            cluster.warm_image(worker)
        elif os.environ.get("TFK8S_WORKER_IMAGE"):
            pytest.fail(f"TFK8S_WORKER_IMAGE={worker} is not a local docker image", pytrace=False)
        yield cluster
    finally:
        if not reused and os.environ.get("TFK8S_KEEP_CLUSTER") != "1":
            run(["kind", "delete", "cluster", "--name", name], env=env, check=False)
        else:  # a kept cluster is left whole for the next session
            cluster.run_repairs()


@pytest.fixture(autouse=True)
def _repaired_cluster(request: pytest.FixtureRequest) -> None:
    """Runs the repairs an earlier kind test left (KindCluster.repair_before_next_use)."""
    if "kind_cluster" in request.fixturenames:
        request.getfixturevalue("kind_cluster").run_repairs()


@pytest.fixture(scope="session")
def worker_image(kind_cluster: KindCluster) -> str:
    """The worker image, loaded into the cluster (built by toolchain.sh from the Dockerfile)."""
    if not kind_cluster.worker_image:
        pytest.fail(
            f"worker image {DEFAULT_WORKER_IMAGE} is not built: run tests/kind/toolchain.sh "
            f"(needs the repository's Dockerfile) or set TFK8S_WORKER_IMAGE",
            pytrace=False,
        )
    return kind_cluster.worker_image


@pytest.fixture(scope="session")
def probe_image(kind_cluster: KindCluster) -> str:
    """A small image with python3, loaded into the cluster, for probe pods."""
    env = kind_cluster.env
    image = os.environ.get("TFK8S_PROBE_IMAGE")
    if not image:
        for candidate in (OFFLINE_PROBE_IMAGE, kind_cluster.worker_image):
            if candidate and _local_image_exists(candidate, env):
                image = candidate
                break
    if not image:
        image = ONLINE_PROBE_IMAGE
        if not _local_image_exists(image, env):
            run(["docker", "pull", image], env=env, timeout=900)
    if image != kind_cluster.worker_image:
        kind_cluster.load_image(image)
    return image


@contextlib.contextmanager
def fresh_namespace(kind_cluster: KindCluster) -> Iterator[str]:
    """A new namespace that enforces the "restricted" Pod Security level, deleted after."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kind_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {RESTRICTED: "restricted", "pod-security.kubernetes.io/enforce-version": "latest"},
            },
        }
    )
    # pods are refused until the namespace's default ServiceAccount exists
    deadline = time.monotonic() + 60
    while kind_cluster.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode:
        if time.monotonic() > deadline:
            pytest.fail(f"namespace {name}: default ServiceAccount never appeared", pytrace=False)
        time.sleep(0.5)
    try:
        yield name
    finally:
        # The namespace goes in the background; its pods are killed now, without their grace
        # period: a cluster a test left training (or saving on SIGTERM) would otherwise take
        # the 2-core CI machine's CPU from the next tests for up to its grace period. Deleting
        # the namespace first stops its Jobs from making new pods (namespace lifecycle).
        kind_cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
        kind_cluster.kubectl(
            "-n",
            name,
            "delete",
            "pods",
            "--all",
            "--grace-period=0",
            "--force",
            "--wait=false",
            "--ignore-not-found",
            check=False,
        )


@pytest.fixture
def namespace(kind_cluster: KindCluster) -> Iterator[str]:
    """A fresh namespace that enforces the "restricted" Pod Security level."""
    with fresh_namespace(kind_cluster) as name:
        yield name


@pytest.fixture
def other_namespace(kind_cluster: KindCluster) -> Iterator[str]:
    """A second fresh namespace, for what must not cross namespaces."""
    with fresh_namespace(kind_cluster) as name:
        yield name


@dataclasses.dataclass
class CheckpointVolume:
    claim_name: str  # PVC in the test namespace: mount it in pods
    pv_name: str  # the hostPath PersistentVolume it is bound to
    node_path: str  # the directory inside the kind node container (mode 0777)


@pytest.fixture
def checkpoint_pvc(kind_cluster: KindCluster, namespace: str) -> Iterator[CheckpointVolume]:
    """A PVC bound to a hostPath PV in `namespace`.

    Restricted Pod Security forbids hostPath volumes in pods, but not a PVC whose PV is a
    hostPath. The directory is made world-writable inside the node so that non-root
    pods can write checkpoints. Every node mounts the same host directory there, so pods
    on any node see the same files.
    """
    pv, pvc = f"ckpt-{namespace}", "checkpoints"
    node_path = f"{NODE_SHARED_PATH}/{namespace}"
    kind_cluster.docker_exec("sh", "-c", f"mkdir -p {node_path} && chmod 0777 {node_path}")
    kind_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": {"tfk8s-test": "checkpoint"}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "tfk8s-hostpath",
                "hostPath": {"path": node_path, "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": pvc},
            },
        }
    )
    kind_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "tfk8s-hostpath",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    kind_cluster.kubectl("-n", namespace, "wait", "--for=jsonpath={.status.phase}=Bound", f"pvc/{pvc}", "--timeout=60s")
    try:
        yield CheckpointVolume(claim_name=pvc, pv_name=pv, node_path=node_path)
    finally:
        kind_cluster.kubectl("-n", namespace, "delete", "pvc", pvc, "--wait=false", "--ignore-not-found", check=False)
        kind_cluster.kubectl("delete", "pv", pv, "--wait=false", "--ignore-not-found", check=False)
        kind_cluster.docker_exec("rm", "-rf", node_path, check=False)


def make_restricted_pod(name: str, image: str, command: list[str], **spec_extra) -> dict:
    """A pod manifest that the "restricted" Pod Security level admits."""
    spec = {
        "restartPolicy": "Never",
        "securityContext": RESTRICTED_POD_SECURITY,
        "containers": [
            {
                "name": "main",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": command,
                "securityContext": RESTRICTED_CONTAINER_SECURITY,
            }
        ],
        "terminationGracePeriodSeconds": 1,
    }
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": spec}


@pytest.fixture
def restricted_pod():
    """make_restricted_pod(name, image, command, **spec_extra) -> a pod manifest (dict)."""
    return make_restricted_pod


def _install_addon(cluster: KindCluster, name: str):
    """addons.install_<name>(cluster), failing with the toolchain's name when it is not built."""
    import addons

    try:
        done = getattr(addons, f"install_{name}")(cluster)
    except addons.AddonMissing as e:
        pytest.fail(f"{name} is not built: {e} (tests/kind/toolchain.sh builds it)", pytrace=False)
    print(
        f"\n[kind] {name} {done.image}: {'already installed' if done.already else 'installed'}, "
        f"ready in {done.seconds:.0f}s"
    )
    return done


@pytest.fixture(scope="session")
def jobset_installed(kind_cluster: KindCluster):
    """The JobSet controller (built by toolchain.sh) installed, its webhooks answering.

    -> addons.Installed (name, image, manifest, namespace, deployment, seconds, already)."""
    return _install_addon(kind_cluster, "jobset")


@pytest.fixture(scope="session")
def kueue_installed(kind_cluster: KindCluster, jobset_installed):
    """Kueue (built by toolchain.sh; JobSet integration on) installed, its webhooks answering.

    -> addons.Installed. Only objects labelled kueue.x-k8s.io/queue-name are queued."""
    return _install_addon(kind_cluster, "kueue")
