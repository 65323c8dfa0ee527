"""Run a cluster spec as local processes: every task on 127.0.0.1, same rules as on Kubernetes.

Each task gets the command, environment and TF_CONFIG of its pod from the plan
(launcher.plan), with a free 127.0.0.1 port per training task (tasks.py). The end-of-job rules
match the Kubernetes backend; they are pure functions in policy.py:
- success: the chief (MWMS: worker 0) exits 0 and the evaluator, if any, has evaluated the final
  checkpoint: the built-in evaluator exits 0 by itself once it has; a bring-your-own evaluator
  is stopped `evaluatorGraceSeconds` after training ended (MWMS: the other workers get
  PEER_EXIT_GRACE_SECONDS to finish after worker 0). Meanwhile the phase is Finishing. Then ps
  and PS workers, which never exit, are stopped (SIGTERM, then SIGKILL after a grace) and count
  as succeeded.
- restarts (policy.restart_decision, the plan's FailurePolicy): a task that exits non-zero (or
  is killed) is started again with the same TF_CONFIG, up to `backoffLimit` times per role,
  counted over all of the role's tasks (like one Kubernetes Job per role): in place under
  restartPolicy OnFailure, as a replaced pod under Never. Under Never the Jobs'
  podFailurePolicy applies too: a task preempted by SIGTERM (exit EXIT_PREEMPTED, 143, after
  the built-in worker saved a checkpoint) is replaced without counting, and a configuration
  error of the built-in worker (exit EXIT_CONFIG, 2) fails its role at once (retrying a bad
  argument cannot help).
- failure (policy.decide): a training task (chief, worker, ps) that failed and may not restart
  fails the cluster; the chief first gets FAILURE_GRACE_SECONDS to notice and exit with its own
  error. Every other task, the evaluator included, is then stopped at once (on Kubernetes, by
  the supervisor in its pod). An evaluator failure never fails training: it is reported in the
  status message.
- stopping a task (runner.stop): SIGTERM to its process group, SIGKILL after the spec's
  terminationGracePeriodSeconds (as the kubelet does), unless the backend was given its own
  stop_grace_seconds.
- nothing outlives the run: each task runs in its own process group, and every group is ended on
  success, failure, Ctrl-C and SIGTERM. On Linux, tasks also get SIGKILL if the supervising
  thread dies without cleaning up (PR_SET_PDEATHSIG), e.g. when the launcher is SIGKILLed.

In the foreground (the default), submit() prepares the run and wait() supervises it in this
process, task output prefixed on `stream`; with foreground=False, submit() starts a detached
`python -m launcher.backends.local supervise` process and wait() polls its status.

Files, under `<workdir>/<name>/` (files.py):
    spec.json                 the submitted spec
    status.json               phase, per-task state and exit codes, and the pid of the process
                              supervising the run (the CLI itself in the foreground), kept up
                              to date
    supervisor.log            output of a detached supervisor (foreground=False)
    pids/<role>-<index>.pid   each running task's pid (for fault injection, see kill())
    logs/<role>-<index>.log   each task's output, all attempts, each behind a header line
    model/                    the model dir (TFK8S_MODEL_DIR), unless checkpoint.dir is gs://;
                              its OWNER.json names this cluster (worker/ownership.py)
`delete` stops a running cluster and removes everything but `model/`, which, like a
PersistentVolumeClaim on Kubernetes, outlives the cluster: a resubmitted spec resumes from its
checkpoints. Remove it by hand to start from scratch.
"""
from __future__ import annotations

import collections
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import IO, Iterator

from launcher import checkpoints
from launcher.backends.base import Backend, exit_code
from launcher.backends.local import runner
from launcher.backends.local.files import RunFiles
from launcher.backends.local.policy import FAILURE_GRACE_SECONDS
from launcher.backends.local.preflight import check_worker_environment
from launcher.backends.local.supervisor import (
    POLL_SECONDS, RESTART_DELAY_SECONDS, Supervisor, Timing,
)
from launcher.errors import ClusterNotFound, LauncherError, SubmitRefused
from launcher.progress import TAIL_BYTES, TrainingProgress, read_progress
from launcher.spec import ClusterSpec, Workload
from launcher.status import ClusterStatus, Phase, RoleStatus
from launcher.view import LineView, NoteStream, Poller, View
from worker.contract import SUCCESS_INDEX, Role, success_role

