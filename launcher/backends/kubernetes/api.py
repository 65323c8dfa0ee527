"""The few Kubernetes API calls the backend makes: connect, get, list by instance, apply, delete.

The official client is imported here only, and only once a command needs a cluster: render and
the local backend work without it.
"""
from __future__ import annotations

import json

from launcher.errors import ClusterUnreachable
from worker import contract

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
OWNED_KINDS = KINDS[:-1]  # what a cluster's objects are; pods come and go with their Jobs


def instance_selector(name: str) -> str:
    return f"{contract.LABEL_NAME}={contract.MANAGED_BY},{contract.LABEL_INSTANCE}={name}"


class Api:
    """A connected dynamic client (connects on first use)."""

    def __init__(self, kubeconfig: str | None, context: str | None):
        self.kubeconfig, self.context = kubeconfig, context
        self._dyn = None
        self._api = None

    def connect(self) -> None:
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

    def default_namespace(self) -> str:
        """The kubeconfig context's namespace, like kubectl; `default` without one."""
        from kubernetes import config

        try:
            contexts, active = config.list_kube_config_contexts(config_file=self.kubeconfig)
            if self.context:
                active = next((c for c in contexts if c["name"] == self.context), active)
            return (active.get("context") or {}).get("namespace") or "default"
        except Exception:
            return "default"

    def resource(self, api_version: str, kind: str):
        self.connect()
        return self._dyn.resources.get(api_version=api_version, kind=kind)

    def list(self, api_version: str, kind: str, namespace: str, name: str) -> list[dict]:
        """Objects of one kind that belong to cluster `name`."""
        result = self.resource(api_version, kind).get(
            namespace=namespace, label_selector=instance_selector(name))
        return [item.to_dict() for item in result.items]

    def list_roots(self, namespace: str) -> list[dict]:
        result = self.resource("v1", "ConfigMap").get(
            namespace=namespace, label_selector=f"{contract.LABEL_NAME}={contract.MANAGED_BY}")
        return [item.to_dict() for item in result.items]

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            return self.resource(api_version, kind).get(namespace=namespace, name=name).to_dict()
        except NotFoundError:
            return None

    def apply(self, obj: dict, dry_run: bool) -> dict:
        resource = self.resource(obj["apiVersion"], obj["kind"])
        result = self._dyn.server_side_apply(
            resource, body=obj, namespace=obj["metadata"].get("namespace"),
            field_manager=FIELD_MANAGER, force_conflicts=True,
            dry_run="All" if dry_run else None,
        )
        return result.to_dict()

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            self.resource(api_version, kind).delete(
                name=name, namespace=namespace, body={"propagationPolicy": "Background"})
        except NotFoundError:
            pass  # gone already: what we wanted

    def pod_log(self, namespace: str, pod: str, follow: bool):
        """A streaming response of the task container's log (caller releases it)."""
        from kubernetes import client

        self.connect()
        return client.CoreV1Api(self._api).read_namespaced_pod_log(
            pod, namespace, container=contract.CONTAINER, follow=follow, _preload_content=False)


def api_message(exc: Exception) -> str:
    """The API server's own message from an ApiException, else the exception's text."""
    body = getattr(exc, "body", None)
    if body:
        try:
            data = json.loads(body)
            return data.get("message") or str(body)
        except (ValueError, TypeError):
            return str(body)
    return str(exc)
