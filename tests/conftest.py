"""pytest setup for every tier: the `process` marker, LocalBackend fixtures, measurements summary.

The tree mirrors the code: tests/launcher (the launcher's modules, a folder per layer: spec, plan,
render, status, supervision, code_shipping, checkpoints, cli, backends; pure, plus the local
backend with real processes), tests/worker (the worker, real TensorFlow processes), tests/charts
(the Helm chart against the launcher), tests/kind (a real cluster). This directory is on sys.path,
so every test imports the shared helpers from support.py and local_clusters.py.

Tests marked `process` start real TensorFlow clusters through LocalBackend (each task a separate
OS process on 127.0.0.1) and take minutes on 2 cores; `-m "not process"` skips them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from local_clusters import (
    MEASUREMENTS,
    LocalBackend,
    LocalProcessBackendConfig,
    assert_no_task_processes,
)
from support import TIER_BUDGET_MINUTES, in_ci


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "process: starts real TensorFlow processes through LocalBackend (minutes on 2 cores)",
    )


TIERS = ("scale", "kind", "process", "helm")  # a test's tier: the first of these markers it has, else unit
# The order the tiers run in within a lane, and in everything under `-n 0`.
TIER_ORDER = ("unit", "process", "helm", "scale", "kind")  # as the README's table of tiers
# Two lanes (pyproject's `-n 2 --dist loadgroup`): the kind tier, one cluster, runs in one
# pytest-xdist worker while the other worker runs the process tier, then the scale tier (its own
# cluster), then the unit and helm tests. Alone, each tier leaves a third of the two cores idle
# (waits on Kubernetes, TF start-up); side by side they fill them. A group never splits, so no
# two TensorFlow clusters of the process tier, and no two tests of one kind cluster, overlap.
LANE_GROUPS = {"kind": "kind-cluster", "process": "tf-processes", "scale": "scale-cluster"}
MEASUREMENT = "tfk8s-measurement"  # a report's user property: one line of the measurements summary
_TIER_SECONDS: dict[str, float] = {}
_TIER_RAN: dict[str, bool] = {}  # a tier collected in this session: whether any of its tests ran
_MEASURED: list[str] = []


def tier_of(keywords) -> str:
    return next((t for t in TIERS if t in keywords), "unit")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups off the items
def pytest_collection_modifyitems(session, config, items):
    """Tiers in TIER_ORDER (stable within a tier); `node_kill` tests after every other kind
    test: the node they kill comes back with cross-node traffic later tests cannot rely on
    (tests/kind/test_lost_node.py). Each lane's tier becomes one pytest-xdist group."""
    items.sort(
        key=lambda item: (TIER_ORDER.index(tier_of(item.keywords)), item.get_closest_marker("node_kill") is not None)
    )
    for item in items:
        group = LANE_GROUPS.get(tier_of(item.keywords))
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_setup(item):
    # Ungrouped lanes would run two TF clusters at once on 2 cores, or split the kind tests
    # across workers: failures that point nowhere near the cause. Each such test fails instead.
    # In a pytest-xdist worker under loadgroup, a grouped test's node id ends in "@<group>".
    if (
        getattr(item.config.option, "loadgroup", False)
        and item.get_closest_marker("xdist_group")
        and "@" not in item.nodeid
    ):
        pytest.fail(
            f"pytest-xdist did not group {item.nodeid}: this pytest drops the group from "
            f"node ids (pytest-dev/pytest-xdist#1386). Install the test extra's pytest "
            f"(pip install -e '.[test]') or run in one process with `-n 0`.",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    # A test's measurements travel on its report: under pytest-xdist it ran in a worker process.
    report = yield
    report.user_properties.extend((MEASUREMENT, line) for line in MEASUREMENTS)
    MEASUREMENTS.clear()
    return report


def pytest_runtest_logreport(report):
    # setup + call + teardown, so a session fixture (the kind cluster) counts for its tier
    tier = tier_of(report.keywords)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration
    # ran: its body ran, or something of it failed; a test skipped in setup or body did not
    ran = report.failed or (report.when == "call" and not report.skipped)
    _TIER_RAN[tier] = _TIER_RAN.get(tier, False) or ran
    _MEASURED.extend(value for key, value in report.user_properties if key == MEASUREMENT)


def pytest_terminal_summary(terminalreporter):
    if _MEASURED:
        terminalreporter.section("tfk8s measurements")
        for line in _MEASURED:
            terminalreporter.write_line(line)
    if _TIER_SECONDS:
        # summed over both lanes: a tier's own time, not the run's wall clock
        terminalreporter.section("tfk8s time per tier")
        terminalreporter.write_line(
            ", ".join(
                f"{tier} {seconds / 60:.1f} min (budget {TIER_BUDGET_MINUTES[tier]})"
                if _TIER_RAN.get(tier)
                else f"{tier} not run (all its tests skipped)"
                for tier, seconds in sorted(_TIER_SECONDS.items())
            )
        )
    if in_ci() and tiers_not_run():
        terminalreporter.write_line(
            f"CI is set and the {', '.join(tiers_not_run())} tier did not run (every test of it skipped, "
            "see the skip reasons above: -rs): the session fails",
            red=True,
        )


def tiers_not_run() -> list[str]:
    """Tiers collected in this session none of whose tests ran (say, the toolchain missing)."""
    return sorted(tier for tier, ran in _TIER_RAN.items() if not ran)


def pytest_sessionfinish(session):
    # Under CI a tier that did not run is a failure even when each of its tests only skipped:
    # CI is green only when every tier it collected ran. (pytest-xdist: the controller decides.)
    if in_ci() and not hasattr(session.config, "workerinput") and tiers_not_run():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _task_python() -> tuple[str, str]:
    """The interpreter of the built-in worker's tasks, and why: $TFK8S_TASK_PYTHON, else the
    environment scripts/task_env.sh made (the worker image's packages only), else this one."""
    if os.environ.get("TFK8S_TASK_PYTHON"):
        return os.environ["TFK8S_TASK_PYTHON"], "$TFK8S_TASK_PYTHON"
    cache = Path(os.environ.get("TFK8S_CACHE") or Path.home() / ".cache" / "tfk8s")
    recorded = cache / "task-python"
    python = recorded.read_text().strip() if recorded.is_file() else ""
    if python and Path(python).is_file():
        return python, "the image's packages, scripts/task_env.sh"
    return sys.executable, (
        "this Python, with all it has installed: run scripts/task_env.sh for the image's packages only"
    )


TASK_PYTHON, TASK_PYTHON_WHY = _task_python()


def pytest_report_header(config):
    return f"tfk8s: local TensorFlow tasks run {TASK_PYTHON} ({TASK_PYTHON_WHY})"


@pytest.fixture
def workdir(tmp_path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def backend(workdir, tmp_path) -> LocalBackend:
    # Task output goes to a file (and per task under the workdir), not into pytest's capture.
    stream = (tmp_path / "cluster-output.log").open("w")
    # In the foreground, echoing every task's output: as the CLI's `submit --local --raw`.
    config = LocalProcessBackendConfig(workdir=workdir, foreground=True, echo_tasks=True, python=TASK_PYTHON)
    yield LocalBackend(config, stream=stream)
    stream.close()
    assert_no_task_processes(workdir)