DEFAULT_WORKDIR = Path(".tfk8s")  # the CLI's --workdir default too
VIEW_SECONDS = 1.0  # how often the view re-reads a foreground run's status and logs
_LIVE = (Phase.PENDING, Phase.RUNNING, Phase.FINISHING)


class LocalBackend(Backend):
    def __init__(self, workdir: str | Path | None = None, *, stream: IO[str] | None = None,
                 foreground: bool = True,
                 restart_delay_seconds: float = RESTART_DELAY_SECONDS,
                 stop_grace_seconds: float | None = None,
                 failure_grace_seconds: float = FAILURE_GRACE_SECONDS,
                 echo_tasks: bool = True, view: View | None = None):
        """echo_tasks: in the foreground, copy every task's output to `stream` as it comes;
        otherwise only to the logs, and the view shows the run. view: what wait() shows
        (default: plain status lines on `stream`)."""
        self.workdir = Path(workdir or DEFAULT_WORKDIR).expanduser().resolve()
        self.stream = stream if stream is not None else sys.stdout
        self.echo_tasks = echo_tasks
        self.view = view if view is not None else LineView(self.stream)
        self.runs_in_foreground = foreground
        # stop_grace_seconds (SIGTERM -> SIGKILL); None: each spec's terminationGracePeriodSeconds.
        self.timing = Timing(restart_delay_seconds, stop_grace_seconds, failure_grace_seconds)
        self._submitted: dict[str, ClusterSpec] = {}  # foreground: prepared, not yet waited for

    # --- paths ---------------------------------------------------------------------------

    def files(self, name: str) -> RunFiles:
        return RunFiles(self.workdir, name)

    def run_dir(self, name: str) -> Path:
        return self.files(name).dir

    def model_dir(self, spec: ClusterSpec) -> str:
        if spec.checkpoint.is_remote:
            return spec.checkpoint.dir
        return str(self.files(spec.name).default_model_dir)

    def log_path(self, name: str, role: str, index: int) -> Path:
        return self.files(name).log_path(role, index)

    def pid_path(self, name: str, role: str, index: int) -> Path:
        return self.files(name).pid_path(role, index)

    # --- Backend ---------------------------------------------------------------------------

    def submit(self, spec: ClusterSpec, *, replace: bool = False) -> None:
        """Prepare the run; in the background, also start its detached supervisor, which writes
        its output to <workdir>/<name>/supervisor.log. In the foreground, wait() runs it."""
        spec = self._as_processes(spec)
        check_worker_environment(spec)  # before anything exists: says what to install
        files = self.files(spec.name)
        if files.has_status():
            current = self.status(spec.name)
            if not replace:
                state = "is running" if not current.finished else f"finished ({current.phase})"
                raise SubmitRefused(
                    f"local cluster {spec.name!r} {state} in {files.dir}; delete it first "
                    f"(`python -m launcher delete {spec.name} --local --workdir "
                    f"{self.workdir}`; its model/ with the checkpoints is kept) or submit "
                    "with --replace"
                )
            self.delete(spec.name)
        files.prepare(spec)
        if self.runs_in_foreground:
            self._submitted[spec.name] = spec
            files.write_status({"phase": Phase.PENDING.value, "roles": [],
                                "supervisor_pid": os.getpid(),
                                "message": "submitted; its tasks start when it is waited for"})
        else:
            self._start_detached_supervisor(spec)

    def _as_processes(self, spec: ClusterSpec) -> ClusterSpec:
        """Local processes are neither Jobs nor a JobSet, and no Kueue queues them: say that
        workload, queue and priorityClassName are ignored, and plan the run as plain tasks."""
        ignored = {"workload": spec.workload.value if spec.workload is not Workload.JOBS else None,
                   "queue": spec.queue, "priorityClassName": spec.priority_class_name}
        ignored = {k: v for k, v in ignored.items() if v is not None}
        if checkpoints.mwms_storage_problem(spec):  # accepted here: loader's shared_disk
            print(f"note: --local: the {spec.replicas(Role.WORKER)} workers share this machine's "
                  "disk, so they need no claim; on Kubernetes set checkpoint.volume."
                  "persistentVolumeClaim.claimName (ReadWriteMany) or a gs:// checkpoint.dir",
                  file=self.stream, flush=True)
        if not ignored:
            return spec
        print("note: --local ignores " + ", ".join(f"{k}: {v}" for k, v in ignored.items())
              + " (Kubernetes only); the tasks run as local processes now",
              file=self.stream, flush=True)
        return spec.model_copy(update={"workload": Workload.JOBS, "queue": None,
                                       "priority_class_name": None})

    def wait(self, name: str) -> int:
        """Foreground, after submit(): supervise the run here (task output on the stream;
        Ctrl-C or SIGTERM stops every task) and return the chief's exit code. Otherwise: poll
        the status, writing each new status line on the stream, until the run has ended."""
        try:
            return self._wait(name)
        finally:
            self.view.close()

    def _wait(self, name: str) -> int:
        spec = self._submitted.pop(name, None)
        if spec is not None:
            stream = self.stream if self.echo_tasks else NoteStream(self.view)
            supervisor = Supervisor(self.files(name), spec, self.model_dir(spec), stream,
                                    self.timing, echo_tasks=self.echo_tasks)
            if self.echo_tasks:
                return supervisor.run()
            # Signals are the main thread's: the supervisor runs here, the view in a thread.
            with Poller(lambda: self.status(name), self.view, VIEW_SECONDS):
                code = supervisor.run()
            self.view.show(self.status(name))
            return code
        return self._watch(name)

    def watch(self, name: str) -> int:
        """Show a run that another process supervises until it ends."""
        try:
            return self._watch(name)
        finally:
            self.view.close()

    def _watch(self, name: str) -> int:
        while True:
            status = self.status(name)
            self.view.show(status)
            if status.finished or status.phase is Phase.UNKNOWN:
                return exit_code(status)
            time.sleep(VIEW_SECONDS)

    def status(self, name: str) -> ClusterStatus:
        record = self.files(name).read_status()
        phase, message = Phase(record["phase"]), record.get("message", "")
        if phase in _LIVE and not runner.alive(record.get("supervisor_pid")):
            phase = Phase.UNKNOWN
            message = (f"the supervising process (pid {record.get('supervisor_pid')}) is gone; "
                       "its tasks ended with it. Delete and resubmit to resume from the "
                       "checkpoints in model/")
        roles = [RoleStatus(**role) for role in record.get("roles", [])]
        return ClusterStatus(name=name, namespace="local", phase=phase, message=message,
                             exit_code=record.get("exit_code"), roles=roles,
                             training=self._training(name))

    def _training(self, name: str) -> TrainingProgress | None:
        files = self.files(name)
        role = success_role(files.read_spec().strategy)
        return read_progress(files.log_tail(role.value, SUCCESS_INDEX, TAIL_BYTES),
                             files.log_tail(Role.EVALUATOR.value, 0, TAIL_BYTES))

    def logs(self, name: str, role: str, index: int, follow: bool = False,
             tail: int | None = None) -> Iterator[str]:
        """Lines of one task's log (every attempt, each behind a header line), each ending in
        a newline like the Kubernetes backend's chunks; with follow, until the cluster ends."""
        path = self.log_path(name, role, index)
        yield from self._read_log(name, path, f"{role}-{index}", follow, tail)

    def all_logs(self, name: str, follow: bool = False,
                 tail: int | None = None) -> Iterator[str]:
        """The run's combined log: every task's lines as the tasks wrote them, and the
        launcher's own `[tfk8s]` lines, as a foreground run prints them."""
        yield from self._read_log(name, self.files(name).combined_log, "every task", follow,
                                  tail)

    def _read_log(self, name: str, path: Path, what: str, follow: bool,
                  tail: int | None = None) -> Iterator[str]:
        self.files(name).read_status()  # a clear error for unknown clusters
        if follow and not path.exists() and not self.status(name).finished:
            print(f"waiting for {what} of local cluster {name!r} to start (no log yet)",
                  file=sys.stderr, flush=True)
        while follow and not path.exists() and not self.status(name).finished:
            time.sleep(POLL_SECONDS)
        if not path.exists():
            raise LauncherError(f"no log for {what} of local cluster {name!r} ({path})")
        with path.open("rb") as src:
            if tail is not None:  # read to the end, keeping the last lines; follow from there
                for line in collections.deque(src, maxlen=max(tail, 0)):
                    yield line.decode("utf-8", errors="replace")
            partial = b""  # a line the task is still writing
            while True:
                chunk = src.readline()
                if chunk:
                    partial += chunk
                    if partial.endswith(b"\n"):
                        yield partial.decode("utf-8", errors="replace")
                        partial = b""
                    continue
                if not follow or self.status(name).finished:
                    if partial:
                        yield partial.decode("utf-8", errors="replace")
                    return
                time.sleep(POLL_SECONDS)

    def delete(self, name: str) -> None:
        """Stop the cluster if it runs, then remove its files except model/."""
        files = self.files(name)
        if not files.dir.exists():
            raise ClusterNotFound(f"no local cluster {name!r} in {self.workdir}")
        self._submitted.pop(name, None)
        record = files.read_status() if files.has_status() else {}
        pid = record.get("supervisor_pid")
        if record.get("phase") in _LIVE and pid != os.getpid() and runner.alive(pid):
            os.kill(pid, signal.SIGTERM)  # the supervisor stops its tasks, then exits
            deadline = time.monotonic() + self._stop_grace(files) + 15
            while runner.alive(pid) and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
            if runner.alive(pid):
                raise LauncherError(f"the supervisor of {name!r} (pid {pid}) did not stop")
        for entry in files.dir.iterdir():
            if entry.name == "model":
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def list(self) -> list[ClusterStatus]:
        if not self.workdir.exists():
            return []
        return [self.status(d.name) for d in sorted(self.workdir.iterdir())
                if self.files(d.name).has_status()]

    def tensorboard(self, name: str, port: int):
        from launcher.backends.local import tensorboard

        files = self.files(name)
        return tensorboard.serve(self.model_dir(files.read_spec()), port,
                                 files.dir / "tensorboard.log")

    # --- fault injection (tests, demos) ----------------------------------------------------

    def pid(self, name: str, role: str, index: int) -> int | None:
        """The running pid of a task, or None between attempts."""
        return self.files(name).read_pid(role, index)

    def kill(self, name: str, role: str, index: int, sig: int = signal.SIGKILL) -> int:
        """Send `sig` to one task (SIGKILL: a crash); returns the pid it went to."""
        pid = self.pid(name, role, index)
        if pid is None:
            raise LauncherError(f"{role}-{index} of local cluster {name!r} is not running")
        os.kill(pid, sig)
        return pid

    # --- internals -------------------------------------------------------------------------

    def _stop_grace(self, files: RunFiles) -> float:
        """For `delete`, which has only the name: the grace of the spec the run recorded."""
        if self.timing.stop_grace_seconds is not None:
            return self.timing.stop_grace_seconds
        return files.recorded_stop_grace()

    def _start_detached_supervisor(self, spec: ClusterSpec) -> None:
        files = self.files(spec.name)
        files.write_status({"phase": Phase.PENDING.value, "roles": [],
                            "message": "starting the supervisor"})
        pid = runner.start_detached(
            [sys.executable, "-m", "launcher.backends.local", "supervise",
             "--workdir", str(self.workdir), spec.name],
            files.supervisor_log,
        )
        files.write_status({"phase": Phase.PENDING.value, "roles": [], "supervisor_pid": pid,
                            "message": "starting tasks"})


def supervise(workdir: str | Path, name: str, stream: IO[str]) -> int:
    """Supervise a run that submit() prepared (the detached supervisor's work)."""
    backend = LocalBackend(workdir, stream=stream)
    files = backend.files(name)
    spec = files.read_spec()
    return Supervisor(files, spec, backend.model_dir(spec), stream, backend.timing).run()
