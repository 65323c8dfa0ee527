"""LocalBackend: the Backend interface over local processes (rules and files in __init__.py)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Iterator

from launcher.backends.base import RERUN_FAILED, Backend, LogLines, View, exit_code
from launcher.backends.local import runner
from launcher.backends.local.files import (
    MOUNTS_DIR,
    SUBMIT_LOCK_FILE,
    RunFiles,
    make_read_only,
    remove_tree,
    write_private,
)
from launcher.backends.local.foreground import ForegroundRun
from launcher.backends.local.logs import read_log
from launcher.backends.local.preflight import as_processes, check_resource_limits, check_worker_environment
from launcher.backends.local.supervisor import POLL_SECONDS, Supervisor
from launcher.backends.local.types import LocalProcessBackendConfig
from launcher.backends.view import LineView, NoteStream
from launcher.cluster_spec import loader, names
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.errors import ClusterNotFound, LauncherError, SubmitRefused
from launcher.plan.plan import plan as make_plan
from launcher.status import progress
from launcher.status.progress import TAIL_BYTES, TrainingProgress, read_progress
from launcher.status.status import ClusterStatus, Phase, RoleStatus
from worker.contract import SUCCESS_INDEX, Role, success_role

VIEW_SECONDS = 1.0  # how often wait() re-reads a run's status (and logs) for the view
METRICS_NOTE_WAIT_SECONDS = 10.0  # for a detached supervisor to write the metrics ports it chose
_LIVE = (Phase.PENDING, Phase.RUNNING, Phase.FINISHING)
# An ended run's supervisor exits after its last status write: seconds (it joins the tasks'
# output readers for up to 5 s each).
ENDED_SUPERVISOR_SECONDS = 15.0


# What `delete` leaves: the model dir and the pods' mount paths (tasks.MOUNTS_DIR), like a claim
# that outlives its cluster, and the submit lock a submit may hold (--replace).
KEPT_BY_DELETE = ("model", MOUNTS_DIR, SUBMIT_LOCK_FILE)


def _gone_within(pid: int, started: int | None, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while runner.runs(pid, started) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    return not runner.runs(pid, started)


def _role_index(task: str) -> tuple[str, int]:
    role, index = task.rsplit("-", 1)
    return role, int(index)


class LocalBackend(Backend):
    def __init__(
        self,
        config: LocalProcessBackendConfig | None = None,
        *,
        stream: IO[str] | None = None,
        view: View | None = None,
    ):
        """stream: where notes (and, with echo_tasks, the tasks' output) go (default: the
        `tfk8s.local` logger). view: what wait() shows (default: plain status lines on `stream`)."""
        self.config = config if config is not None else LocalProcessBackendConfig()
        self._workdir = self.config.resolved_workdir
        self._stream = stream if stream is not None else LogLines(logging.getLogger("tfk8s.local"))
        self._view = view if view is not None else LineView(self._stream)
        self._runs: dict[str, ForegroundRun] = {}  # supervised here (foreground), not yet waited

    def submit(self, spec: ClusterSpec, *, replace: bool = False, code: code_bundle.Bundle | None = None) -> None:
        """Start the run and return once its tasks have started: in the foreground under a
        supervisor thread of this process, else under a detached supervisor process that writes
        its output to <workdir>/<name>/supervisor.log. Refused while another submit of the
        name runs (files.submit_lock)."""
        files = self._files(spec.name)
        spec = as_processes(spec, self._stream, files.dir)
        # before anything exists: says what to install, and where
        check_worker_environment(spec, self.config.task_python)
        code = self._pack_code(spec, code)  # once: the run's copy and its hash are of the same files
        code_dir = str(files.code_dir) if code is not None else None
        cluster = make_plan(spec, code, model_dir=files.model_dir(spec), code_dir=code_dir)
        # before anything exists: the tasks fit this machine's limits
        check_resource_limits(cluster, self.config.task_python)
        with files.submit_lock():
            self._submit(files, spec, code, cluster.spec_hash, replace)

    def _submit(
        self, files: RunFiles, spec: ClusterSpec, code: code_bundle.Bundle | None, spec_hash: str, replace: bool
    ) -> None:
        if files.has_status():
            current = self.status(spec.name)
            if not replace and files.recorded_spec_hash() == spec_hash and current.phase is not Phase.UNKNOWN:
                # as on Kubernetes: the same spec again changes nothing
                self._view.note(f"local cluster {spec.name!r} is unchanged ({current.phase}); nothing started")
                if current.phase is Phase.FAILED:
                    self._view.note(
                        RERUN_FAILED.format(cluster=repr(spec.name), status=f"{spec.name} --workdir {self._workdir}")
                    )
                return
            if not replace:
                state = "is running" if not current.finished else f"finished ({current.phase})"
                raise SubmitRefused(
                    f"local cluster {spec.name!r} {state} with another spec in {files.dir}; "
                    "delete it first "
                    f"(`python -m launcher delete {spec.name} --local --workdir "
                    f"{self._workdir}`; its model/ with the checkpoints is kept) or submit "
                    "with --replace"
                )
            self.delete(spec.name)
        files.prepare(spec, spec_hash)
        if code is not None:  # the pods' archive, unpacked: the same files, links, limit
            write_private(files.code_archive, code.archive)
            if files.code_dir.exists():  # an earlier run's copy, read-only
                remove_tree(files.code_dir)
            code_bundle.unpack(files.code_archive, files.code_dir)
            make_read_only(files.code_dir)  # as the pods' /opt/tfk8s/code (files.py)
            self._view.note(code_bundle.note(spec, code, to=str(files.code_dir)))
        if self.config.foreground:
            self._start_here(files, spec)
        else:
            self._start_detached_supervisor(files, spec)
        self._note_metrics(files)

    def _note_metrics(self, files: RunFiles) -> None:
        """Where each task serves its Prometheus metrics, once the supervisor chose the ports
        (a detached one within a few seconds of its start)."""
        deadline = time.monotonic() + METRICS_NOTE_WAIT_SECONDS
        while (addresses := files.read_metrics()) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if addresses:
            listed = ", ".join(f"{task} {address}" for task, address in addresses.items())
            self._view.note(f"Prometheus metrics: {listed}")

    def wait(self, name: str) -> int:
        """Until the run ends, showing it in the view (a foreground run with echo_tasks: its
        tasks' output instead); the chief's exit code. A foreground run is supervised by this
        process: Ctrl-C or SIGTERM meanwhile stops every task."""
        try:
            run = self._runs.pop(name, None)
            if run is None:
                return self._watch(name)
            if self.config.echo_tasks:
                return run.wait(None, VIEW_SECONDS)
            code = run.wait(lambda: self._view.show(self.status(name)), VIEW_SECONDS)
            self._view.show(self.status(name))
            return code
        finally:
            self._view.close()

    def watch(self, name: str) -> int:
        """Show a run until it ends (one another process supervises, or this one)."""
        try:
            return self._watch(name)
        finally:
            self._view.close()

    def _watch(self, name: str) -> int:
        while True:
            status = self.status(name)
            self._view.show(status)
            if status.finished or status.phase is Phase.UNKNOWN:
                return exit_code(status)
            time.sleep(VIEW_SECONDS)

    def status(self, name: str) -> ClusterStatus:
        record = self._files(name).read_status()
        phase, message = Phase(record["phase"]), record.get("message", "")
        if phase in _LIVE and not runner.runs(record.get("supervisor_pid"), record.get("supervisor_started")):
            phase = Phase.UNKNOWN
            message = (
                f"the supervising process (pid {record.get('supervisor_pid')}) is gone; "
                "its tasks ended with it. Delete and resubmit to resume from the "
                "checkpoints in model/"
            )
        roles = [RoleStatus(**role) for role in record.get("roles", [])]
        status = ClusterStatus(
            name=name,
            namespace="local",
            phase=phase,
            message=message,
            exit_code=record.get("exit_code"),
            roles=roles,
            training=self._training(name),
        )
        if phase is Phase.RUNNING:
            self._say_if_quiet(status, record)
        return status

    def _training(self, name: str) -> TrainingProgress | None:
        """From the progress lines of the success task's and the evaluator's logs; without any,
        the step of the newest checkpoint in the model dir or under the pods' mount paths."""
        files = self._files(name)
        spec = files.read_spec()
        role = success_role(spec.strategy)
        found = read_progress(
            files.log_tail(role.value, SUCCESS_INDEX, TAIL_BYTES), files.log_tail(Role.EVALUATOR.value, 0, TAIL_BYTES)
        )
        if found is not None and found.step is not None:
            return found
        newest = files.newest_checkpoint(files.model_dir(spec)) if not spec.checkpoint.is_remote else None
        if newest is None:
            return found
        step, path, written_at = newest
        shown = os.path.relpath(path, files.dir) if path.startswith(str(files.dir)) else path
        checkpoint = progress.from_checkpoint(step, shown, written_at)
        if found is not None:  # an evaluator's lines, no step of the chief's
            checkpoint.evaluation, checkpoint.history = found.evaluation, found.history
        return checkpoint

    def _say_if_quiet(self, status: ClusterStatus, record: dict) -> None:
        """No step and no checkpoint for progress.QUIET_SECONDS: said in the message (or a note
        beside one), with the likely cause when every task alive only serves."""
        files = self._files(status.name)
        alive = {t["task"]: t["task"].rsplit("-", 1)[0] for t in record.get("tasks", []) if t.get("pid")}
        starts = [t.get("started_at") for t in record.get("tasks", []) if t.get("pid")]
        signs = [s for s in (*starts, status.training.updated_at if status.training else None) if s]
        if not alive or not signs:
            return
        serving = {task for task in alive if progress.waits_as_server(files.log_tail(*_role_index(task), 4096))}
        progress.add_quiet_note(status, max(signs), files.read_spec().strategy.value, alive, serving)

    def logs(self, name: str, role: str, index: int, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        """Lines of one task's log (every attempt, each behind a header line); with follow,
        until the cluster ends."""
        files = self._files(name)
        files.read_status()  # a clear error for unknown clusters
        yield from read_log(
            files.log_path(role, index),
            f"{role}-{index} of local cluster {name!r}",
            lambda: self.status(name).finished,
            follow,
            tail,
        )

    def all_logs(self, name: str, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        """The run's combined log: every task's lines as the tasks wrote them, and the
        launcher's own `[tfk8s]` lines, as a foreground run prints them; `tail` lines of each
        task, as on Kubernetes."""
        files = self._files(name)
        files.read_status()
        yield from read_log(
            files.combined_log,
            f"every task of local cluster {name!r}",
            lambda: self.status(name).finished,
            follow,
            tail,
            per_task=True,
        )

    def delete(self, name: str) -> None:
        """Stop the cluster if it runs, then remove its files except model/ and mounts/, and say which."""
        files = self._files(name)
        if files.dir.is_symlink():  # its entries are another dir's: never removed from here
            raise LauncherError(
                f"{files.dir} is a symbolic link, not a local run's dir; nothing deleted (remove the link by hand)"
            )
        if not files.dir.exists():
            raise ClusterNotFound(f"no local cluster {name!r} in {self._workdir}")
        run = self._runs.pop(name, None)
        if run is not None:
            run.stop()
        record = files.read_status() if files.has_status() else {}
        pid = record.get("supervisor_pid")
        # Only a process proven to be the run's supervisor (its start time as recorded) is
        # signalled: a stale pid may be anyone's process by now.
        if pid != os.getpid() and runner.runs(pid, record.get("supervisor_started")):
            # An ended run's supervisor still writes its last status (after stopping its tasks
            # and reading their output): removing the files before it exits left a status.json
            # without its spec.json, a cluster no command could read. Wait for it; a live run's
            # is asked to stop its tasks first.
            started = record.get("supervisor_started")
            if record.get("phase") in _LIVE or not _gone_within(pid, started, ENDED_SUPERVISOR_SECONDS):
                os.kill(pid, signal.SIGTERM)  # the supervisor stops its tasks, then exits
            if not _gone_within(pid, started, self._stop_grace(files) + 15):
                raise LauncherError(
                    f"the supervisor of {name!r} (pid {pid}) did not stop "
                    f"within its grace; stop it (kill {pid}) and delete again"
                )
        removed, kept = [], []
        for entry in sorted(files.dir.iterdir()):
            if entry.name in KEPT_BY_DELETE:
                if entry.name != SUBMIT_LOCK_FILE:
                    kept.append(entry.name + "/")
                continue
            if entry.is_dir() and not entry.is_symlink():  # a link is removed, never followed
                remove_tree(entry)  # code/ is read-only
                removed.append(entry.name + "/")
            else:
                entry.unlink()
                removed.append(entry.name)
        self._view.note(
            f"deleted local cluster {name!r}: {', '.join(removed) or 'nothing'} of {files.dir}"
            + (
                f"; kept {' and '.join(kept)} (the checkpoints a resubmitted spec resumes from; "
                "remove by hand to start from scratch)"
                if kept
                else ""
            )
        )

    def list(self) -> list[ClusterStatus]:
        """Every cluster of the workdir; a damaged one is listed as Unknown with what is wrong,
        never a failure of the whole list."""
        if not self._workdir.exists():
            return []
        found = []
        for entry in sorted(self._workdir.iterdir()):
            if names.dns1035_problem(entry.name) or not self._files(entry.name).has_status():  # not a run's dir
                continue
            try:
                found.append(self.status(entry.name))
            except (LauncherError, ValueError, KeyError, TypeError) as exc:
                found.append(
                    ClusterStatus(
                        name=entry.name,
                        namespace="local",
                        phase=Phase.UNKNOWN,
                        message=f"damaged local cluster dir {entry} ({exc}); `delete "
                        f"{entry.name} --local` removes it (model/ is kept)",
                    )
                )
        return found

    def tensorboard(self, name: str, port: int):
        from launcher.backends.local import tensorboard

        files = self._files(name)
        return tensorboard.serve(files.model_dir(files.read_spec()), port, files.dir / "tensorboard.log")

    # --- internals -------------------------------------------------------------------------

    def _pack_code(self, spec: ClusterSpec, loaded: code_bundle.Bundle | None) -> code_bundle.Bundle | None:
        """The spec's code: as its load packed it (`loaded`), or packed here (loader.pack_code),
        and packed again without this backend's workdir when it lies inside the code dir
        (`--workdir` there: earlier runs' logs and checkpoints would ship with the code); the
        default `.tfk8s/` is excluded anyway."""
        if spec.code is None:
            return None
        root = code_bundle.resolve(spec.code, Path.cwd())
        if loaded is not None and root not in self._workdir.parents:
            return loaded
        if root in self._workdir.parents:
            inside = "/" + self._workdir.relative_to(root).as_posix() + "/"
            spec = spec.model_copy(
                update={"code": spec.code.model_copy(update={"exclude": [*spec.code.exclude, inside]})}
            )
        return loader.pack_code(spec, root=root)

    def _files(self, name: str) -> RunFiles:
        return RunFiles(self._workdir, name)

    def _stop_grace(self, files: RunFiles) -> float:
        """For `delete`, which has only the name: the grace of the spec the run recorded."""
        if self.config.stop_grace_seconds is not None:
            return self.config.stop_grace_seconds
        return files.recorded_stop_grace()

    def _start_here(self, files: RunFiles, spec: ClusterSpec) -> None:
        files.write_status(
            {
                "phase": Phase.PENDING.value,
                "roles": [],
                "supervisor_pid": os.getpid(),
                "supervisor_started": runner.start_time(os.getpid()),
                "message": "starting tasks",
            }
        )
        echo = self.config.echo_tasks
        supervisor = Supervisor(
            files, spec, self._stream if echo else NoteStream(self._view), self.config, echo_tasks=echo
        )
        run = ForegroundRun(supervisor)
        run.start()
        self._runs[spec.name] = run

    def _start_detached_supervisor(self, files: RunFiles, spec: ClusterSpec) -> None:
        files.write_status({"phase": Phase.PENDING.value, "roles": [], "message": "starting the supervisor"})
        pid = runner.start_detached(
            [
                sys.executable,
                "-m",
                "launcher.backends.local",
                "supervise",
                "--workdir",
                str(self._workdir),
                "--python",
                self.config.task_python,
                spec.name,
            ],
            files.supervisor_log,
        )
        files.write_status(
            {
                "phase": Phase.PENDING.value,
                "roles": [],
                "supervisor_pid": pid,
                "supervisor_started": runner.start_time(pid),
                "message": "starting tasks",
            }
        )
