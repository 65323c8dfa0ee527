"""pytest setup for tests/worker: the `process` marker, fixtures, measurements summary.

Tests marked `process` start real TensorFlow clusters through LocalBackend (each task a separate
OS process on 127.0.0.1) and take minutes on 2 cores; `-m "not process"` skips them. The other
tests here start plain Python processes and take seconds. Helpers live in local_clusters.py.
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
