"""Which backend a client (or the CLI) uses, as typed configuration: one object per backend.

The backends themselves are imported only when a client first needs one, so that importing
the API loads neither the kubernetes client nor anything of TensorFlow.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Union

from launcher.backends.base import Backend

DEFAULT_WORKDIR = ".tfk8s"  # the local backend's, and the CLI's --workdir default
DEFAULT_STUCK_SECONDS = 120.0


@dataclass(frozen=True)
class KubernetesBackendConfig:
    """A Kubernetes cluster, as kubectl would find it.

    namespace: where get/list/logs/delete look and where specs are submitted (None: a spec's
    own namespace for submit, the context's namespace for the rest). dry_run: submit asks the
    API server to validate the objects and creates nothing. stuck_seconds: how long the CLI's
    `submit --wait` waits on a Stuck (or NodeLost) cluster before it gives up."""

    namespace: str | None = None
    context: str | None = None
    kubeconfig: str | None = None
    dry_run: bool = False
    stuck_seconds: float = DEFAULT_STUCK_SECONDS


@dataclass(frozen=True)
class LocalProcessBackendConfig:
    """Every task as a process on this machine, its files under `workdir/<name>/`.

    foreground: False (the API's default) has submit() start a detached supervisor, so the
    cluster runs while the caller does something else, and survives it; True is the CLI's
    `submit --local`: submit() only prepares the run and the client's follow() runs it in this
    process (Ctrl-C stops every task). echo_tasks: in the foreground, copy every task's output
    to the terminal as it comes."""

    workdir: str | Path = DEFAULT_WORKDIR
    foreground: bool = False
    echo_tasks: bool = False


BackendConfig = Union[KubernetesBackendConfig, LocalProcessBackendConfig]


def make_backend(config: BackendConfig, *, view=None, out: IO[str] | None = None,
                 namespace: str | None = None) -> Backend:
    """The backend for `config`. view: what a blocking wait shows (the CLI's live view or
    status lines; None: plain lines on `out`). namespace: overrides the config's (Kubernetes)."""
    import sys

    if isinstance(config, LocalProcessBackendConfig):
        from launcher.backends.local import LocalBackend

        return LocalBackend(workdir=Path(config.workdir), foreground=config.foreground,
                            echo_tasks=config.echo_tasks, view=view,
                            stream=out if out is not None else sys.stdout)
    if isinstance(config, KubernetesBackendConfig):
        from launcher.backends.kubernetes import KubernetesBackend

        return KubernetesBackend(kubeconfig=config.kubeconfig, context=config.context,
                                 namespace=namespace or config.namespace, dry_run=config.dry_run,
                                 stuck_seconds=config.stuck_seconds, view=view,
                                 out=out if out is not None else sys.stderr)
    raise TypeError(f"backend config must be KubernetesBackendConfig or "
                    f"LocalProcessBackendConfig, not {type(config).__name__}")
