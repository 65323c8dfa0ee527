"""Run a cluster spec as local processes: every task on 127.0.0.1, same rules as on Kubernetes.

Each task gets the TF_CONFIG and environment it would get in its pod (launcher.tfconfig and
launcher.podenv), with a free 127.0.0.1 port per training task. The end-of-job rules match the
Kubernetes backend:
- success: the chief (MWMS: worker 0) exits 0 and the evaluator, if any, has evaluated the final
  checkpoint: the built-in evaluator exits 0 by itself once it has; a bring-your-own evaluator
  is stopped `evaluatorGraceSeconds` after training ended. Then ps and PS workers, which never
  exit, are stopped (SIGTERM, then SIGKILL after a grace) and count as succeeded.
- restarts (restart_decision): a task that exits non-zero (or is killed) is started again with
  the same TF_CONFIG, up to `backoffLimit` times per role, counted over all of the role's tasks
  (like one Kubernetes Job per role): in place under restartPolicy OnFailure, as a replaced pod
  under Never. Under Never the Jobs' podFailurePolicy applies too: a task preempted by SIGTERM
  (exit EXIT_PREEMPTED, 143, after the built-in worker saved a checkpoint) is replaced without
  counting, and a configuration error of the built-in worker (exit EXIT_CONFIG, 2) fails its
  role at once (retrying a bad argument cannot help).
- failure: a training task (chief, worker, ps) that failed and may not restart fails the
  cluster; the chief first gets FAILURE_GRACE_SECONDS to notice and exit with its own error.
  Every other task, the evaluator included, is then stopped at once (on Kubernetes, by the
  supervisor in its pod). An evaluator failure never fails training: it is reported in the
  status message.
- stopping a task: SIGTERM to its process group, SIGKILL after the spec's
  terminationGracePeriodSeconds (as the kubelet does), unless the backend was given its own
  stop_grace_seconds.
- nothing outlives the run: each task runs in its own process group, and every group is ended on
  success, failure, Ctrl-C and SIGTERM. On Linux, tasks also get SIGKILL if the supervising
  thread dies without cleaning up (PR_SET_PDEATHSIG), e.g. when the launcher is SIGKILLed.

Files, under `<workdir>/<name>/`:
    spec.json                 the submitted spec
    status.json               phase, per-task state and exit codes, and the pid of the process
                              supervising the run (the CLI itself with --wait), kept up to date
    supervisor.log            output of a detached supervisor (submit without wait)
    pids/<role>-<index>.pid   each running task's pid (for fault injection, see kill())
    logs/<role>-<index>.log   each task's output, all attempts, each behind a header line
    model/                    the model dir (TFK8S_MODEL_DIR), unless checkpoint.dir is gs://
`delete` stops a running cluster and removes everything but `model/`, which, like a
PersistentVolumeClaim on Kubernetes, outlives the cluster: a resubmitted spec resumes from its
checkpoints. Remove it by hand to start from scratch.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Iterator

from launcher import names, podenv, tfconfig
from launcher.backends.base import Backend, ClusterStatus, RoleStatus
from launcher.errors import LauncherError, SubmitRefused
from launcher.spec import ClusterSpec, success_role, supervised_roles
from worker.errors import EXIT_CONFIG, EXIT_PREEMPTED

DEFAULT_WORKDIR = Path(".tfk8s")  # the CLI's --workdir default too
RESTART_DELAY_SECONDS = 1.0
FAILURE_GRACE_SECONDS = 20.0  # lets the chief report a dead peer itself before it is stopped
PEER_EXIT_GRACE_SECONDS = 60.0  # MWMS: other workers finish after worker 0
POLL_SECONDS = 0.2

# Runs before the task's command: asks Linux to SIGKILL the task when the supervising thread
# dies, then execs the command (so `pgrep -f "python -m worker"` sees the task itself).
_EXEC_WITH_PARENT_DEATH_SIGNAL = """\
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
    sys.exit("tfk8s: prctl(PR_SET_PDEATHSIG) failed: errno %d" % ctypes.get_errno())
