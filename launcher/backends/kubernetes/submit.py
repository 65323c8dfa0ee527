"""`submit` as small steps, each one unit (kind's create/actions style), run in order by run():

1. preflight: the namespace exists; for a JobSet its API, for a queue Kueue's LocalQueue.
2. idempotency: an identical spec already applied is a no-op; a different one, or objects this
   launcher did not create, are refused unless --replace (Job pod templates are immutable).
3. apply: the root (ConfigMap, or the JobSet) first, then every other object owned by it.
4. rollback: if any apply fails, whatever this submit created is deleted again, so a failed
   submit never leaves half a cluster.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from launcher import k8s_contract
from launcher.backends.kubernetes.api import JOBSET, KUEUE_VERSIONS, OWNED_KINDS, POD_MONITOR, Api, api_message
from launcher.backends.kubernetes.cleanup import delete_cluster
from launcher.cluster_spec.spec import POD_MONITOR_WITHOUT_CRD, ClusterSpec
from launcher.code_shipping.code_bundle import Bundle
from launcher.errors import LauncherError, SubmitRefused
from launcher.k8s_contract import Workload
from launcher.plan.plan import ClusterPlan
from launcher.render import render
from launcher.render.code_render import SHA256_ANNOTATION


@dataclass
class Submission:
    api: Api
    plan: ClusterPlan  # planned once for this submit, with its code packed once (loader.pack_code)
    replace: bool
    dry_run: bool
    delete_timeout: float
    say: Callable[[str], None]

    @property
    def spec(self) -> ClusterSpec:
        return self.plan.spec

    @property
    def code(self) -> Bundle | None:
        return None if self.plan.code is None else self.plan.code.bundle

    @property
    def namespace(self) -> str:
        return self.spec.namespace


def run(sub: Submission) -> bool:
    """Submit; True when objects were applied, False when the same spec was already there."""
    preflight(sub)
    platform_id = platform(sub.api, sub.namespace)  # before make_room: a refusal replaces nothing
    if not make_room(sub):
        return False
    # a new id per submission that creates the cluster: its evaluator ends on its own FINAL.json
    objects = render.render(sub.plan, platform_id, run=uuid.uuid4().hex)
    apply_all(sub, objects)
    if sub.dry_run:
        sub.say(f"server dry run: {len(objects)} objects accepted by the API server")
    else:
        sub.say(
            f"created cluster {sub.namespace}/{sub.spec.name}: "
            + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
        )
    return True


def platform(api: Api, namespace: str) -> str:
    """This Kubernetes cluster, as OWNER.json names where a cluster ran: its CA certificate as
    Kubernetes publishes it in every namespace (k8s_contract.kubernetes_platform), read in the
    namespace submitted to, so a namespace-scoped user names it too."""
    from kubernetes.dynamic.exceptions import ForbiddenError

    where = f"ConfigMap {k8s_contract.ROOT_CA_CONFIGMAP} in namespace {namespace!r}"
    try:
        published = api.get("v1", "ConfigMap", namespace, k8s_contract.ROOT_CA_CONFIGMAP)
    except ForbiddenError:
        raise LauncherError(
            f"cannot read {where}, the cluster's CA that names this Kubernetes cluster in the model dir's "
            f"OWNER.json: forbidden; ask for `get` on configmaps in {namespace!r} (a Role)"
        ) from None
    root_ca = ((published or {}).get("data") or {}).get(k8s_contract.ROOT_CA_KEY)
    if not root_ca:
        raise LauncherError(
            f"no {k8s_contract.ROOT_CA_KEY} in {where}, which Kubernetes (1.20+) publishes in every namespace "
            "and which names this Kubernetes cluster in the model dir's OWNER.json: check that the "
            "kube-controller-manager's root-ca-cert-publisher controller runs"
        )
    return k8s_contract.kubernetes_platform(root_ca)


# The versions the kind tier installs (tests/kind/toolchain.sh; a unit test keeps them equal).
JOBSET_VERSION = "v0.11.1"
KUEUE_VERSION = "v0.16.2"
JOBSET_INSTALL = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/"
    f"releases/download/{JOBSET_VERSION}/manifests.yaml"
)
KUEUE_INSTALL = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/"
    f"releases/download/{KUEUE_VERSION}/manifests.yaml"
)


def preflight(sub: Submission) -> None:
    """What must exist before anything is created: the namespace, and for a JobSet the JobSet
    API, for a PodMonitor the Prometheus Operator's CRD, and for a queue Kueue's LocalQueue (else
    the set would wait suspended forever)."""
    ns, spec = sub.namespace, sub.spec
    if sub.api.get("v1", "Namespace", None, ns) is None:
        raise LauncherError(f"namespace {ns!r} does not exist (create it: kubectl create namespace {ns})")
    if spec.workload is Workload.JOBSET and not sub.api.served(*JOBSET):
        raise LauncherError(
            f"workload: jobset, but this cluster has no JobSet API ({k8s_contract.JOBSET_API_VERSION}): "
            f"install JobSet ({JOBSET_INSTALL}), or use workload: jobs"
        )
    if spec.metrics.pod_monitor and not sub.api.served(*POD_MONITOR):
        raise LauncherError(f"metrics.podMonitor: {POD_MONITOR_WITHOUT_CRD}")
    if spec.queue is not None:
        version = sub.api.first_served(KUEUE_VERSIONS, "LocalQueue")
        if version is None:
            raise LauncherError(
                f"queue: {spec.queue}, but this cluster has no Kueue (no LocalQueue API): install "
                f"Kueue ({KUEUE_INSTALL}), or remove queue"
            )
        if sub.api.get(version, "LocalQueue", ns, spec.queue) is None:
            raise LauncherError(
                f"queue: there is no LocalQueue {spec.queue!r} in namespace {ns!r} (kubectl get "
                f"localqueues -n {ns} lists them; an administrator creates one that points at a "
                "ClusterQueue)"
            )


def make_room(sub: Submission) -> bool:
    """False when the same spec is already applied; otherwise clears the way (or refuses)."""
    spec, ns = sub.spec, sub.namespace
    root = sub.api.find_root(ns, spec.name)
    existing = [
        f"{kind}/{o['metadata']['name']}"
        for api_version, kind in OWNED_KINDS
        for o in sub.api.list(api_version, kind, ns, spec.name)
    ]
    if root is None and not existing:
        return True
    old = ((root or {}).get("metadata", {}).get("annotations") or {}).get(k8s_contract.SPEC_HASH_ANNOTATION)
    if root is not None and old == sub.plan.spec_hash and not sub.replace:
        sub.say(f"cluster {ns}/{spec.name} is unchanged; nothing applied")
        return False
    changed = code_change(root, sub.code)
    if not sub.replace:
        what = (
            "exists with a different spec"
            if root is not None and old
            else "exists but was not created by this launcher (Helm?)"
        )
        raise SubmitRefused(
            f"cluster {ns}/{spec.name} {what}{changed}; Job pod templates are immutable, so "
            "rerun with --replace to delete and recreate it, or choose another name"
        )
    if not sub.dry_run:
        sub.say(f"replacing cluster {ns}/{spec.name}{changed}")
        delete_cluster(sub.api, ns, spec.name, sub.delete_timeout)
    return True


def code_change(root: dict | None, code: Bundle | None) -> str:
    """', its code changed (sha256 a -> b)' when the running cluster's code differs, else ''."""
    old = ((root or {}).get("metadata", {}).get("annotations") or {}).get(SHA256_ANNOTATION)
    new = code.digest if code is not None else None
    if root is None or old == new:
        return ""
    return f" (its code changed: sha256 {(old or 'none')[:10]} -> {(new or 'none')[:10]})"


