"""The supervisor loop of one local run: poll the tasks, apply policy.py's decisions, write
status.json, and end every task when the run ends (success, failure, Ctrl-C, SIGTERM, SIGHUP).

It runs in the main thread of a detached process (`python -m launcher.backends.local`), where it
handles the signals itself, or in a thread of the launcher (foreground), where the thread that
waits for it passes them on with interrupt()."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO

from launcher.backends.local import policy, runner
from launcher.backends.local.files import (
    ATTEMPT_HEADER_START,
    RunFiles,
    code_changes,
    private_dir,
    tree_state,
    write_json,
)
from launcher.backends.local.policy import Decision, TaskState
from launcher.backends.local.ports import OffLoopbackGuard
from launcher.backends.local.tasks import Task, metrics_addresses, mount_dirs, plan_tasks
from launcher.backends.local.types import LocalProcessBackendConfig
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping.code_bundle import CODE_DIR, Bundle
from launcher.errors import ClusterNotFound
from launcher.plan.plan import plan as make_plan
from launcher.status import failure_reasons
from launcher.status.status import Phase, RoleStatus
from worker import exit_cause
from worker.contract import SUCCESS_INDEX, Role, Strategy

POLL_SECONDS = 0.2
LOG_DRAIN_SECONDS = 2.0  # a child that kept the task's stdout open does not hold us longer
# How much of a task's log its cause is read from: enough for the last traceback of a TF error,
# whose message lists the frames that defined the failing op.
CAUSE_TAIL_BYTES = 16384
CODE_CHANGES_SHOWN = 5  # a note names at most this many writes into the code copy
# What ends a run, every task stopped with SIGTERM as a pod's: SIGHUP is a closed terminal, whose
# default action would end the launcher at once and leave its tasks to the parent-death SIGKILL,
# without the save a SIGTERM gets.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Interrupted(Exception):
    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


class Supervisor:
    """Starts, watches, restarts and stops the tasks of one local cluster."""

    def __init__(
        self,
        files: RunFiles,
        spec: ClusterSpec,
        stream: IO[str],
        options: LocalProcessBackendConfig,
        echo_tasks: bool = True,
    ):
        self.files = files
        self.spec = spec
        self.model_dir = files.model_dir(spec)
        self.timing = options
        # Set once every task has had its first start (or the run ended before): submit()
        # returns then. interrupt(): a signal the waiting thread received, acted on by the loop.
        self.started = threading.Event()
        self._interrupt: int | None = None
        # kill_now(): a second stop signal, the tasks still stopping are SIGKILLed at once
        self._kill_now = threading.Event()
        self._killed_by: int | None = None
        self.output = runner.Output(stream, files.combined_log, echo_tasks)
        self._say = self.output.say
        # code: the archive submit packed and recorded in the run's dir, unpacked there (the
        # tasks run that copy, not the dir in place)
        code, code_dir = None, None
        if spec.code is not None:
            code = Bundle.from_archive(spec.code.path, files.code_archive.read_bytes())
            code_dir = str(files.code_dir)
        self.plan = make_plan(spec, code, model_dir=self.model_dir, code_dir=code_dir)
        # the copy before any task ran: root's writes into it, which a pod refuses, are said at the end
        self.code_before = tree_state(files.code_dir) if code is not None else None
        # Counted restarts per budget (plan.FailurePolicy.budget: a role, or an MWMS worker's index).
        self.restarts_used: dict[str, int] = {}
        self.failed_attempts = {role: 0 for role in spec.active_roles()}
        self.decision = Decision(Phase.PENDING)
        self.said: set[str] = set()  # notes of the decisions, each said once
        if not spec.checkpoint.is_remote:
            private_dir(Path(self.model_dir))
        mounts = mount_dirs(spec, files.dir)  # a pod's mount paths, as dirs of the run
        for directory in mounts.values():
            private_dir(Path(directory))
        self.held_ports, self.tasks = plan_tasks(self.plan, options.task_python, mounts)  # held until run() ends
        write_json(files.metrics_path, metrics_addresses(self.tasks))
        self.chief = next(t for t in self.tasks if (t.role, t.index) == (self.plan.success_role, SUCCESS_INDEX))

    # --- main loop -------------------------------------------------------------------------

    def interrupt(self, signum: int) -> None:
        """Stop every task and end the run as if this loop had received `signum`."""
        self._interrupt = signum

    def kill_now(self, signum: int) -> None:
        """A second stop signal: SIGKILL the tasks still stopping, without waiting out the grace."""
        self._killed_by = signum
        self._kill_now.set()

    def run(self) -> int:
        previous = self._install_signal_handlers()
        # before any task listens: the network meets this guard at the tasks' ports, not TF's gRPC
        guard = OffLoopbackGuard(self.held_ports.ports, self._say)
        try:
            self.decision = Decision(Phase.RUNNING)
            for task in self.tasks:
                self._start(task)
            self._write_status()
            self.started.set()
            while not self.decision.finished:
                if self._interrupt is not None:
                    raise _Interrupted(self._interrupt)
                self._poll()
                self._write_status()
                guard.refresh()
                time.sleep(POLL_SECONDS)
        except (_Interrupted, KeyboardInterrupt) as exc:
            signum = exc.signum if isinstance(exc, _Interrupted) else signal.SIGINT
            self._interrupt = signum
            self._say(f"interrupted by {signal.Signals(signum).name}")
            self._apply(policy.interrupted(self._snapshots(), signum))
        finally:
            self._stop([t for t in self.tasks if t.running], reason="cluster ended")
            self.held_ports.close()
            guard.close()
            for task in self.tasks:
                if task.reader is not None:
                    task.reader.join(timeout=5)
            self._write_status()
            self._restore_signal_handlers(previous)
            self.started.set()
            self._note_code_writes()
        d = self.decision
        self._say(
            f"cluster {self.spec.name}: {d.phase}"
            + (f": {d.message}" if d.message else "")
            + f" (exit code {d.exit_code})"
        )
        self.output.close()
        return d.exit_code

    def _note_code_writes(self) -> None:
        """What the tasks wrote into the run's read-only code copy: only root can (files.py), and
        in a pod the same write fails."""
        if self.code_before is None or not self.files.code_dir.exists():  # none, or deleted under us
            return
        changes = code_changes(self.code_before, tree_state(self.files.code_dir))
        if changes:
            shown = ", ".join(changes[:CODE_CHANGES_SHOWN])
            more = f" and {len(changes) - CODE_CHANGES_SHOWN} more" if len(changes) > CODE_CHANGES_SHOWN else ""
            self._say(
                f"note: the program wrote into its code dir {self.files.code_dir} ({shown}{more}), which "
                f"only root can here: a pod mounts its code dir {CODE_DIR} read-only, where this write "
                "fails (PermissionError); write to $TFK8S_MODEL_DIR or /tmp instead (docs/code.md)"
            )

    def _poll(self) -> None:
        now = time.monotonic()
        for task in self.tasks:
            if task.process is not None and task.state is TaskState.RUNNING:
                code = task.process.poll()
                if code is not None:
                    self._exited(task, code, now)
            if task.state is TaskState.WAITING_RESTART and task.restart_at <= now:
                self._start(task)
        self._apply(
            policy.decide(self.plan, self._snapshots(), now, failure_grace_seconds=self.timing.failure_grace_seconds)
        )

    def _exited(self, task: Task, code: int, now: float) -> None:
        self.files.remove_pid(task.role, task.index)
        task.last_exit_code = code
        task.exit_history.append(code)
        if code == 0:
            task.state, task.reason, task.ended_at = TaskState.SUCCEEDED, "exited 0", now
            self._say(f"{task.name} exited 0")
            return
        # After training, only the evaluator may still be restarted.
        training_over = self.chief.state is TaskState.SUCCEEDED and task.role is not Role.EVALUATOR
        failure = self.plan.failure_of(task.role)
        budget = failure.budget(task.role, task.index)
        decision = policy.restart_decision(
            failure,
            budget,
            code,
            self.restarts_used.get(budget, 0),
            training_over,
            self._last_words(task, code),
        )
        task.reason = decision.reason
        if decision.counted:
            self.failed_attempts[task.role] += 1
        if decision.restart:
            if decision.counted:
                self.restarts_used[budget] = self.restarts_used.get(budget, 0) + 1
            task.state = TaskState.WAITING_RESTART
            task.restart_at = time.monotonic() + self.timing.restart_delay_seconds
        else:
            task.state, task.ended_at = TaskState.FAILED, now
        self._say(f"{task.name} {decision.message}")

    def _last_words(self, task: Task, code: int) -> str | None:
        """Why the task exited, from its output's tail (worker/exit_cause.py), like a pod's
        termination message (FallbackToLogsOnError): only for an exit status of its own, not a
        signal's."""
        if not policy.explains_itself(code, not self.plan.role(task.role).builtin):
            return None
        if task.reader is not None:
            task.reader.join(timeout=LOG_DRAIN_SECONDS)  # its last lines may still be in the pipe
        tail = self.files.last_attempt_tail(task.role, task.index, max_bytes=CAUSE_TAIL_BYTES)
        return exit_cause.exit_cause(tail, code)

    def _apply(self, decision: Decision) -> None:
        for note in decision.notes:
            if note not in self.said:
                self.said.add(note)
                self._say(note)
        by_key = {(t.role, t.index): t for t in self.tasks}
        stopping = [by_key[(s.role, s.index)] for s in decision.stop]
        self._stop(stopping, reason=decision.stop_reason)
        for stop in decision.stop:
            task = by_key[(stop.role, stop.index)]
            task.state = stop.state
            if stop.reason is not None:
                task.reason = stop.reason
        self.decision = decision

    def _snapshots(self):
        return [t.snapshot() for t in self.tasks]

    # --- processes -------------------------------------------------------------------------

    def _start(self, task: Task) -> None:
        task.attempts += 1
        attempt = task.attempts

        def header(pid: int) -> str:
            return (
                f"{ATTEMPT_HEADER_START}{task.name} attempt {attempt}, pid {pid}, "
                f"started {time.strftime('%Y-%m-%d %H:%M:%S')} ==="
            )

        task.process, task.reader = runner.start(
            task.argv,
            task.env,
            name=task.name,
            header=header,
            output=self.output,
            log_path=self.files.log_path(task.role, task.index),
            cwd=task.cwd,
        )
        task.state, task.restart_at, task.started_at = TaskState.RUNNING, None, time.time()
        task.reason = f"running (attempt {task.attempts})"
        self.files.write_pid(task.role, task.index, task.process.pid)

    def _stop(self, tasks: list[Task], reason: str) -> None:
        """SIGTERM each running task's process group; SIGKILL every one left at once after the
        grace, or at a second stop signal (kill_now), naming the tasks that ignored SIGTERM."""
        tasks = [t for t in tasks if t.running]
        if not tasks:
            return
        grace = (
            self.timing.stop_grace_seconds
            if self.timing.stop_grace_seconds is not None
            else self.spec.termination_grace_period_seconds
        )
        if self._interrupt is None:
            for task in tasks:
                self._say(f"stopping {task.name} ({reason})")
        else:  # someone waits for the stop: say what comes and how to cut it short
            plural = len(tasks) > 1
            self._say(
                f"stopping: sent SIGTERM to {len(tasks)} task{'s' if plural else ''} "
                f"({', '.join(t.name for t in tasks)}); {_keys(self._interrupt)} again to kill "
                f"{'them' if plural else 'it'} now "
                f"(else SIGKILL after {grace:g} s, terminationGracePeriodSeconds)"
            )
        ignored = runner.stop({t.name: t.process for t in tasks}, grace, self._kill_now)
        if ignored:
            self._say(self._ignored_sigterm(ignored, grace))
        for task in tasks:
            task.last_exit_code = task.process.returncode
            if task.state is TaskState.RUNNING:
                task.state, task.reason = TaskState.STOPPED, f"stopped ({reason})"
            self.files.remove_pid(task.role, task.index)

    def _ignored_sigterm(self, names: list[str], grace: float) -> str:
        """'SIGKILL sent (...): the program ignored SIGTERM: worker-0, worker-1 (why, if known)'."""
        if self._kill_now.is_set():
            when = f"{_keys(self._killed_by)} again"
        else:
            when = f"{grace:g} s after SIGTERM, terminationGracePeriodSeconds"
        why = ""
        if self.plan.strategy is Strategy.MULTI_WORKER_MIRRORED and not self.spec.builtin:
            why = " (TensorFlow's MultiWorkerMirroredStrategy installs its own SIGTERM handler)"
        return f"SIGKILL sent ({when}): the program ignored SIGTERM: {', '.join(names)}{why}"

    # --- status, output, signals -----------------------------------------------------------

    def _write_status(self) -> None:
        roles = []
        for role in self.spec.active_roles():
            tasks = [t for t in self.tasks if t.role == role]
            last = max(tasks, key=lambda t: t.attempts)
            roles.append(
                asdict(
                    RoleStatus(
                        role=role.value,
                        replicas=len(tasks),
                        active=sum(1 for t in tasks if t.running),
                        succeeded=sum(1 for t in tasks if t.state is TaskState.SUCCEEDED),
                        failed=self.failed_attempts[role],
                        last_exit_code=last.last_exit_code,
                        reason="; ".join(failure_reasons.said_once([(t.name, t.reason) for t in tasks if t.reason]))
                        or None,
                    )
                )
            )
        d = self.decision
        try:
            self._record_status(d, roles)
        except ClusterNotFound:
            pass  # deleted under us (`delete` waits for our exit): there is no run to record

    def _record_status(self, d, roles: list[dict]) -> None:
        self.files.write_status(
            {
                "phase": d.phase.value,
                "message": d.message,
                "exit_code": d.exit_code,
                "supervisor_pid": os.getpid(),
                "supervisor_started": runner.start_time(os.getpid()),
                "model_dir": self.model_dir,
                "roles": roles,
                "tasks": [
                    {
                        "task": t.name,
                        "state": t.state.value,
                        "attempts": t.attempts,
                        "pid": t.process.pid if t.running else None,
                        "started_at": t.started_at,
                        "exit_codes": t.exit_history,
                    }
                    for t in self.tasks
                ],
            }
        )

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None  # only the main thread may; the caller owns signals then

        def interrupt(signum, frame):
            # The first stops the loop; a second only hurries the stop along (kill_now): an
            # exception then would cut the cleanup short (tasks would be orphaned until the
            # parent-death signal got them).
            if self._interrupt is None and not self._kill_now.is_set():
                self._interrupt = signum
                raise _Interrupted(signum)
            self.kill_now(signum)

        return {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}

    @staticmethod
    def _restore_signal_handlers(previous) -> None:
        for sig, handler in (previous or {}).items():
            signal.signal(sig, handler)


def _keys(signum: int) -> str:
    """How a user sends this stop signal again: Ctrl-C for SIGINT, else the signal's name."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
