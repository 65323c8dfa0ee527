"""Helpers for tests that run clusters through LocalBackend: specs, submissions in a thread,
progress records from task logs, and the check that no task outlives its cluster.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
from support import REPO as REPO_ROOT  # noqa: F401 - re-exported to the tests
from support import wait_until as wait_until  # re-exported to the tests

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from launcher.backends.local import LocalBackend, LocalProcessBackendConfig  # noqa: E402,F401
from launcher.backends.local.files import RunFiles  # noqa: E402
from launcher.cluster_spec.spec import ClusterSpec  # noqa: E402
from worker.progress import parse_line  # noqa: E402

# Measurements the tests print at the end of the session (fault recovery times etc.).
MEASUREMENTS: list[str] = []

# The small built-in program, for tests whose subject is not the model (worker/examples/digits.py).
SMALL_PROGRAM = "worker.examples.digits"

ROLES = {
    "parameter_server": {"chief": 1, "worker": 2, "ps": 1},
    "multi_worker_mirrored": {"worker": 2},
    "mirrored": {"chief": 1},
}
# A PS cluster for a test whose subject is the chief or the model dir, not the workers: each run
# starts one TensorFlow process less (the 2-core machine's scarcest thing).
ONE_PS_WORKER = {"chief": 1, "worker": 1, "ps": 1}


def run_files(backend: LocalBackend, name: str) -> RunFiles:
    """A local run's files (launcher/backends/local/files.py): its dir, logs, pids, model/."""
    return RunFiles(backend.config.resolved_workdir, name)


def kill_task(backend: LocalBackend, name: str, role: str, index: int, sig: int = signal.SIGKILL) -> int:
    """Send `sig` to one running task (SIGKILL: a crash); returns the pid it went to."""
    pid = run_files(backend, name).read_pid(role, index)
    if pid is None:
        raise AssertionError(f"{role}-{index} of local cluster {name!r} is not running")
    os.kill(pid, sig)
    return pid


def worker_args(steps: int, every: int, loop: str = "custom", batch: int = 64, data: str = "digits") -> list[str]:
    """The built-in worker's program arguments most process tests train with."""
    return [
        *("--loop", loop, "--steps", str(steps), "--checkpoint-every", str(every)),
        *("--global-batch-size", str(batch), "--data", data),
    ]


def free_port() -> int:
    """A localhost port nothing listens on now (for a task started by hand)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(text: str) -> None:
    MEASUREMENTS.append(text)
    print(text)


def make_spec(
    name: str, strategy: str, program_args: list[str], *, evaluator: bool = True, roles: dict | None = None, **fields
) -> ClusterSpec:
    replicas = dict(roles or ROLES[strategy])
    if evaluator:
        replicas["evaluator"] = 1
    data = {
        "name": name,
        "strategy": strategy,
        "program": {"args": program_args},
        "roles": {role: {"replicas": count} for role, count in replicas.items()},
        # The spec wants a volume for an evaluator (Kubernetes); LocalBackend ignores it and
        # maps the model dir into its workdir.
        "checkpoint": {"dir": "/ckpt/model", "volume": {"persistentVolumeClaim": {"claimName": "unused"}}},
        **fields,
    }
    return ClusterSpec.model_validate(data)


class Submission:
    """submit(spec) and wait(name) in a thread, so a test can watch and inject faults meanwhile."""

    def __init__(self, backend: LocalBackend, spec: ClusterSpec, replace: bool = False):
        self.backend, self.spec = backend, spec
        self.exit_code: int | None = None
        self.error: BaseException | None = None
        self.started = time.time()
        self.thread = threading.Thread(target=self._run, args=(replace,), daemon=True)
        self.thread.start()

    def _run(self, replace: bool) -> None:
        try:
            self.backend.submit(self.spec, replace=replace)
            self.exit_code = self.backend.wait(self.spec.name)
        except BaseException as exc:  # re-raised in wait()
            self.error = exc

    def still_running(self) -> bool:
        """For wait_until conditions: fails at once (with the cluster's status) when the cluster
        has already ended, instead of waiting out the timeout for a step it never reaches."""
        if not self.thread.is_alive():
            raise AssertionError(
                f"cluster {self.spec.name} ended (exit {self.exit_code}, "
                f"{self.error!r}): {self.backend.status(self.spec.name)}"
            )
        return True

    def wait(self, timeout: float) -> int:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"cluster {self.spec.name} still running after {timeout} s")
        if self.error is not None:
            raise self.error
        self.seconds = time.time() - self.started
        return self.exit_code


def attempts(backend: LocalBackend, name: str, role: str, index: int) -> list[list[dict]]:
    """Progress records of one task, one list per attempt (process start)."""
    path = run_files(backend, name).log_path(role, index)
    if not path.exists():
        return []
    result: list[list[dict]] = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("=== tfk8s: "):
            result.append([])
            continue
        record = parse_line(line) if "tfk8s-progress" in line else None
        if record is not None and result:
            result[-1].append(record)
    return result


def events(backend: LocalBackend, name: str, role: str, index: int, event: str) -> list[dict]:
    return [r for attempt in attempts(backend, name, role, index) for r in attempt if r["event"] == event]


def task_processes(workdir: Path) -> list[psutil.Process]:
    """Live processes that belong to clusters under `workdir` (by their TFK8S_MODEL_DIR)."""
    found = []
    for process in psutil.process_iter():
        try:
            model_dir = process.environ().get("TFK8S_MODEL_DIR", "")
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if model_dir.startswith(str(workdir)):
            found.append(process)
    return found


def assert_no_task_processes(workdir: Path) -> None:
    left = task_processes(workdir)
    assert not left, "tasks outlived their cluster: " + ", ".join(f"{p.pid} {' '.join(p.cmdline())}" for p in left)


def metrics(backend: LocalBackend, name: str) -> list[dict]:
    path = run_files(backend, name).dir / "model" / "eval" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def final_marker(backend: LocalBackend, name: str) -> dict:
    return json.loads((run_files(backend, name).dir / "model" / "FINAL.json").read_text())
