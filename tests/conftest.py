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

from pathlib import Path

import pytest

from local_clusters import (
    MEASUREMENTS, LocalBackend, LocalProcessBackendConfig, assert_no_task_processes,
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "process: starts real TensorFlow processes through LocalBackend (minutes on 2 cores)",
    )


TIERS = ("scale", "kind", "process", "helm")  # a test's tier: the first of these markers it has, else unit
# The order the tiers run in. The clusters come last, each deleted when its tier ends
# (support.TierResource): an idle kind control plane beside the process tier made that tier
# take 16.1 min in CI instead of 12.0 alone.
TIER_ORDER = ("unit", "process", "helm", "scale", "kind")  # as the README's table of tiers
_TIER_SECONDS: dict[str, float] = {}


def tier_of(keywords) -> str:
    return next((t for t in TIERS if t in keywords), "unit")


def pytest_collection_modifyitems(session, config, items):
    """Tiers in TIER_ORDER (stable within a tier); `node_kill` tests after every other kind
    test: the node they kill comes back with cross-node traffic later tests cannot rely on
    (tests/kind/test_lost_node.py)."""
    items.sort(key=lambda item: (TIER_ORDER.index(tier_of(item.keywords)),
                                 item.get_closest_marker("node_kill") is not None))


def pytest_runtest_logreport(report):
    # setup + call + teardown, so a session fixture (the kind cluster) counts for its tier
    tier = tier_of(report.keywords)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if MEASUREMENTS:
        terminalreporter.section("tfk8s measurements")
        for line in MEASUREMENTS:
            terminalreporter.write_line(line)
    if _TIER_SECONDS:
        terminalreporter.section("tfk8s time per tier")
        terminalreporter.write_line(", ".join(
            f"{tier} {seconds / 60:.1f} min" for tier, seconds in sorted(_TIER_SECONDS.items())))


@pytest.fixture
def workdir(tmp_path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def backend(workdir, tmp_path) -> LocalBackend:
    # Task output goes to a file (and per task under the workdir), not into pytest's capture.
    stream = (tmp_path / "cluster-output.log").open("w")
    # In the foreground, echoing every task's output: as the CLI's `submit --local --raw`.
    config = LocalProcessBackendConfig(workdir=workdir, foreground=True, echo_tasks=True)
    yield LocalBackend(config, stream=stream)
    stream.close()
    assert_no_task_processes(workdir)
