"""One backend interface; Kubernetes and local processes implement it."""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Iterator

from launcher.spec import ClusterSpec


@dataclass
class RoleStatus:
    role: str
    replicas: int
    active: int = 0
    succeeded: int = 0
    failed: int = 0  # failed attempts, restarts in place included
    last_exit_code: int | None = None
    reason: str | None = None  # why the last attempt ended or why a task waits


@dataclass
class ClusterStatus:
    name: str
    namespace: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    message: str = ""
    exit_code: int | None = None  # the chief's (MWMS: worker 0's) exit code, once known
    roles: list[RoleStatus] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class Backend(abc.ABC):
    @abc.abstractmethod
    def submit(self, spec: ClusterSpec, *, wait: bool = False, replace: bool = False) -> int:
        """Create the cluster; with wait, block until it ends. Returns the CLI exit code."""

    @abc.abstractmethod
    def status(self, name: str) -> ClusterStatus: ...

    @abc.abstractmethod
    def logs(self, name: str, role: str, index: int, follow: bool = False) -> Iterator[str]: ...

    @abc.abstractmethod
    def delete(self, name: str) -> None: ...

    @abc.abstractmethod
    def list(self) -> list[ClusterStatus]: ...
