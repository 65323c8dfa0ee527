"""A fake of the Kubernetes API boundary (launcher/backends/kubernetes/api.py): objects kept in a
dict, every call recorded, failures injected on request.

It subclasses Api and replaces only the methods that talk to the client library (get, select,
apply, delete, served, logs, nodes, Kueue's Workload); find_root, list and list_roots run as in
production on top of them. Deleting an object removes what it owns (ownerReferences) at once,
like the garbage collector with nothing left to wait for.
"""

from __future__ import annotations

import copy
import itertools
import json

from launcher import k8s_contract
from launcher.backends.kubernetes.api import KUEUE_VERSIONS, Api


class FakeApiError(Exception):
    """Shaped like the client's ApiException: api_message() reads the server's words from body."""

    def __init__(self, message: str):
        super().__init__(message)
        self.body = json.dumps({"message": message})


Key = tuple  # (api_version, kind, namespace, name)
FAKE_ROOT_CA = "-----BEGIN CERTIFICATE-----\nthe fake cluster's CA\n-----END CERTIFICATE-----\n"


class FakeApi(Api):
    def __init__(self, namespaces=("default",), root_ca: str | None = FAKE_ROOT_CA):
        super().__init__(kubeconfig=None, context=None)
        self.objects: dict[Key, dict] = {}
        self.calls: list[tuple] = []  # ("apply", kind, name, dry_run), ("delete", kind, name)
        # Add-ons not installed: Kueue by default; tests add JobSet to pretend it is missing.
        self.unserved = {(version, kind) for version in KUEUE_VERSIONS for kind in ("LocalQueue", "Workload")}
        self.fail_apply: dict[tuple[str, str], str] = {}  # (kind, name) -> the server's message
        self.logs: dict[str, list[str]] = {}  # pod name -> its log lines
        self.events_forbidden = False  # RBAC: this user may not list events
        self._uids = (f"uid-{n}" for n in itertools.count(1))
        self.root_ca = root_ca  # the CA Kubernetes publishes in every namespace, None: not published
        for namespace in namespaces:
            self.add_namespace(namespace)

    def add_namespace(self, namespace: str) -> None:
        self.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        if self.root_ca is not None:
            self.add(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": k8s_contract.ROOT_CA_CONFIGMAP, "namespace": namespace},
                    "data": {k8s_contract.ROOT_CA_KEY: self.root_ca},
                }
            )

    # --- what a test sets up and reads ---------------------------------------------------------

    def add(self, obj: dict) -> dict:
        """Store `obj` as the server would (with a uid); returns the stored copy."""
        stored = copy.deepcopy(obj)
        stored["metadata"].setdefault("uid", next(self._uids))
        self.objects[_key(stored)] = stored
        return stored

    def stored(self, kind: str) -> list[dict]:
        return [obj for obj in self.objects.values() if obj["kind"] == kind]

    def mutations(self) -> list[tuple]:
        return [call for call in self.calls if call[0] in ("apply", "delete", "release")]

    # --- the boundary ----------------------------------------------------------------------

    def connect(self) -> None:
        self.calls.append(("connect",))

    def default_namespace(self) -> str:
        return "default"

    def served(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) not in self.unserved

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict | None:
        self.calls.append(("get", kind, name))
        if not self.served(api_version, kind):
            return None
        found = self.objects.get((api_version, kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def select(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict]:
        self.calls.append(("list", kind, selector))
        wanted = dict(term.split("=", 1) for term in selector.split(","))
        return [
            copy.deepcopy(obj)
            for (version, k, ns, _), obj in sorted(self.objects.items())
            if (version, k, ns) == (api_version, kind, namespace)
            and wanted.items() <= (obj["metadata"].get("labels") or {}).items()
        ]

    def apply(self, obj: dict, dry_run: bool) -> dict:
        kind, name = obj["kind"], obj["metadata"]["name"]
        self.calls.append(("apply", kind, name, dry_run))
        if (kind, name) in self.fail_apply:
            raise FakeApiError(self.fail_apply[(kind, name)])
        if dry_run:
            return copy.deepcopy(obj)
        old = self.objects.get(_key(obj))
        applied = copy.deepcopy(obj)
        if old is not None:
            applied["metadata"]["uid"] = old["metadata"]["uid"]
        return copy.deepcopy(self.add(applied))

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        self.calls.append(("delete", kind, name))
        gone = self.objects.pop((api_version, kind, namespace, name), None)
        if gone is None:
            return
        uid = gone["metadata"]["uid"]
        for key, obj in list(self.objects.items()):
            if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or []):
                self.delete(*key)

    def release(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        self.calls.append(("release", kind, name))
        found = self.objects.get((api_version, kind, namespace, name))
        if found is not None:
            found["metadata"].pop("ownerReferences", None)

    def workload_of(self, namespace: str, owner_uid: str) -> dict | None:
        return None

    def pod_log_tail(self, namespace: str, pod: str, lines: int) -> list[str]:
        return self.logs.get(pod, [])[-lines:]

    def events(self, namespace: str, reasons) -> list[dict] | None:
        self.calls.append(("list", "Event", ",".join(reasons)))
        if self.events_forbidden:
            return None
        return [
            copy.deepcopy(obj)
            for (_, kind, ns, _), obj in sorted(self.objects.items())
            if kind == "Event" and ns == namespace and obj.get("reason") in reasons
        ]

    def nodes(self, names) -> dict[str, dict | None]:
        return {name: self.objects.get(("v1", "Node", None, name)) for name in names}


def _key(obj: dict) -> Key:
    return (obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])


def instance_labels(name: str) -> dict[str, str]:
    return {k8s_contract.LABEL_NAME: k8s_contract.MANAGED_BY, k8s_contract.LABEL_INSTANCE: name}
