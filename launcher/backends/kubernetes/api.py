"""The few Kubernetes API calls the backend makes: connect, get, list by instance, apply, delete.

The official client is imported here only, and only once a command needs a cluster: render and
the local backend work without it.
"""

from __future__ import annotations

import json

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.errors import ClusterUnreachable
from launcher.status import admission

FIELD_MANAGER = "tfk8s"
WEBHOOK_ATTEMPTS, WEBHOOK_RETRY_SECONDS = 4, 2.0  # up to 12 s for a webhook's pod to come back


def webhook_unanswered(exc: BaseException) -> bool:
    """The API server's 500 for an admission webhook it could not reach: transient, unlike a
    webhook's own refusal (a 4xx with its reason)."""
    return getattr(exc, "status", None) == 500 and "failed calling webhook" in str(getattr(exc, "body", "") or exc)


JOBSET = (k8s_contract.JOBSET_API_VERSION, "JobSet")
NETWORK_POLICY = ("networking.k8s.io/v1", "NetworkPolicy")  # deleted last (cleanup.delete_cluster)
POD_MONITOR = (k8s_contract.POD_MONITOR_API_VERSION, "PodMonitor")
# Kueue's API (Workload, LocalQueue), newest served version first (v1beta2 from Kueue 0.15).
KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")
# Kueue labels a Workload with the UID of the job object it admits.
WORKLOAD_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# Everything a cluster may consist of, in delete-and-check order (pods last: Jobs own them; the
# JobSet first, or it would recreate the Jobs deleted under it).
KINDS = [
    JOBSET,
    ("batch/v1", "Job"),
    ("v1", "Service"),
    NETWORK_POLICY,
    POD_MONITOR,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Pod"),
]
OWNED_KINDS = KINDS[:-1]  # what a cluster's objects are; pods come and go with their Jobs
# Kinds that exist only where an add-on is installed: absent means "none of them".
OPTIONAL_KINDS = {JOBSET, POD_MONITOR}
# The objects that can be a cluster's root (the one carrying the spec hash, owner of the rest).
ROOT_KINDS = [JOBSET, ("v1", "ConfigMap")]


def instance_selector(name: str) -> str:
    return f"{k8s_contract.LABEL_NAME}={k8s_contract.MANAGED_BY},{k8s_contract.LABEL_INSTANCE}={name}"


