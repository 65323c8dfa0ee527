"""launcher/backends/local/runner.py: what exists once a task has been started."""

from __future__ import annotations

import io
import sys
import threading

import pytest

from launcher.backends.local import runner


class _NeverRuns(threading.Thread):
    """A copying thread the scheduler has not run yet (under load, seen in CI)."""

    def start(self) -> None:
        pass


def test_a_started_tasks_log_holds_its_header_before_the_copying_thread_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(runner.threading, "Thread", _NeverRuns)
    log = tmp_path / "chief-0.log"
    process, _ = runner.start(
        [sys.executable, "-c", "pass"],
        {},
        name="chief-0",
        log_path=log,
        header=lambda pid: f"=== tfk8s: chief-0 attempt 1, pid {pid} ===",
        output=runner.Output(io.StringIO()),
    )
    try:
        assert log.read_text() == f"=== tfk8s: chief-0 attempt 1, pid {process.pid} ===\n"
    finally:
        process.wait(timeout=30)
        process.stdout.close()


def test_a_log_that_cannot_be_opened_starts_no_process(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(runner.subprocess, "Popen", lambda *a, **k: started.append(a))
    with pytest.raises(FileNotFoundError):
        runner.start(
            [sys.executable, "-c", "pass"],
            {},
            name="chief-0",
            log_path=tmp_path / "missing-dir" / "chief-0.log",
            header=lambda pid: "",
            output=runner.Output(io.StringIO()),
        )
    assert started == []
