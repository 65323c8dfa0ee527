"""pytest setup for every tier: the `process` marker, LocalBackend fixtures, measurements summary.

The tree mirrors the code: tests/launcher (the launcher's modules; pure, plus the local backend
with real processes), tests/worker (the worker, real TensorFlow processes), tests/charts (the
Helm chart against the launcher), tests/kind (a real cluster). This directory is on sys.path, so
every test imports the shared helpers from support.py and local_clusters.py.

Tests marked `process` start real TensorFlow clusters through LocalBackend (each task a separate
OS process on 127.0.0.1) and take minutes on 2 cores; `-m "not process"` skips them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from local_clusters import MEASUREMENTS, LocalBackend, assert_no_task_processes


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "process: starts real TensorFlow processes through LocalBackend (minutes on 2 cores)",
    )


def pytest_terminal_summary(terminalreporter):
    if MEASUREMENTS:
        terminalreporter.section("tfk8s measurements")
        for line in MEASUREMENTS:
            terminalreporter.write_line(line)


@pytest.fixture
def workdir(tmp_path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def backend(workdir, tmp_path) -> LocalBackend:
    # Task output goes to a file (and per task under the workdir), not into pytest's capture.
    stream = (tmp_path / "cluster-output.log").open("w")
    yield LocalBackend(workdir, stream=stream)
    stream.close()
    assert_no_task_processes(workdir)