class Api:
    """A connected dynamic client (connects on first use)."""

    def __init__(self, kubeconfig: str | None, context: str | None):
        self.kubeconfig, self.context = kubeconfig, context
        self._dyn = None
        self._api = None
        self._tail_api = None

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
                    f"no Kubernetes cluster configured: {exc} (pass --kubeconfig/--context, or run with --local)"
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
        # Discovery is cached in a file shared by every process for this host: a CRD installed
        # or removed since (JobSet, Kueue) would be missed, or found where it is gone.
        self._dyn.resources.invalidate_cache()

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

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server knows this kind (a CRD such as JobSet may be missing)."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            self.resource(api_version, kind)
            return True
        except ResourceNotFoundError:
            return False

    def first_served(self, versions, kind: str) -> str | None:
        return next((v for v in versions if self.served(v, kind)), None)

    def list(self, api_version: str, kind: str, namespace: str, name: str) -> list[dict]:
        """Objects of one kind that belong to cluster `name` (none of a kind not installed)."""
        return self.select(api_version, kind, namespace, instance_selector(name))

    def select(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict]:
        if (api_version, kind) in OPTIONAL_KINDS and not self.served(api_version, kind):
            return []
        # raw JSON: the client's ResourceInstance.to_dict() took most of the 26 s that `status`
        # needed for a 1000-worker cluster (tests/scale)
        response = self.resource(api_version, kind).get(namespace=namespace, label_selector=selector, serialize=False)
        return json.loads(response.data)["items"]

    def refusal_events(self, namespace: str) -> list[dict] | None:
        """The namespace's events of objects refused at creation (launcher/status/admission.py); None
        when this user may not list events."""
        return self.events(namespace, admission.REFUSAL_REASONS)

    def events(self, namespace: str, reasons) -> list[dict] | None:
        """The namespace's events with one of `reasons`; None when this user may not list events."""
        from kubernetes.client.exceptions import ApiException

        found = []
        try:
            for reason in reasons:
                response = self.resource("v1", "Event").get(
                    namespace=namespace, field_selector=f"reason={reason}", serialize=False
                )
                found += json.loads(response.data)["items"]
        except ApiException as exc:
            if exc.status != 403:
                raise
            return None
        return found

    def list_roots(self, namespace: str) -> list[dict]:
        """Every cluster's root object in the namespace (ConfigMaps and JobSets)."""
        return [
            obj
            for api_version, kind in ROOT_KINDS
            for obj in self.select(api_version, kind, namespace, f"{k8s_contract.LABEL_NAME}={k8s_contract.MANAGED_BY}")
        ]

    def workload_of(self, namespace: str, owner_uid: str) -> dict | None:
        """The Kueue Workload that admits the object with this UID, if Kueue made one."""
        version = self.first_served(KUEUE_VERSIONS, "Workload")
        if version is None:
            return None
        found = (
            self.resource(version, "Workload")
            .get(namespace=namespace, label_selector=f"{WORKLOAD_JOB_UID_LABEL}={owner_uid}")
            .items
        )
        return found[0].to_dict() if found else None

    def find_root(self, namespace: str, name: str) -> dict | None:
        """Cluster `name`'s root object: its JobSet (workload jobset), else its ConfigMap."""
        return next(
            (
                root
                for api_version, kind in ROOT_KINDS
                if (root := self.get(api_version, kind, namespace, names.root(name))) is not None
            ),
            None,
        )

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        """The object, or None when it (or its kind, for an optional one) does not exist."""
        from kubernetes.dynamic.exceptions import NotFoundError

        if (api_version, kind) in OPTIONAL_KINDS and not self.served(api_version, kind):
            return None
        try:
            return self.resource(api_version, kind).get(namespace=namespace, name=name).to_dict()
        except NotFoundError:
            return None

    def apply(self, obj: dict, dry_run: bool) -> dict:
        """Server-side apply (idempotent, so a retry is safe). An admission webhook that did not
        answer (its pod restarting: `failed calling webhook ... EOF`, a 500) is asked again a
        few times before the submit fails on it."""
        import time

        resource = self.resource(obj["apiVersion"], obj["kind"])
        for attempt in range(1, WEBHOOK_ATTEMPTS + 1):
            try:
                result = self._dyn.server_side_apply(
                    resource,
                    body=obj,
                    namespace=obj["metadata"].get("namespace"),
                    field_manager=FIELD_MANAGER,
                    force_conflicts=True,
                    dry_run="All" if dry_run else None,
                )
                return result.to_dict()
            except Exception as exc:
                if attempt == WEBHOOK_ATTEMPTS or not webhook_unanswered(exc):
                    raise
                time.sleep(WEBHOOK_RETRY_SECONDS * attempt)
        raise AssertionError("unreachable")

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            self.resource(api_version, kind).delete(
                name=name, namespace=namespace, body={"propagationPolicy": "Background"}
            )
        except NotFoundError:
            pass  # gone already: what we wanted

    def release(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Drop the object's ownerReferences (a merge patch), so that deleting its owner leaves it."""
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            self.resource(api_version, kind).patch(
                body={"metadata": {"ownerReferences": None}},
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
            )
        except NotFoundError:
            pass

    def core_v1(self):
        """The typed core/v1 client (pods, logs, port-forward) on this connection."""
        from kubernetes import client

        self.connect()
        return client.CoreV1Api(self._api)

    def pod_log(self, namespace: str, pod: str, follow: bool, timestamps: bool = False, tail: int | None = None):
        """A streaming response of the task container's log (caller releases it); tail: only
        its last lines."""
        extra = {} if tail is None else {"tail_lines": tail}
        return self.core_v1().read_namespaced_pod_log(
            pod,
            namespace,
            container=k8s_contract.CONTAINER,
            follow=follow,
            timestamps=timestamps,
            _preload_content=False,
            **extra,
        )

    def pod_log_tail(self, namespace: str, pod: str, lines: int) -> list[str]:
        """The last lines of the task container's log; none while it has not started. Raises
        LogUnavailable when the node cannot serve it (kubelet unreachable, node gone): the API
        server proxies logs to the node, and `status` must not hang or fail on one node."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            text = self._tail_client().read_namespaced_pod_log(
                pod, namespace, container=k8s_contract.CONTAINER, tail_lines=lines, _request_timeout=LOG_TAIL_TIMEOUT
            )
        except ApiException as exc:
            if exc.status in (400, 404):  # container not started yet / pod gone meanwhile
                return []
            raise LogUnavailable(f"{pod}: {api_message(exc)}") from None
        except urllib3.exceptions.HTTPError as exc:  # timed out, connection dropped
            raise LogUnavailable(f"{pod}: {exc}") from None
        return text.splitlines()

    def _tail_client(self):
        """core/v1 without urllib3's retries: a silent node (dead, not yet NotReady) made every
        log tail wait LOG_TAIL_TIMEOUT four times (42 s per `status` on kind), which held the
        NodeLost verdict back by as long."""
        import copy

        from kubernetes import client

        if self._tail_api is None:
            self.connect()
            configuration = copy.deepcopy(self._api.configuration)
            configuration.retries = False
            self._tail_api = client.CoreV1Api(client.ApiClient(configuration))
        return self._tail_api

    def nodes(self, names) -> dict[str, dict | None]:
        """name -> Node (raw JSON), None for a Node that no longer exists. One get per name:
        the CLI user needs only `get` on nodes, and a cluster's pods sit on few of them.
        Raises NodesUnreadable when RBAC forbids it."""
        from kubernetes.dynamic.exceptions import ForbiddenError, NotFoundError

        found: dict[str, dict | None] = {}
        for name in sorted(set(names)):
            try:
                found[name] = json.loads(self.resource("v1", "Node").get(name=name, serialize=False).data)
            except NotFoundError:
                found[name] = None
            except ForbiddenError as exc:
                raise NodesUnreadable(api_message(exc)) from None
        return found


class NodesUnreadable(Exception):
    """The CLI's user may not get Nodes (RBAC): lost nodes cannot be detected."""


# How to let the CLI's user read Nodes (cluster-scoped, so a ClusterRole).
GRANT_NODE_READ = (
    "kubectl create clusterrole tfk8s-node-reader --verb=get --resource=nodes && "
    "kubectl create clusterrolebinding tfk8s-node-reader "
    "--clusterrole=tfk8s-node-reader --user=<you>"
)


class LogUnavailable(Exception):
    """A pod's log cannot be read now (its node does not answer)."""


# (connect, read) seconds for a log tail read by `status`: a node that does not answer must not
# stall every status call (the API server's own dial to the kubelet waits much longer).
LOG_TAIL_TIMEOUT = (5, 10)


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
