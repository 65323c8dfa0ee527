"""The Kubernetes backend's options: one typed object, used by the Python API and the CLI alike."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_STUCK_SECONDS = 120.0


@dataclass(frozen=True)
class KubernetesBackendConfig:
    """A Kubernetes cluster, as kubectl would find it.

    namespace: where get/list/logs/delete look and where specs are submitted (None: a spec's
    own namespace for submit, the context's namespace for the rest). dry_run: submit asks the
    API server to validate the objects and creates nothing. stuck_seconds: how long wait()
    watches a Stuck (or NodeLost) cluster before it gives up, leaving it in place.
    poll_seconds: how often wait() and `logs -f` re-read the cluster. delete_timeout: how long
    delete (and submit's --replace and rollback) wait for every object to be gone."""

    namespace: str | None = None
    context: str | None = None
    kubeconfig: str | None = None
    dry_run: bool = False
    stuck_seconds: float = DEFAULT_STUCK_SECONDS
    poll_seconds: float = 2.0
    delete_timeout: float = 180.0
