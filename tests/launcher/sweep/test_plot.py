"""The sweep's page (launcher/sweep/plot.py): a chart by trial and one per parameter, each trial
a point placed by its value, on a log axis for a log-scale parameter and a slot per value for a
categorical one."""

from __future__ import annotations

import re

from launcher.api.sweeps import SweepStatus, TrialRow
from launcher.sweep import plot


def status() -> SweepStatus:
    rows = [
        TrialRow(0, "sw-t0", {"lr": 0.001, "opt": "adam"}, "Succeeded", 0.9),
        TrialRow(1, "sw-t1", {"lr": 0.01, "opt": "sgd"}, "Succeeded", 0.95, best=True),
        TrialRow(2, "sw-t2", {"lr": 0.1, "opt": "adam"}, "Stopped", None, "stopped early", latest=(100, 0.5)),
        TrialRow(3, "sw-t3", {"lr": 0.3, "opt": "sgd"}, "Failed", None, "chief-0 exited 1"),
    ]
    return SweepStatus("sw", "Succeeded", "", "accuracy", "maximize", ["lr", "opt"], rows)


def centres(svg: str) -> list[float]:
    return [float(x) for x in re.findall(r'<circle class="trial [A-Za-z]+" cx="([0-9.]+)"', svg)]


def test_a_log_scale_parameter_is_spaced_by_decades_and_a_categorical_one_by_slot():
    page = plot.page(status(), {"lr": True, "opt": False})
    by_trial, by_lr, by_opt = re.findall(r"<svg.*?</svg>", page, re.S)
    assert "accuracy by trial" in by_trial and "accuracy by lr" in by_lr and "accuracy by opt" in by_opt
    x0, x1, x2 = centres(by_lr)  # 0.001, 0.01, 0.1: a decade apart each, on a log axis
    assert abs((x1 - x0) - (x2 - x1)) < 0.5, (x0, x1, x2)
    assert len(set(centres(by_opt))) == 2  # two slots: adam, sgd
    assert by_lr.count('class="trial best"') == 1 and 'r="7"' in by_lr
    assert 'class="trial Stopped"' in by_lr and 'fill="none"' in by_lr  # hollow, at its last value
    assert 'class="trial Failed"' in by_lr and "<path" in by_lr  # a cross on the axis
    assert "sw-t3: lr=0.3, opt=sgd; Failed; chief-0 exited 1" in by_lr
    assert "best sw-t1: accuracy 0.95" in page and "higher is better" in page


def test_a_linear_parameter_is_spaced_by_value():
    page = plot.page(status(), {"lr": False})
    by_lr = re.findall(r"<svg.*?</svg>", page, re.S)[1]
    x0, x1, x2 = centres(by_lr)  # 0.001, 0.01, 0.1 on a linear axis up to 0.3
    assert (x2 - x1) > 5 * (x1 - x0), (x0, x1, x2)
