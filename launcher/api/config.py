"""Which backend a client (or the CLI) uses: one typed options object per backend, defined next
to its backend (backends/<name>/types.py) and re-exported here for the API.

The backend classes are imported only when a client first needs one.
"""

from __future__ import annotations

import dataclasses
from typing import IO, Union

from launcher.backends.base import Backend
from launcher.backends.kubernetes.types import DEFAULT_STUCK_SECONDS, KubernetesBackendConfig
from launcher.backends.local.types import DEFAULT_WORKDIR, LocalProcessBackendConfig

BackendConfig = Union[KubernetesBackendConfig, LocalProcessBackendConfig]

__all__ = [
    "BackendConfig",
    "DEFAULT_STUCK_SECONDS",
    "DEFAULT_WORKDIR",
    "KubernetesBackendConfig",
    "LocalProcessBackendConfig",
    "make_backend",
]


def make_backend(
    config: BackendConfig, *, view=None, out: IO[str] | None = None, namespace: str | None = None
) -> Backend:
    """The backend for `config`. view: what a blocking wait shows (the CLI's live view or
    status lines; None: plain lines on `out`). out: where its notes go (None: the backend's
    logger, backends/base.py LogLines). namespace: overrides the config's (Kubernetes)."""
    if isinstance(config, LocalProcessBackendConfig):
        from launcher.backends.local.backend import LocalBackend

        return LocalBackend(config, view=view, stream=out)
    if isinstance(config, KubernetesBackendConfig):
        from launcher.backends.kubernetes.backend import KubernetesBackend

        if namespace:
            config = dataclasses.replace(config, namespace=namespace)
        return KubernetesBackend(config, view=view, out=out)
    raise TypeError(
        f"backend config must be KubernetesBackendConfig or LocalProcessBackendConfig, not {type(config).__name__}"
    )
