"""KubernetesBackend: the Backend interface over the API (the design in __init__.py)."""

from __future__ import annotations

import heapq
import logging
import time
from typing import Iterator, TextIO

from launcher import k8s_contract
from launcher.backends.base import RERUN_FAILED, Backend, LogLines, View, exit_code
from launcher.backends.kubernetes import logs as task_logs
from launcher.backends.kubernetes import submit as submit_steps
from launcher.backends.kubernetes.api import (
    GRANT_NODE_READ,
    JOBSET,
    Api,
    LogUnavailable,
    NodesUnreadable,
    api_message,
)
from launcher.backends.kubernetes.cleanup import claims_of, delete_cluster
from launcher.backends.kubernetes.logs import follow_logs, log_time, newest_pod, task_of
from launcher.backends.kubernetes.types import KubernetesBackendConfig
from launcher.backends.view import LineView
from launcher.cluster_spec import loader
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.errors import ClusterNotFound, LauncherError
from launcher.plan import storage
from launcher.plan.plan import plan
from launcher.status import admission, lifecycle, node_loss, verdicts
from launcher.status import progress as progress_rules
from launcher.status.progress import TAIL_LINES, TrainingProgress, read_progress
from launcher.status.status import ClusterStatus, Phase
from worker import contract


class KubernetesBackend(Backend):
    def __init__(
        self,
        config: KubernetesBackendConfig | None = None,
        *,
        out: TextIO | None = None,
        view: View | None = None,
        api: Api | None = None,
    ):
        """out: where notes go (default: the `tfk8s.kubernetes` logger). view: what wait()
        shows (default: plain status lines on `out`).
        api: the API boundary (default: a client for the config's kubeconfig and context;
        tests pass a fake)."""
        self.config = config if config is not None else KubernetesBackendConfig()
        self._api = api if api is not None else Api(self.config.kubeconfig, self.config.context)
        out = out if out is not None else LogLines(logging.getLogger("tfk8s.kubernetes"))
        self._view = view if view is not None else LineView(out)
        self._out = out
        self._namespace = self.config.namespace

    @property
    def namespace(self) -> str:
        if self._namespace is None:
            self._namespace = self._api.default_namespace()
        return self._namespace

    def submit(self, spec: ClusterSpec, *, replace: bool = False, code: code_bundle.Bundle | None = None) -> None:
        self._api.connect()
        if code is None:  # packed once: what the ConfigMap carries is what the hash names
            code = loader.pack_code(spec)
        if code is not None:
            self._say(f"note: {code_bundle.note(spec, code)}")
        applied = submit_steps.run(
            submit_steps.Submission(
                api=self._api,
                plan=plan(spec, code),
                replace=replace,
                dry_run=self.config.dry_run,
                delete_timeout=self.config.delete_timeout,
                say=self._say,
            )
        )
        if not applied and self.status(spec.name).phase is Phase.FAILED:
            self._say(
                RERUN_FAILED.format(cluster=f"{spec.namespace}/{spec.name}", status=f"{spec.name} -n {spec.namespace}")
            )

    def wait(self, name: str) -> int:
        """Show the cluster in the view until it ends; give up on a Stuck cluster (exit 1) or
        one with a task on a lost node (exit EXIT_NODE_LOST) after `stuck_seconds`; it is left
        in place for inspection."""
        try:
            return self._wait(name)
        finally:
            self._view.close()

    def watch(self, name: str) -> int:
        return self.wait(name)  # a cluster on Kubernetes always runs elsewhere

    def _wait(self, name: str) -> int:
        stuck_since = None
        while True:
            status = self.status(name)
            self._view.show(status)
            if status.finished:
                return exit_code(status)
            if status.phase in (Phase.STUCK, Phase.NODE_LOST):
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > self.config.stuck_seconds:
                    lost = status.phase is Phase.NODE_LOST
                    self._view.note(
                        f"error: cluster {self.namespace}/{name} "
                        + ("has a task on a lost node" if lost else "made no progress")
                        + f" for {self.config.stuck_seconds:.0f}s: {status.message}. It is left in "
                        f"place (training resumes once the task is replaced); remove it with: "
                        f"python -m launcher delete {name} -n {self.namespace}"
                    )
                    return node_loss.EXIT_NODE_LOST if lost else 1
            else:
                stuck_since = None
            time.sleep(self.config.poll_seconds)

    def status(self, name: str) -> ClusterStatus:
        ns = self.namespace
        root = self._api.find_root(ns, name)
        jobs = self._api.list("batch/v1", "Job", ns, name)
        if root is not None and root["kind"] == JOBSET[1]:
            pods = self._api.list("v1", "Pod", ns, name)
            suspended = (root.get("spec") or {}).get("suspend")
            workload = self._api.workload_of(ns, root["metadata"]["uid"]) if suspended else None
            facts, unread = self._scheduling(pods)
            status = lifecycle.compute_jobset_status(name, ns, root, jobs, pods, workload, facts)
        elif not jobs:
            if root is None:
                raise ClusterNotFound(f"no cluster named {name!r} in namespace {ns!r}")
            return ClusterStatus(name, ns, Phase.UNKNOWN, "no Jobs left (deleted after their TTL?)")
        else:
            pods = self._api.list("v1", "Pod", ns, name)
            facts, unread = self._scheduling(pods)
            status = lifecycle.compute_status(name, ns, jobs, pods, facts)
        status.notes += unread
        status = self._with_refusals(status, root, jobs, pods)
        status = self._with_mount_failures(status, pods)
        status = self._with_nodes(status, pods)
        status.training = self._training(ns, pods)
        if status.phase is Phase.RUNNING:
            self._say_if_quiet(status, pods)
        status.notes += storage.storage_notes([job.get("spec") or {} for job in jobs])
        return status

    def _say_if_quiet(self, status: ClusterStatus, pods: list[dict]) -> None:
        """No step since progress.QUIET_SECONDS: said in the message (or a note beside one), with
        the likely cause when every task alive only serves. The checkpoints are on the claim,
        which the launcher does not mount: only progress lines and the tasks' starts count here."""
        started: dict[str, tuple[float, str]] = {}  # task -> (its container's start, its pod)
        for pod in lifecycle.task_pods(pods):
            for container in (pod.get("status") or {}).get("containerStatuses") or []:
                since = node_loss.parse_time(((container.get("state") or {}).get("running") or {}).get("startedAt"))
                if container.get("name") == k8s_contract.CONTAINER and since is not None:
                    task = contract.task_name(lifecycle.role_of(pod), lifecycle.index_of(pod))
                    started[task] = (since.timestamp(), pod["metadata"]["name"])
        signs = [at for at, _ in started.values()] + [status.training.updated_at if status.training else None]
        signs = [s for s in signs if s]
        if not started or time.time() - max(signs) < progress_rules.QUIET_SECONDS:
            return
        serving = set()
        for task, (_, pod) in started.items():
            try:
                if progress_rules.waits_as_server(self._api.pod_log_tail(self.namespace, pod, 20)):
                    serving.add(task)
            except LogUnavailable:
                pass
        strategy = next(
            iter({(p["metadata"].get("labels") or {}).get(k8s_contract.LABEL_STRATEGY) for p in pods} - {None}), ""
        )
        alive = {task: task.rsplit("-", 1)[0] for task in started}
        progress_rules.add_quiet_note(status, max(signs), strategy, alive, serving)

    def _scheduling(self, pods: list[dict]) -> tuple[lifecycle.SchedulingFacts, list[str]]:
        """The cluster autoscaler's word on this cluster's unscheduled pods and the time now, and
        the notes to add; events are asked only while a task pod is Unschedulable. A user who
        may not list events sees every unscheduled pod as Stuck, which a note says."""
        if not any(lifecycle.unschedulable(p) for p in lifecycle.task_pods(pods)):
            return lifecycle.SchedulingFacts(now=time.time()), []
        events = self._api.events(self.namespace, tuple(verdicts.AUTOSCALER_EVENTS))
        if events is None:
            note = (
                "a node the cluster autoscaler is adding cannot be told from none: "
                f"this user may not list events in {self.namespace}"
            )
            return lifecycle.SchedulingFacts(now=time.time()), [note]
        return lifecycle.SchedulingFacts(lifecycle.newest_autoscaler_events(pods, events), time.time()), []

    def _with_refusals(
        self, status: ClusterStatus, root: dict | None, jobs: list[dict], pods: list[dict]
    ) -> ClusterStatus:
        """The status with the API server's refusals to create pods or Jobs as its cause
        (launcher/status/admission.py); asked only while pods are missing."""
        jobset = root is not None and root["kind"] == JOBSET[1]
        jobless = admission.jobless_roles(root, jobs) if jobset else set()
        if status.finished or not (admission.missing_pods(status) or jobless):
            return status
        owners = {job["metadata"]["uid"]: lifecycle.role_of(job) or "" for job in jobs}
        if jobset:
            owners[root["metadata"]["uid"]] = ""
        events = self._api.refusal_events(self.namespace)
        if events is None:
            status.notes.append(
                "pods refused by the API server (a quota, a policy) cannot be "
                f"reported: this user may not list events in {self.namespace}"
            )
            return status
        return admission.apply(status, admission.refusals(events, owners, admission.newest_pods(pods)), jobless)

    def _with_mount_failures(self, status: ClusterStatus, pods: list[dict]) -> ClusterStatus:
        """The status with the volumes its pods cannot mount as its cause (FailedMount,
        FailedAttachVolume events: a missing Secret, a Multi-Attach); asked only while a pod's
        containers wait for their volumes."""
        if status.finished or not any(lifecycle.waits_for_volumes(p) for p in lifecycle.task_pods(pods)):
            return status
        events = self._api.events(self.namespace, tuple(verdicts.MOUNT_FAILURE_EVENTS))
        if events is None:
            status.notes.append(
                f"volumes that cannot mount cannot be reported: this user may not list events in {self.namespace}"
            )
            return status
        return lifecycle.with_mount_failures(status, lifecycle.mount_failures(pods, events))

    def _with_nodes(self, status: ClusterStatus, pods: list[dict]) -> ClusterStatus:
        """The status with the lost nodes under its unfinished pods (node_loss.py); when RBAC
        forbids reading Nodes, the message says node state is unknown and a note how to fix it."""
        if status.finished:
            return status
        live = [
            p
            for p in lifecycle.task_pods(pods)
            if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        try:
            nodes = self._api.nodes({p["spec"]["nodeName"] for p in live})
        except NodesUnreadable as exc:
            status.notes.append(f"lost nodes cannot be detected: {exc}; to let this user read Nodes: {GRANT_NODE_READ}")
            return node_loss.apply(status, live, None, "forbidden to get nodes (RBAC)")
        return node_loss.apply(status, live, nodes)

    def _training(self, ns: str, pods: list[dict]) -> TrainingProgress | None:
        """From the log tails of the success task's and the evaluator's newest pods."""
        strategies = {(p["metadata"].get("labels") or {}).get(k8s_contract.LABEL_STRATEGY) for p in pods}
        strategies.discard(None)
        if len(strategies) != 1:
            return None  # no pods (yet, or any more)
        role = contract.success_role(strategies.pop())

        unreadable = []

        def tail(role: str, index: int) -> list[str]:
            pod = newest_pod(pods, role, index)
            try:
                return self._api.pod_log_tail(ns, pod["metadata"]["name"], TAIL_LINES) if pod else []
            except LogUnavailable as exc:
                unreadable.append(str(exc))
                return []

        progress = read_progress(tail(role.value, contract.SUCCESS_INDEX), tail(contract.Role.EVALUATOR.value, 0))
        if unreadable:
            progress = progress or TrainingProgress()
            progress.unreadable = "; ".join(unreadable)
        return progress

    def logs(self, name: str, role: str, index: int, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        ns = self.namespace
        if follow:
            self.status(name)  # a wrong name fails at once; a deleted cluster ends the follow
            yield from self._follow_task(ns, name, role, index, tail)
            return
        pod = newest_pod(self._api.list("v1", "Pod", ns, name), role, index)
        if pod is None:
            raise LauncherError(
                f"no pod for role {role} index {index} of cluster {ns}/{name} "
                "(check `status`; pods are removed with their Job after ttlSecondsAfterFinished)"
            )
        if not task_logs.has_log(pod):
            task = contract.task_name(role, index)
            raise LauncherError(f"no log yet: {task_logs.waiting_for(pod, task)} (`logs -f` waits for it)")
        yield from self._log_lines(ns, pod["metadata"]["name"], False, False, tail)

    def _follow_task(self, ns: str, name: str, role: str, index: int, tail: int | None) -> Iterator[str]:
        """One task's log across container restarts and replacement pods (logs.py)."""
        return task_logs.follow_task(
            newest_pod=lambda: newest_pod(self._api.list("v1", "Pod", ns, name), role, index),
            stream=lambda pod, lines: self._log_lines(ns, pod, True, False, lines),
            cluster_finished=lambda: self._finished(name),
            say=self._say,
            task=f"{contract.task_name(role, index)} of {ns}/{name}",
            tail=tail,
            poll_seconds=self.config.poll_seconds,
        )

    def _finished(self, name: str) -> bool:
        try:
            status = self.status(name)
        except LauncherError:  # deleted meanwhile
            return True
        return status.finished or status.phase is Phase.UNKNOWN

    def all_logs(self, name: str, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        """Every task's current pod; without follow merged by the kubelet's timestamps, with
        follow as the lines arrive, across restarts (the tasks that have pods when it starts)."""
        ns = self.namespace
        pods = self._api.list("v1", "Pod", ns, name)
        tasks = sorted(
            {task_of(p) for p in pods if task_of(p) is not None},
            key=lambda t: (contract.ROLES.index(contract.Role(t[0])), t[1]),
        )
        if not tasks:
            raise LauncherError(
                f"no pods of cluster {ns}/{name} (check `status`; pods are "
                "removed with their Job after ttlSecondsAfterFinished)"
            )
        if follow:
            yield from follow_logs(
                {f"[{contract.task_name(*t)}] ": self._follow_task(ns, name, *t, tail) for t in tasks}
            )
            return
        current = {t: newest_pod(pods, *t)["metadata"]["name"] for t in tasks}
        stamped = [
            [
                (log_time(line), f"[{contract.task_name(*t)}] " + line.split(" ", 1)[-1])
                for line in self._log_lines(ns, pod, False, True, tail)
            ]
            for t, pod in current.items()
        ]
        for _, line in heapq.merge(*stamped, key=lambda item: item[0]):
            yield line

    def _log_lines(self, ns: str, pod: str, follow: bool, timestamps: bool, tail: int | None = None) -> Iterator[str]:
        from kubernetes.client.exceptions import ApiException

        try:
            response = self._api.pod_log(ns, pod, follow, timestamps, tail)
        except ApiException as exc:  # a pod that has not started yet has no log: say so inline
            yield f"(no log: {api_message(exc)})\n"
            return
        try:
            yield from task_logs.lines_of(response.stream())
        finally:
            response.release_conn()

    def delete(self, name: str) -> None:
        ns = self.namespace
        claims = claims_of(self._api, ns, name)
        deleted = delete_cluster(self._api, ns, name, self.config.delete_timeout)
        if not deleted:
            raise ClusterNotFound(f"no cluster named {name!r} in namespace {ns!r}")
        self._say(f"deleted cluster {ns}/{name}: {', '.join(deleted)} (and their pods)")
        if claims:
            self._say(
                "kept: PersistentVolumeClaim/" + ", PersistentVolumeClaim/".join(claims) + " with the model dir "
                "(a resubmitted spec resumes from its checkpoints; kubectl delete pvc to start from scratch)"
            )

    def list(self) -> list[ClusterStatus]:
        ns = self.namespace
        out = []
        # A JobSet cluster may also have a ConfigMap (its evaluator's supervisor): once each.
        instances = dict.fromkeys(
            root["metadata"]["labels"][k8s_contract.LABEL_INSTANCE] for root in self._api.list_roots(ns)
        )
        for name in instances:
            try:
                out.append(self.status(name))
            except LauncherError as exc:
                out.append(ClusterStatus(name, ns, Phase.UNKNOWN, str(exc)))
        return out

    def tensorboard(self, name: str, port: int):
        from launcher.backends.kubernetes import tensorboard

        return tensorboard.serve(self._api, self.namespace, name, port, self._say)

    def _say(self, text: str) -> None:
        print(text, file=self._out, flush=True)
