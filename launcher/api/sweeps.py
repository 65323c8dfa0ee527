"""Running a sweep (docs/sweeps.md): its trials submitted through a client, followed, and told to
the search (launcher/sweep/search.py), `parallelTrials` at a time, until `maxTrials`, the goal,
or too many failed trials.

A sweep's files are in `<workdir>/.sweeps/<name>/` on the machine that runs it: `sweep.json`
(the sweep and its base spec, as run), `study.journal` (Optuna's study: every trial's values,
reported evaluations and end), `result.json` (how it ended) and `controller.lock` (held, with
its pid, while a launcher runs it). Each trial is named in the study before it is submitted, and
a submit of the same spec is a no-op, so a launcher that restarts carries on: the running trials
are followed again, a named one never submitted is submitted, none runs twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from launcher.cluster_spec.spec import ClusterSpec
from launcher.errors import ClusterNotFound, LauncherError, SpecError, SubmitRefused
from launcher.status.lines import state_line
from launcher.status.status import ClusterStatus, Phase
from launcher.sweep import search as search_
from launcher.sweep import trials as trials_
from launcher.sweep.load import LoadedSweep
from launcher.sweep.spec import SweepSpec

SWEEPS_DIR = ".sweeps"  # under the workdir; a dot-dir, so no cluster's run dir can be it
SPEC_FILE = "sweep.json"
RESULT_FILE = "result.json"
LOCK_FILE = "controller.lock"
STOP_FILE = "stop"  # written by `sweep delete`: the running launcher ends its loop
STOP_WAIT_SECONDS = 60.0
# A finished trial's phase in `sweep status`, from the study's state.
TRIAL_PHASES = {search_.COMPLETE: "Succeeded", search_.FAIL: "Failed", search_.PRUNED: "Stopped"}


def sweep_dir(workdir: str | Path, name: str) -> Path:
    return Path(workdir).expanduser().resolve() / SWEEPS_DIR / name


@dataclass
class TrialRow:
    number: int
    cluster: str | None
    values: dict[str, Any]
    phase: str
    value: float | None  # the objective's, once the trial succeeded
    message: str = ""
    latest: tuple[int, float] | None = None  # a running or stopped trial's latest evaluation (step, value)
    best: bool = False

    def to_dict(self) -> dict:
        return {
            "trial": self.number,
            "cluster": self.cluster,
            "parameters": self.values,
            "phase": self.phase,
            "value": self.value,
            "latest": None if self.latest is None else {"step": self.latest[0], "value": self.latest[1]},
            "best": self.best,
            "message": self.message,
        }


@dataclass
class SweepStatus:
    name: str
    phase: str  # Running, Succeeded, Failed, Stopped (no launcher runs it: rerun to resume)
    message: str
    metric: str
    direction: str
    parameters: list[str]
    trials: list[TrialRow] = field(default_factory=list)

    @property
    def best(self) -> TrialRow | None:
        return next((t for t in self.trials if t.best), None)

    def to_dict(self) -> dict:
        best = self.best
        return {
            "name": self.name,
            "phase": self.phase,
            "message": self.message,
            "objective": {"metric": self.metric, "direction": self.direction},
            "best": None if best is None else {"trial": best.number, "cluster": best.cluster, "value": best.value},
            "trials": [t.to_dict() for t in self.trials],
        }


class SweepFiles:
    def __init__(self, directory: Path):
        self.dir = directory

    def exists(self) -> bool:
        return (self.dir / SPEC_FILE).is_file()

    def record(self) -> dict:
        return json.loads((self.dir / SPEC_FILE).read_text())

    def sweep(self) -> SweepSpec:
        return SweepSpec.model_validate(self.record()["sweep"])

    def trials_namespace(self) -> str | None:
        """Kubernetes: where the trials were submitted (the run's namespace, else the base
        spec's), whichever namespace a later `sweep status` or `delete` is given."""
        record = self.record()
        if record["backend"].get("local"):
            return None
        return record["backend"].get("namespace") or record["base"].get("namespace")

    def result(self) -> dict | None:
        path = self.dir / RESULT_FILE
        return json.loads(path.read_text()) if path.is_file() else None

    def running_pid(self) -> int | None:
        """The pid of the launcher running the sweep now, or None."""
        path = self.dir / LOCK_FILE
        if not path.exists():
            return None
        with open(path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.seek(0)
                text = lock.read().strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(lock, fcntl.LOCK_UN)
        return None

    @contextmanager
    def controller_lock(self, name: str) -> Iterator[None]:
        with open(self.dir / LOCK_FILE, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.seek(0)
                raise LauncherError(
                    f"sweep {name!r} is being run by another launcher (pid {lock.read().strip() or '?'}); "
                    f"see it with `python -m launcher sweep status {name}`"
                ) from None
            lock.seek(0)
            lock.truncate()
            lock.write(str(os.getpid()))
            lock.flush()
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _record(loaded: LoadedSweep, backend: dict) -> dict:
    return {
        "sweep": loaded.sweep.model_dump(by_alias=True, mode="json"),
        "base": loaded.base.spec.model_dump(by_alias=True, mode="json"),
        "backend": backend,
    }


class SweepRun:
    """One launcher's run of a sweep: run() until it ends (or `sweep delete` stops it)."""

    def __init__(
        self,
        client,
        loaded: LoadedSweep,
        directory: Path,
        *,
        backend: dict,
        on_event: Callable[[str], None] | None = None,
        poll_seconds: float | None = None,
    ):
        self.client, self.loaded, self.files = client, loaded, SweepFiles(directory)
        self.sweep, self.base = loaded.sweep, loaded.base.spec
        self.backend = backend
        self.say = on_event or (lambda _: None)
        self.poll_seconds = poll_seconds if poll_seconds is not None else (1.0 if client.local else 5.0)

    def run(self) -> SweepStatus:
        name = self.sweep.name
        self.files.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self.files.controller_lock(name):
            self._check_same_sweep()
            (self.files.dir / RESULT_FILE).unlink(missing_ok=True)
            self.search = search_.Search.open(self.sweep, self.files.dir)
            resumed = self.search.trials()
            if resumed:
                self.say(f"sweep {name}: resuming with {len(resumed)} trials in {self.files.dir}")
            phase, message = self._loop()
            if phase is not None:
                (self.files.dir / RESULT_FILE).write_text(json.dumps({"phase": phase, "message": message}))
                self.say(f"sweep {name}: {phase}" + (f" - {message}" if message else ""))
        return sweep_status(self.client, self.files.dir)

    def _check_same_sweep(self) -> None:
        record = _record(self.loaded, self.backend)
        path = self.files.dir / SPEC_FILE
        if path.is_file():
            old = json.loads(path.read_text())
            if (old["sweep"], old["base"]) != (record["sweep"], record["base"]):
                raise SubmitRefused(
                    f"sweep {self.sweep.name!r} exists in {self.files.dir} with another sweep or base spec; "
                    f"delete it first (`python -m launcher sweep delete {self.sweep.name}`: its trials end) or "
                    "give the sweep another name"
                )
        path.write_text(json.dumps(record, indent=2))

    def _loop(self) -> tuple[str | None, str]:
        budget = search_.trial_budget(self.sweep)
        while True:
            if (self.files.dir / STOP_FILE).exists():
                self.say(
                    f"sweep {self.sweep.name}: stopped, as `sweep delete` asked (a delete that gave up leaves "
                    f"{self.files.dir / STOP_FILE}: remove it to run the sweep)"
                )
                return None, ""
            for trial in self.search.trials():
                if trial.state == search_.RUNNING:
                    self._follow(trial)
            trials = self.search.trials()
            best = self.search.best()
            failed = [t for t in trials if t.state == search_.FAIL]
            goal = self.sweep.objective.goal
            if best is not None and goal is not None and self._reaches(best.value, goal):
                why = f"trial {best.cluster} reached the goal {goal:g} ({self.sweep.objective.metric} {best.value:.4g})"
                self._end_running(f"ended: {why}")
                return "Succeeded", why
            if len(failed) > self.sweep.max_failed_trials:
                why = (
                    f"{len(failed)} trials failed, more than maxFailedTrials {self.sweep.max_failed_trials}; "
                    f"the last, {failed[-1].cluster}: {failed[-1].message}"
                )
                self._end_running("ended: the sweep failed")
                return "Failed", why
            running = [t for t in trials if t.state == search_.RUNNING]
            while len(running) < self.sweep.parallel_trials and len(trials) < budget:
                trial = self.search.ask(lambda number: trials_.trial_name(self.sweep.name, number))
                self._submit(trial)
                trials = self.search.trials()
                running = [t for t in trials if t.state == search_.RUNNING]
                if sum(t.state == search_.FAIL for t in trials) > self.sweep.max_failed_trials:
                    break  # refused at its submit: the next look ends the sweep
            if sum(t.state == search_.FAIL for t in trials) > self.sweep.max_failed_trials:
                continue  # ends it, with the cause, at the top
            if not running:
                if best is None:
                    return "Failed", f"no trial succeeded of {len(trials)}"
                return "Succeeded", f"best: {best.cluster}, {self.sweep.objective.metric} {best.value:.4g}"
            time.sleep(self.poll_seconds)

    def _reaches(self, value: float, goal: float) -> bool:
        return value <= goal if self.sweep.objective.direction == "minimize" else value >= goal

    def _spec(self, trial: search_.Trial) -> ClusterSpec:
        return trials_.trial_spec(self.sweep, self.base, trial.number, trial.values, shared_disk=self.client.local)

    def _submit(self, trial: search_.Trial) -> None:
        values = " ".join(f"{k}={trials_.format_value(v)}" for k, v in trial.values.items())
        try:
            self.client.submit(self._spec(trial))
        except (SpecError, SubmitRefused, LauncherError) as exc:
            cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.search.fail(trial.number, f"not submitted: {cause}")
            self.say(f"{trial.cluster} Failed: not submitted: {cause}")
            return
        self.search.submitted(trial.number)
        self.say(f"{trial.cluster} submitted: {values}")

    def _follow(self, trial: search_.Trial) -> None:
        try:
            status = self.client.get_job(trial.cluster)
        except ClusterNotFound:
            if not trial.submitted:  # named, then the launcher stopped before its submit
                self._submit(trial)
                return
            cause = (
                "its cluster is gone: deleted, or removed after its ttlSecondsAfterFinished while no launcher "
                "followed the sweep"
            )
            self.search.fail(trial.number, cause)
            self.say(f"{trial.cluster} Failed: {cause}")
            return
        metric = self.sweep.objective.metric
        if self.sweep.early_stopping is not None:
            for step, value in trials_.intermediate_values(status, metric):
                if step not in trial.intermediate:
                    self.search.report(trial.number, step, value)
                    trial.intermediate[step] = value
            if not status.finished and trial.intermediate and self.search.should_stop(trial.number):
                step = max(trial.intermediate)
                best = search_.best_of(self.sweep.objective.direction)(trial.intermediate.values())
                why = (
                    f"stopped early at step {step}: its best {metric} {best:.4g} is worse than the median of "
                    "the finished trials' best by that step"
                )
                self._end(trial.cluster)
                self.search.stop(trial.number, why)
                self.say(f"{trial.cluster} Stopped: {why}")
                return
        if status.phase is Phase.SUCCEEDED:
            value, why = trials_.objective_value(status, self.sweep.objective)
            if value is None:
                self.search.fail(trial.number, why)
                self.say(f"{trial.cluster} Failed: {why}")
            else:
                self.search.complete(trial.number, value, why)
                self.say(f"{trial.cluster} Succeeded: {metric} {value:.4g} ({why})")
        elif status.phase in (Phase.FAILED, Phase.UNKNOWN):
            cause = status.message or state_line(status)
            self.search.fail(trial.number, cause)
            self.say(f"{trial.cluster} {status.phase}: {cause}")

    def _end_running(self, why: str) -> None:
        for trial in self.search.trials():
            if trial.state == search_.RUNNING:
                self._end(trial.cluster)
                self.search.stop(trial.number, why)
                self.say(f"{trial.cluster} Stopped: {why}")

    def _end(self, cluster: str | None) -> None:
        if cluster is None:
            return
        try:
            self.client.delete_job(cluster)
        except ClusterNotFound:
            pass


def sweep_status(client, directory: Path) -> SweepStatus:
    """The sweep's trials as its study keeps them, a running trial's phase from its cluster."""
    files = SweepFiles(directory)
    if not files.exists():
        raise ClusterNotFound(f"no sweep {directory.name!r} in {directory.parent}")
    sweep = files.sweep()
    search = search_.Search.open(sweep, directory)
    pid, result = files.running_pid(), files.result()
    if pid is not None:
        phase, message = "Running", f"run by pid {pid}"
    elif result is not None:
        phase, message = result["phase"], result["message"]
    else:
        phase, message = "Stopped", "no launcher runs it: run `python -m launcher sweep` on its file again to resume"
    best = search.best()
    rows, namespace = [], files.trials_namespace()
    for trial in search.trials():
        if trial.cluster is not None:
            client.locate(trial.cluster, namespace)
        row = TrialRow(
            trial.number,
            trial.cluster,
            trial.values,
            TRIAL_PHASES.get(trial.state, ""),
            trial.value,
            trial.message,
            best=best is not None and best.number == trial.number,
        )
        if trial.state == search_.RUNNING:
            _live(client, row, sweep.objective.metric)
        elif trial.state == search_.PRUNED and trial.intermediate:  # what it had reached when stopped
            row.latest = max(trial.intermediate.items())
        rows.append(row)
    return SweepStatus(
        sweep.name,
        phase,
        message,
        sweep.objective.metric,
        sweep.objective.direction,
        [p.name for p in sweep.parameters],
        rows,
    )


def _live(client, row: TrialRow, metric: str) -> None:
    try:
        status: ClusterStatus = client.get_job(row.cluster)
    except ClusterNotFound:
        row.phase, row.message = "NotSubmitted", "named, not submitted yet"
        return
    except LauncherError as exc:
        row.phase, row.message = "Unknown", str(exc).splitlines()[0]
        return
    row.phase, row.message = str(status.phase), status.message
    seen = trials_.intermediate_values(status, metric)
    if seen:
        row.latest = seen[-1]


def delete_sweep(client, directory: Path, *, wait_seconds: float = STOP_WAIT_SECONDS) -> list[str]:
    """End the sweep: stop the launcher running it (at its next look), delete every trial's
    cluster (locally each run's files but model/, as `delete` does), remove the sweep's files.
    Returns the clusters deleted."""
    files = SweepFiles(directory)
    if not files.exists():
        raise ClusterNotFound(f"no sweep {directory.name!r} in {directory.parent}")
    (directory / STOP_FILE).touch()
    deadline = time.monotonic() + wait_seconds
    while (pid := files.running_pid()) is not None:
        if time.monotonic() > deadline:
            raise LauncherError(
                f"the launcher running sweep {directory.name!r} (pid {pid}) did not stop within {wait_seconds:g}s; "
                "stop it (Ctrl-C) and delete again"
            )
        time.sleep(0.2)
    deleted, namespace = [], files.trials_namespace()
    for trial in search_.Search.open(files.sweep(), directory).trials():
        if trial.cluster is None:
            continue
        client.locate(trial.cluster, namespace)
        try:
            client.delete_job(trial.cluster)
            deleted.append(trial.cluster)
        except ClusterNotFound:
            pass
    shutil.rmtree(directory)
    return deleted


def first_trials(loaded: LoadedSweep, count: int, *, shared_disk: bool = False) -> list[ClusterSpec]:
    """The first `count` trials' clusters as the search would start them (a study in memory,
    nothing kept): what `sweep --dry-run` renders."""
    search = search_.Search.open(loaded.sweep, None)
    out = []
    for _ in range(min(count, search_.trial_budget(loaded.sweep))):
        trial = search.ask(lambda number: trials_.trial_name(loaded.sweep.name, number))
        out.append(
            trials_.trial_spec(loaded.sweep, loaded.base.spec, trial.number, trial.values, shared_disk=shared_disk)
        )
    return out
