"""One backend interface; Kubernetes and local processes implement it exactly.

Where and how a backend works (kubeconfig, namespace, work directory, server dry run,
timeouts) is fixed at construction by its typed options (backends/<name>/types.py), with the
output stream and view; the methods take only what names a cluster. So the CLI chooses a
backend once and then calls the same methods whatever it chose.
"""

from __future__ import annotations

import abc
import io
import logging
from typing import ContextManager, Iterator, Protocol

from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping.code_bundle import Bundle
from launcher.status.status import ClusterStatus, Phase

# The same spec again changes nothing, so a Failed cluster stays Failed: how to run it again.
RERUN_FAILED = (
    "cluster {cluster} ended Failed: submit --replace deletes it and runs this spec again (the model dir is "
    "kept: it resumes from its checkpoints); `python -m launcher status {status}` says why it failed"
)


class View(Protocol):
    """Where a backend's wait() shows a running cluster: its status, and notes between."""

    def show(self, status: ClusterStatus) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


class LogLines(io.TextIOBase):
    """A text stream whose every line is one INFO record of `logger` (`tfk8s.<backend>`): where
    a backend's notes and status lines go when its caller gave it no stream, so a program
    that uses the library (launcher.api) gets nothing on its stdout; the CLI passes its own
    streams and configures logging for the rest (launcher/cli.py)."""

    def __init__(self, logger: logging.Logger):
        self.logger = logger
        self._partial = ""  # a line written in pieces (print's text, then its end)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if line.strip():
                self.logger.info(line)
        return len(text)


class Backend(abc.ABC):
    @abc.abstractmethod
    def submit(self, spec: ClusterSpec, *, replace: bool = False, code: Bundle | None = None) -> None:
        """Create the cluster and start it, then return (a no-op when the same spec already
        runs); refuse to clobber a different one unless `replace`. `code`: the spec's code as its
        load packed it (loader.Loaded); without it, a spec with `code:` is packed here."""

    @abc.abstractmethod
    def wait(self, name: str) -> int:
        """Block until the cluster ends, reporting progress; the CLI exit code (the chief's)."""

    @abc.abstractmethod
    def watch(self, name: str) -> int:
        """Show a cluster that runs elsewhere (submitted earlier) until it ends; the CLI exit
        code (the chief's)."""

    @abc.abstractmethod
    def status(self, name: str) -> ClusterStatus: ...

    @abc.abstractmethod
    def logs(self, name: str, role: str, index: int, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        """Lines of one task's log, each ending in a newline (tail: only the last ones); with
        follow, until the task ends: waiting while it has not started, and going on with the
        log of a restarted or replaced task after a marker line."""

    @abc.abstractmethod
    def all_logs(self, name: str, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        """Every task's log lines, each behind `[<role>-<index>] `, in the order they were
        written as far as the backend can tell (tail: the last ones of each log); with follow,
        until the cluster ends."""

    @abc.abstractmethod
    def delete(self, name: str) -> None:
        """Stop the cluster and remove its objects; returns once everything is gone."""

    @abc.abstractmethod
    def list(self) -> list[ClusterStatus]: ...

    @abc.abstractmethod
    def tensorboard(self, name: str, port: int) -> ContextManager[str]:
        """TensorBoard on the cluster's model dir at 127.0.0.1:port while the context is open
        (its value: the URL); leaving it stops TensorBoard and removes what it made."""


def exit_code(status: ClusterStatus) -> int:
    """The CLI exit code of a finished cluster: 0, or the chief's non-zero code (1 if unknown)."""
    if status.phase is Phase.SUCCEEDED:
        return 0
    return status.exit_code if status.exit_code not in (None, 0) else 1
