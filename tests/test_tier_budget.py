"""The kind tier's TensorFlow trainings stay within the budget: summed from the collected kind
tests' tf_trainings markers (tests/kind/conftest.py holds each test to its own marker while
it runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import KIND_TF_TRAININGS_BUDGET, REPO
from tier_budget_plugin import LINE

TESTS = Path(__file__).resolve().parent


def collected_kind_trainings() -> dict[str, int | None]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "-m",
            "kind",
            "-p",
            "tier_budget_plugin",
            "tests/kind",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = {}
    for line in result.stdout.splitlines():
        if line.startswith(LINE + " "):
            _, nodeid, count = line.split(" ")
            found[nodeid] = None if count == "skipped" else int(count)
    return found


def test_the_kind_tier_submits_no_more_tensorflow_trainings_than_its_budget():
    found = collected_kind_trainings()
    assert len(found) > 20, f"collected only {len(found)} kind tests: {sorted(found)}"
    total = sum(n for n in found.values() if n)
    print(f"kind tier: {total} TensorFlow trainings declared by {len(found)} tests (budget {KIND_TF_TRAININGS_BUDGET})")
    assert total <= KIND_TF_TRAININGS_BUDGET, (
        f"the kind tier submits {total} TensorFlow trainings, over its budget of "
        f"{KIND_TF_TRAININGS_BUDGET} (tests/conftest.py): make a new check ride on a training the "
        "tier already runs, or use stand-in tasks where TensorFlow is not the subject "
        f"(docs/development.md). By test: { {k: v for k, v in found.items() if v} }"
    )
