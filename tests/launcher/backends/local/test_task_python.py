"""The interpreter of a local run's built-in worker tasks (LocalProcessBackendConfig.python,
`--python`): checked before anything starts, used by the foreground and the detached supervisor
alike; a bring-your-own command runs as its spec says."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from local_clusters import LocalBackend, LocalProcessBackendConfig, make_spec, run_files

from launcher.backends.local.preflight import WorkerEnvironmentError
from launcher.backends.local.tasks import plan_tasks
from launcher.plan.plan import plan as make_plan
from worker.errors import EXIT_CONFIG

DIGITS = ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "32", "--data", "digits"]


def test_built_in_tasks_run_the_configured_python_and_bring_your_own_its_command():
    spec = make_spec("py", "parameter_server", DIGITS)
    held, tasks = plan_tasks(make_plan(spec, model_dir="/tmp/model"), "/envs/tf/bin/python")
    held.close()
    assert {tuple(t.argv[:3]) for t in tasks} == {("/envs/tf/bin/python", "-m", "worker")}
    byo = make_spec("byo", "mirrored", [], evaluator=False, image="example.com/byo:1")
    data = byo.model_dump(by_alias=True)
    data.pop("program")
    data["command"] = ["python3", "train.py"]
    byo = type(byo).model_validate(data)
    held, [task] = plan_tasks(make_plan(byo, model_dir="/tmp/model"), "/envs/tf/bin/python")
    held.close()
    assert task.argv[:2] == ["python3", "train.py"]


def test_a_task_python_without_tensorflow_is_refused_before_anything_starts(workdir, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, python=python), stream=io.StringIO())
    with pytest.raises(WorkerEnvironmentError) as raised:
        backend.submit(make_spec("bare", "mirrored", DIGITS, evaluator=False))
    assert str(raised.value).startswith("tensorflow is not installed in this Python environment")
    assert str(raised.value).endswith(f"(a local run's tasks use {python}; nothing was started)")
    assert raised.value.exit_code == EXIT_CONFIG
    assert not run_files(backend, "bare").dir.exists()


def test_a_task_python_that_does_not_exist_is_refused(workdir):
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, python="/nowhere/python3"), stream=io.StringIO())
    with pytest.raises(
        WorkerEnvironmentError,
        match="the interpreter for the local tasks, /nowhere/python3, cannot run: No such file or directory",
    ):
        backend.submit(make_spec("nowhere", "mirrored", DIGITS, evaluator=False))
    assert not run_files(backend, "nowhere").dir.exists()


@pytest.mark.process
def test_the_detached_supervisor_runs_the_tasks_with_the_configured_python(workdir, tmp_path):
    """A wrapper that records each start, then runs this Python: the detached supervisor (a
    process of its own, started by submit) gets the interpreter from the backend's config."""
    calls = tmp_path / "calls"
    wrapper = tmp_path / "python-wrapper"
    # each start's first two words: "-c import" (the check), "-m worker" (a task)
    wrapper.write_text(f'#!/bin/sh\nprintf "%s %.6s\\n" "$1" "$2" >> {calls}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, python=str(wrapper)), stream=io.StringIO())
    backend.submit(make_spec("wrapped", "mirrored", DIGITS, evaluator=False))
    assert backend.wait("wrapped") == 0, backend.status("wrapped")
    # the pre-flight check, then the one task, started once
    assert calls.read_text().splitlines() == ["-c import", "-m worker"]
    assert os.path.exists(run_files(backend, "wrapped").dir / "model" / "FINAL.json")
