"""The launcher's own error types: every user-facing failure is one of these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a cluster spec: where it is, what it is, how to fix it."""

    message: str
    path: str = ""  # field path, e.g. roles.ps.replicas
    file: str | None = None
    line: int | None = None
    hint: str | None = None

    def __str__(self) -> str:
        where = self.file or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class LauncherError(Exception):
    """Base class: the CLI prints these as one line each and exits non-zero."""

    exit_code = 1


class SpecError(LauncherError):
    """A cluster spec is invalid; carries every problem found, not just the first."""

    exit_code = 2

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ClusterUnreachable(LauncherError):
    """No Kubernetes API server answered."""


class SubmitRefused(LauncherError):
    """Submitting would change or clobber an existing cluster."""

    exit_code = 2


class NotAClusterName(LauncherError):
    """A command was given a name no spec could have: refused before any file is touched."""

    exit_code = 2


class ClusterNotFound(LauncherError):
    """No cluster of that name where the backend looks (namespace, local workdir)."""


class JobFailed(LauncherError):
    """A cluster waited for ended in a phase the caller did not wait for (Failed, Unknown);
    `status` is its last ClusterStatus, `exit_code` the CLI's code for it."""

    def __init__(self, message: str, status, exit_code: int = 1):
        super().__init__(message)
        self.status = status
        self.exit_code = exit_code


class JobTimeout(LauncherError, TimeoutError):
    """A wait ran past its timeout; `status` is the cluster's last ClusterStatus."""

    def __init__(self, message: str, status):
        super().__init__(message)
        self.status = status
