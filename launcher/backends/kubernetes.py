"""Kubernetes backend: server-side apply of the rendered objects, status, logs, delete, list.

Ownership: the root ConfigMap owns every other object (ownerReferences are added here, once the
root's UID exists), so deleting it removes the cluster. `delete` also removes everything carrying
the instance label, which covers clusters installed by Helm (no ownerReferences there).
"""
from __future__ import annotations

import json
import sys
import time
from typing import Iterator, TextIO

from launcher import lifecycle, names, render
from launcher.backends.base import Backend, ClusterStatus
from launcher.errors import ClusterUnreachable, LauncherError, SubmitRefused
from launcher.spec import ClusterSpec

FIELD_MANAGER = "tfk8s"
# Everything a cluster may consist of, in delete-and-check order (pods last: Jobs own them).
KINDS = [
    ("batch/v1", "Job"),
    ("v1", "Service"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Pod"),
]


def instance_selector(name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in render.selector_labels(name).items())


class KubernetesBackend(Backend):
    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 namespace: str | None = None, out: TextIO = sys.stderr,
                 poll_seconds: float = 2.0, stuck_seconds: float = 120.0):
        self.kubeconfig, self.context = kubeconfig, context
        self._namespace = namespace
        self.out = out
        self.poll_seconds = poll_seconds
        self.stuck_seconds = stuck_seconds
        self._dyn = None
        self._api = None

    # -- connection ---------------------------------------------------------------------------
    def _connect(self):
        if self._dyn is not None:
            return
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.dynamic import DynamicClient

        try:
            api = config.new_client_from_config(config_file=self.kubeconfig, context=self.context)
        except (ConfigException, FileNotFoundError, OSError) as exc:
            try:
                config.load_incluster_config()
                api = client.ApiClient()
            except ConfigException:
                raise ClusterUnreachable(
                    f"no Kubernetes cluster configured: {exc} "
                    "(pass --kubeconfig/--context, or run with --local)"
                ) from None
        host = api.configuration.host
        try:
            client.VersionApi(api).get_code(_request_timeout=10)
        except Exception as exc:  # urllib3 errors vary; all mean the same to the user
            reason = getattr(exc, "reason", None) or exc.__class__.__name__
            raise ClusterUnreachable(
                f"cannot reach the Kubernetes API server at {host}: {reason} "
                "(is the cluster running? check --kubeconfig/--context)"
            ) from None
        self._api = api
        self._dyn = DynamicClient(api)

    @property
    def namespace(self) -> str:
        if self._namespace:
            return self._namespace
        from kubernetes import config

        try:
            contexts, active = config.list_kube_config_contexts(config_file=self.kubeconfig)
            if self.context:
                active = next((c for c in contexts if c["name"] == self.context), active)
            return (active.get("context") or {}).get("namespace") or "default"
        except Exception:
            return "default"

    def _resource(self, api_version: str, kind: str):
        return self._dyn.resources.get(api_version=api_version, kind=kind)

    def _list(self, api_version: str, kind: str, namespace: str, name: str) -> list[dict]:
        result = self._resource(api_version, kind).get(
            namespace=namespace, label_selector=instance_selector(name)
        )
        return [item.to_dict() for item in result.items]

    def _get(self, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            return self._resource(api_version, kind).get(namespace=namespace, name=name).to_dict()
        except NotFoundError:
            return None

    def _apply(self, obj: dict, dry_run: bool) -> dict:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        result = self._dyn.server_side_apply(
            resource, body=obj, namespace=obj["metadata"].get("namespace"),
            field_manager=FIELD_MANAGER, force_conflicts=True,
            dry_run="All" if dry_run else None,
        )
        return result.to_dict()

    # -- submit -------------------------------------------------------------------------------
    def submit(self, spec: ClusterSpec, *, wait: bool = False, replace: bool = False,
               dry_run: bool = False) -> int:
        self._connect()
        ns = spec.namespace
        if self._get("v1", "Namespace", None, ns) is None:
            raise LauncherError(
                f"namespace {ns!r} does not exist (create it: kubectl create namespace {ns})"
            )
        objects = render.render(spec)
        digest = render.spec_hash(spec)
        root = self._get("v1", "ConfigMap", ns, names.root(spec.name))
        existing = self._existing_objects(ns, spec.name)
        if root is not None or existing:
            old = ((root or {}).get("metadata", {}).get("annotations") or {}).get(
                render.SPEC_HASH_ANNOTATION)
            if root is not None and old == digest and not replace:
                status = self.status(spec.name, ns)
                self._say(f"cluster {ns}/{spec.name} is unchanged (phase {status.phase}); "
                          "nothing applied")
                return self._wait(spec, ns) if wait else 0
            if not replace:
                what = ("exists with a different spec" if root is not None and old
                        else "exists but was not created by this launcher (Helm?)")
                raise SubmitRefused(
                    f"cluster {ns}/{spec.name} {what}; Job pod templates are immutable, so "
                    "rerun with --replace to delete and recreate it, or choose another name"
                )
            if not dry_run:
                self._say(f"replacing cluster {ns}/{spec.name}")
                self.delete(spec.name, ns)
        self._create(objects, digest, dry_run)
        if dry_run:
            self._say(f"server dry run: {len(objects)} objects accepted by the API server")
            return 0
        self._say(f"created cluster {ns}/{spec.name}: "
                  + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objects))
        return self._wait(spec, ns) if wait else 0

    def _existing_objects(self, ns: str, name: str) -> list[str]:
        return [f"{kind}/{o['metadata']['name']}" for api_version, kind in KINDS[:-1]
                for o in self._list(api_version, kind, ns, name)]

    def _create(self, objects: list[dict], digest: str, dry_run: bool) -> None:
        root, rest = objects[0], objects[1:]
        root = {**root, "metadata": {
            **root["metadata"],
            "annotations": {**root["metadata"].get("annotations", {}),
                            render.SPEC_HASH_ANNOTATION: digest},
        }}
        created_root = False
        current = root
        try:
            applied = self._apply(root, dry_run)
            created_root = not dry_run
            owner = {
                "apiVersion": "v1", "kind": "ConfigMap", "name": root["metadata"]["name"],
                "uid": applied["metadata"].get("uid"), "controller": True,
                "blockOwnerDeletion": True,
            }
            for obj in rest:
                current = obj
                if not dry_run:
                    obj = {**obj, "metadata": {**obj["metadata"], "ownerReferences": [owner]}}
                self._apply(obj, dry_run)
        except Exception as exc:
            name = root["metadata"]["name"]
            ns = root["metadata"]["namespace"]
            where = f"{current['kind']}/{current['metadata']['name']}"
            if created_root:
                # No half-created clusters: take back what this submit created.
                self.delete(name, ns, quiet=True)
                left = "everything created so far was deleted again"
            else:
                left = "nothing was created"
            raise LauncherError(f"submit failed at {where}: {_api_message(exc)}; {left}") from None

    def _wait(self, spec: ClusterSpec, ns: str) -> int:
        last = None
        stuck_since = None
        while True:
            status = self.status(spec.name, ns)
            line = format_status_line(status)
            if line != last:
                self._say(line)
                last = line
            if status.finished:
                if status.phase == "Succeeded":
                    return 0
                return status.exit_code if status.exit_code not in (None, 0) else 1
            if status.phase == "Stuck":
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > self.stuck_seconds:
                    self._say(f"error: cluster {ns}/{spec.name} made no progress for "
                              f"{self.stuck_seconds:.0f}s: {status.message}. It is left in place "
                              f"for inspection; remove it with: python -m launcher delete "
                              f"{spec.name} -n {ns}")
                    return 1
            else:
                stuck_since = None
            time.sleep(self.poll_seconds)

    # -- status / logs / delete / list --------------------------------------------------------
    def status(self, name: str, namespace: str | None = None) -> ClusterStatus:
        self._connect()
        ns = namespace or self.namespace
        jobs = self._list("batch/v1", "Job", ns, name)
        if not jobs:
            root = self._get("v1", "ConfigMap", ns, names.root(name))
            if root is None:
                raise LauncherError(f"no cluster named {name!r} in namespace {ns!r}")
            return ClusterStatus(name, ns, "Unknown", "no Jobs left (deleted after their TTL?)")
        pods = self._list("v1", "Pod", ns, name)
        return lifecycle.compute_status(name, ns, jobs, pods)

    def logs(self, name: str, role: str, index: int, follow: bool = False,
             namespace: str | None = None) -> Iterator[str]:
        self._connect()
        from kubernetes import client

        ns = namespace or self.namespace
        pods = [
            p for p in self._list("v1", "Pod", ns, name)
            if (p["metadata"].get("labels") or {}).get(render.LABEL_COMPONENT) == role
            and (p["metadata"].get("annotations") or {}).get(names.INDEX_ANNOTATION) == str(index)
        ]
        if not pods:
            raise LauncherError(
                f"no pod for role {role} index {index} of cluster {ns}/{name} "
                "(check `status`; pods are removed with their Job after ttlSecondsAfterFinished)"
            )
        pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        core = client.CoreV1Api(self._api)
        response = core.read_namespaced_pod_log(
            pod["metadata"]["name"], ns, container="tensorflow", follow=follow,
            _preload_content=False,
        )
        try:
            for line in response.stream():
                yield line.decode(errors="replace")
        finally:
            response.release_conn()

    def delete(self, name: str, namespace: str | None = None, quiet: bool = False,
               timeout: float = 180.0) -> None:
        self._connect()
        from kubernetes.dynamic.exceptions import NotFoundError

        ns = namespace or self.namespace
        found = False
        for api_version, kind in KINDS[:-1]:
            resource = self._resource(api_version, kind)
            for obj in self._list(api_version, kind, ns, name):
                found = True
                try:
                    resource.delete(name=obj["metadata"]["name"], namespace=ns,
                                    body={"propagationPolicy": "Background"})
                except NotFoundError:
                    pass
        if not found and not quiet:
            raise LauncherError(f"no cluster named {name!r} in namespace {ns!r}")
        deadline = time.monotonic() + timeout
        while True:
            left = [f"{kind}/{o['metadata']['name']}" for api_version, kind in KINDS
                    for o in self._list(api_version, kind, ns, name)]
            if not left:
                break
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"cluster {ns}/{name} not gone after {timeout:.0f}s; still present: "
                    + ", ".join(left)
                )
            time.sleep(1.0)
        if not quiet:
            self._say(f"deleted cluster {ns}/{name}")

    def list(self, namespace: str | None = None) -> list[ClusterStatus]:
        self._connect()
        ns = namespace or self.namespace
        roots = self._resource("v1", "ConfigMap").get(
            namespace=ns, label_selector=f"{render.LABEL_NAME}={render.MANAGED_BY}"
        )
        out = []
        for item in roots.items:
            name = item.metadata.labels[render.LABEL_INSTANCE]
            try:
                out.append(self.status(name, ns))
            except LauncherError as exc:
                out.append(ClusterStatus(name, ns, "Unknown", str(exc)))
        return out

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def format_status_line(status: ClusterStatus) -> str:
    roles = ", ".join(
        f"{r.role} {r.active} active/{r.succeeded} succeeded/{r.failed} failed of {r.replicas}"
        for r in status.roles
    )
    text = f"[{status.phase}] {roles}"
    if status.message:
        text += f" - {status.message}"
    return text


def _api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if body:
        try:
            data = json.loads(body)
            return data.get("message") or str(body)
        except (ValueError, TypeError):
            return str(body)
    return str(exc)