if os.getppid() != int(sys.argv[1]):
    sys.exit("tfk8s: the launcher exited before this task started")
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write("tfk8s: cannot run %r: %s\\n" % (sys.argv[2], exc))
    sys.exit(127)
"""


class LocalBackend(Backend):
    def __init__(self, workdir: str | Path | None = None, *, stream: IO[str] | None = None,
                 restart_delay_seconds: float = RESTART_DELAY_SECONDS,
                 stop_grace_seconds: float | None = None,
                 failure_grace_seconds: float = FAILURE_GRACE_SECONDS):
        self.workdir = Path(workdir or DEFAULT_WORKDIR).expanduser().resolve()
        self.stream = stream if stream is not None else sys.stdout
        self.restart_delay_seconds = restart_delay_seconds
        # SIGTERM -> SIGKILL; None: each spec's terminationGracePeriodSeconds.
        self.stop_grace_seconds = stop_grace_seconds
        self.failure_grace_seconds = failure_grace_seconds

    # --- paths ---------------------------------------------------------------------------

    def run_dir(self, name: str) -> Path:
        return self.workdir / name

    def model_dir(self, spec: ClusterSpec) -> str:
        if spec.checkpoint.is_remote:
            return spec.checkpoint.dir
        return str(self.run_dir(spec.name) / "model")

    def log_path(self, name: str, role: str, index: int) -> Path:
        return self.run_dir(name) / "logs" / f"{role}-{index}.log"

    def pid_path(self, name: str, role: str, index: int) -> Path:
        return self.run_dir(name) / "pids" / f"{role}-{index}.pid"

    # --- Backend ---------------------------------------------------------------------------

    def submit(self, spec: ClusterSpec, *, wait: bool = False, replace: bool = False) -> int:
        """Start the cluster; with wait, supervise it here and return the chief's exit code.

        Without wait, a detached `python -m launcher.backends.local supervise` process
        supervises it, writing its output to <workdir>/<name>/supervisor.log.
        """
        run_dir = self.run_dir(spec.name)
        if (run_dir / "status.json").exists():
            current = self.status(spec.name)
            if not replace:
                state = "is running" if not current.finished else f"finished ({current.phase})"
                raise SubmitRefused(
                    f"local cluster {spec.name!r} {state} in {run_dir}; delete it first "
                    f"(`python -m launcher delete {spec.name} --local --workdir "
                    f"{self.workdir}`; its model/ with the checkpoints is kept) or submit "
                    "with --replace"
                )
            self.delete(spec.name)
        for sub in ("logs", "pids"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        (run_dir / "spec.json").write_text(
            json.dumps(spec.model_dump(mode="json", by_alias=True), indent=2) + "\n"
        )
        if wait:
            return _Supervisor(self, spec, self.stream).run()
        return self._start_detached_supervisor(spec)

    def status(self, name: str) -> ClusterStatus:
        record = self._read_status(name)
        phase, message = record["phase"], record.get("message", "")
        if phase in ("Pending", "Running") and not _alive(record.get("supervisor_pid")):
            phase = "Unknown"
            message = (f"the supervising process (pid {record.get('supervisor_pid')}) is gone; "
                       "its tasks ended with it. Delete and resubmit to resume from the "
                       "checkpoints in model/")
        roles = [RoleStatus(**role) for role in record.get("roles", [])]
        return ClusterStatus(name=name, namespace="local", phase=phase, message=message,
                             exit_code=record.get("exit_code"), roles=roles)

    def logs(self, name: str, role: str, index: int, follow: bool = False) -> Iterator[str]:
        """Lines of one task's log (every attempt), each ending in a newline like the Kubernetes
        backend's chunks; with follow, until the cluster ends."""
        path = self.log_path(name, role, index)
        self._read_status(name)  # a clear error for unknown clusters
        while follow and not path.exists() and not self.status(name).finished:
            time.sleep(POLL_SECONDS)
        if not path.exists():
            raise LauncherError(f"no log for {role}-{index} of local cluster {name!r} ({path})")
        with path.open("rb") as src:
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
        run_dir = self.run_dir(name)
        if not run_dir.exists():
            raise LauncherError(f"no local cluster {name!r} in {self.workdir}")
        record = self._read_status(name) if (run_dir / "status.json").exists() else {}
        pid = record.get("supervisor_pid")
        if record.get("phase") in ("Pending", "Running") and _alive(pid):
            os.kill(pid, signal.SIGTERM)  # the supervisor stops its tasks, then exits
            deadline = time.monotonic() + self._stop_grace(name) + 15
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
            if _alive(pid):
                raise LauncherError(f"the supervisor of {name!r} (pid {pid}) did not stop")
        for entry in run_dir.iterdir():
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
                if (d / "status.json").exists()]

    # --- fault injection (tests, demos) ----------------------------------------------------

    def pid(self, name: str, role: str, index: int) -> int | None:
        """The running pid of a task, or None between attempts."""
        try:
            return int(self.pid_path(name, role, index).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def kill(self, name: str, role: str, index: int, sig: int = signal.SIGKILL) -> int:
        """Send `sig` to one task (SIGKILL: a crash); returns the pid it went to."""
        pid = self.pid(name, role, index)
        if pid is None:
            raise LauncherError(f"{role}-{index} of local cluster {name!r} is not running")
        os.kill(pid, sig)
        return pid

    # --- internals -------------------------------------------------------------------------

    def _stop_grace(self, name: str) -> float:
        """For `delete`, which has only the name: the grace of the spec the run recorded."""
        if self.stop_grace_seconds is not None:
            return self.stop_grace_seconds
        try:
            spec = json.loads((self.run_dir(name) / "spec.json").read_text())
            return float(spec["terminationGracePeriodSeconds"])
        except (FileNotFoundError, KeyError, ValueError):
            return float(ClusterSpec.model_fields["termination_grace_period_seconds"].default)

    def _read_status(self, name: str) -> dict:
        path = self.run_dir(name) / "status.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise LauncherError(f"no local cluster {name!r} in {self.workdir}") from None

    def _start_detached_supervisor(self, spec: ClusterSpec) -> int:
        run_dir = self.run_dir(spec.name)
        _write_json(run_dir / "status.json", {"phase": "Pending", "roles": [],
                                              "message": "starting the supervisor"})
        log = (run_dir / "supervisor.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "launcher.backends.local", "supervise",
             "--workdir", str(self.workdir), spec.name],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "PYTHONPATH": _pythonpath()},
        )
        log.close()
        _write_json(run_dir / "status.json", {"phase": "Pending", "roles": [],
                                              "supervisor_pid": process.pid,
                                              "message": "starting tasks"})
        return 0


