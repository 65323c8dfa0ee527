"""Kubernetes backend: server-side apply of the rendered objects, status, logs, delete, list.

Ownership: the root (the ConfigMap; under workload jobset the JobSet) owns every other object
(ownerReferences are added once the root's UID exists), so deleting it removes the cluster.
`delete` also removes everything carrying the instance label, which covers clusters installed by
Helm (no ownerReferences there).
Submit's steps are in submit.py, the API calls in api.py, the phase in launcher/status/lifecycle.py,
the options in types.py, the Backend interface over them in backend.py.
"""

from launcher.backends.kubernetes.types import DEFAULT_STUCK_SECONDS, KubernetesBackendConfig

__all__ = ["KubernetesBackend", "KubernetesBackendConfig", "DEFAULT_STUCK_SECONDS"]


def __getattr__(attribute: str):
    # The backend class is imported on first use, so importing the options (types.py) through
    # this package, as launcher.api does, loads none of the backend's modules.
    if attribute == "KubernetesBackend":
        from launcher.backends.kubernetes.backend import KubernetesBackend

        return KubernetesBackend
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
