"""Install the JobSet and Kueue controllers into a kind cluster.

``tests/kind/toolchain.sh`` builds the controllers' images (``tfk8s/jobset-controller``,
``tfk8s/kueue-controller``) and renders their install manifests from the upstream
``config/default`` kustomizations into ``$TFK8S_CACHE/addons/`` (never committed). Its
``env.sh`` names them: ``TFK8S_JOBSET_MANIFEST``, ``TFK8S_JOBSET_IMAGE``,
``TFK8S_KUEUE_MANIFEST``, ``TFK8S_KUEUE_IMAGE`` (``KindCluster.env`` carries them, see
``conftest._env_file_vars``; the process environment wins).

``install_jobset(cluster)`` / ``install_kueue(cluster)`` load the image into the kind node,
apply the manifest server-side, wait for the controller Deployment to roll out and then for
the admission (and conversion) webhooks to really answer: a ``--dry-run=server`` create of
a small object goes through them. Idempotent: on a cluster where the same manifest is
installed and answering, a call only checks (about a second). Kueue's JobSet integration
needs the JobSet CRD, so install JobSet first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:  # conftest is imported by pytest, never by name
    from conftest import KindCluster

# On the controller's pod template: the manifest's recipe (its first line, written by
# toolchain.sh) and the image ID. A re-rendered manifest or a rebuilt image (same tag) thus
# changes the template and rolls the controller; an unchanged one is recognised as installed.
RECIPE_ANNOTATION = "tfk8s.io/addon-recipe"

WEBHOOK_TIMEOUT_S = 180.0
ROLLOUT_TIMEOUT_S = 180.0

JOBSET_PROBE = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "tfk8s-webhook-probe", "namespace": "default"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "probe",
                "replicas": 1,
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "probe", "image": "tfk8s/webhook-probe:none"}],
                            }
                        }
                    }
                },
            }
        ]
    },
}
# ResourceFlavor: Kueue's mutating/validating webhooks. ClusterQueue in v1beta1 (storage is
# v1beta2): the conversion webhook as well, which serves the CRDs' non-storage versions.
KUEUE_PROBE = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tfk8s-webhook-probe"}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "tfk8s-webhook-probe"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "tfk8s-webhook-probe", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
                }
            ],
        },
    },
]


class AddonMissing(RuntimeError):
    """The toolchain has not built the addon (no manifest or image)."""


@dataclasses.dataclass(frozen=True)
class Addon:
    name: str
    manifest_var: str
    image_var: str
    probe: list[dict]


@dataclasses.dataclass
class Installed:
    name: str
    image: str
    manifest: str
    namespace: str
    deployment: str
    seconds: float  # from the call to webhooks answering
    already: bool  # it was installed and answering: nothing was applied


JOBSET = Addon("jobset", "TFK8S_JOBSET_MANIFEST", "TFK8S_JOBSET_IMAGE", [JOBSET_PROBE])
KUEUE = Addon("kueue", "TFK8S_KUEUE_MANIFEST", "TFK8S_KUEUE_IMAGE", KUEUE_PROBE)


def install_jobset(cluster: KindCluster) -> Installed:
    """JobSet (jobset.x-k8s.io/v1alpha2) controller installed, its webhooks answering."""
    return _install(cluster, JOBSET)


def install_kueue(cluster: KindCluster) -> Installed:
    """Kueue controller installed, its webhooks answering (install JobSet first)."""
    return _install(cluster, KUEUE)


# --------------------------------------------------------------------------- internals
def _setting(cluster: KindCluster, var: str) -> str | None:
    return cluster.env.get(var) or os.environ.get(var)


def _artifacts(cluster: KindCluster, addon: Addon) -> tuple[str, str, list[dict]]:
    manifest, image = _setting(cluster, addon.manifest_var), _setting(cluster, addon.image_var)
    if not manifest or not image:
        raise AddonMissing(
            f"{addon.name}: {addon.manifest_var}/{addon.image_var} are not set: run "
            f"tests/kind/toolchain.sh (it builds the {addon.name} controller and writes them "
            f"into $TFK8S_CACHE/env.sh)"
        )
    if not os.path.isfile(manifest):
        raise AddonMissing(f"{addon.name}: manifest {manifest} is missing: run tests/kind/toolchain.sh")
    with open(manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    return manifest, image, docs


def _local_image_id(cluster: KindCluster, image: str) -> str:
    r = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=60,
    )
    if r.returncode:
        raise AddonMissing(f"image {image} is not a local docker image: run tests/kind/toolchain.sh")
    return r.stdout.strip()


def _recipe(cluster: KindCluster, manifest: str, image: str) -> str:
    with open(manifest) as f:
        first = f.readline().strip().lstrip("# ")
    return f"{first} image={_local_image_id(cluster, image)}"


def _deployment(docs: list[dict]) -> dict:
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    return dep


def _webhooks_answer(cluster: KindCluster, addon: Addon) -> tuple[bool, str]:
    doc = {"apiVersion": "v1", "kind": "List", "items": addon.probe}
    r = cluster.kubectl(
        "create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(doc), check=False, timeout=60
    )
    return r.returncode == 0, (r.stderr or r.stdout).strip()


def _rolled_out(cluster: KindCluster, ns: str, name: str, recipe: str) -> bool:
    r = cluster.kubectl("-n", ns, "get", "deployment", name, "-o", "json", check=False)
    if r.returncode:
        return False
    dep = json.loads(r.stdout)
    meta, spec, status = dep["metadata"], dep["spec"], dep.get("status", {})
    want = spec.get("replicas", 1)
    return (
        (spec["template"]["metadata"].get("annotations") or {}).get(RECIPE_ANNOTATION) == recipe
        and status.get("observedGeneration", 0) >= meta.get("generation", 0)
        and status.get("updatedReplicas") == want
        and status.get("availableReplicas") == want
        and status.get("replicas") == want
    )


def _apiservices(docs: list[dict]) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d["kind"] == "APIService"]


def _drop_stale_apiservices(cluster: KindCluster, ns: str, docs: list[dict]) -> None:
    """Delete aggregated APIs served from `ns` that the manifest no longer has.

    Server-side apply prunes nothing, and an APIService left without its server breaks API
    discovery (namespace deletion then stalls) for every test on the cluster."""
    keep = set(_apiservices(docs))
    for svc in json.loads(cluster.kubectl("get", "apiservices", "-o", "json").stdout)["items"]:
        ref = svc["spec"].get("service") or {}
        if ref.get("namespace") == ns and svc["metadata"]["name"] not in keep:
            cluster.kubectl("delete", "apiservice", svc["metadata"]["name"], "--ignore-not-found")


def _diagnostics(cluster: KindCluster, ns: str, name: str) -> str:
    out = []
    for args in (
        ("get", "pods", "-o", "wide"),
        ("describe", "deployment", name),
        ("logs", f"deployment/{name}", "--tail=40", "--all-containers"),
    ):
        r = cluster.kubectl("-n", ns, *args, check=False, timeout=60)
        out.append(f"--- kubectl -n {ns} {' '.join(args)}\n{(r.stdout + r.stderr)[-3000:]}")
    return "\n".join(out)


def _install(cluster: KindCluster, addon: Addon) -> Installed:
    t0 = time.monotonic()
    manifest, image, docs = _artifacts(cluster, addon)
    dep = _deployment(docs)
    ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
    recipe = _recipe(cluster, manifest, image)
    done = dict(name=addon.name, image=image, manifest=manifest, namespace=ns, deployment=name)
    if _rolled_out(cluster, ns, name, recipe) and _webhooks_answer(cluster, addon)[0]:
        return Installed(**done, seconds=time.monotonic() - t0, already=True)

    cluster.load_image(image)
    template_meta = dep["spec"]["template"].setdefault("metadata", {})
    template_meta.setdefault("annotations", {})[RECIPE_ANNOTATION] = recipe
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        timeout=300,
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )
    _drop_stale_apiservices(cluster, ns, docs)
    r = cluster.kubectl(
        "-n",
        ns,
        "rollout",
        "status",
        f"deployment/{name}",
        f"--timeout={ROLLOUT_TIMEOUT_S:.0f}s",
        check=False,
        timeout=ROLLOUT_TIMEOUT_S + 30,
    )
    if r.returncode:
        raise RuntimeError(
            f"{addon.name}: deployment {ns}/{name} did not become available in "
            f"{ROLLOUT_TIMEOUT_S:.0f}s: {r.stderr.strip()}\n{_diagnostics(cluster, ns, name)}"
        )

    # The manager is Ready once its certificates are written, but the API server may still
    # hold an old caBundle or no endpoint yet: only a request through the webhooks tells.
    deadline = time.monotonic() + WEBHOOK_TIMEOUT_S
    while True:
        ok, why = _webhooks_answer(cluster, addon)
        if ok:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{addon.name}: webhooks still failing after {WEBHOOK_TIMEOUT_S:.0f}s: "
                f"{why}\n{_diagnostics(cluster, ns, name)}"
            )
        time.sleep(2)
    # Aggregated APIs, if a manifest has any (toolchain.sh drops Kueue's visibility API): an
    # unavailable one breaks API discovery, which stalls namespace deletion.
    for svc in _apiservices(docs):
        left = max(5.0, deadline - time.monotonic())
        r = cluster.kubectl(
            "wait",
            "--for=condition=Available",
            f"apiservice/{svc}",
            f"--timeout={left:.0f}s",
            check=False,
            timeout=left + 30,
        )
        if r.returncode:
            raise RuntimeError(
                f"{addon.name}: APIService {svc} not Available: {r.stderr.strip()}\n{_diagnostics(cluster, ns, name)}"
            )
    return Installed(**done, seconds=time.monotonic() - t0, already=False)