def apply_all(sub: Submission, objects: list[dict]) -> None:
    """The root (stamped with the spec hash) first, then the rest with the root as owner."""
    root, rest = objects[0], objects[1:]
    root = {
        **root,
        "metadata": {
            **root["metadata"],
            "annotations": {
                **root["metadata"].get("annotations", {}),
                k8s_contract.SPEC_HASH_ANNOTATION: sub.plan.spec_hash,
                **({SHA256_ANNOTATION: sub.code.digest} if sub.code is not None else {}),
            },
        },
    }
    current = root
    created_root = False
    try:
        applied = sub.api.apply(root, sub.dry_run)
        created_root = not sub.dry_run
        owner = {
            "apiVersion": root["apiVersion"],
            "kind": root["kind"],
            "name": root["metadata"]["name"],
            "uid": applied["metadata"].get("uid"),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        for obj in rest:
            current = obj
            if not sub.dry_run:
                obj = {**obj, "metadata": {**obj["metadata"], "ownerReferences": [owner]}}
            sub.api.apply(obj, sub.dry_run)
    except Exception as exc:
        where = f"{current['kind']}/{current['metadata']['name']}"
        left = rollback(sub) if created_root else "nothing was created"
        raise LauncherError(f"submit failed at {where}: {api_message(exc)}; {left}") from None


def rollback(sub: Submission) -> str:
    """No half-created clusters: take back what this submit created."""
    delete_cluster(sub.api, sub.namespace, sub.spec.name, sub.delete_timeout)
    return "everything created so far was deleted again"