@dataclass
class _Task:
    role: str
    index: int
    argv: list[str]
    env: dict[str, str]
    state: str = "pending"  # pending | running | waiting-restart | succeeded | failed | stopped
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    attempts: int = 0
    last_exit_code: int | None = None
    restart_at: float | None = None
    reason: str = ""
    exit_history: list[int] = field(default_factory=list)
    failed_at: float | None = None  # when it failed for good

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


class _Interrupted(Exception):
    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


class _Supervisor:
    """Starts, watches, restarts and stops the tasks of one local cluster."""

    def __init__(self, backend: LocalBackend, spec: ClusterSpec, stream: IO[str]):
        self.backend = backend
        self.spec = spec
        self.stream = stream
        self.output_lock = threading.Lock()
        self.run_dir = backend.run_dir(spec.name)
        self.model_dir = backend.model_dir(spec)
        self.restarts_used = {role: 0 for role in spec.active_roles()}
        self.failed_attempts = {role: 0 for role in spec.active_roles()}
        self.phase = "Pending"
        self.message = ""
        self.exit_code: int | None = None
        self.training_ended_at: float | None = None
        self.grace_announced: set[str] = set()  # failed peers the chief got a grace for
        self.tasks = self._plan_tasks()
        self.success_task = self._task(success_role(spec), 0)

    # --- plan ------------------------------------------------------------------------------

    def _plan_tasks(self) -> list[_Task]:
        spec = self.spec
        ports = _free_ports(sum(spec.replicas(r) for r in spec.training_roles()))
        port_of = {}
        for role in spec.training_roles():
            for i in range(spec.replicas(role)):
                port_of[(role, i)] = ports.pop()

        def address(role: str, index: int) -> str:
            return f"127.0.0.1:{port_of[(role, index)]}"

        if not spec.checkpoint.is_remote:
            Path(self.model_dir).mkdir(parents=True, exist_ok=True)
        argv = podenv.command(spec)
        if spec.builtin:
            argv = [sys.executable, *argv[1:]]  # "python" -> this interpreter and its packages
        tasks = []
        for (role, index), config in tfconfig.all_tf_configs(spec, address).items():
            env = {
                **os.environ,
                **gpu_env(spec.strategy.value, role),  # the spec's env may still override it
                **podenv.launcher_env(spec, role, self.model_dir),
                "TF_CONFIG": json.dumps(config),
                names.INDEX_ENV: str(index),
                "PYTHONUNBUFFERED": "1",  # lines reach the log as they are printed
                "PYTHONPATH": _pythonpath(),
            }
            tasks.append(_Task(role=role, index=index, argv=list(argv), env=env))
        return tasks

    def _task(self, role: str, index: int) -> _Task:
        return next(t for t in self.tasks if (t.role, t.index) == (role, index))

    # --- main loop -------------------------------------------------------------------------

    def run(self) -> int:
        previous = self._install_signal_handlers()
        try:
            self.phase = "Running"
            for task in self.tasks:
                self._start(task)
            self._write_status()
            while self.phase == "Running":
                self._poll()
                self._write_status()
                time.sleep(POLL_SECONDS)
        except (_Interrupted, KeyboardInterrupt) as exc:
            signum = exc.signum if isinstance(exc, _Interrupted) else signal.SIGINT
            self._say(f"interrupted by {signal.Signals(signum).name}: stopping every task")
            self.phase, self.message = "Failed", f"interrupted by {signal.Signals(signum).name}"
            self.exit_code = 128 + signum
        finally:
            self._stop([t for t in self.tasks if t.running], reason="cluster ended")
            for task in self.tasks:
                if task.reader is not None:
                    task.reader.join(timeout=5)
            self._write_status()
            self._restore_signal_handlers(previous)
        self._say(f"cluster {self.spec.name}: {self.phase}"
                  + (f": {self.message}" if self.message else "")
                  + f" (exit code {self.exit_code})")
        return self.exit_code

    def _poll(self) -> None:
        now = time.monotonic()
        for task in self.tasks:
            if task.process is not None and task.state == "running":
                code = task.process.poll()
                if code is not None:
                    self._exited(task, code)
            if task.state == "waiting-restart" and task.restart_at <= now:
                self._start(task)
        self._decide(now)

    def _exited(self, task: _Task, code: int) -> None:
        (self.backend.pid_path(self.spec.name, task.role, task.index)).unlink(missing_ok=True)
        task.last_exit_code = code
        task.exit_history.append(code)
        if code == 0:
            task.state, task.reason = "succeeded", "exited 0"
            self._say(f"{task.name} exited 0")
            return
        decision = restart_decision(
            self.spec, task.role, code, self.restarts_used[task.role],
            training_over=self.training_ended_at is not None and task.role != "evaluator",
        )
        task.reason = decision.reason
        if decision.counted:
            self.failed_attempts[task.role] += 1
        if decision.restart:
            if decision.counted:
                self.restarts_used[task.role] += 1
            task.state = "waiting-restart"
            task.restart_at = time.monotonic() + self.backend.restart_delay_seconds
        else:
            task.state, task.failed_at = "failed", time.monotonic()
        self._say(f"{task.name} {decision.message}")

    def _decide(self, now: float) -> None:
        chief = self.success_task
        training = [t for t in self.tasks if t.role != "evaluator"]
        dead_peers = sorted((t for t in training if t.state == "failed" and t is not chief),
                            key=lambda t: t.failed_at)
        cause = f" after {dead_peers[0].name} {dead_peers[0].reason}" if dead_peers else ""
        if chief.state == "failed":
            return self._finish("Failed", f"{chief.name} {chief.reason}{cause}",
                                _exit_code(chief.last_exit_code))
        if dead_peers and chief.state != "succeeded":
            first = dead_peers[0]
            if chief.state == "running" and now - first.failed_at < self.backend.failure_grace_seconds:
                if first.name not in self.grace_announced:
                    self.grace_announced.add(first.name)
                    self._say(f"{first.name} cannot restart; giving {chief.name} "
                              f"{self.backend.failure_grace_seconds:g} s to exit by itself")
                return
            return self._finish("Failed", f"{first.name} {first.reason}; {chief.name} was "
                                "stopped", 1)
        if chief.state != "succeeded":
            return
        if self.training_ended_at is None:
            self.training_ended_at = now
            self._say(f"training ended: {chief.name} exited 0")
        elapsed = now - self.training_ended_at
        # MWMS: the other workers finish on their own shortly after worker 0.
        supervised = set(supervised_roles(self.spec))
        peers = [t for t in training if t.role not in supervised and t is not chief
                 and t.state in ("running", "waiting-restart")]
        if peers and elapsed < PEER_EXIT_GRACE_SECONDS:
            return
        evaluator_note = self._evaluator_outcome(elapsed)
        if evaluator_note is None:
            return  # still waiting for the evaluator
        leftovers = [t for t in self.tasks if t.running or t.state == "waiting-restart"]
        self._stop(leftovers, reason="training is over")
        for task in leftovers:
            if task.role in supervised:
                task.state, task.reason = "succeeded", "stopped after training (never exits)"
            else:
                task.state = "stopped"
        self._finish("Succeeded", evaluator_note, 0)

    def _evaluator_outcome(self, elapsed: float) -> str | None:
        """'' or a note once the evaluator is done with; None while it is still needed."""
        if not self.spec.replicas("evaluator"):
            return ""
        evaluator = self._task("evaluator", 0)
        grace = self.spec.evaluator_grace_seconds
        if evaluator.state == "succeeded":
            return "" if self.spec.builtin else "evaluator exited by itself"
        if evaluator.state == "failed":
            return f"training succeeded; the evaluator failed ({evaluator.reason})"
        if elapsed < grace:
            return None
        if self.spec.builtin:
            return (f"training succeeded; the evaluator had not evaluated the final checkpoint "
                    f"{grace} s (evaluatorGraceSeconds) after training ended and was stopped")
        return f"evaluator stopped {grace} s (evaluatorGraceSeconds) after training ended"

    def _finish(self, phase: str, message: str, exit_code: int) -> None:
        self.phase, self.message, self.exit_code = phase, message, exit_code

    # --- processes -------------------------------------------------------------------------

    def _start(self, task: _Task) -> None:
        task.attempts += 1
        log_path = self.backend.log_path(self.spec.name, task.role, task.index)
        argv = task.argv
        if sys.platform.startswith("linux"):
            argv = [sys.executable, "-c", _EXEC_WITH_PARENT_DEATH_SIGNAL, str(os.getpid()), *argv]
        process = subprocess.Popen(
            argv, env=task.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        task.process, task.state, task.restart_at = process, "running", None
        task.reason = f"running (attempt {task.attempts})"
        _write_pid(self.backend.pid_path(self.spec.name, task.role, task.index), process.pid)
        header = (f"=== tfk8s: {task.name} attempt {task.attempts}, pid {process.pid}, "
                  f"started {time.strftime('%Y-%m-%d %H:%M:%S')} ===")
        task.reader = threading.Thread(
            target=self._copy_output, args=(task.name, process, log_path, header),
            name=f"log-{task.name}", daemon=True,
        )
        task.reader.start()

    def _copy_output(self, name: str, process: subprocess.Popen, log_path: Path, header: str) -> None:
        prefix = f"[{name}] "
        with log_path.open("a", encoding="utf-8") as log:
            log.write(header + "\n")
            log.flush()
            for raw in process.stdout:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                with self.output_lock:
                    self.stream.write(prefix + line + "\n")
                    self.stream.flush()
        process.stdout.close()

    def _stop(self, tasks: list[_Task], reason: str) -> None:
        """SIGTERM each task's process group, SIGKILL what is left after the grace."""
        tasks = [t for t in tasks if t.running]
        for task in tasks:
            self._say(f"stopping {task.name} ({reason})")
            _signal_group(task.process.pid, signal.SIGTERM)
        grace = (self.backend.stop_grace_seconds if self.backend.stop_grace_seconds is not None
                 else self.spec.termination_grace_period_seconds)
        deadline = time.monotonic() + grace
        for task in tasks:
            try:
                task.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._say(f"{task.name} ignored SIGTERM for {grace:g} s; sending SIGKILL")
                _signal_group(task.process.pid, signal.SIGKILL)
                task.process.wait()
            # Anything the task started in its group goes too.
            _signal_group(task.process.pid, signal.SIGKILL)
            task.last_exit_code = task.process.returncode
            if task.state == "running":
                task.state, task.reason = "stopped", f"stopped ({reason})"
            (self.backend.pid_path(self.spec.name, task.role, task.index)).unlink(missing_ok=True)

    # --- status, output, signals -----------------------------------------------------------

    def _write_status(self) -> None:
        roles = []
        for role in self.spec.active_roles():
            tasks = [t for t in self.tasks if t.role == role]
            last = max(tasks, key=lambda t: t.attempts)
            roles.append(asdict(RoleStatus(
                role=role, replicas=len(tasks),
                active=sum(1 for t in tasks if t.running),
                succeeded=sum(1 for t in tasks if t.state == "succeeded"),
                failed=self.failed_attempts[role],
                last_exit_code=last.last_exit_code,
                reason="; ".join(f"{t.name}: {t.reason}" for t in tasks if t.reason) or None,
            )))
        _write_json(self.run_dir / "status.json", {
            "phase": self.phase, "message": self.message, "exit_code": self.exit_code,
            "supervisor_pid": os.getpid(), "model_dir": self.model_dir, "roles": roles,
            "tasks": [{"task": t.name, "state": t.state, "attempts": t.attempts,
                       "pid": t.process.pid if t.running else None, "exit_codes": t.exit_history}
                      for t in self.tasks],
        })

    def _say(self, text: str) -> None:
        with self.output_lock:
            self.stream.write(f"[tfk8s] {text}\n")
            self.stream.flush()

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None  # only the main thread may; the caller owns signals then

        def interrupt(signum, frame):
            # Once: a second Ctrl-C must not cut the cleanup short (tasks would be orphaned
            # until the parent-death signal got them).
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
            raise _Interrupted(signum)

        return {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}

    @staticmethod
    def _restore_signal_handlers(previous) -> None:
        for sig, handler in (previous or {}).items():
            signal.signal(sig, handler)


# --- restart policy ------------------------------------------------------------------------

@dataclass(frozen=True)
class RestartDecision:
    restart: bool  # start the task again (same TF_CONFIG)
    counted: bool  # a failure counted against backoffLimit
    reason: str  # the task's state, e.g. "exited 3"
    message: str  # what happens next, for the log


def restart_decision(spec: ClusterSpec, role: str, code: int, restarts_used: int,
                     training_over: bool = False) -> RestartDecision:
    """What Kubernetes would do about a task (pod) that exited with `code` (Popen's
    returncode, non-zero), given `restarts_used` counted restarts of its role so far.

    restartPolicy Never (render.pod_failure_policy): EXIT_PREEMPTED is ignored (the pod is
    replaced, not counted); the built-in worker's EXIT_CONFIG fails the Job at once; anything
    else replaces the pod, counted against backoffLimit. OnFailure: every failure restarts in
    place, counted, preemptions included (no podFailurePolicy there).
    """
    status = _exit_code(code)
    limit = spec.backoff_limit
    never = spec.restart_policy == "Never"
    described = _describe_exit(code)
    if status == EXIT_PREEMPTED:
        described = f"was preempted ({described}: SIGTERM)"
    if training_over:
        return RestartDecision(False, True, described, f"{described}; not restarting it "
                               "(training is over)")
    if never and status == EXIT_PREEMPTED:
        return RestartDecision(True, False, described, (
            f"{described}; replacing it like a replaced pod (a preemption is not counted against "
            f"backoffLimit; {restarts_used} of {limit} used for role {role})"))
    if never and spec.builtin and status == EXIT_CONFIG:
        return RestartDecision(False, True, f"{described} (a configuration error)", (
            f"{described}, a configuration error of the built-in worker (see its log); not "
            "restarting it, the same arguments would fail again (podFailurePolicy FailJob)"))
    if restarts_used >= limit:
        return RestartDecision(False, True, described, (
            f"{described}; not restarting it (backoffLimit {limit} reached for role {role})"))
    if never:
        how = "replacing it (restartPolicy Never: a new pod"
    elif status == EXIT_PREEMPTED:
        how = ("restarting it in place (restartPolicy OnFailure has no podFailurePolicy, so a "
               "preemption counts")
    else:
        how = "restarting it in place (restartPolicy OnFailure"
    return RestartDecision(True, True, described, (
        f"{described}; {how}, failure {restarts_used + 1} of backoffLimit {limit} for role "
        f"{role})"))


# --- helpers -------------------------------------------------------------------------------

def _free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out; all held open together so they differ.

    Another process could take one between close and the task's bind (a small race, as with
    any port picker); the task would then fail to start its server and be restarted.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _pythonpath() -> str:
    """Tasks import `worker` and `launcher` from the same checkout as this launcher."""
    root = str(Path(__file__).resolve().parents[2])
    existing = os.environ.get("PYTHONPATH")
    return root + (os.pathsep + existing if existing else "")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the whole group is gone already


