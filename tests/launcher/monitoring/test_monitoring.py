"""launcher/monitoring: the CLI prints what the modules build, and the copies in docs/ are
current (their PromQL runs against a real Prometheus in tests/worker/test_prometheus.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from launcher.monitoring import alerts, dashboard

REPO = Path(__file__).resolve().parents[3]


def cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "launcher", "monitoring", *args], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout


def test_the_cli_prints_the_alerts_with_the_thresholds_asked_for():
    printed = yaml.safe_load(cli("alerts", "--stalled-seconds", "1800", "--stalled-intervals", "5", "--for", "5m"))
    assert printed == alerts.rules(alerts.Thresholds(stalled_seconds=1800, stalled_intervals=5, hold="5m"))
    stalled = printed["groups"][0]["rules"][0]
    assert stalled["alert"] == "TFK8sTrainingStalled" and "> 1800 unless" in stalled["expr"]
    assert "<= 5 * max by (training_namespace, training) (last_over_time(tfk8s_progress_interval" in stalled["expr"]
    assert stalled["for"] == "5m"


def test_every_panel_reads_the_chosen_trainings_and_the_table_all():
    for panel in dashboard.dashboard()["panels"]:
        for target in panel["targets"]:
            if panel["title"] == "Trainings":
                assert "$training" not in target["expr"]
            elif panel["title"].startswith("Sweep"):  # a sweep's trials: the chosen sweeps'
                assert 'sweep=~"$sweep", sweep!=""' in target["expr"], (panel["title"], target["expr"])
            else:
                assert 'training=~"$training"' in target["expr"], (panel["title"], target["expr"])
