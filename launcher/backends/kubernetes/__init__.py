"""Kubernetes backend: server-side apply of the rendered objects, status, logs, delete, list.

Ownership: the root (the ConfigMap; under workload jobset the JobSet) owns every other object
(ownerReferences are added once the root's UID exists), so deleting it removes the cluster. `delete` also removes everything
carrying the instance label, which covers clusters installed by Helm (no ownerReferences there).
Submit's steps are in submit.py, the API calls in api.py, the phase in launcher/lifecycle.py.
"""
from __future__ import annotations

import sys
import time
from typing import Iterator, TextIO

from launcher import lifecycle
from launcher.backends.base import Backend, exit_code
from launcher.backends.kubernetes import submit as submit_steps
from launcher.backends.kubernetes.api import JOBSET, Api
from launcher.backends.kubernetes.cleanup import delete_cluster
from launcher.errors import LauncherError
from launcher.spec import ClusterSpec
from launcher.status import ClusterStatus, Phase
from worker import contract


class KubernetesBackend(Backend):
    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 namespace: str | None = None, *, dry_run: bool = False,
                 out: TextIO = sys.stderr, poll_seconds: float = 2.0,
                 stuck_seconds: float = 120.0, delete_timeout: float = 180.0):
        """namespace: where status/logs/delete/list look (default: the kubeconfig context's);
        submit uses the spec's. dry_run: submit asks the API server to validate only."""
        self.api = Api(kubeconfig, context)
        self._namespace = namespace
        self.dry_run = dry_run
        self.out = out
        self.poll_seconds = poll_seconds
        self.stuck_seconds = stuck_seconds
        self.delete_timeout = delete_timeout

    @property
    def namespace(self) -> str:
        if self._namespace is None:
            self._namespace = self.api.default_namespace()
        return self._namespace

    def submit(self, spec: ClusterSpec, *, replace: bool = False) -> None:
        self.api.connect()
        submit_steps.run(submit_steps.Submission(
            api=self.api, spec=spec, replace=replace, dry_run=self.dry_run,
            delete_timeout=self.delete_timeout, say=self._say,
        ))

    def wait(self, name: str) -> int:
        """Print each new status line until the cluster ends; give up on a Stuck cluster after
        `stuck_seconds` (it is left in place for inspection)."""
        last, stuck_since = None, None
        while True:
            status = self.status(name)
            if status.line() != last:
                last = status.line()
                self._say(last)
            if status.finished:
                return exit_code(status)
            if status.phase is Phase.STUCK:
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > self.stuck_seconds:
                    self._say(f"error: cluster {self.namespace}/{name} made no progress for "
                              f"{self.stuck_seconds:.0f}s: {status.message}. It is left in place "
                              f"for inspection; remove it with: python -m launcher delete "
                              f"{name} -n {self.namespace}")
                    return 1
            else:
                stuck_since = None
            time.sleep(self.poll_seconds)

    def status(self, name: str) -> ClusterStatus:
        ns = self.namespace
        root = self.api.find_root(ns, name)
        jobs = self.api.list("batch/v1", "Job", ns, name)
        if root is not None and root["kind"] == JOBSET[1]:
            pods = self.api.list("v1", "Pod", ns, name)
            suspended = (root.get("spec") or {}).get("suspend")
            workload = self.api.workload_of(ns, root["metadata"]["uid"]) if suspended else None
            return lifecycle.compute_jobset_status(name, ns, root, jobs, pods, workload)
        if not jobs:
            if root is None:
                raise LauncherError(f"no cluster named {name!r} in namespace {ns!r}")
            return ClusterStatus(name, ns, Phase.UNKNOWN, "no Jobs left (deleted after their TTL?)")
        pods = self.api.list("v1", "Pod", ns, name)
        return lifecycle.compute_status(name, ns, jobs, pods)

    def logs(self, name: str, role: str, index: int, follow: bool = False) -> Iterator[str]:
        ns = self.namespace
        pods = [
            p for p in self.api.list("v1", "Pod", ns, name)
            if (p["metadata"].get("labels") or {}).get(contract.LABEL_COMPONENT) == role
            and (p["metadata"].get("annotations") or {}).get(contract.INDEX_ANNOTATION) == str(index)
        ]
        if not pods:
            raise LauncherError(
                f"no pod for role {role} index {index} of cluster {ns}/{name} "
                "(check `status`; pods are removed with their Job after ttlSecondsAfterFinished)"
            )
        pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        response = self.api.pod_log(ns, pod["metadata"]["name"], follow)
        try:
            for line in response.stream():
                yield line.decode(errors="replace")
        finally:
            response.release_conn()

    def delete(self, name: str) -> None:
        ns = self.namespace
        if not delete_cluster(self.api, ns, name, self.delete_timeout):
            raise LauncherError(f"no cluster named {name!r} in namespace {ns!r}")
        self._say(f"deleted cluster {ns}/{name}")

    def list(self) -> list[ClusterStatus]:
        ns = self.namespace
        out = []
        # A JobSet cluster may also have a ConfigMap (its evaluator's supervisor): once each.
        instances = dict.fromkeys(root["metadata"]["labels"][contract.LABEL_INSTANCE]
                                  for root in self.api.list_roots(ns))
        for name in instances:
            try:
                out.append(self.status(name))
            except LauncherError as exc:
                out.append(ClusterStatus(name, ns, Phase.UNKNOWN, str(exc)))
        return out

    def tensorboard(self, name: str, port: int):
        from launcher.backends.kubernetes import tensorboard

        return tensorboard.serve(self.api, self.namespace, name, port, self._say)

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)