def _alive(pid) -> bool:
    """Whether `pid` runs; a zombie (exited, not yet reaped by its parent) does not."""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        # No /proc (macOS): trust kill(0). On Linux, the process has just gone.
        return not sys.platform.startswith("linux")
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited {code}"


def _exit_code(code: int | None) -> int:
    """A process's return code as a shell exit status (killed by signal N -> 128 + N)."""
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def _write_json(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(temporary, path)


def _write_pid(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid}\n")


def _supervise_main(argv: list[str]) -> int:
    """Entry point of the detached supervisor started by submit(wait=False)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m launcher.backends.local")
    sub = parser.add_subparsers(dest="command", required=True)
    supervise = sub.add_parser("supervise", help="supervise a submitted local cluster")
    supervise.add_argument("--workdir", required=True)
    supervise.add_argument("name")
    options = parser.parse_args(argv)
    backend = LocalBackend(options.workdir)
    spec = ClusterSpec.model_validate(
        json.loads((backend.run_dir(options.name) / "spec.json").read_text())
    )
    return _Supervisor(backend, spec, sys.stdout).run()


def gpu_env(strategy: str, role: str) -> dict[str, str]:
    """Up to five TF processes share this host's GPUs, and each would take nearly all of their
    memory at start-up: only the tasks that compute see the GPUs, and grow their share as
    needed. ps, the PS coordinator and the evaluator run on the CPU."""
    computes = role == "worker" or (role == "chief" and strategy != "parameter_server")
    if computes:
        return {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    return {"CUDA_VISIBLE_DEVICES": ""}


if __name__ == "__main__":
    sys.exit(_supervise_main(sys.argv[1:]))
